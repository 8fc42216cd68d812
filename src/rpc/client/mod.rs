//! The client side of TVM's RPC: connect to a TVM RPC server (tvmrt's `tvmrt rpc-server` or
//! TVM's own, apache-tvm 0.21 and later) and call its functions as if they were local (TVM
//! `rpc_socket_impl.cc`, `rpc_module.cc`).
//!
//! - [`endpoint`]: the connection, its handshake and round trips;
//! - [`remote`]: remote functions, modules and objects, and the argument and result
//!   conversions;
//! - [`device`]: the devices of sessions for the device layer (tensors on a masked device are
//!   the server's);
//! - [`tensor`]: remote tensors as objects of their own (for Rust callers).
//!
//! The globals TVM's runtime registers for its client: `rpc.Connect(url, port, key[,
//! enable_logging[, init_seq...]])` (the session module, kind `"rpc"`: its functions are the
//! remote's globals), `rpc.LoadRemoteModule`, `rpc.ImportRemoteModule`, `rpc.SessTableIndex`,
//! and `device_api.rpc`, the name `runtime.RuntimeEnabled("rpc")` asks about. tvm4j's client
//! calls `rpc.Connect` with 3 arguments where TVM reads 4: tvmrt takes the missing ones as
//! their defaults.

mod device;
pub mod endpoint;
pub mod remote;
pub mod tensor;

use std::sync::{Arc, Weak};

use once_cell::sync::Lazy;
use parking_lot::Mutex;

pub use endpoint::{ConnectOptions, Endpoint};
pub use remote::{RemoteModule, RemoteObject, RPC_SESS_MASK};
pub use tensor::RemoteTensor;

use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::Module;
use crate::value::{Any, AnyView};

/// Open sessions by index (TVM's `RPCSession` table): a session's index makes its devices'
/// mask. A slot is reused once its session is gone.
static SESSIONS: Lazy<Mutex<Vec<Weak<Endpoint>>>> = Lazy::new(|| Mutex::new(Vec::new()));

/// The open session at `index` of the table.
fn session_at(index: i32) -> Option<Arc<Endpoint>> {
    let i = usize::try_from(index).ok()?;
    SESSIONS.lock().get(i)?.upgrade()
}

fn enter_table(ep: &Arc<Endpoint>) {
    let mut t = SESSIONS.lock();
    let i = match t.iter().position(|w| w.strong_count() == 0) {
        Some(i) => {
            t[i] = Arc::downgrade(ep);
            i
        }
        None => {
            t.push(Arc::downgrade(ep));
            t.len() - 1
        }
    };
    ep.set_table_index(i as i32);
}

/// Connects to the RPC server at `host:port` with `key` and returns its session module
/// (kind `"rpc"`). The session ends (`Shutdown`) when the module and everything got from it
/// are dropped.
pub fn connect(host: &str, port: u16, key: &str, opts: &ConnectOptions) -> Result<Module> {
    let ep = Arc::new(Endpoint::connect(host, port, key, opts)?);
    enter_table(&ep);
    Ok(RemoteModule::session(ep))
}

fn arg<'a, 'b>(args: &'a [AnyView<'b>], i: usize, what: &str) -> Result<&'a AnyView<'b>> {
    args.get(i)
        .ok_or_else(|| Error::type_error(format!("missing argument {i} ({what})")))
}

