//! The VM builtins (`vm.builtin.*`), with TVM's semantics and error messages
//! (`src/runtime/vm/builtin.cc`, `memory/memory_manager.cc`).
//!
//! Each builtin is a [`Builtin`]. The interpreter binds the names of its function table to
//! them once and calls them directly with the VM at hand; the same builtins are also
//! registered as global functions (for callers outside the VM), where the ones that need a VM
//! take TVM's context pointer (the `%vm` register) as their first argument and check it
//! against the live VMs.
//!
//! Messages start with "Check failed: ..." where TVM's come from its `TVM_FFI_CHECK*` macros,
//! so that a model's own argument checks (whose text names the parameter through the
//! `ErrorContext(...)` string the compiler stores in the constant pool) read the same on both
//! runtimes.

mod check;
mod shape;

use crate::abi::{type_index, DLDataType, DLTensor};
use crate::dtype::{dtype_to_string, dtypes};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::shape::{new_shape, shape_dims};
use crate::object::ObjectRef;
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

use crate::vm::array::{array_get, new_array};
use crate::vm::interp::{closure_obj, new_bound_closure, VmState};
use crate::vm::storage::{alloc_tensor_in, new_storage, storage_block};

macro_rules! builtins {
    ($($variant:ident => $name:literal),* $(,)?) => {
        /// A builtin the interpreter calls directly.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Builtin { $($variant),* }

        impl Builtin {
            /// Every builtin.
            pub const ALL: &'static [Builtin] = &[$(Builtin::$variant),*];

            /// The global name.
            pub fn name(self) -> &'static str {
                match self { $(Builtin::$variant => $name),* }
            }

            /// The builtin registered under `name`, if any.
            pub fn from_name(name: &str) -> Option<Builtin> {
                match name { $($name => Some(Builtin::$variant),)* _ => None }
            }
        }
    };
}

builtins! {
    AllocShapeHeap => "vm.builtin.alloc_shape_heap",
    MatchPrimValue => "vm.builtin.match_prim_value",
    MatchShape => "vm.builtin.match_shape",
    MakePrimValue => "vm.builtin.make_prim_value",
    MakeShape => "vm.builtin.make_shape",
    CheckTensorInfo => "vm.builtin.check_tensor_info",
    CheckShapeInfo => "vm.builtin.check_shape_info",
    CheckPrimValueInfo => "vm.builtin.check_prim_value_info",
    CheckStringInfo => "vm.builtin.check_string_info",
    CheckTupleInfo => "vm.builtin.check_tuple_info",
    CheckFuncInfo => "vm.builtin.check_func_info",
    AllocStorage => "vm.builtin.alloc_storage",
    AllocTensor => "vm.builtin.alloc_tensor",
    MakeClosure => "vm.builtin.make_closure",
    InvokeClosure => "vm.builtin.invoke_closure",
    CallTirDyn => "vm.builtin.call_tir_dyn",
    ShapeOf => "vm.builtin.shape_of",
    Copy => "vm.builtin.copy",
    Reshape => "vm.builtin.reshape",
    NullValue => "vm.builtin.null_value",
    ToDevice => "vm.builtin.to_device",
    ReadIfCond => "vm.builtin.read_if_cond",
    TupleGetItem => "vm.builtin.tuple_getitem",
    TupleResetItem => "vm.builtin.tuple_reset_item",
    MakeTuple => "vm.builtin.make_tuple",
    TensorToShape => "vm.builtin.tensor_to_shape",
    EnsureZeroOffset => "vm.builtin.ensure_zero_offset",
}

impl Builtin {
    /// Whether the first argument is the VM context pointer.
    fn takes_vm(self) -> bool {
        matches!(
            self,
            Builtin::AllocShapeHeap | Builtin::AllocStorage | Builtin::InvokeClosure
        )
    }
}

fn arg<'a, 'b>(args: &'a [AnyView<'b>], i: usize, b: Builtin) -> Result<&'a AnyView<'b>> {
    args.get(i).ok_or_else(|| {
        Error::type_error(format!(
            "{} expects at least {} arguments, but got {}",
            b.name(),
            i + 1,
            args.len()
        ))
    })
}

