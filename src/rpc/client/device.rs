//! The devices of RPC sessions as the device layer sees them (TVM's `RPCDeviceAPI`,
//! `rpc_device_api.cc`): device `{type + (i + 1) * 128, id}` is device `{type, id}` of session
//! `i`. With this API plugged into the device layer, the tensors of every caller work on a
//! server's devices as on local ones: `TVMArrayAlloc` on a masked device allocates there
//! (`DevAllocData`), `TVMArrayCopyFromBytes`/`ToBytes` and `TVMArrayCopyFromTo` copy over the
//! session (`CopyToRemote`, `CopyFromRemote`, `CopyAmongRemote`), `TVMArrayFree` frees there;
//! such a tensor passed to a remote function goes as the server's tensor, and a tensor a remote
//! function returns comes back as one on the masked device.
//!
//! A remote tensor's data pointer here is a token, never dereferenced: it names an entry of this
//! module's table, which holds the session and the server's address (TVM's `RemoteSpace`,
//! which the pointer addresses there). A pointer that is no token is refused, so a stray or
//! forged one is an error, not a wild read.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use super::endpoint::Endpoint;
use super::remote::{plain, RemoteHandle, RPC_SESS_MASK};
use crate::abi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLTensor};
use crate::device::{self, DataRef, DeviceApi, DeviceAttr, StreamHandle};
use crate::error::{Error, Result};
use crate::rpc::wire::{Code, WireTensor, WireValue, Writer};
use crate::tensor::Tensor;
use crate::value::Any;

/// Who frees a remote allocation.
enum Owner {
    /// Allocated through this API: `DevFreeData` when freed.
    Allocated,
    /// Returned by a remote function: its handle, dropped (`FreeHandle`) when freed.
    Returned { _handle: RemoteHandle },
}

/// What a token names: the server's address in a session, and its device there.
struct Space {
    sess: Arc<Endpoint>,
    device: DLDevice,
    data: u64,
    owner: Owner,
}

/// Live tokens by value.
static SPACES: Lazy<Mutex<HashMap<usize, Space>>> = Lazy::new(|| Mutex::new(HashMap::new()));
static NEXT_TOKEN: AtomicUsize = AtomicUsize::new(1);

fn new_token(space: Space) -> *mut c_void {
    // Aligned as any allocation, never null, unique for the life of the process.
    let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed) << 6;
    SPACES.lock().insert(token, space);
    token as *mut c_void
}

/// The session and server address behind `token`.
fn space_of(token: *mut c_void, what: &str) -> Result<(Arc<Endpoint>, u64)> {
    SPACES
        .lock()
        .get(&(token as usize))
        .map(|s| (s.sess.clone(), s.data))
        .ok_or_else(|| {
            Error::value(format!(
                "{what}: {token:p} is not the data of a remote tensor of this process"
            ))
        })
}

/// Session `i`'s device for masked device `dev`: the session and the device as the server
/// names it.
fn session_of(dev: DLDevice) -> Result<(Arc<Endpoint>, DLDevice)> {
    let t = dev.device_type.0;
    if t < RPC_SESS_MASK {
        return Err(Error::value(format!(
            "{} is not a device of an RPC session",
            device::device_name(dev)
        )));
    }
    let index = (t / RPC_SESS_MASK) as i32 - 1;
    let sess = super::session_at(index).ok_or_else(|| {
        Error::value(format!(
            "{}: there is no RPC session {index} (closed, or never opened)",
            device::device_name(dev)
        ))
    })?;
    let remote = DLDevice {
        device_type: DLDeviceType(t % RPC_SESS_MASK),
        device_id: dev.device_id,
    };
    Ok((sess, remote))
}

