//! One RPC session's state and its answers: the handles it gave the peer, the memory it lent,
//! and what each packet does (TVM `rpc_endpoint.cc`'s handlers over `rpc_local_session.cc`).
//!
//! Handles are numbers of this session's table, not addresses: a handle the peer never got,
//! or already freed, is an error naming it. Every error becomes an `Exception` packet and the
//! session goes on.

use std::collections::HashMap;

use super::memory::{MemoryTable, Resolved};
use super::wire::{self, Code, Reader, WireTensor, WireValue, Writer};
use std::collections::HashSet;
use std::ffi::c_void;

use crate::abi::{type_index as ti, DLDataType, DLDataTypeCode};
use crate::device::{self, api::DeviceAttr};
use crate::error::{Error, Result};
use crate::function::{registry, Function};
use crate::object::ObjectRef;
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

/// An object the peer holds a handle to.
struct Held {
    object: ObjectRef,
    /// The region recorded for a returned tensor's data: `(address, region id)`.
    region: Option<(u64, u64)>,
}

/// What a packet is answered with.
pub enum Reply {
    /// A whole packet.
    Packet(Vec<u8>),
    /// A `CopyAck` whose data is read from remote host memory as it is sent.
    HostAck(Resolved),
}

/// One session: handles, memory, and whether `InitServer` came.
#[derive(Default)]
pub struct Session {
    handles: HashMap<u64, Held>,
    next_handle: u64,
    memory: MemoryTable,
    /// Streams the peer created (null, the default stream, is always valid).
    streams: HashSet<u64>,
    initialized: bool,
    /// Whether `CallFunc` runs functions (off only for fuzzing the protocol itself, where a
    /// fuzzed call could reach any global with any argument).
    no_calls: bool,
}

impl Session {
    /// A new session.
    pub fn new() -> Session {
        Session::default()
    }

    /// A session whose allocations may total at most `limit` bytes at once (a board's
    /// memory is the whole machine's: `tvmrt rpc-server --memory-limit`).
    pub fn with_memory_limit(limit: usize) -> Session {
        Session {
            memory: MemoryTable::with_limit(limit),
            ..Session::default()
        }
    }

    /// A session that refuses `CallFunc`, with allocations of at most 64 MiB: everything
    /// else of the protocol (allocation, copies, handles, streams), for fuzzing.
    pub fn without_calls() -> Session {
        Session {
            no_calls: true,
            ..Session::with_memory_limit(64 << 20)
        }
    }

    /// How many handles and memory regions the peer holds.
    pub fn held(&self) -> (usize, usize) {
        (self.handles.len(), self.memory.len())
    }

    /// Answers one packet (any but `CopyToRemote` and `Shutdown`, which the loop streams).
    pub fn answer(&mut self, code: i32, body: &[u8]) -> Reply {
        if wire::is_classic_lookup(code, body) {
            return Reply::Packet(wire::classic_exception_packet(wire::CLASSIC_CLIENT));
        }
        match self.dispatch(code, &mut Reader::new(body)) {
            Ok(reply) => reply,
            Err(e) => Reply::Packet(wire::exception_packet(&e.message)),
        }
    }

    fn dispatch(&mut self, code: i32, r: &mut Reader<'_>) -> Result<Reply> {
        let code = Code::from_i32(code)?;
        if code != Code::InitServer && !self.initialized {
            return Err(Error::value(
                "RPC: the session is not initialized (InitServer must come first)",
            ));
        }
        let values = match code {
            Code::InitServer => return self.init_server(r).map(|()| void()),
            Code::CallFunc => {
                let handle = r.u64("function handle")?;
                let args = r.values()?;
                return self.call(handle, args);
            }
            Code::CopyFromRemote => {
                let t = r.tensor()?;
                let nbytes = r.u64("copy size")?;
                return self.copy_from_remote(&t, nbytes);
            }
            _ => r.values()?,
        };
        let rv = self.syscall(code, &values)?;
        Ok(Reply::Packet(wire::return_packet(&[rv])))
    }

    fn init_server(&mut self, r: &mut Reader<'_>) -> Result<()> {
        let version = r.string("protocol version")?;
        let args = r.values()?;
        if self.initialized {
            return Err(Error::value("RPC: the server has already been initialized"));
        }
        if version != wire::PROTOCOL_VERSION {
            return Err(Error::value(format!(
                "RPC: client protocol version {version} does not match the server's {}",
                wire::PROTOCOL_VERSION
            )));
        }
        match args.first() {
            None => {}
            Some(WireValue::Str(name)) if name == "rpc.LocalSession" => {}
            Some(WireValue::Str(name)) => {
                return Err(Error::value(format!(
                    "RPC: cannot find session constructor {name} (tvmrt serves \
                     rpc.LocalSession)"
                )))
            }
            Some(other) => {
                return Err(Error::type_error(format!(
                    "RPC: the session constructor must be a name, got {other:?}"
                )))
            }
        }
        self.initialized = true;
        Ok(())
    }

