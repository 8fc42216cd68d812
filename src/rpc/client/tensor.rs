//! Remote tensors for Rust callers as objects of their own: memory on the server's device,
//! allocated (`DevAllocData`), filled (`CopyToRemote`) and read back (`CopyFromRemote`) over the
//! session, and passed to remote functions in the tensor wire form (TVM `rpc_endpoint.cc`'s
//! copies).
//!
//! A [`RemoteTensor`] is an object of its own (`rpc.RemoteTensor`), not a tvmrt tensor: its
//! data address is the server's, never dereferenced here. Tensors on a session's masked device
//! ([`super::device`]: `Tensor::empty(shape, dtype, {type + 128 * (index + 1), id})`, as TVM's
//! client makes them and as C and tvm4j callers do through `TVMArrayAlloc`) do the same through
//! the tensor API, and are what remote functions return.

use std::sync::Arc;

use once_cell::sync::Lazy;

use super::endpoint::Endpoint;
use super::remote::RemoteModule;
use crate::abi::{type_index as ti, DLDataType, DLDevice};
use crate::error::{Error, Result};
use crate::module::Module;
use crate::object::{new_object, type_registry, ObjectPayload, ObjectRef};
use crate::rpc::wire::{Code, WireTensor, WireValue, Writer};
use crate::tensor::layout::shape_bytes;

/// A tensor whose data lives on the server.
pub struct RemoteTensor {
    sess: Arc<Endpoint>,
    meta: WireTensor,
    nbytes: usize,
}

static REMOTE_TENSOR_TYPE: Lazy<i32> = Lazy::new(|| {
    type_registry::get_or_alloc_index("rpc.RemoteTensor", -1, 1, 0, true, ti::OBJECT)
        .unwrap_or_else(|e| panic!("registering rpc.RemoteTensor: {e}"))
});

// SAFETY: a plain Rust payload under a type index registered once for it (above).
unsafe impl ObjectPayload for RemoteTensor {
    const TYPE_INDEX: i32 = ti::OBJECT;
    fn type_index() -> i32 {
        *REMOTE_TENSOR_TYPE
    }
}

impl Drop for RemoteTensor {
    fn drop(&mut self) {
        if self.sess.is_open() && self.meta.data != 0 {
            let args = [
                WireValue::Device(self.meta.device),
                WireValue::Opaque(self.meta.data),
            ];
            // A failed free leaves the memory to the session's end, which frees it all.
            let _ = self.sess.syscall(Code::DevFreeData, &args);
        }
    }
}

impl RemoteTensor {
    /// A new tensor on device `dev` of the server behind session module `sess` (a plain
    /// device, as the server names it), contents undefined.
    pub fn empty(
        sess: &Module,
        shape: &[i64],
        dtype: DLDataType,
        dev: DLDevice,
    ) -> Result<ObjectRef> {
        let sess = sess
            .downcast::<RemoteModule>()
            .ok_or_else(|| Error::value("RemoteTensor::empty needs an RPC session module"))?
            .endpoint()
            .clone();
        let nbytes = shape_bytes(shape, dtype)?;
        let data = if nbytes == 0 {
            0
        } else {
            // TVM 0.21+'s DevAllocData: device, size, alignment, dtype hint.
            let args = [
                WireValue::Device(dev),
                WireValue::Int(nbytes as i64),
                WireValue::Int(64),
                WireValue::DType(dtype),
            ];
            match sess.syscall(Code::DevAllocData, &args)? {
                WireValue::Opaque(p) if p != 0 => p,
                other => {
                    return Err(Error::new(
                        "RPCError",
                        format!("RPC: DevAllocData answered {other:?}"),
                    ))
                }
            }
        };
        Ok(new_object(RemoteTensor {
            sess,
            meta: WireTensor {
                data,
                device: dev,
                dtype,
                shape: shape.to_vec(),
                byte_offset: 0,
            },
            nbytes,
        }))
    }

    /// The remote tensor behind an object, if it is one.
    pub fn from_object(obj: &ObjectRef) -> Option<&RemoteTensor> {
        obj.downcast_ref::<RemoteTensor>()
    }

    /// The session the tensor belongs to.
    pub(crate) fn endpoint(&self) -> &Arc<Endpoint> {
        &self.sess
    }

    /// The tensor as it crosses the wire.
    pub fn wire(&self) -> &WireTensor {
        &self.meta
    }

    /// The shape.
    pub fn shape(&self) -> &[i64] {
        &self.meta.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DLDataType {
        self.meta.dtype
    }

    /// The server's device.
    pub fn device(&self) -> DLDevice {
        self.meta.device
    }

    /// Bytes of data (shape times element size).
    pub fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// Fills the tensor with `bytes` (exactly [`RemoteTensor::nbytes`] of them).
    pub fn copy_from_bytes(&self, bytes: &[u8]) -> Result<()> {
        self.check_len(bytes.len())?;
        if bytes.is_empty() {
            return Ok(());
        }
        let mut w = Writer::packet(Code::CopyToRemote);
        w.tensor(&self.meta).u64(bytes.len() as u64).raw(bytes);
        self.sess.request(w.finish()).map(|_| ())
    }

    /// The tensor's bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        if self.nbytes == 0 {
            return Ok(Vec::new());
        }
        let mut w = Writer::packet(Code::CopyFromRemote);
        w.tensor(&self.meta).u64(self.nbytes as u64);
        match self.sess.request(w.finish())?.into_iter().next() {
            Some(WireValue::Bytes(b)) if b.len() == self.nbytes => Ok(b),
            other => Err(Error::new(
                "RPCError",
                format!(
                    "RPC: CopyFromRemote of {} bytes answered {:?}",
                    self.nbytes,
                    other.map(|v| match v {
                        WireValue::Bytes(b) => format!("{} bytes", b.len()),
                        v => format!("{v:?}"),
                    })
                ),
            )),
        }
    }

    fn check_len(&self, n: usize) -> Result<()> {
        if n != self.nbytes {
            return Err(Error::value(format!(
                "remote tensor of {} bytes, given {n}",
                self.nbytes
            )));
        }
        Ok(())
    }
}
