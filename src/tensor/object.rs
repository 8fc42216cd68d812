//! The tensor object's payload (`TensorObj`: the public `DLTensor`, then the shape, strides and
//! data owner it points to) and the registry of live read-only descriptors.

use std::ffi::c_void;

use super::dlpack::{LegacyManaged, VersionedManaged};
use super::{layout, FLAG_READ_ONLY};
use crate::abi::{type_index, DLDataType, DLDevice, DLTensor};
use crate::device::DeviceBlock;
use crate::error::{Error, Result};
use crate::object::{ObjectPayload, ObjectRef};

/// What keeps a tensor's data alive.
pub(crate) enum DataOwner {
    /// Memory tvmrt allocated on the tensor's device.
    Block(#[allow(dead_code)] DeviceBlock),
    /// An imported legacy DLPack tensor (its deleter runs on drop).
    Legacy(#[allow(dead_code)] LegacyManaged),
    /// An imported DLPack 1.x tensor (its deleter runs on drop).
    Versioned(#[allow(dead_code)] VersionedManaged),
    /// The tensor this one views.
    Parent(#[allow(dead_code)] ObjectRef),
    /// Read-only bytes of a mapped library, kept mapped by their owner.
    Mapped(#[allow(dead_code)] crate::mapped::Owner),
    /// Memory some other owner keeps alive while any tensor over it lives (an RPC session's
    /// remote memory: a view the callee keeps cannot outlive it).
    Shared(#[allow(dead_code)] std::sync::Arc<dyn std::any::Any + Send + Sync>),
}

/// Payload of a tvmrt tensor object: the public `DLTensor`, then what it points to.
#[repr(C)]
pub struct TensorObj {
    dl: DLTensor,
    shape: Box<[i64]>,
    strides: Box<[i64]>,
    pub(super) flags: u64,
    owner: DataOwner,
}

// SAFETY: `TensorObj` starts with the `DLTensor` tvm-ffi's `TensorObj` places after the header
// (type index 70). The descriptor is immutable after construction; the data it points to is
// shared memory whose synchronization is the users' (as in TVM).
unsafe impl ObjectPayload for TensorObj {
    const TYPE_INDEX: i32 = type_index::TENSOR;
}

/// The scalar fields of a new tensor.
pub(crate) struct Meta {
    pub data: *mut c_void,
    pub byte_offset: u64,
    pub device: DLDevice,
    pub dtype: DLDataType,
    pub flags: u64,
}

impl TensorObj {
    /// Builds the payload: `shape`/`strides` are copied into the object and the descriptor
    /// points at them (null for a 0-d tensor, as DLPack allows).
    pub(super) fn new(
        meta: Meta,
        shape: &[i64],
        strides: Option<&[i64]>,
        owner: DataOwner,
    ) -> TensorObj {
        let Meta {
            data,
            byte_offset,
            device,
            dtype,
            flags,
        } = meta;
        let shape: Box<[i64]> = shape.into();
        let strides: Box<[i64]> = match strides {
            Some(s) => s.into(),
            None => layout::compact_strides(&shape).into(),
        };
        let ptr_or_null = |b: &[i64]| {
            if b.is_empty() {
                std::ptr::null_mut()
            } else {
                b.as_ptr().cast_mut()
            }
        };
        let dl = DLTensor {
            data,
            device,
            ndim: shape.len() as i32,
            dtype,
            shape: ptr_or_null(&shape),
            strides: ptr_or_null(&strides),
            byte_offset,
        };
        TensorObj {
            dl,
            shape,
            strides,
            flags,
            owner,
        }
    }
}

impl Drop for TensorObj {
    fn drop(&mut self) {
        if self.flags & FLAG_READ_ONLY != 0 {
            // The payload is dropped in place inside its object, so this is the address
            // `from_payload` registered.
            read_only_registry::remove(&self.dl);
        }
    }
}

/// The `DLTensor` addresses of live read-only tvmrt tensors, so the classic copy calls, which
/// take bare `DLTensor*`s (TVM accepts any descriptor there, not only its own arrays), can
/// refuse to write into one without reading memory before a foreign pointer.
pub(crate) mod read_only_registry {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use once_cell::sync::Lazy;
    use parking_lot::Mutex;

    use crate::abi::DLTensor;

    static LIVE: Lazy<Mutex<HashSet<usize>>> = Lazy::new(|| Mutex::new(HashSet::new()));
    /// Entries in `LIVE`, read without the lock on the common path (no read-only tensors).
    static COUNT: AtomicUsize = AtomicUsize::new(0);

    pub fn insert(t: *const DLTensor) {
        if LIVE.lock().insert(t as usize) {
            COUNT.fetch_add(1, Ordering::SeqCst);
        }
    }

    pub fn remove(t: *const DLTensor) {
        if LIVE.lock().remove(&(t as usize)) {
            COUNT.fetch_sub(1, Ordering::SeqCst);
        }
    }

    pub fn contains(t: *const DLTensor) -> bool {
        COUNT.load(Ordering::SeqCst) != 0 && LIVE.lock().contains(&(t as usize))
    }
}

/// Fails when `t` is the descriptor of a live read-only tvmrt tensor (any other descriptor,
/// tvmrt's or not, is writable as far as tvmrt knows).
pub fn check_dltensor_writable(t: *const DLTensor, what: &str) -> Result<()> {
    if read_only_registry::contains(t) {
        return Err(Error::value(format!(
            "{what}: the tensor is read-only (imported with DLPACK_FLAG_BITMASK_READ_ONLY)"
        )));
    }
    Ok(())
}
