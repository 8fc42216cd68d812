//! The `vm.builtin.check_*_info` builtins: a value against the type a function declares, with
//! TVM's messages.

use crate::abi::type_index;
use crate::error::{Error, Result};
use crate::object::shape::shape_dims;
use crate::value::{Any, AnyView};

use crate::vm::array::array_items;
use crate::vm::interp::closure_obj;

use super::*;

/// `vm.builtin.check_tensor_info`.
pub(super) fn tensor_info(args: &[AnyView<'_>], b: Builtin) -> Result<Any> {
    let v = arg(args, 0, b)?;
    let ndim = int_arg(args, 1, b, "ndim")?;
    let (dtype, ctx_at) = if args.len() == 3 {
        (None, 2)
    } else {
        let d = arg(args, 2, b)?;
        let d = if d.is_none() {
            None
        } else {
            Some(
                d.as_dtype()
                    .ok_or_else(|| d.type_mismatch("dtype", "DataType"))?,
            )
        };
        (d, 3)
    };
    // Formatted only on failure.
    let ctx = || err_ctx(args.get(ctx_at));
    let t = dl_of(v)?.ok_or_else(|| {
        Error::type_error(format!(
            "Check failed: (opt_ptr.has_value()) is false: {} expect a Tensor but get {}",
            ctx(),
            type_key(v)
        ))
    })?;
    if ndim != -1 && t.ndim as i64 != ndim {
        return Err(Error::value(format!(
            "Check failed: (ptr->ndim == ndim) is false: {} expect Tensor with ndim \
             {ndim} but get {}",
            ctx(),
            t.ndim
        )));
    }
    if let Some(d) = dtype {
        if t.dtype != d {
            return Err(Error::value(format!(
                "Check failed: (ptr->dtype == dtype.value()) is false: {} expect \
                 Tensor with dtype {} but get {}",
                ctx(),
                dtype_str(d),
                dtype_str(t.dtype)
            )));
        }
    }
    Ok(Any::none())
}

/// `vm.builtin.check_shape_info`.
pub(super) fn shape_info(args: &[AnyView<'_>], b: Builtin) -> Result<Any> {
    let v = arg(args, 0, b)?;
    let ndim = int_arg(args, 1, b, "ndim")?;
    let ctx = err_ctx(args.get(2));
    let dims = v
        .as_object()
        .and_then(|o| shape_dims(&o).map(<[i64]>::len))
        .ok_or_else(|| {
            Error::type_error(format!(
                "Check failed: (ptr != nullptr) is false: {ctx} expect a Shape but get {}",
                type_key(v)
            ))
        })?;
    if ndim != -1 && dims as i64 != ndim {
        return Err(Error::value(format!(
            "Check failed: (ptr->size == static_cast<uint64_t>(ndim)) is false: {ctx} \
             expect Shape with ndim {ndim} but get {dims}"
        )));
    }
    Ok(Any::none())
}

/// `vm.builtin.check_prim_value_info`.
pub(super) fn prim_value_info(args: &[AnyView<'_>], b: Builtin) -> Result<Any> {
    let v = arg(args, 0, b)?;
    let d = arg(args, 1, b)?;
    let d = d
        .as_dtype()
        .ok_or_else(|| d.type_mismatch("dtype", "DataType"))?;
    let ctx = err_ctx(args.get(2));
    if v.type_index() >= type_index::STATIC_OBJECT_BEGIN {
        return Err(Error::type_error(format!(
            "{ctx}, expected dtype {}, but received ObjectRef of type {}",
            dtype_str(d),
            type_key(v)
        )));
    }
    let ok = match d.code.0 {
        6 => v.as_bool().is_some() || v.as_i64().is_some(),
        0 | 1 => v.as_i64().is_some(),
        2 => v.as_f64().is_some(),
        3 if !(d.bits == 0 && d.lanes == 0) => v.as_opaque_ptr().is_some() || v.is_none(),
        _ => {
            return Err(Error::type_error(format!(
                "{ctx}, unsupported dtype {}",
                dtype_str(d)
            )))
        }
    };
    if !ok {
        return Err(Error::type_error(format!(
            "{ctx}, expected dtype {}, but got {}",
            dtype_str(d),
            type_key(v)
        )));
    }
    Ok(Any::none())
}

/// `vm.builtin.check_string_info`.
pub(super) fn string_info(args: &[AnyView<'_>], b: Builtin) -> Result<Any> {
    let v = arg(args, 0, b)?;
    let ctx = err_ctx(args.get(1));
    if v.as_str().is_none() {
        return Err(Error::type_error(format!(
            "Check failed: (value.as<ffi::String>().has_value()) is false: {ctx} expect \
             a string"
        )));
    }
    Ok(Any::none())
}

/// `vm.builtin.check_tuple_info`.
pub(super) fn tuple_info(args: &[AnyView<'_>], b: Builtin) -> Result<Any> {
    let v = arg(args, 0, b)?;
    let size = int_arg(args, 1, b, "size")?;
    let ctx = err_ctx(args.get(2));
    let n = v
        .as_object()
        .and_then(|o| array_items(&o).map(<[AnyView<'_>]>::len))
        .ok_or_else(|| {
            Error::type_error(format!(
                "Check failed: (ptr != nullptr) is false: {ctx} expect a Tuple but get {}",
                type_key(v)
            ))
        })?;
    if n as i64 != size {
        return Err(Error::value(format!(
            "Check failed: (static_cast<int64_t>(ptr->size()) == size) is false: {ctx} \
             expect a Tuple with {size} elements,  but get a Tuple with {n} elements."
        )));
    }
    Ok(Any::none())
}

/// `vm.builtin.check_func_info`.
pub(super) fn func_info(args: &[AnyView<'_>], b: Builtin) -> Result<Any> {
    let v = arg(args, 0, b)?;
    let ctx = err_ctx(args.get(1));
    let is_func = v.type_index() == type_index::FUNCTION
        || v.as_object().is_some_and(|o| closure_obj(&o).is_some());
    if !is_func {
        return Err(Error::type_error(format!(
            "Check failed: (is_func) is false: {ctx} expect a Function but get {}",
            type_key(v)
        )));
    }
    Ok(Any::none())
}
