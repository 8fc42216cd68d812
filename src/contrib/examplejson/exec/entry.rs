//! The checked entry points of a subgraph: `run_slices` on Rust slices and `run` on DLTensors
//! (dtype, shape, strides, device and aliasing checked before any kernel runs).

use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDeviceType, DLTensor};

use super::kernels::Element;
use crate::contrib::examplejson::graph::{Subgraph, MAX_RANK};
use crate::error::{Error, Result};
use crate::tensor::layout;

/// A checked argument: `len` elements at `ptr`.
#[derive(Clone, Copy)]
struct RawView {
    ptr: *mut u8,
    len: usize,
}

impl RawView {
    fn overlaps(&self, other: &RawView, elem: usize) -> bool {
        let (a, b) = (self.ptr as usize, other.ptr as usize);
        a < b + other.len * elem && b < a + self.len * elem
    }
}

impl Subgraph {
    /// Runs the subgraph on Rust slices: `inputs` in declaration order, each with exactly its
    /// declared number of elements (row-major), and `output` with the result's.
    pub fn run_slices<T: Element>(&self, inputs: &[&[T]], output: &mut [T]) -> Result<()> {
        let exec = &self.exec;
        if inputs.len() != exec.input_lens.len() {
            crate::bail_value!(
                "ExampleJSON subgraph '{}' takes {} inputs, got {}",
                self.name,
                exec.input_lens.len(),
                inputs.len()
            );
        }
        for (k, (x, &want)) in inputs.iter().zip(&exec.input_lens).enumerate() {
            if x.len() != want {
                crate::bail_value!(
                    "ExampleJSON subgraph '{}': input {k} has {} elements, expected {want} \
                     (shape {:?})",
                    self.name,
                    x.len(),
                    self.nodes[self.inputs[k]].shape
                );
            }
        }
        if output.len() != exec.output_len {
            crate::bail_value!(
                "ExampleJSON subgraph '{}': the output has {} elements, expected {} (shape {:?})",
                self.name,
                output.len(),
                exec.output_len,
                self.output_shape()
            );
        }
        exec.run(inputs, output)
    }

    /// Runs the subgraph on DLTensors: its inputs in declaration order, then the output, which
    /// receives the last node. Checks the argument count, the device (CPU only), the dtype
    /// (float32, float64, int32 or int64, the same for all), the shapes against the declared
    /// ones, contiguity, null and misaligned data pointers. Inputs may alias each other and the
    /// output (the result is then computed aside and copied in).
    ///
    /// # Safety
    /// For every argument: `shape` points to `ndim` readable `i64`s (when `ndim` is at most
    /// [`MAX_RANK`]), `strides` is null or likewise, and once the checks pass,
    /// `data + byte_offset` points to the whole tensor (elements × element size bytes), readable
    /// and, for the output, writable; while the call runs no other thread writes the arguments'
    /// memory or accesses the output's.
    pub unsafe fn run(&self, args: &[&DLTensor]) -> Result<()> {
        let name = &self.name;
        let n = self.inputs.len();
        if args.len() != n + 1 {
            crate::bail_value!(
                "ExampleJSON subgraph '{name}' takes {} arguments ({n} inputs, then the output), \
                 got {}",
                n + 1,
                args.len()
            );
        }
        for (i, t) in args.iter().enumerate() {
            if t.device.device_type != DLDeviceType::CPU {
                crate::bail_value!(
                    "ExampleJSON subgraph '{name}': argument {i} is on device {}, but this \
                     runtime runs on cpu only",
                    layout::device_name(t.device)
                );
            }
            if Dtype::of(t.dtype).is_none() {
                crate::bail_type!(
                    "ExampleJSON subgraph '{name}': argument {i} has dtype {}, supported are \
                     float32, float64, int32 and int64",
                    layout::dtype_label(t.dtype)
                );
            }
            if t.dtype != args[0].dtype {
                crate::bail_type!(
                    "ExampleJSON subgraph '{name}': argument {i} has dtype {} but argument 0 has \
                     {}; all arguments must have the same dtype",
                    layout::dtype_label(t.dtype),
                    layout::dtype_label(args[0].dtype)
                );
            }
        }
        // Checked in the loop above; kept as an error rather than a panic.
        let dtype = Dtype::of(args[0].dtype).ok_or_else(|| {
            Error::type_error(format!(
                "ExampleJSON subgraph '{name}': unsupported dtype {}",
                layout::dtype_label(args[0].dtype)
            ))
        })?;
        let elem = dtype.size();
        let mut views = Vec::with_capacity(args.len());
        for (i, t) in args.iter().enumerate() {
            let expected = if i < n {
                &self.nodes[self.inputs[i]].shape
            } else {
                self.output_shape()
            };
            // SAFETY: the caller guarantees `shape`/`strides` hold `ndim` values.
            views.push(unsafe { check_tensor(name, i, t, expected, elem)? });
        }
        // SAFETY: the views passed every check; the caller guarantees the memory behind them.
        unsafe {
            match dtype {
                Dtype::F32 => self.run_views::<f32>(&views),
                Dtype::F64 => self.run_views::<f64>(&views),
                Dtype::I32 => self.run_views::<i32>(&views),
                Dtype::I64 => self.run_views::<i64>(&views),
            }
        }
    }

