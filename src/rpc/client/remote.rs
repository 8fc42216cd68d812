//! What a client holds of the remote side: remote functions, remote modules (module kind
//! `"rpc"`) and other remote objects, each owning its remote handle and freeing it
//! (`FreeHandle`) when dropped; and the conversions of a call's arguments and result (TVM
//! `rpc_module.cc`'s `RPCWrappedFunc` and `RPCModuleNode`).
//!
//! Arguments may be ints, floats, bools, strings, bytes, None, dtypes, devices (a device of
//! this session, masked as TVM's client masks it, or a plain one), opaque pointers, and
//! functions, modules, objects and remote tensors of the same session: tensors on its masked
//! devices ([`super::device`]) and [`super::tensor`]'s. Local tensors are refused (TVM's client
//! sends only remote ones). A tensor result is a tensor on the session's masked device.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use super::endpoint::Endpoint;
use super::tensor::RemoteTensor;
use crate::abi::{type_index as ti, DLDevice, DLDeviceType};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::{Module, ModuleKind};
use crate::object::{new_object, type_registry, ObjectPayload};
use crate::rpc::wire::WireValue;
use crate::value::{Any, AnyView};

/// The device-type offset of each session (`kRPCSessMask`): session `i`'s devices are
/// `type + (i + 1) * 128`.
pub const RPC_SESS_MASK: u32 = crate::device::SESSION_MASK;

/// A handle the remote gave us; freed on the remote when dropped.
pub(crate) struct RemoteHandle {
    sess: Arc<Endpoint>,
    handle: u64,
    /// The address of the function object wrapping it, when it is a function's.
    func_addr: AtomicUsize,
}

/// Remote functions by their object's address: `(session, handle)`, so one passed back as an
/// argument is sent as its handle.
static FUNCTIONS: Lazy<Mutex<HashMap<usize, (usize, u64)>>> =
    Lazy::new(|| Mutex::new(HashMap::new()));

impl RemoteHandle {
    pub(crate) fn new(sess: &Arc<Endpoint>, handle: u64) -> RemoteHandle {
        RemoteHandle {
            sess: sess.clone(),
            handle,
            func_addr: AtomicUsize::new(0),
        }
    }
}

impl Drop for RemoteHandle {
    fn drop(&mut self) {
        let addr = self.func_addr.load(Ordering::Relaxed);
        if addr != 0 {
            FUNCTIONS.lock().remove(&addr);
        }
        // A session that broke or closed has nothing left to free.
        let _ = self.sess.free_handle(self.handle);
    }
}

/// A remote function: calling it sends `CallFunc` with the arguments encoded.
pub fn remote_function(sess: &Arc<Endpoint>, handle: u64) -> Function {
    let h = Arc::new(RemoteHandle::new(sess, handle));
    let inner = h.clone();
    let f = Function::from_fn(move |args| {
        let wire = encode_args(&inner.sess, args)?;
        let values = inner.sess.call(inner.handle, &wire)?;
        decode_return(&inner.sess, values)
    });
    let addr = f.object().as_ptr() as usize;
    FUNCTIONS
        .lock()
        .insert(addr, (Arc::as_ptr(sess) as usize, handle));
    h.func_addr.store(addr, Ordering::Relaxed);
    f
}

/// A module on the remote (`handle` set) or the session itself (`handle` `None`: its
/// functions are the remote's globals).
pub struct RemoteModule {
    sess: Arc<Endpoint>,
    handle: Option<RemoteHandle>,
    /// Remote globals this module calls (`tvm.rpc.server.ModuleGetFunction`, ...).
    helpers: Mutex<HashMap<&'static str, Function>>,
}

impl RemoteModule {
    /// The session module of `sess`.
    pub fn session(sess: Arc<Endpoint>) -> Module {
        Module::new(RemoteModule {
            sess,
            handle: None,
            helpers: Mutex::new(HashMap::new()),
        })
    }

    fn remote(sess: &Arc<Endpoint>, handle: u64) -> Module {
        Module::new(RemoteModule {
            sess: sess.clone(),
            handle: Some(RemoteHandle::new(sess, handle)),
            helpers: Mutex::new(HashMap::new()),
        })
    }

    /// The session this module belongs to.
    pub fn endpoint(&self) -> &Arc<Endpoint> {
        &self.sess
    }

    /// The remote module's handle (`None` for the session module).
    pub fn handle(&self) -> Option<u64> {
        self.handle.as_ref().map(|h| h.handle)
    }

    /// Remote global `name` (TVM's `InitRemoteFunc`), looked up once.
    pub fn helper(&self, name: &'static str) -> Result<Function> {
        if let Some(f) = self.helpers.lock().get(name) {
            return Ok(f.clone());
        }
        let h = self.sess.get_global(name)?.ok_or_else(|| {
            Error::new(
                "RPCError",
                format!("RPC: the server has no function {name}"),
            )
        })?;
        let f = remote_function(&self.sess, h);
        self.helpers.lock().insert(name, f.clone());
        Ok(f)
    }
}

