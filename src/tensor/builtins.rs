//! Tensor functions of TVM's runtime (`src/runtime/tensor.cc`), by TVM's names:
//! - `runtime.TVMTensorCreateView(tensor, shape, dtype, relative_byte_offset)` (what
//!   `R.memory.view` lowers to, TVM's `Tensor::CreateView`): a view of a compact tensor's bytes
//!   with another shape and dtype, keeping the tensor alive;
//! - `runtime.TVMTensorAllocWithScope(shape, dtype, device, mem_scope)` (TVM's
//!   `Tensor::Empty`, what `tvm.runtime.empty` calls): a tensor on any device with a back end;
//! - `runtime.TVMTensorCopyFromBytes(tensor, data, nbytes)`, `runtime.TVMTensorCopyToBytes`
//!   and `runtime.TVMTensorCopyFromTo(from, to)`: copies that have finished when they return,
//!   on any device (what `tvm.runtime.Tensor.copyfrom` / `.numpy()` / `.copyto` call).

use crate::abi::DLTensor;
use crate::dtype::dtype_from_str;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::shape::shape_dims;
use crate::tensor::copy;
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

fn create_view(args: &[AnyView<'_>]) -> Result<Any> {
    const WHAT: &str = "runtime.TVMTensorCreateView";
    if args.len() != 4 {
        crate::bail_type!(
            "{WHAT} expects 4 arguments (tensor, shape, dtype, relative_byte_offset), got {}",
            args.len()
        );
    }
    let t = Tensor::from_any_view(&args[0], "tensor")?;
    let shape_obj = args[1].expect_object("shape")?;
    let shape =
        shape_dims(&shape_obj).ok_or_else(|| args[1].type_mismatch("shape", "ffi.Shape"))?;
    let dtype = match args[2].as_dtype() {
        Some(d) => d,
        None => dtype_from_str(
            args[2]
                .as_str()
                .ok_or_else(|| args[2].type_mismatch("dtype", "dtype or str"))?,
        )?,
    };
    let offset = args[3].expect_i64("relative_byte_offset")?;
    let offset = u64::try_from(offset)
        .map_err(|_| Error::value(format!("{WHAT}: negative byte offset {offset}")))?;
    Ok(t.view(shape, dtype, offset)
        .map_err(|e| e.context(WHAT))?
        .into())
}

fn alloc_with_scope(args: &[AnyView<'_>]) -> Result<Any> {
    const WHAT: &str = "runtime.TVMTensorAllocWithScope";
    if args.len() < 3 {
        crate::bail_type!(
            "{WHAT} expects (shape, dtype, device[, mem_scope]), got {} arguments",
            args.len()
        );
    }
    let shape_obj = args[0].expect_object("shape")?;
    let shape =
        shape_dims(&shape_obj).ok_or_else(|| args[0].type_mismatch("shape", "ffi.Shape"))?;
    let dtype = match args[1].as_dtype() {
        Some(d) => d,
        None => dtype_from_str(
            args[1]
                .as_str()
                .ok_or_else(|| args[1].type_mismatch("dtype", "dtype or str"))?,
        )?,
    };
    let device = args[2]
        .as_device()
        .ok_or_else(|| args[2].type_mismatch("device", "Device"))?;
    let scope = match args.get(3) {
        Some(v) if !v.is_none() => Some(v.expect_str("mem_scope")?),
        _ => None,
    };
    Ok(Tensor::empty_scoped(shape, dtype, device, scope)
        .map_err(|e| e.context(WHAT))?
        .into())
}

/// The `DLTensor*` argument `i` (a tensor object or a bare pointer).
fn dltensor_arg<'a>(args: &'a [AnyView<'_>], i: usize, what: &str) -> Result<&'a DLTensor> {
    let v = args
        .get(i)
        .ok_or_else(|| Error::type_error(format!("missing argument {i} (`{what}`)")))?;
    let p = v
        .as_dltensor()
        .filter(|p| !p.is_null())
        .ok_or_else(|| v.type_mismatch(what, "Tensor or DLTensor*"))?;
    // SAFETY: a non-null tensor argument is a live DLTensor for the call.
    Ok(unsafe { &*p })
}

/// `(tensor, data: opaque pointer, nbytes)` of the byte copies.
fn bytes_args<'a>(args: &'a [AnyView<'_>], what: &str) -> Result<(&'a DLTensor, *mut u8, usize)> {
    if args.len() != 3 {
        crate::bail_type!(
            "{what} expects (tensor, data, nbytes), got {} arguments",
            args.len()
        );
    }
    let t = dltensor_arg(args, 0, "tensor")?;
    let data = args[1]
        .as_opaque_ptr()
        .ok_or_else(|| args[1].type_mismatch("data", "opaque pointer"))?;
    crate::error::non_null(data, "data")?;
    let n = args[2].expect_i64("nbytes")?;
    let n = usize::try_from(n).map_err(|_| Error::value(format!("{what}: nbytes {n} < 0")))?;
    // SAFETY: the descriptor is live for the call.
    let expected = unsafe { crate::tensor::layout::dl_bytes(t, "tensor")? };
    if n != expected {
        crate::bail_value!("{what}: size mismatch: the tensor holds {expected} bytes, got {n}");
    }
    Ok((t, data.cast(), n))
}

/// The tensor functions, with TVM's names.
pub(crate) fn builtins() -> Vec<(&'static str, Function)> {
    vec![
        (
            "runtime.TVMTensorCreateView",
            Function::from_fn(create_view),
        ),
        (
            "runtime.TVMTensorAllocWithScope",
            Function::from_fn(alloc_with_scope),
        ),
        (
            "runtime.TVMTensorCopyFromBytes",
            Function::from_fn(|args| {
                const WHAT: &str = "runtime.TVMTensorCopyFromBytes";
                let (t, data, n) = bytes_args(args, WHAT)?;
                crate::tensor::check_dltensor_writable(t, WHAT)?;
                // SAFETY: TVM's contract for this global: `data` holds `nbytes` bytes.
                let bytes = unsafe { std::slice::from_raw_parts(data, n) };
                // SAFETY: a live descriptor.
                unsafe { copy::copy_from_bytes(t, bytes)? };
                Ok(Any::none())
            }),
        ),
        (
            "runtime.TVMTensorCopyToBytes",
            Function::from_fn(|args| {
                let (t, data, n) = bytes_args(args, "runtime.TVMTensorCopyToBytes")?;
                // SAFETY: TVM's contract for this global: `data` holds `nbytes` writable bytes.
                let out = unsafe { std::slice::from_raw_parts_mut(data, n) };
                // SAFETY: a live descriptor.
                unsafe { copy::copy_to_bytes(t, out)? };
                Ok(Any::none())
            }),
        ),
        (
            "runtime.TVMTensorCopyFromTo",
            Function::from_fn(|args| {
                let from = dltensor_arg(args, 0, "from")?;
                let to = dltensor_arg(args, 1, "to")?;
                crate::tensor::check_dltensor_writable(to, "runtime.TVMTensorCopyFromTo")?;
                // SAFETY: live descriptors for the call.
                unsafe { copy::copy_dltensor(from, to)? };
                Ok(Any::none())
            }),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::dtypes;
    use crate::object::shape::new_shape;
    use crate::tensor::layout::cpu;

    fn view_of(t: &Tensor, dims: &[i64], dtype: crate::abi::DLDataType, at: i64) -> Result<Any> {
        let args = [
            Any::from(t.clone()),
            Any::from_object(new_shape(dims)),
            Any::from(dtype),
            Any::from(at),
        ];
        let views: Vec<AnyView<'_>> = args.iter().map(Any::view).collect();
        create_view(&views)
    }

    #[test]
    fn alloc_and_copy_by_tvms_names() {
        let get = |n: &str| crate::function::registry::get_required(n).unwrap();
        let t = get("runtime.TVMTensorAllocWithScope")
            .call_values(&[
                Any::from_object(new_shape(&[2, 2])),
                Any::from("int32"),
                Any::from(cpu()),
                Any::from("global"),
            ])
            .unwrap();
        let src: Vec<u8> = [1i32, 2, 3, 4]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        get("runtime.TVMTensorCopyFromBytes")
            .call_values(&[
                t.clone(),
                Any::opaque_ptr(src.as_ptr().cast_mut().cast()),
                Any::from(16i64),
            ])
            .unwrap();
        let mut out = vec![0u8; 16];
        get("runtime.TVMTensorCopyToBytes")
            .call_values(&[
                t.clone(),
                Any::opaque_ptr(out.as_mut_ptr().cast()),
                Any::from(16i64),
            ])
            .unwrap();
        assert_eq!(out, src);
        let e = get("runtime.TVMTensorCopyToBytes")
            .call_values(&[
                t.clone(),
                Any::opaque_ptr(out.as_mut_ptr().cast()),
                Any::from(8i64),
            ])
            .unwrap_err();
        assert!(e.message.contains("holds 16 bytes, got 8"), "{e}");
        let e = get("runtime.TVMTensorAllocWithScope")
            .call_values(&[
                Any::from_object(new_shape(&[2])),
                Any::from("int32"),
                Any::from(cpu()),
                Any::from("global.texture"),
            ])
            .unwrap_err();
        assert!(e.message.contains("memory scope `global.texture`"), "{e}");
    }

    #[test]
    fn views_reinterpret_bytes_and_check_bounds() {
        let t = Tensor::empty(&[4], dtypes::UINT16, cpu()).unwrap();
        t.copy_from_bytes(&[1, 0, 2, 0, 3, 0, 4, 0]).unwrap();
        let v = view_of(&t, &[1], dtypes::UINT32, 4).unwrap();
        let v = Tensor::from_any_view(&v.view(), "view").unwrap();
        assert_eq!((v.shape(), v.dtype()), (&[1i64][..], dtypes::UINT32));
        assert_eq!(v.to_vec().unwrap(), [3, 0, 4, 0]);
        // Writing through the view writes the tensor.
        v.copy_from_bytes(&[9, 0, 9, 0]).unwrap();
        assert_eq!(t.to_vec().unwrap(), [1, 0, 2, 0, 9, 0, 9, 0]);
        let e = view_of(&t, &[2], dtypes::UINT32, 4).unwrap_err();
        assert!(e.message.contains("do not fit"), "{}", e.message);
        assert!(view_of(&t, &[1], dtypes::UINT32, -4).is_err());
    }
}
