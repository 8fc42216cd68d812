//! Inputs that fuzzing (`fuzz/`, see `.ci/fuzz.sh`) found to crash tvmrt, kept as tests after
//! the fix. Each test names the fuzz target and the input that found it.

use tvmrt::abi::{DLDevice, DLDeviceType, DLManagedTensor, DLTensor};
use tvmrt::tensor::dlpack::ImportRequirements;
use tvmrt::tensor::Tensor;

static DELETED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

unsafe extern "C" fn count_delete(_m: *mut DLManagedTensor) {
    DELETED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

/// dlpack_import, crash-4963a162b7705a7f3d6ea3c41ce3153cacabdf2c: a DLPack tensor of one
/// float32 dimension of 0x0010_0500_0ac8_0000 elements with stride 0 (one stored element
/// broadcast) is a valid import; `Tensor::to_vec` then asked the allocator for its 4.5 PB
/// compact copy with `vec!`, which aborts the process when the allocation fails. It must be an
/// error instead.
#[test]
fn to_vec_of_a_huge_broadcast_tensor_is_an_error() {
    let mut data = [1.5f32; 4];
    let mut shape = [0x0010_0500_0ac8_0000i64];
    let mut strides = [0i64];
    let mut managed = DLManagedTensor {
        dl_tensor: DLTensor {
            data: data.as_mut_ptr().cast(),
            device: DLDevice {
                device_type: DLDeviceType::CPU,
                device_id: 0,
            },
            ndim: 1,
            dtype: tvmrt::dtype::dtypes::FLOAT32,
            shape: shape.as_mut_ptr(),
            strides: strides.as_mut_ptr(),
            byte_offset: 0,
        },
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(count_delete),
    };
    // SAFETY: a live managed tensor whose shape and strides hold one entry and whose single
    // stored element is in `data`; both outlive the tensor (dropped at the end of the test).
    let t = unsafe { Tensor::from_dlpack(&mut managed, ImportRequirements::default()) }
        .expect("a broadcast tensor is a valid import");
    assert_eq!(t.numel(), 0x0010_0500_0ac8_0000);
    let e = t.to_vec().unwrap_err();
    assert_eq!(e.kind, "ValueError");
    assert!(e.message.contains("cannot allocate"), "{e}");
    // A view of what is stored still works.
    let one = t.view(&[1], tvmrt::dtype::dtypes::FLOAT32, 0);
    assert!(one.is_err(), "view needs a contiguous source");
    drop(t);
    assert_eq!(DELETED.load(std::sync::atomic::Ordering::SeqCst), 1);
}