/// `rpc.Connect(url, port, key[, enable_logging[, init_seq...]])`.
fn rpc_connect(args: &[AnyView<'_>]) -> Result<Any> {
    let url = arg(args, 0, "url")?.expect_str("url")?;
    let port = arg(args, 1, "port")?.expect_i64("port")?;
    let port = u16::try_from(port)
        .map_err(|_| Error::value(format!("rpc.Connect: port {port} out of range")))?;
    let key = match args.get(2) {
        Some(v) if !v.is_none() => v.expect_str("key")?,
        _ => "",
    };
    let mut opts = ConnectOptions {
        log: args.get(3).and_then(|v| v.as_bool()).unwrap_or(false),
        ..ConnectOptions::default()
    };
    for (i, v) in args.iter().enumerate().skip(4) {
        opts.init_seq.push(remote::encode_arg(None, v, i)?);
    }
    Ok(Any::from_object(
        connect(url, port, key, &opts)?.into_object(),
    ))
}

/// The remote module behind argument `i`.
fn rpc_module(args: &[AnyView<'_>], i: usize, what: &str) -> Result<Module> {
    let m = Module::from_view(arg(args, i, what)?, what)?;
    if m.downcast::<RemoteModule>().is_none() {
        return Err(Error::value(format!(
            "{what} must be an RPC module (kind \"rpc\"), got kind \"{}\"",
            m.kind()
        )));
    }
    Ok(m)
}

/// `rpc.LoadRemoteModule(sess, path)`: the remote's `tvm.rpc.server.load_module(path)`.
fn load_remote_module(args: &[AnyView<'_>]) -> Result<Any> {
    let sess = rpc_module(args, 0, "session")?;
    let path = arg(args, 1, "path")?;
    let load = sess
        .downcast::<RemoteModule>()
        .expect("checked")
        .helper("tvm.rpc.server.load_module")?;
    load.call(std::slice::from_ref(path))
}

/// `rpc.ImportRemoteModule(parent, child)`: the remote's `tvm.rpc.server.ImportModule`.
fn import_remote_module(args: &[AnyView<'_>]) -> Result<Any> {
    let parent = rpc_module(args, 0, "parent")?;
    let child = arg(args, 1, "child")?;
    let import = parent
        .downcast::<RemoteModule>()
        .expect("checked")
        .helper("tvm.rpc.server.ImportModule")?;
    let p = Any::from_object(parent.object().clone());
    import.call(&[p.view(), *child])
}

/// `rpc.SessTableIndex(module)`: the session's index.
fn sess_table_index(args: &[AnyView<'_>]) -> Result<Any> {
    let m = rpc_module(args, 0, "module")?;
    let index = m
        .downcast::<RemoteModule>()
        .expect("checked")
        .endpoint()
        .table_index();
    Ok(Any::from(index as i64))
}

/// `runtime.RPCTimeEvaluator(mod, name, device_type, ...)` on a module of an RPC session:
/// the server's own evaluator, given the remote module (or None for the session module) and
/// the device without its session mask (TVM's `RPCModuleNode::GetTimeEvaluator`). Its result
/// is a remote function returning the times. `None` when `m` is not an RPC module.
pub(crate) fn remote_time_evaluator(m: &Module, args: &[AnyView<'_>]) -> Option<Result<Any>> {
    let r = m.downcast::<RemoteModule>()?;
    let forward = || {
        let f = r.helper("runtime.RPCTimeEvaluator")?;
        let mut device_type = args[2].expect_i64("device_type")?;
        if device_type >= RPC_SESS_MASK as i64 {
            let index = device_type / RPC_SESS_MASK as i64 - 1;
            if index != r.endpoint().table_index() as i64 {
                return Err(Error::value(
                    "Need to pass the matched remote device to RPCModule.GetTimeEvaluator",
                ));
            }
            device_type %= RPC_SESS_MASK as i64;
        }
        let module = match r.handle() {
            Some(_) => Any::from_object(m.object().clone()),
            None => Any::none(),
        };
        let device_type = Any::from(device_type);
        let mut a: Vec<AnyView<'_>> = args.to_vec();
        a[0] = module.view();
        a[2] = device_type.view();
        f.call(&a)
    };
    Some(forward())
}

/// What `device_api.rpc` hands out: a token saying the RPC client is built (TVM returns its
/// `RPCDeviceAPI`; tvmrt's device API is Rust, so the address cannot be called through).
static RPC_DEVICE_API: u8 = 0;

/// The RPC client's globals; plugs the sessions' devices into the device layer.
pub fn builtins() -> Vec<(&'static str, Function)> {
    crate::device::plug_session_devices(&device::SESSION_DEVICES);
    vec![
        ("rpc.Connect", Function::from_fn(rpc_connect)),
        (
            "rpc.LoadRemoteModule",
            Function::from_fn(load_remote_module),
        ),
        (
            "rpc.ImportRemoteModule",
            Function::from_fn(import_remote_module),
        ),
        ("rpc.SessTableIndex", Function::from_fn(sess_table_index)),
        (
            "device_api.rpc",
            Function::from_fn(|_| {
                let p = std::ptr::addr_of!(RPC_DEVICE_API).cast_mut();
                Ok(Any::opaque_ptr(p.cast()))
            }),
        ),
    ]
}