impl ModuleKind for RemoteModule {
    fn kind(&self) -> &str {
        "rpc"
    }

    fn get_function(&self, this: &Module, name: &str) -> Result<Option<Function>> {
        if name == "CloseRPCConnection" {
            let sess = self.sess.clone();
            return Ok(Some(Function::from_fn(move |_| {
                sess.shutdown();
                Ok(Any::none())
            })));
        }
        if self.handle.is_none() {
            return Ok(self
                .sess
                .get_global(name)?
                .map(|h| remote_function(&self.sess, h)));
        }
        let get = self.helper("tvm.rpc.server.ModuleGetFunction")?;
        let m = Any::from_object(this.object().clone());
        let rv = get.call(&[m.view(), Any::from(name).view(), Any::from(true).view()])?;
        if rv.view().is_none() {
            return Ok(None);
        }
        rv.view().expect_function("remote function").map(Some)
    }

    fn property_mask(&self) -> i32 {
        // Runnable (`RPCModuleNode::GetPropertyMask`).
        2
    }
}

/// A remote object other than a function or module (TVM's `RPCObjectRef`).
pub struct RemoteObject {
    handle: RemoteHandle,
}

static RPC_OBJECT_TYPE: Lazy<i32> = Lazy::new(|| {
    type_registry::get_or_alloc_index("runtime.RPCObjectRef", -1, 1, 0, true, ti::OBJECT)
        .unwrap_or_else(|e| panic!("registering runtime.RPCObjectRef: {e}"))
});

// SAFETY: a plain Rust payload under a type index registered once for it (above).
unsafe impl ObjectPayload for RemoteObject {
    const TYPE_INDEX: i32 = ti::OBJECT;
    fn type_index() -> i32 {
        *RPC_OBJECT_TYPE
    }
}

fn handle_of(v: &WireValue, what: &str) -> Result<u64> {
    match v {
        WireValue::Opaque(h)
        | WireValue::Function(h)
        | WireValue::Module(h)
        | WireValue::Object(h) => Ok(*h),
        WireValue::Int(h) => Ok(*h as u64),
        other => Err(Error::new(
            "RPCError",
            format!("RPC: the server returned {other:?} for a {what} handle"),
        )),
    }
}

/// A device argument: this session's devices lose their mask; a plain device goes as is.
fn unmask(sess: Option<&Arc<Endpoint>>, d: DLDevice, i: usize) -> Result<DLDevice> {
    let t = d.device_type.0;
    if t < RPC_SESS_MASK {
        return Ok(d);
    }
    let index = (t / RPC_SESS_MASK) as i32 - 1;
    if sess.map(|s| s.table_index()) != Some(index) {
        return Err(Error::value(format!(
            "argument {i}: a device of another RPC session ({index}) cannot be passed here"
        )));
    }
    Ok(DLDevice {
        device_type: DLDeviceType(t % RPC_SESS_MASK),
        device_id: d.device_id,
    })
}

/// One argument in its wire form; handles must belong to `sess` (none without a session:
/// `InitServer`'s arguments).
pub fn encode_arg(sess: Option<&Arc<Endpoint>>, v: &AnyView<'_>, i: usize) -> Result<WireValue> {
    let same = |s: usize| sess.is_some_and(|x| Arc::as_ptr(x) as usize == s);
    let other_session = |what: &str| {
        Error::value(format!(
            "argument {i}: a {what} of another RPC session, or a local one, cannot be passed \
             to the remote"
        ))
    };
    Ok(match v.type_index() {
        ti::NONE => WireValue::None,
        ti::INT => WireValue::Int(v.as_i64().unwrap_or(0)),
        ti::BOOL => WireValue::Bool(v.as_bool().unwrap_or(false)),
        ti::FLOAT => WireValue::Float(v.as_f64().unwrap_or(0.0)),
        ti::OPAQUE_PTR => WireValue::Opaque(v.as_opaque_ptr().unwrap_or_default() as u64),
        ti::DATA_TYPE => WireValue::DType(v.as_dtype().expect("a dtype")),
        ti::DEVICE => WireValue::Device(unmask(sess, v.as_device().expect("a device"), i)?),
        ti::RAW_STR | ti::SMALL_STR | ti::STR => match v.as_str() {
            Some(s) => WireValue::Str(s.to_string()),
            None => return Err(Error::value(format!("argument {i}: invalid UTF-8"))),
        },
        ti::BYTE_ARRAY_PTR | ti::SMALL_BYTES | ti::BYTES => {
            WireValue::Bytes(v.as_byte_slice().unwrap_or_default().to_vec())
        }
        ti::FUNCTION => {
            let obj = v.expect_object("function")?;
            match FUNCTIONS.lock().get(&(obj.as_ptr() as usize)) {
                Some(&(s, h)) if same(s) => WireValue::Function(h),
                _ => return Err(other_session("function")),
            }
        }
        ti::MODULE => {
            let m = Module::from_view(v, "module")?;
            match m.downcast::<RemoteModule>() {
                Some(r) if same(Arc::as_ptr(&r.sess) as usize) => match r.handle() {
                    Some(h) => WireValue::Module(h),
                    None => {
                        return Err(Error::value(format!(
                            "argument {i}: an RPC session module cannot be passed to its remote"
                        )))
                    }
                },
                _ => return Err(other_session("module")),
            }
        }
        ti::DL_TENSOR_PTR | ti::TENSOR => {
            let t = v.as_dltensor().expect("a tensor");
            let view = match sess {
                // SAFETY: a tensor argument points at a live DLTensor for the call, as every
                // function taking tensors is handed (TVM's contract; null refused here).
                Some(s) if !t.is_null() => unsafe { super::device::wire_view(s, &*t, i)? },
                _ => None,
            };
            match view {
                Some(w) => WireValue::Tensor(w),
                None => {
                    return Err(Error::value(format!(
                        "argument {i}: a local tensor cannot be passed to the remote (allocate \
                         it on the session's device: type + 128 * (session index + 1))"
                    )))
                }
            }
        }
        _ => {
            let obj = v.expect_object("argument")?;
            if let Some(t) = RemoteTensor::from_object(&obj) {
                if !same(Arc::as_ptr(t.endpoint()) as usize) {
                    return Err(other_session("tensor"));
                }
                return Ok(WireValue::Tensor(t.wire().clone()));
            }
            match obj.downcast_ref::<RemoteObject>() {
                Some(r) if same(Arc::as_ptr(&r.handle.sess) as usize) => {
                    WireValue::Object(r.handle.handle)
                }
                _ => {
                    return Err(Error::value(format!(
                        "argument {i}: cannot pass a {} to the remote",
                        v.type_name()
                    )))
                }
            }
        }
    })
}