    /// # Safety
    /// `views` are checked arguments of element type `T` (see [`Subgraph::run`]).
    unsafe fn run_views<T: Element>(&self, views: &[RawView]) -> Result<()> {
        let Some((out, ins)) = views.split_last() else {
            return Ok(());
        };
        let elem = std::mem::size_of::<T>();
        let aliased = ins.iter().any(|v| v.overlaps(out, elem));
        let inputs: Vec<&[T]> = ins
            .iter()
            // SAFETY: checked non-null, aligned for T, `len` elements readable (caller).
            .map(|v| unsafe { std::slice::from_raw_parts(v.ptr.cast::<T>(), v.len) })
            .collect();
        if !aliased {
            // SAFETY: as above, writable, and no input slice overlaps it.
            let output = unsafe { std::slice::from_raw_parts_mut(out.ptr.cast::<T>(), out.len) };
            return self.exec.run(&inputs, output);
        }
        // The output shares memory with an input: compute aside, then copy once the input
        // slices are gone, so no shared and mutable borrow of the same bytes coexist.
        let mut result = vec![T::default(); out.len];
        self.exec.run(&inputs, &mut result)?;
        drop(inputs);
        // SAFETY: as above; no other slice of these bytes is alive now.
        let output = unsafe { std::slice::from_raw_parts_mut(out.ptr.cast::<T>(), out.len) };
        output.copy_from_slice(&result);
        Ok(())
    }
}