fn int_arg(args: &[AnyView<'_>], i: usize, b: Builtin, what: &str) -> Result<i64> {
    let v = arg(args, i, b)?;
    v.as_i64()
        .ok_or_else(|| v.type_mismatch(&format!("{} argument {i} ({what})", b.name()), "int"))
}

/// TVM's `Optional<String>` error context: None reads as "".
fn err_ctx(v: Option<&AnyView<'_>>) -> String {
    match v {
        Some(v) => v.as_str().unwrap_or_default().to_string(),
        None => String::new(),
    }
}

fn type_key(v: &AnyView<'_>) -> String {
    match v.type_index() {
        type_index::NONE => "None".into(),
        type_index::SMALL_STR | type_index::RAW_STR => "ffi.String".into(),
        i if i >= type_index::STATIC_OBJECT_BEGIN => v
            .as_object()
            .and_then(|o| crate::object::type_registry::index_to_key(o.type_index()).ok())
            .unwrap_or_else(|| v.type_name().to_string()),
        _ => v.type_name().to_string(),
    }
}

fn dtype_str(d: DLDataType) -> String {
    dtype_to_string(d).unwrap_or_else(|_| format!("{d:?}"))
}

/// The `DLTensor` of a tensor object or a `DLTensor*` value (`Ok(None)` for other values; a
/// null `DLTensor*` from a C caller is an error, not a crash).
fn dl_of<'a>(v: &'a AnyView<'_>) -> Result<Option<&'a DLTensor>> {
    match v.as_dltensor() {
        None => Ok(None),
        Some(p) if p.is_null() => Err(Error::value("got a null DLTensor* argument")),
        // SAFETY: the view keeps the tensor alive for its lifetime.
        Some(p) => Ok(Some(unsafe { &*p })),
    }
}

/// Runs `f` on the dims of a tensor, tensor pointer or shape value (`None` for other values),
/// without copying them.
fn with_dims<R>(v: &AnyView<'_>, f: impl FnOnce(&[i64]) -> R) -> Option<R> {
    if let Some(t) = dl_of(v).ok()? {
        // SAFETY: the view keeps the tensor alive; its shape has `ndim` dims.
        return unsafe { crate::tensor::layout::dl_shape(t, "tensor") }
            .ok()
            .map(f);
    }
    let obj = v.as_object()?;
    shape_dims(&obj).map(f)
}

/// Runs `f` on the dims of a shape value, or fails with a `TypeError` naming `what`.
fn with_shape<R>(v: &AnyView<'_>, what: &str, f: impl FnOnce(&[i64]) -> Result<R>) -> Result<R> {
    let obj = v
        .as_object()
        .ok_or_else(|| v.type_mismatch(what, "ffi.Shape"))?;
    let dims = shape_dims(&obj).ok_or_else(|| v.type_mismatch(what, "ffi.Shape"))?;
    f(dims)
}

fn tensor_of(v: &AnyView<'_>, what: &str) -> Result<Tensor> {
    match v.type_index() {
        type_index::TENSOR => Tensor::from_any_view(v, what),
        type_index::DL_TENSOR_PTR => {
            // A bare DLTensor* owns nothing: copy it into a tensor of our own.
            let src = dl_of(v)?.ok_or_else(|| v.type_mismatch(what, "DLTensor*"))?;
            // SAFETY: the caller keeps the pointed-to tensor alive for the call.
            let shape = unsafe { crate::tensor::layout::dl_shape(src, what)? };
            let t = Tensor::empty(shape, src.dtype, src.device)?;
            // SAFETY: both describe live memory.
            unsafe { crate::tensor::copy::copy_dltensor(src, t.dl())? };
            Ok(t)
        }
        _ => Err(Error::type_error(format!(
            "{what} expects a Tensor or DLTensor*, but get {}",
            type_key(v)
        ))),
    }
}

/// Runs builtin `b` with `vm` (the running VM) or, when `None`, the VM named by the context
/// pointer in the first argument.
pub fn call(b: Builtin, vm: Option<&VmState>, args: &[AnyView<'_>], depth: usize) -> Result<Any> {
    use Builtin as B;
    match b {
        B::AllocShapeHeap => {
            let size = int_arg(args, 1, b, "size")?;
            with_vm(vm, args, b, |_| {
                Ok(Tensor::empty(&[size], dtypes::INT64, crate::tensor::layout::cpu())?.into())
            })
        }
        B::MatchPrimValue => shape::match_prim_value(args, b),
        B::MatchShape => shape::match_shape(args, b),
        B::MakePrimValue => shape::make_prim_value(args, b),
        B::MakeShape => shape::make_shape(args, b),
        B::CheckTensorInfo => check::tensor_info(args, b),
        B::CheckShapeInfo => check::shape_info(args, b),
        B::CheckPrimValueInfo => check::prim_value_info(args, b),
        B::CheckStringInfo => check::string_info(args, b),
        B::CheckTupleInfo => check::tuple_info(args, b),
        B::CheckFuncInfo => check::func_info(args, b),
        B::AllocStorage => {
            let shape_v = arg(args, 1, b)?;
            let device_index = int_arg(args, 2, b, "device_index")?;
            let hint = arg(args, 3, b)?;
            let hint = hint
                .as_dtype()
                .ok_or_else(|| hint.type_mismatch("alloc_storage dtype_hint", "DataType"))?;
            if let Some(s) = args.get(4) {
                // Bytes, not `str`: this runs on every allocation and "global" needs no UTF-8
                // validation.
                let raw = s
                    .as_byte_slice()
                    .ok_or_else(|| s.type_mismatch("alloc_storage mem_scope", "str"))?;
                if !raw.starts_with(b"global") {
                    let scope = String::from_utf8_lossy(raw);
                    return Err(Error::new(
                        "InternalError",
                        format!(
                            "Allocator cannot allocate data space with specified memory scope: \
                             {scope}"
                        ),
                    ));
                }
            }
            let nbytes = with_shape(shape_v, "alloc_storage buffer_shape", |dims| {
                let numel = crate::tensor::layout::check_shape(dims)?;
                crate::tensor::layout::data_size(numel, hint)
            })?;
            with_vm(vm, args, b, |vm| {
                let alloc = vm.allocator(device_index)?;
                Ok(Any::from_object(new_storage(alloc.alloc(nbytes)?)))
            })
        }
        B::AllocTensor => {
            let s = arg(args, 0, b)?;
            let obj = s.as_object();
            let block = obj
                .as_ref()
                .and_then(storage_block)
                .ok_or_else(|| s.type_mismatch("alloc_tensor storage", "vm.Storage"))?;
            let offset = int_arg(args, 1, b, "offset")?;
            let d = arg(args, 3, b)?;
            let d = d
                .as_dtype()
                .ok_or_else(|| d.type_mismatch("alloc_tensor dtype", "DataType"))?;
            if let Some(scope) = args.get(4) {
                let scope = scope.expect_str("alloc_tensor scope")?;
                if !scope.starts_with("global") {
                    return Err(Error::value(format!(
                        "alloc_tensor: memory scope `{scope}` is not supported by tvmrt (only \
                         global memory)"
                    )));
                }
            }
            with_shape(arg(args, 2, b)?, "alloc_tensor shape", |dims| {
                Ok(alloc_tensor_in(block, offset, dims, d)?.into())
            })
        }
        B::MakeClosure => {
            let c = arg(args, 0, b)?;
            let obj = c
                .as_object()
                .filter(|o| closure_obj(o).is_some())
                .ok_or_else(|| c.type_mismatch("make_closure closure", "relax.vm.Closure"))?;
            let saved: Vec<Any> = args[1..].iter().map(AnyView::to_owned_any).collect();
            Ok(Any::from_object(new_bound_closure(obj, saved)))
        }
        B::InvokeClosure => {
            let c = arg(args, 1, b)?;
            let obj = c
                .as_object()
                .ok_or_else(|| c.type_mismatch("invoke_closure closure", "relax.vm.Closure"))?;
            with_vm(vm, args, b, |vm| {
                vm.invoke_closure(&obj, &args[2..], depth + 1)
            })
        }
        B::CallTirDyn => {
            let f = arg(args, 0, b)?.expect_function("call_tir_dyn func")?;
            if args.len() < 2 {
                return Err(Error::type_error(
                    "vm.builtin.call_tir_dyn expects (func, args..., shape)",
                ));
            }
            let last = &args[args.len() - 1];
            with_shape(last, "call_tir_dyn to_unpack", |dims| {
                let mut call_args: Vec<AnyView<'_>> = args[1..args.len() - 1].to_vec();
                call_args.extend(dims.iter().map(|&d| AnyView::from(d)));
                f.call(&call_args)
            })
        }
        B::ShapeOf => {
            let v = arg(args, 0, b)?;
            if v.as_dltensor().is_none() {
                return Err(Error::type_error(format!(
                    "vm.builtin.shape_of expects a Tensor or DLTensor*, but get {}",
                    type_key(v)
                )));
            }
            Ok(with_dims(v, |dims| Any::from_object(new_shape(dims))).unwrap_or_default())
        }
        B::Copy => Ok(arg(args, 0, b)?.to_owned_any()),
        B::Reshape => {
            let v = arg(args, 0, b)?;
            let t = tensor_of(v, "vm.builtin.reshape")?;
            with_shape(arg(args, 1, b)?, "reshape new_shape", |dims| {
                let want = crate::tensor::layout::shape_bytes(dims, t.dtype())?;
                if want > t.nbytes() {
                    return Err(Error::value(format!(
                        "vm.builtin.reshape: the new shape {dims:?} needs {want} bytes, more \
                         than the tensor's {}",
                        t.nbytes()
                    )));
                }
                Ok(t.view(dims, t.dtype(), 0)?.into())
            })
        }
        B::NullValue => Ok(Any::none()),
        B::ToDevice => {
            let t = tensor_of(arg(args, 0, b)?, "vm.builtin.to_device")?;
            let dev_type = int_arg(args, 1, b, "dev_type")?;
            let dev_id = int_arg(args, 2, b, "dev_id")?;
            let scope = match args.get(3) {
                Some(s) => Some(s.expect_str("to_device mem_scope")?),
                None => None,
            };
            let dev = crate::abi::DLDevice {
                device_type: crate::abi::DLDeviceType(u32::try_from(dev_type).map_err(|_| {
                    Error::value(format!(
                        "vm.builtin.to_device: invalid device type {dev_type}"
                    ))
                })?),
                device_id: i32::try_from(dev_id).map_err(|_| {
                    Error::value(format!("vm.builtin.to_device: invalid device id {dev_id}"))
                })?,
            };
            // TVM's `Tensor::CopyTo`: always a copy, finished when it returns.
            Ok(t.copy_to(dev, scope)
                .map_err(|e| e.context("vm.builtin.to_device"))?
                .into())
        }
        B::ReadIfCond => Ok(Any::from(read_if_cond(arg(args, 0, b)?)?)),
        B::TupleGetItem => {
            let a = arg(args, 0, b)?;
            let obj = a
                .as_object()
                .ok_or_else(|| a.type_mismatch("tuple_getitem tuple", "ffi.Array"))?;
            let i = int_arg(args, 1, b, "index")?;
            array_get(&obj, i)
        }
        // tvmrt's arrays are immutable (an early release only frees memory sooner); the item
        // stays until the tuple dies.
        B::TupleResetItem => Ok(Any::none()),
        B::MakeTuple => Ok(Any::from_object(new_array(
            args.iter().map(AnyView::to_owned_any).collect(),
        ))),
        B::TensorToShape => {
            let t = tensor_of(arg(args, 0, b)?, "vm.builtin.tensor_to_shape")?.to_host()?;
            if t.ndim() != 1 || t.dtype().code.0 != 0 {
                return Err(Error::new(
                    "InternalError",
                    format!(
                        "vm.builtin.tensor_to_shape expects a 1-d int tensor, got {}-d {}",
                        t.ndim(),
                        dtype_str(t.dtype())
                    ),
                ));
            }
            let bytes = t.to_vec()?;
            let dims: Vec<i64> = match t.dtype().bits {
                16 => bytes
                    .chunks_exact(2)
                    .map(|c| i16::from_le_bytes([c[0], c[1]]) as i64)
                    .collect(),
                32 => bytes
                    .chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                    .collect(),
                64 => bytes
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect(),
                _ => {
                    return Err(Error::new(
                        "InternalError",
                        format!("Unknown scalar int type: {}", dtype_str(t.dtype())),
                    ))
                }
            };
            Ok(Any::from_object(new_shape(&dims)))
        }
        B::EnsureZeroOffset => {
            let t = tensor_of(arg(args, 0, b)?, "vm.builtin.ensure_zero_offset")?;
            if t.byte_offset() == 0 {
                return Ok(t.into());
            }
            let out = Tensor::empty(t.shape(), t.dtype(), t.device())?;
            out.copy_from(&t)?;
            Ok(out.into())
        }
    }
}

fn with_vm(
    vm: Option<&VmState>,
    args: &[AnyView<'_>],
    b: Builtin,
    f: impl FnOnce(&VmState) -> Result<Any>,
) -> Result<Any> {
    match vm {
        Some(vm) => f(vm),
        None => {
            let ctx = arg(args, 0, b)?;
            let p = ctx.as_opaque_ptr().ok_or_else(|| {
                ctx.type_mismatch(&format!("{} context", b.name()), "VM context pointer")
            })?;
            let vm = super::interp::live_vm(p).ok_or_else(|| {
                Error::value(format!(
                    "{}: the context pointer is not a live tvmrt VirtualMachine",
                    b.name()
                ))
            })?;
            f(&vm)
        }
    }
}

/// `vm.builtin.read_if_cond`: a bool or int, or the first element of an int/uint/bool tensor.
pub fn read_if_cond(v: &AnyView<'_>) -> Result<bool> {
    if let Some(b) = v.as_bool() {
        return Ok(b);
    }
    if let Some(i) = v.as_i64() {
        return Ok(i != 0);
    }
    // A condition on a device is read on the host, as TVM copies it to the CPU.
    let t = tensor_of(v, "vm.builtin.read_if_cond")?.to_host()?;
    let d = t.dtype();
    if !matches!(d.code.0, 0 | 1 | 6) {
        return Err(Error::new(
            "InternalError",
            format!(
                "Check failed: (arr->dtype.code == kDLInt || arr->dtype.code == kDLUInt || \
                 arr->dtype.code == kDLBool) is false: read_if_cond expects an int, uint or bool \
                 tensor, got {}",
                dtype_str(d)
            ),
        ));
    }
    if t.numel() == 0 {
        return Err(Error::value(
            "vm.builtin.read_if_cond: the condition tensor is empty",
        ));
    }
    let p = t.data_ptr();
    // SAFETY: a live tensor in host memory with at least one element of `bits` bits.
    let v = unsafe {
        match d.bits {
            1 | 8 => *p.cast::<i8>() as i64,
            16 => *p.cast::<i16>() as i64,
            32 => *p.cast::<i32>() as i64,
            64 => *p.cast::<i64>(),
            _ => {
                return Err(Error::new(
                    "InternalError",
                    format!("Unknown scalar int type: {}", dtype_str(d)),
                ))
            }
        }
    };
    Ok(v != 0)
}

/// The builtins as global functions.
pub(crate) fn globals() -> Vec<(&'static str, Function)> {
    Builtin::ALL
        .iter()
        .map(|&b| {
            let f = Function::from_fn(move |args: &[AnyView<'_>]| {
                if b.takes_vm() && args.is_empty() {
                    return Err(Error::type_error(format!(
                        "{} expects the VM context pointer as its first argument",
                        b.name()
                    )));
                }
                call(b, None, args, 0)
            });
            (b.name(), f)
        })
        .collect()
}

/// Whether `obj` is a tvmrt object the VM understands as callable.
pub fn is_callable(obj: &ObjectRef) -> bool {
    obj.type_index() == type_index::FUNCTION || closure_obj(obj).is_some()
}
