//! The element types the kernels support (`f32`, `f64`, `i32`, `i64`) and the kernels: each op
//! as a loop over zipped slices of equal length, and the expansion of a broadcast operand.

use dlpark::ffi::DLDataTypeCode;

use crate::contrib::examplejson::graph::{Op, MAX_RANK};

/// An element type the kernels support: `f32`, `f64`, `i32`, `i64` (sealed).
pub trait Element:
    Copy + Default + PartialOrd + Send + Sync + std::fmt::Debug + 'static + private::Sealed
{
    /// DLPack type code.
    const CODE: DLDataTypeCode;
    /// Bits per element.
    const BITS: u8;
    /// `a + b`, wrapping for integers.
    fn add(a: Self, b: Self) -> Self;
    /// `a - b`, wrapping for integers.
    fn sub(a: Self, b: Self) -> Self;
    /// `a * b`, wrapping for integers.
    fn mul(a: Self, b: Self) -> Self;
    /// `dst[i] = a[i] / b[i]`; returns false, writing nothing, on an integer division by zero.
    fn div_into(dst: &mut [Self], a: &[Self], b: &[Self]) -> bool;
}

mod private {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
}

macro_rules! float_element {
    ($t:ty, $bits:expr) => {
        impl Element for $t {
            const CODE: DLDataTypeCode = DLDataTypeCode::FLOAT;
            const BITS: u8 = $bits;
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                a + b
            }
            #[inline(always)]
            fn sub(a: Self, b: Self) -> Self {
                a - b
            }
            #[inline(always)]
            fn mul(a: Self, b: Self) -> Self {
                a * b
            }
            fn div_into(dst: &mut [Self], a: &[Self], b: &[Self]) -> bool {
                zip2(dst, a, b, |x, y| x / y);
                true
            }
        }
    };
}

macro_rules! int_element {
    ($t:ty, $bits:expr) => {
        impl Element for $t {
            const CODE: DLDataTypeCode = DLDataTypeCode::INT;
            const BITS: u8 = $bits;
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                a.wrapping_add(b)
            }
            #[inline(always)]
            fn sub(a: Self, b: Self) -> Self {
                a.wrapping_sub(b)
            }
            #[inline(always)]
            fn mul(a: Self, b: Self) -> Self {
                a.wrapping_mul(b)
            }
            fn div_into(dst: &mut [Self], a: &[Self], b: &[Self]) -> bool {
                if b[..dst.len()].contains(&0) {
                    return false;
                }
                zip2(dst, a, b, |x, y| x.wrapping_div(y));
                true
            }
        }
    };
}

float_element!(f32, 32);
float_element!(f64, 64);
int_element!(i32, 32);
int_element!(i64, 64);

/// `dst[i] = f(a[i], b[i])`; the operands are cut to `dst`'s length first so the loop has no
/// bounds checks and vectorizes.
#[inline(always)]
fn zip2<T: Copy>(dst: &mut [T], a: &[T], b: &[T], f: impl Fn(T, T) -> T) {
    let n = dst.len();
    for ((d, &x), &y) in dst.iter_mut().zip(&a[..n]).zip(&b[..n]) {
        *d = f(x, y);
    }
}

/// `dst[i] = f(a[i])`.
#[inline(always)]
fn zip1<T: Copy>(dst: &mut [T], a: &[T], f: impl Fn(T) -> T) {
    let n = dst.len();
    for (d, &x) in dst.iter_mut().zip(&a[..n]) {
        *d = f(x);
    }
}