fn encode_args(sess: &Arc<Endpoint>, args: &[AnyView<'_>]) -> Result<Vec<WireValue>> {
    args.iter()
        .enumerate()
        .map(|(i, v)| encode_arg(Some(sess), v, i))
        .collect()
}

/// A call's result from its `Return` values (the type index, the value, and a tensor's
/// handle): TVM's `WrapRemoteReturnToValue`.
pub fn decode_return(sess: &Arc<Endpoint>, values: Vec<WireValue>) -> Result<Any> {
    let mut it = values.into_iter();
    let index = match it.next() {
        // `ReturnVoid`: one None.
        None | Some(WireValue::None) => return Ok(Any::none()),
        Some(WireValue::Int(t)) => t as i32,
        Some(other) => {
            return Err(Error::new(
                "RPCError",
                format!("RPC: a result must start with its type index, got {other:?}"),
            ))
        }
    };
    let value = it.next().unwrap_or(WireValue::None);
    match index {
        ti::NONE => Ok(Any::none()),
        ti::FUNCTION => Ok(Any::from_object(
            remote_function(sess, handle_of(&value, "function")?).into_object(),
        )),
        ti::MODULE => Ok(Any::from_object(
            RemoteModule::remote(sess, handle_of(&value, "module")?).into_object(),
        )),
        ti::TENSOR | ti::DL_TENSOR_PTR => {
            // The wire form, then the handle that keeps the remote tensor.
            let handle = match it.next() {
                Some(h) => RemoteHandle::new(sess, handle_of(&h, "tensor")?),
                None => {
                    return Err(Error::new(
                        "RPCError",
                        "RPC: a tensor result without its handle",
                    ))
                }
            };
            match value {
                WireValue::Tensor(meta) => Ok(Any::from_object(
                    super::device::returned_tensor(sess, meta, handle)?.into_object(),
                )),
                other => Err(Error::new(
                    "RPCError",
                    format!("RPC: a tensor result must be a tensor, got {other:?}"),
                )),
            }
        }
        t if t >= ti::STATIC_OBJECT_BEGIN
            && !matches!(value, WireValue::Str(_) | WireValue::Bytes(_)) =>
        {
            let handle = RemoteHandle::new(sess, handle_of(&value, "object")?);
            Ok(Any::from_object(new_object(RemoteObject { handle })))
        }
        _ => plain(value),
    }
}

/// A value that is not a handle.
pub(super) fn plain(v: WireValue) -> Result<Any> {
    Ok(match v {
        WireValue::None => Any::none(),
        WireValue::Int(x) => Any::from(x),
        WireValue::Bool(b) => Any::from(b),
        WireValue::Float(f) => Any::from(f),
        WireValue::Opaque(p) => Any::opaque_ptr(p as usize as *mut c_void),
        WireValue::DType(d) => Any::from(d),
        WireValue::Device(d) => Any::from(d),
        WireValue::Str(s) => Any::from(s),
        WireValue::Bytes(b) => Any::bytes(&b),
        other => {
            return Err(Error::new(
                "RPCError",
                format!("RPC: unexpected result {other:?}"),
            ))
        }
    })
}
