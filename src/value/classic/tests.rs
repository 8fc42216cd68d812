use std::ffi::c_void;

use super::*;
use crate::abi::{type_code as tc, type_index as ti};
use crate::abi::{DLTensor, TVMValue};
use crate::dtype::classic_bool;
use crate::object::string::new_str;
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

#[test]
fn plain_classic_arguments_convert_by_table() {
    let text = c"text";
    // A real descriptor: a `DLTensor*` argument is read (for its dtype) on the way.
    let mut tensor_slot = DLTensor {
        data: std::ptr::null_mut(),
        device: crate::tensor::layout::cpu(),
        ndim: 0,
        dtype: crate::dtype::dtypes::FLOAT32,
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let tensor = (&mut tensor_slot as *mut DLTensor).cast::<c_void>();
    let device = crate::abi::DLDevice {
        device_type: crate::abi::DLDeviceType::CUDA,
        device_id: 3,
    };
    let cases: [(TVMValue, i32, i32); 8] = [
        (TVMValue { v_int64: -7 }, tc::INT, ti::INT),
        (TVMValue { v_int64: 9 }, tc::UINT, ti::INT),
        (TVMValue { v_float64: 2.5 }, tc::FLOAT, ti::FLOAT),
        (TVMValue::handle(tensor), tc::OPAQUE_HANDLE, ti::OPAQUE_PTR),
        (TVMValue { v_int64: 77 }, tc::NULLPTR, ti::NONE),
        (TVMValue::device(device), tc::DEVICE, ti::DEVICE),
        (
            TVMValue::handle(tensor),
            tc::DL_TENSOR_HANDLE,
            ti::DL_TENSOR_PTR,
        ),
        (TVMValue::c_str(text.as_ptr()), tc::STR, ti::RAW_STR),
    ];
    for (value, code, index) in cases {
        // SAFETY: the pointers are alive for the test.
        let raw = unsafe { plain_classic_to_raw(value, code) }.expect("plain code");
        assert_eq!(raw.type_index, index, "code {code}");
        assert_eq!(raw.small_str_len, 0);
        // SAFETY: reading the member the index names.
        unsafe {
            match index {
                ti::NONE => assert_eq!(raw.payload.v_int64, 0, "None has a zero payload"),
                ti::FLOAT => assert_eq!(raw.payload.v_float64, 2.5),
                ti::DEVICE => {
                    assert_eq!(raw.payload.v_device.device_id, 3);
                    assert_eq!(
                        raw.payload.v_device.device_type,
                        crate::abi::DLDeviceType::CUDA
                    );
                }
                _ => assert_eq!(raw.payload.v_int64, value.v_int64, "code {code}"),
            }
        }
        // And back the way a classic callee receives it.
        let (back, back_code) = plain_arg_to_classic(&raw).expect("plain index");
        let expected_code = match code {
            tc::UINT => tc::INT,
            other => other,
        };
        assert_eq!(back_code, expected_code);
        if code != tc::NULLPTR {
            // SAFETY: eight-byte members on both sides.
            unsafe { assert_eq!(back.v_int64, value.v_int64, "code {code}") };
        }
    }
    // Codes that need the general conversion, and a null string.
    for code in [
        tc::DATA_TYPE,
        tc::OBJECT_HANDLE,
        tc::MODULE_HANDLE,
        tc::PACKED_FUNC_HANDLE,
        tc::BYTES,
        tc::NDARRAY_HANDLE,
        tc::OBJECT_RVALUE_REF_ARG,
        tc::BOOL,
        16,
        -1,
        i32::MAX,
    ] {
        // SAFETY: refused before any member is read.
        assert!(unsafe { plain_classic_to_raw(TVMValue { v_int64: 1 }, code) }.is_none());
    }
    let null_str = TVMValue::c_str(std::ptr::null());
    // SAFETY: the null string is refused, not read.
    assert!(unsafe { plain_classic_to_raw(null_str, tc::STR) }.is_none());
    // Results: only values that own nothing are plain.
    let int = Any::from(41i64);
    assert_eq!(plain_to_classic(int.raw()).map(|(_, c)| c), Some(tc::INT));
    let s = Any::from("a string long enough to be an object");
    assert!(plain_to_classic(s.raw()).is_none());
    assert!(plain_arg_to_classic(s.raw()).is_none());
}

#[test]
fn bools_are_uint1_on_the_classic_side() {
    use crate::dtype::{dtype, dtypes};
    let mut shape = [3i64];
    let mut data = [1u8, 0, 1];
    let mut classic = DLTensor {
        data: data.as_mut_ptr().cast(),
        device: crate::tensor::layout::cpu(),
        ndim: 1,
        dtype: classic_bool::CLASSIC,
        shape: shape.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let value = TVMValue {
        v_handle: (&mut classic as *mut DLTensor).cast(),
    };
    // SAFETY: a live descriptor.
    assert!(unsafe { plain_classic_to_raw(value, tc::DL_TENSOR_HANDLE) }.is_none());
    let mut inbound = ClassicInbound::default();
    // SAFETY: as above.
    let r = unsafe { inbound.convert(value, tc::DL_TENSOR_HANDLE) }.unwrap();
    // SAFETY: the converted descriptor lives in `inbound`.
    let seen = unsafe { *r.payload.v_ptr.cast::<DLTensor>() };
    assert_eq!(seen.dtype, dtypes::BOOL);
    assert_eq!(seen.data, classic.data, "same bytes");
    assert_eq!(
        classic.dtype,
        classic_bool::CLASSIC,
        "the caller's descriptor is unchanged"
    );
    // Data types: uint1 in, kDLBool out; uint8 unchanged.
    let dt = |t| TVMValue { v_type: t };
    // SAFETY: data type values.
    let r = unsafe { classic_to_raw(dt(classic_bool::CLASSIC), tc::DATA_TYPE) }.unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { r.payload.v_dtype }, dtypes::BOOL);
    // SAFETY: as above.
    let r = unsafe { classic_to_raw(dt(dtypes::UINT8), tc::DATA_TYPE) }.unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { r.payload.v_dtype }, dtypes::UINT8);
    // The other way: a kDLBool tensor, descriptor and dtype reach a classic callee as uint1.
    let t = Tensor::empty(&[3], dtypes::BOOL, crate::tensor::layout::cpu()).unwrap();
    let mut ffi_desc = *t.dl();
    let values = [
        Any::from(t.clone()),
        Any::dltensor_ptr(&mut ffi_desc),
        Any::from(dtypes::BOOL),
        Any::from(dtype(0, 8, 1)),
    ];
    let views: Vec<AnyView<'_>> = values.iter().map(Any::view).collect();
    assert!(plain_arg_to_classic(views[1].raw()).is_none());
    let mut c = ClassicArgs::from_views(&views).unwrap();
    let codes = c.codes_mut().to_vec();
    assert_eq!(
        codes,
        [
            tc::NDARRAY_HANDLE,
            tc::DL_TENSOR_HANDLE,
            tc::DATA_TYPE,
            tc::DATA_TYPE
        ]
    );
    let v = c.values_mut();
    // SAFETY: the handles live in `c` (views and descriptor copies) for its lifetime.
    unsafe {
        let array = &*v[0].v_handle.cast::<DLTensor>();
        assert_eq!(array.dtype, classic_bool::CLASSIC);
        assert_eq!(array.data, t.data_ptr(), "a view of the same bytes");
        assert_eq!(
            (*v[1].v_handle.cast::<DLTensor>()).dtype,
            classic_bool::CLASSIC
        );
        assert_eq!(v[2].v_type, classic_bool::CLASSIC);
        assert_eq!(v[3].v_type, dtype(0, 8, 1));
    }
    assert_eq!(t.dtype(), dtypes::BOOL, "the tensor itself is unchanged");
    assert_eq!(ffi_desc.dtype, dtypes::BOOL);
    // A bool result leaves for a classic caller as a uint1 view, and comes back as kDLBool.
    let (ret, code) = any_to_classic_return(Any::from(t.clone())).unwrap();
    assert_eq!(code, tc::NDARRAY_HANDLE);
    // SAFETY: the returned handle owns a reference to the view.
    let back = unsafe { classic_to_owned(ret, code) }.unwrap();
    // SAFETY: as above.
    assert_eq!(
        unsafe { (*ret.v_handle.cast::<DLTensor>()).dtype },
        classic_bool::CLASSIC
    );
    let back = Tensor::from_any_view(&back.view(), "back").unwrap();
    assert_eq!(back.dtype(), dtypes::BOOL);
    assert_eq!(back.data_ptr(), t.data_ptr());
    // SAFETY: releases the reference the classic return handed over.
    unsafe { crate::object::dec_ref_raw(ret.v_handle.cast::<u8>().sub(HEADER_BYTES).cast()) };
}