/// The server's view of a local tensor on a masked device of `sess`: its address there and
/// its own device, shape, dtype and offset. `None` for a tensor on a local device.
///
/// # Safety
/// `t` is a live `DLTensor` whose shape and strides are readable (what a function taking
/// tensors is handed).
pub(super) unsafe fn wire_view(
    sess: &Arc<Endpoint>,
    t: &DLTensor,
    i: usize,
) -> Result<Option<WireTensor>> {
    if t.device.device_type.0 < RPC_SESS_MASK {
        return Ok(None);
    }
    let what = format!("argument {i}");
    let (owner, data) = space_of(t.data, &what)?;
    if !Arc::ptr_eq(&owner, sess) {
        return Err(Error::value(format!(
            "{what}: a tensor of another RPC session cannot be passed to this one"
        )));
    }
    // SAFETY: per the contract.
    if unsafe { !crate::tensor::layout::dl_is_contiguous(t) } {
        return Err(Error::value(format!(
            "{what}: only compact remote tensors can be passed to a remote function"
        )));
    }
    let (_, device) = session_of(t.device)?;
    Ok(Some(WireTensor {
        data,
        device,
        dtype: t.dtype,
        // SAFETY: per the contract.
        shape: unsafe { crate::tensor::layout::dl_shape(t, &what)? }.to_vec(),
        byte_offset: t.byte_offset,
    }))
}

/// A tensor a remote function returned (`meta`, kept on the server by `handle`) as a tensor
/// on this session's masked device (TVM's `TensorFromRemoteOpaqueHandle`).
pub(super) fn returned_tensor(
    sess: &Arc<Endpoint>,
    meta: WireTensor,
    handle: RemoteHandle,
) -> Result<Tensor> {
    let index = sess.table_index();
    let masked = u32::try_from(index + 1)
        .ok()
        .and_then(|i| i.checked_mul(RPC_SESS_MASK))
        .and_then(|m| m.checked_add(meta.device.device_type.0 % RPC_SESS_MASK))
        .ok_or_else(|| Error::value(format!("RPC session index {index} out of range")))?;
    let dev = DLDevice {
        device_type: DLDeviceType(masked),
        device_id: meta.device.device_id,
    };
    let token = new_token(Space {
        sess: sess.clone(),
        device: meta.device,
        data: meta.data,
        owner: Owner::Returned { _handle: handle },
    });
    let guard = Arc::new(TokenGuard(token as usize));
    // SAFETY: the data pointer of a masked device is a token, which nothing dereferences: the
    // device layer hands it to this API only, which looks it up. `guard` keeps it alive.
    unsafe { Tensor::over_shared(token, meta.byte_offset, &meta.shape, meta.dtype, dev, guard) }
}

/// Frees a token (and what it holds on the server) when the last tensor over it goes.
struct TokenGuard(usize);

impl Drop for TokenGuard {
    fn drop(&mut self) {
        release(self.0 as *mut c_void);
    }
}

/// Forgets `token`, freeing the server's memory or handle behind it.
fn release(token: *mut c_void) -> Option<()> {
    let space = SPACES.lock().remove(&(token as usize))?;
    match space.owner {
        Owner::Allocated if space.sess.is_open() && space.data != 0 => {
            // A failed free leaves the memory to the session's end, which frees it all.
            let _ = space.sess.syscall(
                Code::DevFreeData,
                &[
                    WireValue::Device(space.device),
                    WireValue::Opaque(space.data),
                ],
            );
        }
        // Dropping the handle frees it on the server.
        _ => {}
    }
    Some(())
}

fn bytes_tensor(data: u64, device: DLDevice, offset: usize, nbytes: usize) -> WireTensor {
    WireTensor {
        data,
        device,
        dtype: DLDataType {
            code: DLDataTypeCode(1),
            bits: 8,
            lanes: 1,
        },
        shape: vec![nbytes as i64],
        byte_offset: offset as u64,
    }
}

/// The token of what an allocation syscall (`what`) answered: the server's address on
/// `device`, freed there with the token.
fn allocated(
    sess: Arc<Endpoint>,
    device: DLDevice,
    answer: WireValue,
    what: &str,
) -> Result<*mut c_void> {
    match answer {
        WireValue::Opaque(data) => Ok(new_token(Space {
            sess,
            device,
            data,
            owner: Owner::Allocated,
        })),
        other => Err(Error::new(
            "RPCError",
            format!("RPC: {what} answered {other:?}"),
        )),
    }
}

