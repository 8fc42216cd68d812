//! Buffer descriptors and their registry, for back ends whose tensor `data` is a pointer to a
//! descriptor holding the driver's buffer handle rather than a device address (TVM's OpenCL
//! `cl::BufferDescriptor`, its Vulkan buffer): tvmrt hands out boxed descriptors and records
//! each one while it lives, so a pointer that is not one (a CPU tensor's data given to a
//! kernel, a descriptor already freed, another runtime's pointer) is refused with a message
//! instead of being read as a descriptor.

use std::collections::HashMap;
use std::ffi::c_void;
use std::marker::PhantomData;

use once_cell::sync::Lazy;
use parking_lot::{RwLock, RwLockReadGuard};

use super::address::BuildAddressHasher;
use super::api::{a_or_an, DataRef};
use super::device_name;
use crate::abi::{DLDevice, DLDeviceType};
use crate::error::{Error, Result};
use crate::value::AnyView;

/// What a registry records of a descriptor, as far as the shared checks read it.
pub trait Recorded: Copy {
    /// The back end's device (tvmrt's id) the buffer was allocated on.
    fn device_id(&self) -> i32;
    /// The buffer's size in bytes.
    fn nbytes(&self) -> usize;
}

type Map<B> = HashMap<usize, B, BuildAddressHasher>;

/// The live descriptors `D` of one back end, each with what the back end knows of it (`B`).
pub struct Registry<D, B: Copy> {
    live: Lazy<RwLock<Map<B>>>,
    /// The back end's name in messages ("OpenCL", "Vulkan").
    kind: &'static str,
    _descriptor: PhantomData<fn() -> D>,
}

impl<D, B: Copy> Registry<D, B> {
    /// An empty registry for the back end named `kind` in messages.
    pub const fn new(kind: &'static str) -> Self {
        Registry {
            live: Lazy::new(|| RwLock::new(Map::default())),
            kind,
            _descriptor: PhantomData,
        }
    }

    /// Boxes `desc` and records it with `info`; returns the pointer tensors hold.
    pub fn register(&self, desc: D, info: B) -> *mut D {
        let p = Box::into_raw(Box::new(desc));
        self.live.write().insert(p as usize, info);
        p
    }

    /// Forgets the descriptor `p` and frees it; returns what was recorded of it, for the back
    /// end to release its buffer. A pointer that is not a live descriptor is refused and left
    /// alone.
    ///
    /// # Safety
    /// Nothing reads `p` afterwards.
    pub unsafe fn unregister(&self, p: *mut D) -> Result<B> {
        let Some(info) = self.live.write().remove(&(p as usize)) else {
            return Err(self.not_a_buffer(p.cast(), "free"));
        };
        // SAFETY: live descriptors come from `Box::into_raw` in `register`, and this removal
        // gives this call the only right to free it.
        drop(unsafe { Box::from_raw(p) });
        Ok(info)
    }

    /// The error for a pointer that is not a live descriptor.
    pub fn not_a_buffer(&self, p: *const c_void, what: &str) -> Error {
        not_a_buffer(self.kind, p, what)
    }

    /// The registry, read-locked: look several descriptors up under one lock (a launch holds
    /// it until its buffers are bound, so none can be freed in between).
    pub fn lock(&self) -> Live<'_, B> {
        Live {
            map: self.live.read(),
            kind: self.kind,
        }
    }

    /// What `p` is, or an error saying it is not a live descriptor.
    pub fn lookup(&self, p: *const c_void, what: &str) -> Result<B> {
        self.lock().get(p).ok_or_else(|| self.not_a_buffer(p, what))
    }

    /// How many descriptors are live: what a leak check compares before and after.
    pub fn len(&self) -> usize {
        self.live.read().len()
    }

    /// Whether no descriptor is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<D, B: Recorded> Registry<D, B> {
    /// The buffer one side of a copy names: a live descriptor, allocated on the device the
    /// tensor says, holding `nbytes` from the side's offset.
    pub fn copy_side(&self, side: &DataRef, nbytes: usize, what: &str) -> Result<B> {
        let b = self.lookup(side.data, what)?;
        if b.device_id() != side.device.device_id {
            let owner = DLDevice {
                device_type: side.device.device_type,
                device_id: b.device_id(),
            };
            return Err(Error::value(format!(
                "{what}: the tensor says {} but its buffer was allocated on {}",
                device_name(side.device),
                device_name(owner)
            )));
        }
        let offset = side.offset;
        if offset
            .checked_add(nbytes)
            .is_none_or(|end| end > b.nbytes())
        {
            return Err(Error::value(format!(
                "{what}: {nbytes} bytes at offset {offset} exceed the {} buffer's {} bytes",
                self.kind,
                b.nbytes()
            )));
        }
        Ok(b)
    }
}