#[test]
fn pods_round_trip_through_classic() {
    let values = [
        Any::from(5i64),
        Any::from(1.5f64),
        Any::from(true),
        Any::none(),
    ];
    let views: Vec<AnyView<'_>> = values.iter().map(Any::view).collect();
    let mut c = ClassicArgs::from_views(&views).unwrap();
    assert_eq!(c.codes_mut(), &[tc::INT, tc::FLOAT, tc::BOOL, tc::NULLPTR]);
    for (i, v) in values.iter().enumerate() {
        let (value, code) = (c.values_mut()[i], c.codes_mut()[i]);
        // SAFETY: plain values.
        let back = unsafe { classic_to_owned(value, code) }.unwrap();
        assert_eq!(back.view().type_index(), v.view().type_index());
    }
    // SAFETY: the FLOAT member of a float value.
    assert_eq!(unsafe { c.values_mut()[1].v_float64 }, 1.5);
}

#[test]
fn strings_become_c_strings() {
    let s = Any::from_object(new_str("hi"));
    let mut c = ClassicArgs::from_views(&[s.view()]).unwrap();
    assert_eq!(c.codes_mut()[0], tc::STR);
    // SAFETY: the CString lives in `c`.
    let text = unsafe { std::ffi::CStr::from_ptr(c.values_mut()[0].v_str) };
    assert_eq!(text.to_str().unwrap(), "hi");
    let (v, code) = any_to_classic_return(Any::from("ret")).unwrap();
    assert_eq!(code, tc::STR);
    // SAFETY: valid until the next return on this thread.
    assert_eq!(
        unsafe { std::ffi::CStr::from_ptr(v.v_str) }
            .to_str()
            .unwrap(),
        "ret"
    );
    let (v, code) = any_to_classic_return(Any::from(crate::dtype::dtypes::FLOAT32)).unwrap();
    assert_eq!(code, tc::STR);
    // SAFETY: as above.
    assert_eq!(
        unsafe { std::ffi::CStr::from_ptr(v.v_str) }
            .to_str()
            .unwrap(),
        "float32"
    );
}

#[test]
fn more_than_eight_arguments_use_the_heap() {
    let values: Vec<Any> = (0..11i64).map(Any::from).collect();
    let views: Vec<AnyView<'_>> = values.iter().map(Any::view).collect();
    let mut c = ClassicArgs::from_views(&views).unwrap();
    assert_eq!(c.len(), 11);
    // SAFETY: int values.
    let ints: Vec<i64> = c
        .values_mut()
        .iter()
        .map(|v| unsafe { v.v_int64 })
        .collect();
    assert_eq!(ints, (0..11).collect::<Vec<i64>>());
}

#[test]
fn unknown_code_is_type_error() {
    // SAFETY: the value is not dereferenced for an unknown code.
    let e = unsafe { classic_to_raw(TVMValue::default(), 99) }
        .err()
        .unwrap();
    assert!(e.message.contains("unknown classic type code 99"));
}
