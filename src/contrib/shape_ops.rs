//! `relax.run.shape_to_tensor`: the packed function a Relax model calls for
//! `R.shape_to_tensor` (ONNX `Shape` of dynamic inputs). TVM registers it from Python
//! (`python/tvm/relax/op/base.py`): the shape's dims as a new `int64` tensor of shape `(ndim,)`.

use crate::dtype::dtypes;
use crate::error::Result;
use crate::function::Function;
use crate::object::shape::shape_dims;
use crate::tensor::layout::cpu;
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

fn shape_to_tensor(args: &[AnyView<'_>]) -> Result<Any> {
    if args.len() != 1 {
        crate::bail_type!(
            "relax.run.shape_to_tensor expects 1 argument (a shape), got {}",
            args.len()
        );
    }
    let obj = args[0].expect_object("shape")?;
    let dims = shape_dims(&obj).ok_or_else(|| args[0].type_mismatch("shape", "ffi.Shape"))?;
    let t = Tensor::empty(&[dims.len() as i64], dtypes::INT64, cpu())?;
    let bytes: Vec<u8> = dims.iter().flat_map(|d| d.to_le_bytes()).collect();
    t.copy_from_bytes(&bytes)?;
    Ok(t.into())
}

/// The shape functions, with TVM's names.
pub fn builtins() -> Vec<(&'static str, Function)> {
    vec![(
        "relax.run.shape_to_tensor",
        Function::from_fn(shape_to_tensor),
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::shape::new_shape;

    #[test]
    fn dims_become_an_int64_tensor() {
        let shape = Any::from_object(new_shape(&[2, 0, 7]));
        let t = shape_to_tensor(&[shape.view()]).unwrap();
        let t = Tensor::from_any_view(&t.view(), "result").unwrap();
        assert_eq!(t.dtype(), dtypes::INT64);
        assert_eq!(t.shape(), &[3]);
        let want: Vec<u8> = [2i64, 0, 7].iter().flat_map(|d| d.to_le_bytes()).collect();
        assert_eq!(t.to_vec().unwrap(), want);
        let e = shape_to_tensor(&[AnyView::from(3i64)]).unwrap_err();
        assert_eq!(e.kind, "TypeError");
    }
}
