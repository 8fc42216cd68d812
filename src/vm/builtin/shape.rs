//! The shape builtins: the shape heap, and matching and making shapes and prim values from
//! it (`MatchShapeCode`, `MakeShapeCode`).

use crate::dtype::dtypes;
use crate::error::{Error, Result};
use crate::object::shape::new_shape;
use crate::value::{Any, AnyView};

use super::*;

/// `MatchShapeCode` (`include/tvm/runtime/vm/builtin.h`).
mod match_code {
    pub const ASSERT_EQUAL_TO_IMM: i64 = 0;
    pub const STORE_TO_HEAP: i64 = 1;
    pub const NO_OP: i64 = 2;
    pub const ASSERT_EQUAL_TO_LOAD: i64 = 3;
}

/// `MakeShapeCode`.
mod make_code {
    pub const USE_IMM: i64 = 0;
    pub const LOAD_SHAPE: i64 = 1;
}

/// The int64 shape heap: a tensor of int64 values the generated code reads and writes.
struct Heap {
    data: *mut i64,
    len: usize,
}

impl Heap {
    fn from_view(v: &AnyView<'_>) -> Result<Option<Heap>> {
        if v.is_none() {
            return Ok(None);
        }
        let t = dl_of(v)?.ok_or_else(|| v.type_mismatch("shape heap", "ffi.Tensor"))?;
        if t.dtype != dtypes::INT64 || t.ndim != 1 {
            return Err(Error::type_error(
                "shape heap: expected a 1-d int64 tensor".to_string(),
            ));
        }
        // SAFETY: the view keeps the tensor alive; its shape has `ndim` (1) dims.
        let len = unsafe { crate::tensor::layout::dl_shape(t, "shape heap")? }[0];
        let data = t
            .data
            .cast::<u8>()
            .wrapping_add(t.byte_offset as usize)
            .cast::<i64>();
        Ok(Some(Heap {
            data,
            len: usize::try_from(len).unwrap_or(0),
        }))
    }

    fn slot(heap: &Option<Heap>, reg: i64) -> Result<*mut i64> {
        let h = heap
            .as_ref()
            .ok_or_else(|| Error::runtime("the shape code needs a shape heap, but got None"))?;
        let i = usize::try_from(reg)
            .ok()
            .filter(|&i| i < h.len)
            .ok_or_else(|| {
                Error::index(format!(
                    "shape heap index {reg} is out of range (heap size {})",
                    h.len
                ))
            })?;
        Ok(h.data.wrapping_add(i))
    }

    fn load(heap: &Option<Heap>, reg: i64) -> Result<i64> {
        // SAFETY: `slot` checked the index against the heap tensor's length.
        Ok(unsafe { *Heap::slot(heap, reg)? })
    }

    fn store(heap: &Option<Heap>, reg: i64, v: i64) -> Result<()> {
        // SAFETY: as in `load`; the heap belongs to the running function.
        unsafe { *Heap::slot(heap, reg)? = v };
        Ok(())
    }
}

