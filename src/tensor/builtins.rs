//! Tensor functions of TVM's runtime that compiled models call by name:
//! `runtime.TVMTensorCreateView(tensor, shape, dtype, relative_byte_offset)` (what
//! `R.memory.view` lowers to, TVM's `Tensor::CreateView`): a view of a compact tensor's bytes
//! with another shape and dtype, keeping the tensor alive.

use crate::dtype::dtype_from_str;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::shape::shape_dims;
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

/// The tensor functions, with TVM's names.
pub(crate) fn builtins() -> Vec<(&'static str, Function)> {
    vec![(
        "runtime.TVMTensorCreateView",
        Function::from_fn(create_view),
    )]
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