/// The device API of every RPC session's devices.
pub(super) struct SessionDevices;

/// The one instance, plugged into the device layer by the RPC client's globals.
pub(super) static SESSION_DEVICES: SessionDevices = SessionDevices;

impl SessionDevices {
    fn syscall(&self, dev: DLDevice, code: Code, rest: &[WireValue]) -> Result<WireValue> {
        let (sess, remote) = session_of(dev)?;
        let mut args = vec![WireValue::Device(remote)];
        args.extend_from_slice(rest);
        sess.syscall(code, &args)
    }
}

impl DeviceApi for SessionDevices {
    fn set_device(&self, dev: DLDevice) -> Result<()> {
        self.syscall(dev, Code::DevSetDevice, &[]).map(drop)
    }

    fn check_exists(&self, dev: DLDevice) -> Result<()> {
        let (sess, _) = session_of(dev)?;
        if !sess.is_open() {
            return Err(Error::value(format!(
                "{}: the RPC session is closed",
                device::device_name(dev)
            )));
        }
        Ok(())
    }

    fn get_attr(&self, dev: DLDevice, attr: DeviceAttr) -> Result<Any> {
        let v = self.syscall(dev, Code::DevGetAttr, &[WireValue::Int(attr as i64)])?;
        plain(v)
    }

    fn alloc_data_space(
        &self,
        dev: DLDevice,
        nbytes: usize,
        alignment: usize,
        type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        let (sess, remote) = session_of(dev)?;
        let args = [
            WireValue::Device(remote),
            WireValue::Int(nbytes as i64),
            WireValue::Int(alignment as i64),
            WireValue::DType(type_hint),
        ];
        let answer = sess.syscall(Code::DevAllocData, &args)?;
        allocated(sess, remote, answer, "DevAllocData")
    }

    fn alloc_data_space_scoped(
        &self,
        dev: DLDevice,
        shape: &[i64],
        dtype: DLDataType,
        mem_scope: Option<&str>,
    ) -> Result<*mut c_void> {
        let (sess, remote) = session_of(dev)?;
        let meta = WireTensor {
            data: 0,
            device: remote,
            dtype,
            shape: shape.to_vec(),
            byte_offset: 0,
        };
        let scope = match mem_scope {
            Some(s) => WireValue::Str(s.to_string()),
            None => WireValue::None,
        };
        let answer = sess.syscall(
            Code::DevAllocDataWithScope,
            &[WireValue::Tensor(meta), scope],
        )?;
        allocated(sess, remote, answer, "DevAllocDataWithScope")
    }

    unsafe fn free_data_space(&self, _dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        if !ptr.is_null() {
            release(ptr).ok_or_else(|| {
                Error::value(format!("{ptr:p} is not the data of a remote tensor"))
            })?;
        }
        Ok(())
    }