#[cold]
fn not_a_buffer(kind: &str, p: *const c_void, what: &str) -> Error {
    Error::value(format!(
        "{what}: {p:p} is not {} {kind} buffer tvmrt allocated (a tensor on another device, or \
         one already freed)",
        a_or_an(kind),
    ))
}

/// A read-locked [`Registry`].
pub struct Live<'a, B> {
    map: RwLockReadGuard<'a, Map<B>>,
    kind: &'static str,
}

impl<B: Copy> Live<'_, B> {
    /// What `p` is, if it is a live descriptor.
    pub fn get(&self, p: *const c_void) -> Option<B> {
        self.map.get(&(p as usize)).copied()
    }
}

impl<B: Recorded> Live<'_, B> {
    /// The buffer a kernel's buffer argument `v` names: an opaque pointer to a live descriptor
    /// of the device the kernel runs on (`device_id` of `device_type`). `what` names the
    /// argument in messages.
    pub fn kernel_arg(
        &self,
        v: &AnyView<'_>,
        device_type: u32,
        device_id: i32,
        what: impl Fn() -> String,
    ) -> Result<B> {
        let ptr = v
            .as_opaque_ptr()
            .ok_or_else(|| v.type_mismatch(&what(), "a buffer (opaque pointer)"))?;
        let b = self
            .get(ptr)
            .ok_or_else(|| not_a_buffer(self.kind, ptr, &what()))?;
        if b.device_id() != device_id {
            let dev = |device_id| DLDevice {
                device_type: DLDeviceType(device_type),
                device_id,
            };
            return Err(Error::value(format!(
                "{}: its buffer is on {}, the kernel runs on {}",
                what(),
                device_name(dev(b.device_id())),
                device_name(dev(device_id))
            )));
        }
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Any;

    #[derive(Clone, Copy, Debug)]
    struct Rec(i32, usize);

    impl Recorded for Rec {
        fn device_id(&self) -> i32 {
            self.0
        }
        fn nbytes(&self) -> usize {
            self.1
        }
    }

    /// Not zero-sized: descriptors are keyed by their boxes' addresses.
    struct Desc {
        _handle: u64,
    }

    #[test]
    fn kernel_arguments_are_live_buffers_of_the_launch_device() {
        let reg: Registry<Desc, Rec> = Registry::new("OpenCL");
        let p = reg.register(Desc { _handle: 1 }, Rec(1, 64));
        let arg = Any::opaque_ptr(p.cast());
        let what = || "kernel `k` argument 0".to_string();
        let live = reg.lock();
        assert_eq!(live.kernel_arg(&arg.view(), 4, 1, what).unwrap().1, 64);
        let e = live.kernel_arg(&arg.view(), 4, 0, what).unwrap_err();
        assert_eq!(
            e.message,
            "kernel `k` argument 0: its buffer is on opencl:1, the kernel runs on opencl:0"
        );
        let e = live
            .kernel_arg(&Any::from(3i64).view(), 4, 1, what)
            .unwrap_err();
        assert!(
            e.message.contains("expected a buffer (opaque pointer)"),
            "{e}"
        );
        let stranger = Any::opaque_ptr(std::ptr::null_mut::<u8>().wrapping_add(64).cast());
        let e = live.kernel_arg(&stranger.view(), 4, 1, what).unwrap_err();
        assert!(
            e.message
                .contains("0x40 is not an OpenCL buffer tvmrt allocated"),
            "{e}"
        );
        drop(live);
        // SAFETY: registered above, not used afterwards.
        assert_eq!(unsafe { reg.unregister(p) }.unwrap().0, 1);
        assert!(reg.is_empty());
    }
}