/// Checks one argument's shape, strides and data pointer.
///
/// # Safety
/// `t.shape` and (if non-null) `t.strides` hold `t.ndim` values when `0 <= ndim <= MAX_RANK`.
unsafe fn check_tensor(
    name: &str,
    i: usize,
    t: &DLTensor,
    expected: &[usize],
    elem: usize,
) -> Result<RawView> {
    let ndim = usize::try_from(t.ndim).ok().filter(|&d| d <= MAX_RANK);
    let shape: Option<&[i64]> = match ndim {
        Some(0) => Some(&[]),
        Some(d) if !t.shape.is_null() => {
            // SAFETY: the caller guarantees `shape` holds `ndim` values.
            Some(unsafe { std::slice::from_raw_parts(t.shape, d) })
        }
        _ => None,
    };
    let matches = shape.is_some_and(|s| {
        s.len() == expected.len() && s.iter().zip(expected).all(|(&g, &e)| g == e as i64)
    });
    if !matches {
        let got = match shape {
            Some(s) => format!("shape {s:?}"),
            None if t.shape.is_null() => format!("ndim {} and a null shape pointer", t.ndim),
            None => format!("ndim {}", t.ndim),
        };
        crate::bail_value!(
            "ExampleJSON subgraph '{name}': argument {i} has {got}, expected shape {expected:?}"
        );
    }
    // The shape matched `expected`, so it is present.
    let shape = shape.unwrap_or_default();
    // SAFETY: the caller guarantees `strides`, when non-null, holds `ndim` values.
    if let Some(strides) = unsafe { layout::dl_strides(t) } {
        if !layout::is_contiguous(shape, Some(strides)) {
            crate::bail_value!(
                "ExampleJSON subgraph '{name}': argument {i} is not contiguous (strides \
                 {strides:?} for shape {expected:?}); pass a compact row-major tensor"
            );
        }
    }
    if t.data.is_null() {
        crate::bail_value!("ExampleJSON subgraph '{name}': argument {i} has a null data pointer");
    }
    let len: usize = expected.iter().product();
    // At most 2^31 elements of at most 8 bytes: no overflow.
    let bytes = len * elem;
    let offset = usize::try_from(t.byte_offset).ok();
    let end = offset
        .and_then(|o| (t.data as usize).checked_add(o))
        .and_then(|start| start.checked_add(bytes));
    let Some(offset) = offset.filter(|_| end.is_some()) else {
        crate::bail_value!(
            "ExampleJSON subgraph '{name}': argument {i} has a byte_offset {} that overflows the \
             address space",
            t.byte_offset
        );
    };
    let ptr = t.data.cast::<u8>().wrapping_add(offset);
    if (ptr as usize) & (elem - 1) != 0 {
        crate::bail_value!(
            "ExampleJSON subgraph '{name}': argument {i} data pointer {ptr:p} (with byte_offset) \
             is not aligned to its {elem}-byte elements"
        );
    }
    Ok(RawView { ptr, len })
}

/// The supported dtypes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dtype {
    F32,
    F64,
    I32,
    I64,
}

impl Dtype {
    fn of(dtype: DLDataType) -> Option<Dtype> {
        match (dtype.code, dtype.bits, dtype.lanes) {
            (DLDataTypeCode::FLOAT, 32, 1) => Some(Dtype::F32),
            (DLDataTypeCode::FLOAT, 64, 1) => Some(Dtype::F64),
            (DLDataTypeCode::INT, 32, 1) => Some(Dtype::I32),
            (DLDataTypeCode::INT, 64, 1) => Some(Dtype::I64),
            _ => None,
        }
    }