/// `vm.builtin.match_prim_value`.
pub(super) fn match_prim_value(args: &[AnyView<'_>], b: Builtin) -> Result<Any> {
    let input = int_arg(args, 0, b, "input_value")?;
    let heap = Heap::from_view(arg(args, 1, b)?)?;
    let code = int_arg(args, 2, b, "code")?;
    let reg = int_arg(args, 3, b, "reg")?;
    let ctx = || err_ctx(args.get(4));
    match code {
        match_code::ASSERT_EQUAL_TO_IMM if input != reg => Err(Error::runtime(format!(
            "Check failed: input_value == reg ({input} vs. {reg}) : {} match_cast \
             error,  PrimExpr mismatch to specified constant.",
            ctx()
        ))),
        match_code::STORE_TO_HEAP => Heap::store(&heap, reg, input).map(|_| Any::none()),
        match_code::ASSERT_EQUAL_TO_LOAD => {
            let want = Heap::load(&heap, reg)?;
            if input != want {
                return Err(Error::runtime(format!(
                    "Check failed: input_value == heap_data[reg] ({input} vs. {want}) : \
                     {} match_cast error,  PrimExpr mismatch to a previous populated \
                     value.",
                    ctx()
                )));
            }
            Ok(Any::none())
        }
        match_code::ASSERT_EQUAL_TO_IMM | match_code::NO_OP => Ok(Any::none()),
        c => Err(Error::new(
            "InternalError",
            format!("Unknown match shape code: {c}"),
        )),
    }
}

/// `vm.builtin.make_prim_value`.
pub(super) fn make_prim_value(args: &[AnyView<'_>], b: Builtin) -> Result<Any> {
    let heap = Heap::from_view(arg(args, 0, b)?)?;
    let code = int_arg(args, 1, b, "shape_code")?;
    let reg = int_arg(args, 2, b, "reg")?;
    match code {
        make_code::USE_IMM => Ok(Any::from(reg)),
        make_code::LOAD_SHAPE => Ok(Any::from(Heap::load(&heap, reg)?)),
        c => Err(Error::new(
            "InternalError",
            format!("Invalid shape code: {c}"),
        )),
    }
}

/// `vm.builtin.make_shape`.
pub(super) fn make_shape(args: &[AnyView<'_>], b: Builtin) -> Result<Any> {
    let heap = Heap::from_view(arg(args, 0, b)?)?;
    let size = int_arg(args, 1, b, "size")?;
    let n = usize::try_from(size)
        .ok()
        .filter(|&n| 2 + 2 * n <= args.len())
        .ok_or_else(|| {
            Error::value(format!(
                "vm.builtin.make_shape: {size} dims need {} arguments, got {}",
                size.saturating_mul(2).saturating_add(2),
                args.len()
            ))
        })?;
    let mut dims = Vec::with_capacity(n);
    for i in 0..n {
        let code = int_arg(args, 2 + 2 * i, b, "code")?;
        let reg = int_arg(args, 3 + 2 * i, b, "reg")?;
        dims.push(match code {
            make_code::USE_IMM => reg,
            make_code::LOAD_SHAPE => Heap::load(&heap, reg)?,
            c => {
                return Err(Error::new(
                    "InternalError",
                    format!("Invalid shape code: {c}"),
                ))
            }
        });
    }
    Ok(Any::from_object(new_shape(&dims)))
}

/// `vm.builtin.match_shape(value, heap, ndim, (code, reg) * ndim, err_ctx)`.
pub(super) fn match_shape(args: &[AnyView<'_>], b: Builtin) -> Result<Any> {
    let v = arg(args, 0, b)?;
    let heap = Heap::from_view(arg(args, 1, b)?)?;
    let size = int_arg(args, 2, b, "size")?;
    let n = usize::try_from(size)
        .ok()
        .filter(|&n| 3 + 2 * n < args.len())
        .ok_or_else(|| {
            Error::value(format!(
                "vm.builtin.match_shape: {size} dims need {} arguments, got {}",
                size.saturating_mul(2).saturating_add(4),
                args.len()
            ))
        })?;
    // Formatted only on failure: the context is a long string and checks rarely fail.
    let ctx = || err_ctx(args.get(3 + 2 * n));
    let checked = with_dims(v, |shape: &[i64]| -> Result<()> {
        if shape.len() != n {
            return Err(Error::runtime(format!(
                "Check failed: input_shape.size() == size ({} vs. {size}) : {} match_cast \
                 shape size mismatch.",
                shape.len(),
                ctx()
            )));
        }
        for (i, &dim) in shape.iter().enumerate() {
            let code = int_arg(args, 3 + 2 * i, b, "code")?;
            let reg = int_arg(args, 4 + 2 * i, b, "reg")?;
            match code {
                match_code::ASSERT_EQUAL_TO_IMM => {
                    if dim != reg {
                        return Err(Error::runtime(format!(
                            "Check failed: input_shape[i] == reg ({dim} vs. {reg}) : {} \
                             match_cast error,  shape[{i}] mismatch to specified constant.",
                            ctx()
                        )));
                    }
                }
                match_code::STORE_TO_HEAP => Heap::store(&heap, reg, dim)?,
                match_code::NO_OP => {}
                match_code::ASSERT_EQUAL_TO_LOAD => {
                    let want = Heap::load(&heap, reg)?;
                    if dim != want {
                        return Err(Error::runtime(format!(
                            "Check failed: input_shape[i] == heap_data[reg] ({dim} vs. {want}) \
                             : {} match_cast error,  shape[{i}] mismatch to a previous \
                             populated value.",
                            ctx()
                        )));
                    }
                }
                c => {
                    return Err(Error::new(
                        "InternalError",
                        format!("Unknown match shape code: {c}"),
                    ))
                }
            }
        }
        Ok(())
    });
    match checked {
        Some(r) => r.map(|_| Any::none()),
        None => Err(Error::type_error(format!(
            "Cannot convert from type `{}` to `ffi.Shape`",
            type_key(v)
        ))),
    }
}