    unsafe fn copy_bytes(
        &self,
        from: DataRef,
        to: DataRef,
        nbytes: usize,
        _type_hint: DLDataType,
        stream: StreamHandle,
    ) -> Result<()> {
        let remote_from = from.device.device_type.0 >= RPC_SESS_MASK;
        let remote_to = to.device.device_type.0 >= RPC_SESS_MASK;
        match (remote_from, remote_to) {
            (true, true) => {
                let (sess, from_dev) = session_of(from.device)?;
                let (to_sess, to_dev) = session_of(to.device)?;
                if !Arc::ptr_eq(&sess, &to_sess) {
                    return Err(Error::value(
                        "cannot copy between tensors of two RPC sessions: copy through the CPU",
                    ));
                }
                let (_, src) = space_of(from.data, "copy source")?;
                let (_, dst) = space_of(to.data, "copy destination")?;
                let args = [
                    WireValue::Tensor(bytes_tensor(src, from_dev, from.offset, nbytes)),
                    WireValue::Tensor(bytes_tensor(dst, to_dev, to.offset, nbytes)),
                    WireValue::Opaque(stream as u64),
                ];
                sess.syscall(Code::CopyAmongRemote, &args).map(drop)
            }
            (true, false) if device::is_host_accessible(to.device) => {
                let (sess, dev) = session_of(from.device)?;
                let (_, src) = space_of(from.data, "copy source")?;
                if nbytes == 0 {
                    return Ok(());
                }
                let mut w = Writer::packet(Code::CopyFromRemote);
                w.tensor(&bytes_tensor(src, dev, from.offset, nbytes))
                    .u64(nbytes as u64);
                match sess.request(w.finish())?.into_iter().next() {
                    Some(WireValue::Bytes(b)) if b.len() == nbytes => {
                        // SAFETY: `to` is host memory of at least `nbytes` from its offset,
                        // writable (the caller's contract), and `b` holds `nbytes`.
                        unsafe {
                            std::ptr::copy_nonoverlapping(b.as_ptr(), to.host_address(), nbytes)
                        };
                        Ok(())
                    }
                    other => Err(Error::new(
                        "RPCError",
                        format!(
                            "RPC: CopyFromRemote of {nbytes} bytes answered {:?}",
                            other.map(|v| match v {
                                WireValue::Bytes(b) => format!("{} bytes", b.len()),
                                v => format!("{v:?}"),
                            })
                        ),
                    )),
                }
            }
            (false, true) if device::is_host_accessible(from.device) => {
                let (sess, dev) = session_of(to.device)?;
                let (_, dst) = space_of(to.data, "copy destination")?;
                if nbytes == 0 {
                    return Ok(());
                }
                // SAFETY: `from` is host memory of at least `nbytes` from its offset (the
                // caller's contract).
                let bytes = unsafe { std::slice::from_raw_parts(from.host_address(), nbytes) };
                let mut w = Writer::packet(Code::CopyToRemote);
                w.tensor(&bytes_tensor(dst, dev, to.offset, nbytes))
                    .u64(nbytes as u64)
                    .raw(bytes);
                sess.request(w.finish()).map(drop)
            }
            _ => Err(Error::value(format!(
                "cannot copy from {} to {} directly: a remote tensor copies to and from the \
                 CPU or another tensor of its session",
                device::device_name(from.device),
                device::device_name(to.device)
            ))),
        }
    }

    fn create_stream(&self, dev: DLDevice) -> Result<StreamHandle> {
        match self.syscall(dev, Code::DevCreateStream, &[])? {
            WireValue::Opaque(s) => Ok(s as usize as StreamHandle),
            WireValue::None => Ok(std::ptr::null_mut()),
            other => Err(Error::new(
                "RPCError",
                format!("RPC: DevCreateStream answered {other:?}"),
            )),
        }
    }

    unsafe fn free_stream(&self, dev: DLDevice, stream: StreamHandle) -> Result<()> {
        self.syscall(
            dev,
            Code::DevFreeStream,
            &[WireValue::Opaque(stream as u64)],
        )
        .map(drop)
    }

    fn stream_sync(&self, dev: DLDevice, stream: StreamHandle) -> Result<()> {
        self.syscall(
            dev,
            Code::DevStreamSync,
            &[WireValue::Opaque(stream as u64)],
        )
        .map(drop)
    }

    fn set_stream(&self, dev: DLDevice, stream: StreamHandle) -> Result<()> {
        self.syscall(dev, Code::DevSetStream, &[WireValue::Opaque(stream as u64)])
            .map(drop)
    }

    fn current_stream(&self, dev: DLDevice) -> StreamHandle {
        match self.syscall(dev, Code::DevGetCurrentStream, &[]) {
            Ok(WireValue::Opaque(s)) => s as usize as StreamHandle,
            _ => std::ptr::null_mut(),
        }
    }
}
