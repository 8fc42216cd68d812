//! The sorts a model calls (`tvm.contrib.sort.argsort/sort/topk`, `relax.run.unique`) on
//! realistic sizes, against the sort they replaced (issue 35), measured in the same run:
//! `cargo bench --bench sort_bench`.
//!
//! The reference is the code the library ran before: every element read as an `i128` or `f64`
//! enum key and the (index, key) pairs stably sorted with a comparator on the enum. The library
//! now maps each dtype to a `u64` order key and sorts (key, index) pairs with one sort. Each case
//! checks that both give the same output, then times both in turns (thread CPU time, as the
//! machine is shared; `SORT_BENCH_REPEATS`, default 9; median and best shown).

use std::cmp::Ordering;
use std::hint::black_box;

use tvmrt::abi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLTensor};
use tvmrt::function::Function;
use tvmrt::value::Any;

fn cpu_now() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// A tensor over `data` (which must outlive it) of `shape`.
fn tensor<T>(data: &mut [T], shape: &mut [i64], code: u8) -> DLTensor {
    DLTensor {
        data: data.as_mut_ptr().cast(),
        device: DLDevice {
            device_type: DLDeviceType::CPU,
            device_id: 0,
        },
        ndim: shape.len() as i32,
        dtype: DLDataType {
            code: DLDataTypeCode(code),
            bits: (std::mem::size_of::<T>() * 8) as u8,
            lanes: 1,
        },
        shape: shape.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

fn function(name: &str) -> Function {
    tvmrt::contrib::sort::builtins()
        .into_iter()
        .chain(tvmrt::contrib::set_ops::builtins())
        .find(|(n, _)| *n == name)
        .map(|(_, f)| f)
        .expect("a contrib function")
}

/// The key the library compared before (`contrib/elements.rs`'s `Key`).
#[derive(Clone, Copy)]
enum OldKey {
    Int(i128),
    Float(f64),
}

impl OldKey {
    fn total_cmp(&self, other: &OldKey) -> Ordering {
        let float = |a: f64, b: f64| match (a.is_nan(), b.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => a.partial_cmp(&b).expect("neither is NaN"),
        };
        match (self, other) {
            (OldKey::Int(a), OldKey::Int(b)) => a.cmp(b),
            (OldKey::Float(a), OldKey::Float(b)) => float(*a, *b),
            (OldKey::Int(a), OldKey::Float(b)) => float(*a as f64, *b),
            (OldKey::Float(a), OldKey::Int(b)) => float(*a, *b as f64),
        }
    }
}

trait Elem: Copy {
    const CODE: u8;
    fn old_key(self) -> OldKey;
}

impl Elem for f32 {
    const CODE: u8 = 2;
    fn old_key(self) -> OldKey {
        OldKey::Float(self as f64)
    }
}

impl Elem for i64 {
    const CODE: u8 = 0;
    fn old_key(self) -> OldKey {
        OldKey::Int(self as i128)
    }
}

/// The old `sort_lines`/`topk` of one line: stable sort of (index, key), the first `k`
/// indices (topk breaks ties by index; the stable sort already does).
fn old_sort_line<T: Elem>(x: &[T], ascend: bool, k: usize, out: &mut [i64]) {
    let mut line: Vec<(usize, OldKey)> = x
        .iter()
        .enumerate()
        .map(|(i, v)| (i, v.old_key()))
        .collect();
    line.sort_by(|a, b| {
        let by_key = if ascend {
            a.1.total_cmp(&b.1)
        } else {
            b.1.total_cmp(&a.1)
        };
        by_key.then(a.0.cmp(&b.0))
    });
    for (o, p) in out.iter_mut().zip(line.iter().take(k)) {
        *o = p.0 as i64;
    }
}

/// The old `unique`'s sort of items of `width` elements (rows of `x`; the first step, which
/// dominates).
fn old_unique_order<T: Elem>(x: &[T], width: usize, out: &mut [i64]) {
    let keys: Vec<Vec<OldKey>> = x
        .chunks(width)
        .map(|r| r.iter().map(|v| v.old_key()).collect())
        .collect();
    let lex = |a: &Vec<OldKey>, b: &Vec<OldKey>| {
        a.iter()
            .zip(b)
            .map(|(p, q)| p.total_cmp(q))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    };
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&a, &b| lex(&keys[a], &keys[b]));
    for (o, i) in out.iter_mut().zip(order) {
        *o = i as i64;
    }
}

fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 11
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Times `new` and `old` in turns; prints medians and bests in milliseconds.
fn race(name: &str, repeats: usize, mut new: impl FnMut(), mut old: impl FnMut()) {
    let (mut tn, mut to) = (Vec::new(), Vec::new());
    for r in 0..=repeats {
        let t = cpu_now();
        new();
        let a = cpu_now() - t;
        let t = cpu_now();
        old();
        let b = cpu_now() - t;
        if r > 0 {
            tn.push(a * 1e3);
            to.push(b * 1e3);
        }
    }
    let (bn, bo) = (
        tn.iter().cloned().fold(f64::MAX, f64::min),
        to.iter().cloned().fold(f64::MAX, f64::min),
    );
    let (mn, mo) = (median(&mut tn), median(&mut to));
    println!(
        "| {name} | {mn:.3} ({bn:.3}) | {mo:.3} ({bo:.3}) | {:.2}x |",
        mn / mo
    );
}

fn main() {
    let repeats = std::env::var("SORT_BENCH_REPEATS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9);
    let mut seed = 42u64;
    println!("| case | now: median (best) ms | before: median (best) ms | now / before |");
    println!("|---|---:|---:|---:|");

    // The samplers' shape: one row of 32k float32 logits.
    let vocab = 32_000usize;
    let mut logits: Vec<f32> = (0..vocab)
        .map(|_| (lcg(&mut seed) % 20_000) as f32 / 1000.0 - 10.0)
        .collect();
    let mut shape = [1, vocab as i64];
    let mut out = vec![0i64; vocab];
    let mut want = vec![0i64; vocab];
    let mut oshape = shape;
    let argsort = function("tvm.contrib.sort.argsort");
    let mut x = tensor(&mut logits, &mut shape, f32::CODE);
    let mut o = tensor(&mut out, &mut oshape, 0);
    let args = [
        Any::dltensor_ptr(&mut x),
        Any::dltensor_ptr(&mut o),
        Any::from(1i64),
        Any::from(false),
    ];
    argsort.call_values(&args).unwrap();
    old_sort_line(&logits, false, vocab, &mut want);
    assert_eq!(out, want, "argsort");
    race(
        "argsort, 32k float32 logits, descending",
        repeats,
        || {
            argsort.call_values(&args).unwrap();
        },
        || old_sort_line(black_box(&logits), false, vocab, black_box(&mut want)),
    );

    // topk 50 of the same logits.
    let topk = function("tvm.contrib.sort.topk");
    let k = 50usize;
    let mut top = vec![0i64; k];
    let mut tshape = [1, k as i64];
    let mut t = tensor(&mut top, &mut tshape, 0);
    let targs = [
        Any::dltensor_ptr(&mut x),
        Any::dltensor_ptr(&mut t),
        Any::from(k as i64),
        Any::from(-1i64),
        Any::from("indices"),
        Any::from(false),
    ];
    topk.call_values(&targs).unwrap();
    let mut want_top = vec![0i64; k];
    old_sort_line(&logits, false, k, &mut want_top);
    assert_eq!(top, want_top, "topk");
    race(
        "topk 50, 32k float32, descending",
        repeats,
        || {
            topk.call_values(&targs).unwrap();
        },
        || old_sort_line(black_box(&logits), false, k, black_box(&mut want_top)),
    );

    // Many short lines: argsort of (2000, 100) float32 along the last axis.
    let (rows, cols) = (2000usize, 100usize);
    let mut m: Vec<f32> = (0..rows * cols)
        .map(|_| (lcg(&mut seed) % 1000) as f32 / 7.0)
        .collect();
    let mut mshape = [rows as i64, cols as i64];
    let mut mout = vec![0i64; rows * cols];
    let mut moshape = mshape;
    let mut mx = tensor(&mut m, &mut mshape, f32::CODE);
    let mut mo = tensor(&mut mout, &mut moshape, 0);
    let margs = [
        Any::dltensor_ptr(&mut mx),
        Any::dltensor_ptr(&mut mo),
        Any::from(-1i64),
        Any::from(true),
    ];
    argsort.call_values(&margs).unwrap();
    let mut mwant = vec![0i64; rows * cols];
    let old_rows = |want: &mut [i64]| {
        for r in 0..rows {
            old_sort_line(
                &m[r * cols..(r + 1) * cols],
                true,
                cols,
                &mut want[r * cols..],
            );
        }
    };
    old_rows(&mut mwant);
    assert_eq!(mout, mwant, "argsort of rows");
    race(
        "argsort, 2000 x 100 float32 along the last axis",
        repeats,
        || {
            argsort.call_values(&margs).unwrap();
        },
        || old_rows(black_box(&mut mwant)),
    );

    // sort of 1M int64 (values written; the reference computes the order, the larger part).
    let n = 1 << 20;
    let mut ints: Vec<i64> = (0..n).map(|_| lcg(&mut seed) as i64 - (1 << 52)).collect();
    let mut ishape = [n as i64];
    let mut sorted = vec![0i64; n];
    let mut sshape = ishape;
    let sort = function("tvm.contrib.sort.sort");
    let mut ix = tensor(&mut ints, &mut ishape, i64::CODE);
    let mut sx = tensor(&mut sorted, &mut sshape, i64::CODE);
    let sargs = [
        Any::dltensor_ptr(&mut ix),
        Any::dltensor_ptr(&mut sx),
        Any::from(0i64),
        Any::from(true),
    ];
    sort.call_values(&sargs).unwrap();
    let mut iwant = vec![0i64; n];
    old_sort_line(&ints, true, n, &mut iwant);
    let iwant_values: Vec<i64> = iwant.iter().map(|&i| ints[i as usize]).collect();
    assert_eq!(sorted, iwant_values, "sort of int64");
    race(
        "sort, 1M int64, ascending",
        repeats.min(5),
        || {
            sort.call_values(&sargs).unwrap();
        },
        || old_sort_line(black_box(&ints), true, n, black_box(&mut iwant)),
    );

    // unique of 1M int64 with 1000 distinct values (values only).
    let mut few: Vec<i64> = (0..n).map(|_| (lcg(&mut seed) % 1000) as i64).collect();
    let mut fshape = [n as i64];
    let unique = function("relax.run.unique");
    let mut fx = tensor(&mut few, &mut fshape, i64::CODE);
    let uargs = [
        Any::dltensor_ptr(&mut fx),
        Any::from(true),
        Any::from(false),
        Any::from(false),
        Any::from(false),
    ];
    unique.call_values(&uargs).unwrap();
    let mut uorder = vec![0i64; n];
    race(
        "unique (sorted), 1M int64, 1000 distinct",
        repeats.min(5),
        || {
            black_box(unique.call_values(&uargs).unwrap());
        },
        || old_unique_order(black_box(&few), 1, black_box(&mut uorder)),
    );

    // unique rows (axis 0) of a (200k, 4) int64 matrix of 0..3: 81 distinct rows.
    let (urows, ucols) = (200_000usize, 4usize);
    let mut mat: Vec<i64> = (0..urows * ucols)
        .map(|_| (lcg(&mut seed) % 3) as i64)
        .collect();
    let mut ushape = [urows as i64, ucols as i64];
    let mut ux = tensor(&mut mat, &mut ushape, i64::CODE);
    let rargs = [
        Any::dltensor_ptr(&mut ux),
        Any::from(true),
        Any::from(false),
        Any::from(false),
        Any::from(false),
        Any::from(0i64),
    ];
    unique.call_values(&rargs).unwrap();
    let mut rorder = vec![0i64; urows];
    race(
        "unique rows (axis 0), 200k x 4 int64, 81 distinct",
        repeats.min(5),
        || {
            black_box(unique.call_values(&rargs).unwrap());
        },
        || old_unique_order(black_box(&mat), ucols, black_box(&mut rorder)),
    );
}