/// Runs one op on equal-length slices; false on an integer division by zero.
pub(super) fn apply<T: Element>(op: Op, dst: &mut [T], a: &[T], b: &[T]) -> bool {
    match op {
        Op::Add => zip2(dst, a, b, T::add),
        Op::Sub => zip2(dst, a, b, T::sub),
        Op::Mul => zip2(dst, a, b, T::mul),
        Op::Div => return T::div_into(dst, a, b),
        // Selects, as TVM's LLVM codegen lowers max/min (codegen_llvm.cc); they vectorize to
        // max/min instructions.
        Op::Maximum => zip2(dst, a, b, |x, y| if x > y { x } else { y }),
        Op::Minimum => zip2(dst, a, b, |x, y| if x < y { x } else { y }),
        Op::Relu => {
            let zero = T::default();
            zip1(dst, a, |x| if x > zero { x } else { zero })
        }
    }
    true
}

/// Writes elements `start..start + out.len()` of `src` broadcast along `dims` into `out`.
pub(super) fn expand<T: Copy>(src: &[T], dims: &[(usize, usize)], start: usize, out: &mut [T]) {
    let k = dims.len();
    let mut coord = [0usize; MAX_RANK];
    let mut rest = start;
    let mut offset = 0;
    for d in (0..k).rev() {
        let (extent, stride) = dims[d];
        coord[d] = rest % extent;
        rest /= extent;
        offset += coord[d] * stride;
    }
    let (inner, inner_stride) = dims[k - 1];
    let mut done = 0;
    while done < out.len() {
        let run = (inner - coord[k - 1]).min(out.len() - done);
        let piece = &mut out[done..done + run];
        match inner_stride {
            0 => piece.fill(src[offset]),
            1 => piece.copy_from_slice(&src[offset..offset + run]),
            s => {
                for (j, x) in piece.iter_mut().enumerate() {
                    *x = src[offset + j * s];
                }
            }
        }
        done += run;
        coord[k - 1] += run;
        offset += run * inner_stride;
        if coord[k - 1] == inner {
            coord[k - 1] = 0;
            offset -= inner * inner_stride;
            for d in (0..k - 1).rev() {
                let (extent, stride) = dims[d];
                coord[d] += 1;
                offset += stride;
                if coord[d] < extent {
                    break;
                }
                coord[d] = 0;
                offset -= extent * stride;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contrib::examplejson::exec::test_support::*;

    fn check_all_ops<T: Element + From<i16>>(div: Vec<T>) {
        let a16 = [-7i16, -3, 0, 2, 5, 100];
        let b16 = [2i16, -3, 4, -5, 5, 3];
        let a: Vec<T> = a16.iter().map(|&x| T::from(x)).collect();
        let b: Vec<T> = b16.iter().map(|&x| T::from(x)).collect();
        let expect = |f: fn(i16, i16) -> i16| -> Vec<T> {
            a16.iter()
                .zip(&b16)
                .map(|(&x, &y)| T::from(f(x, y)))
                .collect()
        };
        let cases = [
            ("add", expect(|x, y| x + y)),
            ("sub", expect(|x, y| x - y)),
            ("mul", expect(|x, y| x * y)),
            ("maximum", expect(|x, y| x.max(y))),
            ("minimum", expect(|x, y| x.min(y))),
            ("div", div),
        ];
        let ty = std::any::type_name::<T>();
        for (name, want) in cases {
            let text = format!("f\ninput 0 2 3\ninput 1 2 3\n{name} 2 inputs: 0 1 shape: 2 3\n");
            let g = Graph::parse(&text).unwrap();
            let got = call(g.subgraph("f").unwrap(), &[a.clone(), b.clone()]).unwrap();
            assert_eq!(got, want, "{name} on {ty}");
        }
        let g = Graph::parse("f\ninput 0 6\nrelu 1 inputs: 0 shape: 6\n").unwrap();
        let got = call(g.subgraph("f").unwrap(), std::slice::from_ref(&a)).unwrap();
        assert_eq!(got, expect(|x, _| x.max(0)), "relu on {ty}");
    }

    #[test]
    fn every_op_on_every_dtype() {
        check_all_ops::<f32>(vec![-3.5, 1.0, 0.0, -0.4, 1.0, 100.0 / 3.0]);
        check_all_ops::<f64>(vec![-3.5, 1.0, 0.0, -0.4, 1.0, 100.0 / 3.0]);
        // Integer division truncates toward zero, as in C.
        check_all_ops::<i32>(vec![-3, 1, 0, 0, 1, 33]);
        check_all_ops::<i64>(vec![-3, 1, 0, 0, 1, 33]);
    }

    #[test]
    fn integer_overflow_wraps() {
        let text = "f\ninput 0 3\ninput 1 3\nadd 2 inputs: 0 1 shape: 3\n\
                    mul 3 inputs: 2 1 shape: 3\ndiv 4 inputs: 3 1 shape: 3\n";
        let g = Graph::parse(text).unwrap();
        let s = g.subgraph("f").unwrap();
        // (MAX + 1) = MIN; MIN * 1 = MIN; MIN / 1 = MIN. (MIN + -1) = MAX; MAX * -1 = -MAX;
        // -MAX / -1 = MAX. (2^30 + 2) * 2 wraps to -2^31 + 4, / 2 = -2^30 + 2.
        let out = call(s, &[vec![i32::MAX, i32::MIN, 1 << 30], vec![1, -1, 2]]).unwrap();
        assert_eq!(out, vec![i32::MIN, i32::MAX, -(1 << 30) + 2]);
        let g = Graph::parse("f\ninput 0 2\ninput 1 2\ndiv 2 inputs: 0 1 shape: 2\n").unwrap();
        let s = g.subgraph("f").unwrap();
        assert_eq!(
            call(s, &[vec![i64::MIN, 7], vec![-1, -2]]).unwrap(),
            vec![i64::MIN, -3]
        );
        assert_eq!(
            call(s, &[vec![i32::MIN, 7], vec![-1, 2]]).unwrap(),
            vec![i32::MIN, 3]
        );
    }

    #[test]
    fn integer_division_by_zero_is_an_error() {
        let g = Graph::parse("f\ninput 0 3\ninput 1 3\ndiv 7 inputs: 0 1 shape: 3\n").unwrap();
        let s = g.subgraph("f").unwrap();
        let e = call(s, &[vec![1i32, 2, 3], vec![1, 0, 1]]).unwrap_err();
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'f': node 7 (div): integer division by zero"
        );
        let e = call(s, &[vec![1i64, 2, 3], vec![1, 1, 0]]).unwrap_err();
        assert_eq!(e.kind, "ValueError");
        // The scratch set survived the error: the next call works.
        assert_eq!(
            call(s, &[vec![8i32, 9, 10], vec![2, 3, 5]]).unwrap(),
            vec![4, 3, 2]
        );
        // Floats follow IEEE: no error.
        let out = call(s, &[vec![1f32, -1.0, 0.0], vec![0.0, 0.0, 0.0]]).unwrap();
        assert_eq!(out[..2], [f32::INFINITY, f32::NEG_INFINITY]);
        assert!(out[2].is_nan());
    }

    #[test]
    fn nan_follows_tvm_selects() {
        let text = "f\ninput 0 2\ninput 1 2\nmaximum 2 inputs: 0 1 shape: 2\n\
                    minimum 3 inputs: 0 1 shape: 2\nadd 4 inputs: 2 3 shape: 2\n";
        let g = Graph::parse(text).unwrap();
        let s = g.subgraph("f").unwrap();
        // max(NaN, 1) = (NaN > 1 ? NaN : 1) = 1; max(1, NaN) = NaN; likewise min.
        let out = call(s, &[vec![f64::NAN, 1.0], vec![1.0, f64::NAN]]).unwrap();
        assert_eq!(out[0], 2.0);
        assert!(out[1].is_nan());
        let g = Graph::parse("f\ninput 0 3\nrelu 1 inputs: 0 shape: 3\n").unwrap();
        let out = call(g.subgraph("f").unwrap(), &[vec![f32::NAN, -0.5, 0.5]]).unwrap();
        assert_eq!(out, vec![0.0, 0.0, 0.5]);
    }
}