    fn new_handle(&mut self, object: ObjectRef, region: Option<(u64, u64)>) -> u64 {
        // Odd and far from zero, so a handle is never mistaken for null or a small integer.
        self.next_handle += 1;
        let h = 0x7000_0000_0000_0001 + 2 * self.next_handle;
        self.handles.insert(h, Held { object, region });
        h
    }

    fn object_of(&self, handle: u64, index: Option<i32>, what: &str) -> Result<ObjectRef> {
        let held = self.handles.get(&handle).ok_or_else(|| {
            Error::value(format!(
                "RPC: {what}: unknown handle 0x{handle:x} (never given out, or freed)"
            ))
        })?;
        if let Some(want) = index {
            if held.object.type_index() != want {
                return Err(Error::type_error(format!(
                    "RPC: {what}: handle 0x{handle:x} is a {}, not a {}",
                    crate::value::type_name(held.object.type_index()),
                    crate::value::type_name(want)
                )));
            }
        }
        Ok(held.object.clone())
    }

    /// Turns the peer's values into arguments, resolving handles and tensors.
    fn arguments(&self, values: Vec<WireValue>) -> Result<Vec<Any>> {
        values
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                let what = format!("argument {i}");
                Ok(match v {
                    WireValue::None => Any::none(),
                    WireValue::Int(x) => Any::from(x),
                    WireValue::Bool(b) => Any::from(b),
                    WireValue::Float(f) => Any::from(f),
                    WireValue::Opaque(p) => Any::opaque_ptr(p as usize as *mut _),
                    WireValue::DType(d) => Any::from(d),
                    WireValue::Device(d) => Any::from(d),
                    WireValue::Str(s) => Any::from(s),
                    WireValue::Bytes(b) => Any::bytes(&b),
                    WireValue::Tensor(t) => {
                        Any::from_object(self.resolve_tensor(&t, &what)?.into_object())
                    }
                    WireValue::Function(h) => {
                        Any::from_object(self.object_of(h, Some(ti::FUNCTION), &what)?)
                    }
                    WireValue::Module(h) => {
                        Any::from_object(self.object_of(h, Some(ti::MODULE), &what)?)
                    }
                    WireValue::Object(h) => Any::from_object(self.object_of(h, None, &what)?),
                })
            })
            .collect()
    }

    fn resolve_tensor(&self, t: &WireTensor, what: &str) -> Result<Tensor> {
        if t.data == 0 && crate::tensor::layout::shape_bytes(&t.shape, t.dtype)? == 0 {
            // An empty tensor has no memory to name.
            return Tensor::empty(&t.shape, t.dtype, t.device);
        }
        self.memory.resolve(t, what)?.to_tensor()
    }

    fn call(&mut self, handle: u64, args: Vec<WireValue>) -> Result<Reply> {
        if self.no_calls {
            return Err(Error::value("RPC: calls are off in this session"));
        }
        let f = Function::from_object(self.object_of(handle, Some(ti::FUNCTION), "call")?)?;
        let args = self.arguments(args)?;
        let views: Vec<AnyView<'_>> = args.iter().map(Any::view).collect();
        let rv = f.call(&views)?;
        let values = self.encode_return(rv)?;
        Ok(Reply::Packet(wire::return_packet(&values)))
    }

    /// A call's result as TVM's `LocalSession::EncodeReturn` sends it: its type index, then
    /// the value (objects as handles; a tensor as its wire form and its handle).
    fn encode_return(&mut self, rv: Any) -> Result<Vec<WireValue>> {
        let index = rv.view().type_index();
        let tag = WireValue::Int(index as i64);
        let v = rv.view();
        let value = match index {
            ti::NONE => WireValue::None,
            ti::INT => WireValue::Int(v.as_i64().unwrap_or(0)),
            ti::BOOL => WireValue::Bool(v.as_bool().unwrap_or(false)),
            ti::FLOAT => WireValue::Float(v.as_f64().unwrap_or(0.0)),
            ti::OPAQUE_PTR => WireValue::Opaque(v.as_opaque_ptr().unwrap_or_default() as u64),
            ti::DATA_TYPE => WireValue::DType(v.as_dtype().expect("dtype")),
            ti::DEVICE => WireValue::Device(v.as_device().expect("device")),
            ti::RAW_STR | ti::SMALL_STR | ti::STR => {
                WireValue::Str(v.as_str().unwrap_or_default().to_string())
            }
            ti::SMALL_BYTES | ti::BYTES | ti::BYTE_ARRAY_PTR => {
                WireValue::Bytes(v.as_byte_slice().unwrap_or_default().to_vec())
            }
            ti::TENSOR => {
                let t = Tensor::from_any_view(&v, "result")?;
                if !t.is_contiguous() {
                    return Err(Error::value(
                        "RPC: a strided tensor cannot be returned over RPC",
                    ));
                }
                let (addr, region) = self.memory.record_tensor(&t)?;
                let wire_t = WireTensor {
                    data: addr,
                    device: t.device(),
                    dtype: t.dtype(),
                    shape: t.shape().to_vec(),
                    byte_offset: t.byte_offset(),
                };
                let h = self.new_handle(t.into_object(), Some((addr, region)));
                return Ok(vec![tag, WireValue::Tensor(wire_t), WireValue::Opaque(h)]);
            }
            i if i >= ti::STATIC_OBJECT_BEGIN => {
                let obj = v.expect_object("result")?;
                WireValue::Opaque(self.new_handle(obj, None))
            }
            other => {
                return Err(Error::type_error(format!(
                    "RPC: a result of type {} cannot be returned over RPC",
                    crate::value::type_name(other)
                )))
            }
        };
        Ok(vec![tag, value])
    }

    fn free_handle(&mut self, handle: u64) -> Result<()> {
        let held = self.handles.remove(&handle).ok_or_else(|| {
            Error::value(format!(
                "RPC: free of unknown handle 0x{handle:x} (never given out, or freed)"
            ))
        })?;
        if let Some((addr, id)) = held.region {
            self.memory.release(addr, id);
        }
        Ok(())
    }

    /// Resolves a tensor the peer names for a copy of `nbytes`.
    pub fn copy_target(&self, t: &WireTensor, nbytes: u64, what: &str) -> Result<Resolved> {
        let r = self.memory.resolve(t, what)?;
        if nbytes != r.nbytes as u64 {
            return Err(Error::value(format!(
                "RPC: {what}: {nbytes} bytes for a tensor of {} bytes",
                r.nbytes
            )));
        }
        Ok(r)
    }

    fn copy_from_remote(&mut self, t: &WireTensor, nbytes: u64) -> Result<Reply> {
        let r = self.copy_target(t, nbytes, "copy from remote")?;
        if r.host_ptr().is_some() {
            return Ok(Reply::HostAck(r));
        }
        let mut data = vec![0u8; r.nbytes];
        r.to_tensor()?.copy_to_bytes(&mut data)?;
        let mut w = Writer::packet(Code::CopyAck);
        w.raw(&data);
        Ok(Reply::Packet(w.finish()))
    }

    /// A stream handle the peer sent: null or one this session created.
    fn stream(&self, h: u64) -> Result<*mut c_void> {
        if h != 0 && !self.streams.contains(&h) {
            return Err(Error::value(format!(
                "RPC: unknown stream 0x{h:x} (not created in this session, or freed)"
            )));
        }
        Ok(h as usize as *mut c_void)
    }

    /// Whether `InitServer` came.
    pub fn initialized(&self) -> bool {
        self.initialized
    }

    fn syscall(&mut self, code: Code, a: &[WireValue]) -> Result<WireValue> {
        let name = format!("{code:?}");
        let arg = |i: usize| {
            a.get(i)
                .ok_or_else(|| Error::value(format!("RPC: {name}: missing argument {i}")))
        };
        let dev = |i: usize| match arg(i)? {
            WireValue::Device(d) => Ok(*d),
            other => Err(Error::type_error(format!(
                "RPC: {name}: argument {i} must be a device, got {other:?}"
            ))),
        };
        let int = |i: usize| match arg(i)? {
            WireValue::Int(x) => Ok(*x),
            WireValue::Opaque(x) => Ok(*x as i64),
            other => Err(Error::type_error(format!(
                "RPC: {name}: argument {i} must be an integer, got {other:?}"
            ))),
        };
        let handle = |i: usize| match arg(i)? {
            WireValue::Opaque(h) | WireValue::Function(h) | WireValue::Module(h) => Ok(*h),
            WireValue::Object(h) => Ok(*h),
            WireValue::Int(h) => Ok(*h as u64),
            WireValue::None => Ok(0),
            other => Err(Error::type_error(format!(
                "RPC: {name}: argument {i} must be a handle, got {other:?}"
            ))),
        };
        let tensor = |i: usize| match arg(i)? {
            WireValue::Tensor(t) => Ok(t.clone()),
            other => Err(Error::type_error(format!(
                "RPC: {name}: argument {i} must be a tensor, got {other:?}"
            ))),
        };
        match code {
            Code::GetGlobalFunc => {
                let fname = match arg(0)? {
                    WireValue::Str(s) => s.clone(),
                    other => {
                        return Err(Error::type_error(format!(
                            "RPC: GetGlobalFunc: the name must be a string, got {other:?}"
                        )))
                    }
                };
                Ok(match registry::get(&fname) {
                    Some(f) => WireValue::Opaque(self.new_handle(f.into_object(), None)),
                    None => WireValue::None,
                })
            }
            Code::FreeHandle => self.free_handle(handle(0)?).map(|()| WireValue::None),
            Code::DevSetDevice => {
                let d = dev(0)?;
                device::api_of(d)?.set_device(d)?;
                Ok(WireValue::None)
            }
            Code::DevGetAttr => {
                let d = dev(0)?;
                let kind = DeviceAttr::from_code(int(1)?)?;
                let rv = match device::api_of(d) {
                    Ok(api) => api.get_attr(d, kind)?,
                    Err(_) if kind == DeviceAttr::Exist => Any::from(0i64),
                    Err(e) => return Err(e),
                };
                plain_value(rv)
            }
            Code::DevAllocData => {
                let d = dev(0)?;
                let nbytes = int(1)?;
                let u8_type = DLDataType {
                    code: DLDataTypeCode(1),
                    bits: 8,
                    lanes: 1,
                };
                let addr = self.memory.allocate(d, &[nbytes], u8_type, None)?;
                Ok(WireValue::Opaque(addr))
            }
            Code::DevAllocDataWithScope => {
                let t = tensor(0)?;
                let scope = match a.get(1) {
                    Some(WireValue::Str(s)) => Some(s.clone()),
                    _ => None,
                };
                let addr = self
                    .memory
                    .allocate(t.device, &t.shape, t.dtype, scope.as_deref())?;
                Ok(WireValue::Opaque(addr))
            }
            Code::DevFreeData => {
                let d = dev(0)?;
                self.memory.free_allocation(d, handle(1)?)?;
                Ok(WireValue::None)
            }
            Code::DevStreamSync => {
                let d = dev(0)?;
                let stream = self.stream(handle(1)?)?;
                device::api_of(d)?.stream_sync(d, stream)?;
                Ok(WireValue::None)
            }
            Code::CopyAmongRemote => {
                let from = self.memory.resolve(&tensor(0)?, "copy source")?;
                let to = self.memory.resolve(&tensor(1)?, "copy destination")?;
                if from.nbytes != to.nbytes {
                    return Err(Error::value(format!(
                        "RPC: copy between remote tensors of {} and {} bytes",
                        from.nbytes, to.nbytes
                    )));
                }
                to.to_tensor()?.copy_from(&from.to_tensor()?)?;
                Ok(WireValue::None)
            }
            Code::DevCreateStream | Code::DevGetCurrentStream => {
                let d = dev(0)?;
                let api = device::api_of(d)?;
                let s = if code == Code::DevCreateStream {
                    let s = api.create_stream(d)?;
                    self.streams.insert(s as u64);
                    s
                } else {
                    api.current_stream(d)
                };
                Ok(WireValue::Opaque(s as u64))
            }
            Code::DevFreeStream | Code::DevSetStream => {
                let d = dev(0)?;
                let h = handle(1)?;
                let stream = self.stream(h)?;
                let api = device::api_of(d)?;
                if code == Code::DevSetStream {
                    api.set_stream(d, stream)?;
                } else if h != 0 {
                    self.streams.remove(&h);
                    // SAFETY: `stream` is one this session created on this back end and has
                    // not freed (checked by `Session::stream` above).
                    unsafe { api.free_stream(d, stream)? };
                }
                Ok(WireValue::None)
            }
            other => Err(Error::value(format!(
                "RPC: packet code {other:?} is not a request"
            ))),
        }
    }
}

/// A `Return` with nothing in it: TVM's `ReturnVoid` (one `None`).
fn void() -> Reply {
    Reply::Packet(wire::return_packet(&[WireValue::None]))
}

/// A plain result of a syscall (an attribute) as one wire value.
fn plain_value(rv: Any) -> Result<WireValue> {
    let v = rv.view();
    Ok(match rv.view().type_index() {
        ti::NONE => WireValue::None,
        ti::INT => WireValue::Int(v.as_i64().unwrap_or(0)),
        ti::BOOL => WireValue::Bool(v.as_bool().unwrap_or(false)),
        ti::FLOAT => WireValue::Float(v.as_f64().unwrap_or(0.0)),
        ti::RAW_STR | ti::SMALL_STR | ti::STR => {
            WireValue::Str(v.as_str().unwrap_or_default().to_string())
        }
        other => {
            return Err(Error::type_error(format!(
                "RPC: a device attribute of type {} cannot be sent",
                crate::value::type_name(other)
            )))
        }
    })
}
