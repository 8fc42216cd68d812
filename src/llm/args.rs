//! Argument readers for the LLM globals: each names the function and the argument it reads,
//! so a wrong argument is a clear error rather than a wrong answer.

use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::array::array_items;
use crate::object::shape::shape_dims;
use crate::object::ObjectRef;
use crate::tensor::Tensor;
use crate::value::AnyView;

/// The arguments of one call of the global `func`.
pub struct Args<'a, 'b> {
    func: &'static str,
    args: &'a [AnyView<'b>],
}

impl<'a, 'b> Args<'a, 'b> {
    /// The arguments of `func`, which takes exactly `count` of them.
    pub fn exact(func: &'static str, args: &'a [AnyView<'b>], count: usize) -> Result<Self> {
        Args::between(func, args, count, count)
    }

    /// The arguments of `func`, which takes `min..=max` of them.
    pub fn between(
        func: &'static str,
        args: &'a [AnyView<'b>],
        min: usize,
        max: usize,
    ) -> Result<Self> {
        if args.len() < min || args.len() > max {
            let expected = if min == max {
                format!("{min}")
            } else {
                format!("{min} to {max}")
            };
            crate::bail_type!("{func} expects {expected} arguments, got {}", args.len());
        }
        Ok(Args { func, args })
    }

    /// Number of arguments passed.
    pub fn len(&self) -> usize {
        self.args.len()
    }

    /// Whether no argument was passed.
    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }

    /// The name of the function, for messages.
    pub fn func(&self) -> &'static str {
        self.func
    }

    /// Argument `i` as passed.
    pub fn get(&self, i: usize) -> &'a AnyView<'b> {
        &self.args[i]
    }

    fn what(&self, i: usize, name: &str) -> String {
        format!("{} argument {i} ({name})", self.func)
    }

    /// An integer (bools convert).
    pub fn i64(&self, i: usize, name: &str) -> Result<i64> {
        self.args[i]
            .as_i64()
            .ok_or_else(|| self.args[i].type_mismatch(&self.what(i, name), "int"))
    }

    /// An integer that must fit in 32 bits.
    pub fn i32(&self, i: usize, name: &str) -> Result<i32> {
        let v = self.i64(i, name)?;
        i32::try_from(v).map_err(|_| {
            Error::value(format!(
                "{}: {v} does not fit in 32 bits",
                self.what(i, name)
            ))
        })
    }

    /// A float (ints convert).
    pub fn f64(&self, i: usize, name: &str) -> Result<f64> {
        self.args[i]
            .as_f64()
            .ok_or_else(|| self.args[i].type_mismatch(&self.what(i, name), "float"))
    }

    /// A bool (ints convert).
    pub fn bool(&self, i: usize, name: &str) -> Result<bool> {
        self.args[i]
            .as_bool()
            .ok_or_else(|| self.args[i].type_mismatch(&self.what(i, name), "bool"))
    }

    /// A string.
    pub fn str(&self, i: usize, name: &str) -> Result<&'a str> {
        self.args[i]
            .as_str()
            .ok_or_else(|| self.args[i].type_mismatch(&self.what(i, name), "str"))
    }

    /// Any object.
    pub fn object(&self, i: usize, name: &str) -> Result<ObjectRef> {
        self.args[i]
            .as_object()
            .ok_or_else(|| self.args[i].type_mismatch(&self.what(i, name), "Object"))
    }

    /// A tensor object (`ffi.Tensor`; a bare `DLTensor*` owns nothing and is refused).
    pub fn tensor(&self, i: usize, name: &str) -> Result<Tensor> {
        let v = &self.args[i];
        match v.as_object() {
            Some(o) if o.type_index() == crate::abi::type_index::TENSOR => Tensor::from_object(o),
            _ => Err(v.type_mismatch(&self.what(i, name), "ffi.Tensor")),
        }
    }

    /// A tensor object, or `None`.
    pub fn opt_tensor(&self, i: usize, name: &str) -> Result<Option<Tensor>> {
        if self.args[i].is_none() {
            return Ok(None);
        }
        self.tensor(i, name).map(Some)
    }

    /// A function.
    pub fn function(&self, i: usize, name: &str) -> Result<Function> {
        self.args[i]
            .as_function()
            .ok_or_else(|| self.args[i].type_mismatch(&self.what(i, name), "ffi.Function"))
    }

    /// A function, or `None` for anything else (TVM's `args[i].as<Function>()`).
    pub fn opt_function(&self, i: usize) -> Option<Function> {
        self.args[i].as_function()
    }

    /// The dims of an `ffi.Shape` (TVM's `ShapeTuple`).
    pub fn shape(&self, i: usize, name: &str) -> Result<Vec<i64>> {
        let v = &self.args[i];
        v.as_object()
            .and_then(|o| shape_dims(&o).map(<[i64]>::to_vec))
            .ok_or_else(|| v.type_mismatch(&self.what(i, name), "ffi.Shape"))
    }

    /// An `ffi.Shape`, or `None`.
    pub fn opt_shape(&self, i: usize, name: &str) -> Result<Option<Vec<i64>>> {
        if self.args[i].is_none() {
            return Ok(None);
        }
        self.shape(i, name).map(Some)
    }

    /// The items of an `ffi.Array` (views valid while the returned object lives).
    pub fn array(&self, i: usize, name: &str) -> Result<ObjectRef> {
        let v = &self.args[i];
        let obj = v
            .as_object()
            .filter(|o| array_items(o).is_some())
            .ok_or_else(|| v.type_mismatch(&self.what(i, name), "ffi.Array"))?;
        Ok(obj)
    }

    /// An `ffi.Array` of functions.
    pub fn functions(&self, i: usize, name: &str) -> Result<Vec<Function>> {
        let arr = self.array(i, name)?;
        let items = array_items(&arr).unwrap_or(&[]);
        items
            .iter()
            .enumerate()
            .map(|(k, v)| v.expect_function(&format!("{} item {k}", self.what(i, name))))
            .collect()
    }

    /// An `ffi.Array` of tensors.
    pub fn tensors(&self, i: usize, name: &str) -> Result<Vec<Tensor>> {
        let arr = self.array(i, name)?;
        let items = array_items(&arr).unwrap_or(&[]);
        items
            .iter()
            .enumerate()
            .map(|(k, v)| Tensor::from_any_view(v, &format!("{} item {k}", self.what(i, name))))
            .collect()
    }

    /// An `ffi.Array` of strings.
    pub fn strings(&self, i: usize, name: &str) -> Result<Vec<String>> {
        let arr = self.array(i, name)?;
        let items = array_items(&arr).unwrap_or(&[]);
        items
            .iter()
            .enumerate()
            .map(|(k, v)| {
                v.expect_str(&format!("{} item {k}", self.what(i, name)))
                    .map(str::to_string)
            })
            .collect()
    }
}