    /// Bytes per element.
    fn size(self) -> usize {
        match self {
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::F64 | Dtype::I64 => 8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contrib::examplejson::exec::test_support::*;

    #[test]
    fn guide_subgraph_computes_real_values() {
        let g = Graph::parse(SEED).unwrap();
        let s = g.subgraph("subgraph_0").unwrap();
        let a: Vec<f32> = (0..100).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..100).map(|i| 100.0 - i as f32).collect();
        let c: Vec<f32> = (0..100).map(|i| (i % 7) as f32).collect();
        let d: Vec<f32> = (0..100).map(|i| 1.0 + (i % 3) as f32).collect();
        let out = call(s, &[a.clone(), b.clone(), c.clone(), d.clone()]).unwrap();
        for i in 0..100 {
            assert_eq!(out[i], ((a[i] + b[i]) - c[i]) * d[i], "element {i}");
        }
        // Spot values: i = 0: (0 + 100 - 0) * 1; i = 10: (5 + 90 - 3) * 2.
        assert_eq!(out[0], 100.0);
        assert_eq!(out[10], 184.0);
        // The Rust slice entry gives the same.
        let mut out2 = vec![0f32; 100];
        s.run_slices(&[&a, &b, &c, &d], &mut out2).unwrap();
        assert_eq!(out, out2);
    }

    #[test]
    fn output_may_alias_an_input() {
        let text = "f\ninput 0 3000\ninput 1 1\nsub 2 inputs: 0 1 shape: 3000\n\
                    mul 3 inputs: 2 0 shape: 3000\n";
        let g = Graph::parse(text).unwrap();
        let s = g.subgraph("f").unwrap();
        let mut x: Vec<f64> = (0..3000).map(|i| i as f64).collect();
        let mut one = vec![1.0f64];
        let (mut sx, mut s1) = (vec![3000i64], vec![1i64]);
        let tx = dl(&mut x, &mut sx);
        let t1 = dl(&mut one, &mut s1);
        // SAFETY: both tensors point at live Vecs of their shapes; x is input and output.
        unsafe { s.run(&[&tx, &t1, &tx]).unwrap() };
        for (i, &v) in x.iter().enumerate() {
            assert_eq!(v, (i as f64 - 1.0) * i as f64);
        }
    }

    #[test]
    fn accepts_compact_strides_and_byte_offset() {
        let g =
            Graph::parse("f\ninput 0 1 4\ninput 1 1 4\nadd 2 inputs: 0 1 shape: 1 4\n").unwrap();
        let s = g.subgraph("f").unwrap();
        let mut a = vec![-1.0f32, -1.0, 1.0, 2.0, 3.0, 4.0];
        let mut b = vec![10.0f32, 20.0, 30.0, 40.0];
        let mut out = vec![0.0f32; 4];
        let (mut sa, mut sb, mut so) = (vec![1i64, 4], vec![1i64, 4], vec![1i64, 4]);
        // Explicit compact strides; the unit dimension's stride is irrelevant.
        let (mut st_b, mut st_o) = (vec![4i64, 1], vec![999i64, 1]);
        let mut ta = dl(&mut a, &mut sa);
        ta.byte_offset = 8;
        let mut tb = dl(&mut b, &mut sb);
        tb.strides = st_b.as_mut_ptr();
        let mut to = dl(&mut out, &mut so);
        to.strides = st_o.as_mut_ptr();
        // SAFETY: live Vecs of the declared shapes (a from its third element).
        unsafe { s.run(&[&ta, &tb, &to]).unwrap() };
        assert_eq!(out, vec![11.0, 22.0, 33.0, 44.0]);
    }

    #[test]
    fn call_errors_name_the_argument() {
        let g = Graph::parse(SEED).unwrap();
        let s = g.subgraph("subgraph_0").unwrap();
        let mut bufs: Vec<Vec<f32>> = vec![vec![0.0; 100]; 5];
        let mut shapes: Vec<Vec<i64>> = vec![vec![10, 10]; 5];
        let good: Vec<DLTensor> = bufs
            .iter_mut()
            .zip(shapes.iter_mut())
            .map(|(b, s)| dl(b, s))
            .collect();
        let run = |ts: &[DLTensor]| {
            let args: Vec<&DLTensor> = ts.iter().collect();
            // SAFETY: every tensor's pointers are live; checks reject the bad ones first.
            unsafe { s.run(&args) }.unwrap_err()
        };
        let with = |i: usize, f: &dyn Fn(&mut DLTensor)| {
            let mut ts = good.clone();
            f(&mut ts[i]);
            run(&ts)
        };

        let e = run(&good[..3]);
        assert_eq!(
            (e.kind.as_str(), e.message.as_str()),
            (
                "ValueError",
                "ExampleJSON subgraph 'subgraph_0' takes 5 arguments (4 inputs, then the \
                 output), got 3"
            )
        );
        let e = with(1, &|t| {
            t.device = DLDevice {
                device_type: DLDeviceType::CUDA,
                device_id: 1,
            }
        });
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'subgraph_0': argument 1 is on device cuda:1, but this runtime \
             runs on cpu only"
        );
        let e = with(0, &|t| t.dtype.bits = 16);
        assert_eq!(
            (e.kind.as_str(), e.message.as_str()),
            (
                "TypeError",
                "ExampleJSON subgraph 'subgraph_0': argument 0 has dtype float16, supported are \
                 float32, float64, int32 and int64"
            )
        );
        let e = with(3, &|t| t.dtype.lanes = 4);
        assert!(
            e.message.contains("argument 3 has dtype float32x4"),
            "{}",
            e.message
        );
        let e = with(4, &|t| t.dtype.code = DLDataTypeCode::UINT);
        assert!(
            e.message.contains("argument 4 has dtype uint32"),
            "{}",
            e.message
        );
        let e = with(2, &|t| t.dtype.code = DLDataTypeCode::INT);
        assert_eq!(
            (e.kind.as_str(), e.message.as_str()),
            (
                "TypeError",
                "ExampleJSON subgraph 'subgraph_0': argument 2 has dtype int32 but argument 0 \
                 has float32; all arguments must have the same dtype"
            )
        );

        let mut small = vec![10i64, 5];
        let small = small.as_mut_ptr();
        let e = with(3, &|t| t.shape = small);
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'subgraph_0': argument 3 has shape [10, 5], expected shape \
             [10, 10]"
        );
        let mut flat = vec![100i64];
        let flat = flat.as_mut_ptr();
        let e = with(4, &|t| {
            t.shape = flat;
            t.ndim = 1;
        });
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'subgraph_0': argument 4 has shape [100], expected shape [10, \
             10]"
        );
        let e = with(0, &|t| t.ndim = 1000);
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'subgraph_0': argument 0 has ndim 1000, expected shape [10, 10]"
        );
        let e = with(0, &|t| t.shape = null_mut());
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'subgraph_0': argument 0 has ndim 2 and a null shape pointer, \
             expected shape [10, 10]"
        );
        let mut transposed = vec![1i64, 10];
        let transposed = transposed.as_mut_ptr();
        let e = with(2, &|t| t.strides = transposed);
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'subgraph_0': argument 2 is not contiguous (strides [1, 10] \
             for shape [10, 10]); pass a compact row-major tensor"
        );
        let e = with(1, &|t| t.data = null_mut());
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'subgraph_0': argument 1 has a null data pointer"
        );
        let e = with(1, &|t| t.byte_offset = 2);
        assert!(
            e.message.contains("argument 1 data pointer")
                && e.message.ends_with("is not aligned to its 4-byte elements"),
            "{}",
            e.message
        );
        let e = with(1, &|t| t.byte_offset = u64::MAX - 3);
        assert!(
            e.message.contains("overflows the address space"),
            "{}",
            e.message
        );
    }

    #[test]
    fn slice_entry_checks_counts_and_lengths() {
        let g = Graph::parse("f\ninput 0 2 2\ninput 1 2\nadd 2 inputs: 0 1 shape: 2 2\n").unwrap();
        let s = g.subgraph("f").unwrap();
        let mut out = [0.0f64; 4];
        let e = s
            .run_slices(&[&[1.0, 2.0, 3.0, 4.0][..]], &mut out)
            .unwrap_err();
        assert_eq!(e.message, "ExampleJSON subgraph 'f' takes 2 inputs, got 1");
        let e = s
            .run_slices(&[&[1.0, 2.0, 3.0, 4.0][..], &[1.0][..]], &mut out)
            .unwrap_err();
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'f': input 1 has 1 elements, expected 2 (shape [2])"
        );
        let e = s
            .run_slices(&[&[1.0, 2.0, 3.0, 4.0][..], &[1.0, 2.0][..]], &mut out[..3])
            .unwrap_err();
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'f': the output has 3 elements, expected 4 (shape [2, 2])"
        );
        s.run_slices(&[&[1.0, 2.0, 3.0, 4.0][..], &[10.0, 20.0][..]], &mut out)
            .unwrap();
        assert_eq!(out, [11.0, 22.0, 13.0, 24.0]);
    }

    #[test]
    fn graph_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Graph>();
    }
}
