//! tvmrt tensors handed to kernels compiled by TVM 0.27 (`tests/fixtures/*.so`): as tensor
//! objects (index 70) and as bare `DLTensor*` (index 7), views with a folded offset, imported
//! DLPack data, every fixture dtype, and TVM's own argument checks on strided input.

use std::path::PathBuf;

// The module tests' helpers: fixture paths, `.npy` reading, host tensors.
#[path = "module_support/mod.rs"]
mod module_support;

use tvmrt::abi::{DLDataType, DLDevice, DLDeviceType};
use tvmrt::dtype::dtypes;
use tvmrt::module::loader::load_dso;
use tvmrt::tensor::Tensor;
use tvmrt::{Any, Function};

fn cpu() -> DLDevice {
    DLDevice {
        device_type: DLDeviceType(1),
        device_id: 0,
    }
}

fn fixture(name: &str) -> String {
    let p: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "fixtures", name]
        .iter()
        .collect();
    p.to_string_lossy().into_owned()
}

fn kernel(lib: &str, name: &str) -> Function {
    let m = load_dso(&fixture(lib)).unwrap();
    m.get_function(name, false)
        .unwrap()
        .expect("function in fixture")
}

fn tensor_from(shape: &[i64], t: DLDataType, bytes: &[u8]) -> Tensor {
    let x = Tensor::empty(shape, t, cpu()).unwrap();
    x.copy_from_bytes(bytes).unwrap();
    x
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn add_with_tensor_objects_and_bare_pointers() {
    let add = kernel("add_dyn.so", "add");
    let a: Vec<f32> = (0..100).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..100).map(|i| 1000.0 - i as f32).collect();
    let expect: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    let ta = tensor_from(&[100], dtypes::FLOAT32, &f32_bytes(&a));
    let tb = tensor_from(&[100], dtypes::FLOAT32, &f32_bytes(&b));
    // Index 70: tensor objects.
    let tc = Tensor::empty(&[100], dtypes::FLOAT32, cpu()).unwrap();
    add.call_values(&[
        Any::from(ta.clone()),
        Any::from(tb.clone()),
        Any::from(tc.clone()),
    ])
    .unwrap();
    assert_eq!(f32s(&tc.to_vec().unwrap()), expect);
    // Index 7: the same tensors as bare DLTensor pointers.
    let td = Tensor::empty(&[100], dtypes::FLOAT32, cpu()).unwrap();
    add.call_values(&[
        Any::dltensor_ptr(ta.dltensor()),
        Any::dltensor_ptr(tb.dltensor()),
        Any::dltensor_ptr(td.dltensor()),
    ])
    .unwrap();
    assert_eq!(f32s(&td.to_vec().unwrap()), expect);
    // Empty tensors are fine too.
    let e = Tensor::empty(&[0], dtypes::FLOAT32, cpu()).unwrap();
    add.call_values(&[Any::from(e.clone()), Any::from(e.clone()), Any::from(e)])
        .unwrap();
}

#[test]
fn views_and_dlpack_imports_feed_kernels() {
    let add = kernel("add_dyn.so", "add");
    let base = tensor_from(
        &[8],
        dtypes::FLOAT32,
        &f32_bytes(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]),
    );
    // The second half of `base` as a 4-element view: the offset is folded into `data`, so
    // TVM's `byte_offset == 0` check for offset-free buffers passes.
    let half = base.view(&[4], dtypes::FLOAT32, 16).unwrap();
    assert_eq!(half.byte_offset(), 0);
    // A DLPack import of a tvmrt export (a framework round trip).
    let ones = tensor_from(&[4], dtypes::FLOAT32, &f32_bytes(&[1.0; 4]));
    let exported = ones.to_dlpack_versioned();
    // SAFETY: our own live export, handed over.
    let imported = unsafe {
        Tensor::from_dlpack_versioned(
            exported,
            tvmrt::tensor::dlpack::ImportRequirements::default(),
        )
    }
    .unwrap();
    // The output is a view into the first half of `base`.
    let out = base.view(&[4], dtypes::FLOAT32, 0).unwrap();
    add.call_values(&[Any::from(half), Any::from(imported), Any::from(out)])
        .unwrap();
    assert_eq!(
        f32s(&base.to_vec().unwrap()),
        [5.0, 6.0, 7.0, 8.0, 4.0, 5.0, 6.0, 7.0]
    );
}

#[test]
fn strided_input_meets_tvms_compactness_check() {
    let add = kernel("shape_check.so", "add");
    let a = tensor_from(
        &[4, 4],
        dtypes::FLOAT32,
        &f32_bytes(&(0..16).map(|i| i as f32).collect::<Vec<_>>()),
    );
    let mut shape = [4i64, 4];
    let mut strides = [1i64, 4];
    let proto = tvmrt::abi::DLTensor {
        shape: shape.as_mut_ptr(),
        strides: strides.as_mut_ptr(),
        ..*a.dl()
    };
    // SAFETY: the transposed view covers exactly `a`'s data.
    let at = unsafe { a.create_unsafe_view(&proto) }.unwrap();
    let c = Tensor::empty(&[4, 4], dtypes::FLOAT32, cpu()).unwrap();
    let err = add
        .call_values(&[
            Any::from(at.clone()),
            Any::from(a.clone()),
            Any::from(c.clone()),
        ])
        .unwrap_err();
    assert_eq!(err.kind, "ValueError");
    assert!(
        err.message
            .starts_with("Mismatched A.strides on argument #0"),
        "{}",
        err.message
    );
    // Made compact by a strided copy, it is accepted.
    let compact = Tensor::empty(&[4, 4], dtypes::FLOAT32, cpu()).unwrap();
    compact.copy_from(&at).unwrap();
    add.call_values(&[Any::from(compact), Any::from(a), Any::from(c.clone())])
        .unwrap();
    let got = f32s(&c.to_vec().unwrap());
    for i in 0..4 {
        for j in 0..4 {
            assert_eq!(got[i * 4 + j], (j * 4 + i) as f32 + (i * 4 + j) as f32);
        }
    }
}

#[test]
fn every_fixture_dtype_round_trips_through_kernels() {
    let n = 17usize;
    // (function, dtype, a, b, expected), values as raw little-endian bytes.
    let i8s = |f: fn(usize) -> i8| (0..n).flat_map(move |i| f(i).to_le_bytes()).collect();
    type Case = (&'static str, DLDataType, Vec<u8>, Vec<u8>, Vec<u8>);
    let cases: Vec<Case> = vec![
        (
            "add_int8",
            dtypes::INT8,
            i8s(|i| i as i8 - 8),
            i8s(|i| 3 * i as i8),
            i8s(|i| 4 * i as i8 - 8),
        ),
        (
            "add_uint8",
            dtypes::UINT8,
            (0..n).map(|i| 200 + i as u8).collect(),
            (0..n).map(|i| i as u8).collect(),
            (0..n).map(|i| (200 + 2 * i as u32) as u8).collect(), // wraps at 256
        ),
        (
            "add_int64",
            dtypes::INT64,
            (0..n)
                .flat_map(|i| (i as i64 * 1_000_000_007).to_le_bytes())
                .collect(),
            (0..n).flat_map(|i| (-(i as i64)).to_le_bytes()).collect(),
            (0..n)
                .flat_map(|i| (i as i64 * 1_000_000_006).to_le_bytes())
                .collect(),
        ),
        (
            "add_float64",
            dtypes::FLOAT64,
            (0..n)
                .flat_map(|i| (i as f64 * 0.25).to_le_bytes())
                .collect(),
            (0..n)
                .flat_map(|i| (i as f64 * 0.5).to_le_bytes())
                .collect(),
            (0..n)
                .flat_map(|i| (i as f64 * 0.75).to_le_bytes())
                .collect(),
        ),
        (
            // float16 as bit patterns: 1.0 = 0x3c00, 2.0 = 0x4000, 3.0 = 0x4200.
            "add_float16",
            dtypes::FLOAT16,
            (0..n).flat_map(|_| 0x3c00u16.to_le_bytes()).collect(),
            (0..n).flat_map(|_| 0x4000u16.to_le_bytes()).collect(),
            (0..n).flat_map(|_| 0x4200u16.to_le_bytes()).collect(),
        ),
        (
            "or_bool",
            dtypes::BOOL,
            (0..n).map(|i| (i % 2) as u8).collect(),
            (0..n).map(|i| (i % 3 == 0) as u8).collect(),
            (0..n).map(|i| (i % 2 == 1 || i % 3 == 0) as u8).collect(),
        ),
    ];
    let m = load_dso(&fixture("dtypes.so")).unwrap();
    for (name, t, a, b, expect) in cases {
        let f = m.get_function(name, false).unwrap().unwrap();
        let shape = [n as i64];
        let ta = tensor_from(&shape, t, &a);
        let tb = tensor_from(&shape, t, &b);
        let tc = Tensor::empty(&shape, t, cpu()).unwrap();
        f.call_values(&[Any::from(ta), Any::from(tb), Any::from(tc.clone())])
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(tc.to_vec().unwrap(), expect, "{name}");
    }
}
