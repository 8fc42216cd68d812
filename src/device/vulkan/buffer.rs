//! Vulkan buffers as TVM's runtime represents them: a tensor's `data` is a pointer to a buffer
//! descriptor whose first field is the `VkBuffer`, then its `VkDeviceMemory` (TVM
//! `vulkan_buffer.h`, `VulkanBuffer`), so a tensor tvmrt allocates on Vulkan can be handed to
//! code built against TVM's headers and back.
//!
//! Every descriptor tvmrt hands out is recorded while it lives ([`crate::device::descriptor`]),
//! so a pointer that is not one is refused with a message instead of being read.

use std::ffi::c_void;

use ash::vk;

use super::context::{context, vk_error, Device};
use crate::device::descriptor::{Recorded, Registry};
use crate::error::Result;

/// TVM's `VulkanBuffer`, as far as anyone outside the runtime reads it. 64-byte aligned, as
/// generated host code assumes of every data pointer.
#[repr(C, align(64))]
pub struct BufferDescriptor {
    /// The buffer.
    pub buffer: vk::Buffer,
    /// Its memory.
    pub memory: vk::DeviceMemory,
}

/// A buffer and its memory, possibly mapped (host-visible staging and uniform buffers).
#[derive(Clone, Copy, Debug)]
pub struct RawBuffer {
    /// The buffer.
    pub buffer: vk::Buffer,
    /// Its own memory.
    pub memory: vk::DeviceMemory,
    /// Its size in bytes.
    pub size: usize,
    /// The host address of its memory, when mapped.
    pub mapped: *mut u8,
}

impl RawBuffer {
    /// A buffer of `size` bytes (at least 1) for `usage`, in memory with `want` (device-local
    /// memory falls back to any type the buffer allows; host-visible memory does not), mapped
    /// when `map`.
    pub fn new(
        dev: &Device,
        size: usize,
        usage: vk::BufferUsageFlags,
        want: vk::MemoryPropertyFlags,
        map: bool,
    ) -> Result<RawBuffer> {
        let d = &dev.device;
        let info = vk::BufferCreateInfo::default()
            .size(size.max(1) as u64)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: a live device; the info lives across the call.
        let buffer = unsafe { d.create_buffer(&info, None) }
            .map_err(|r| vk_error(r, &format!("vkCreateBuffer ({size} bytes)")))?;
        // SAFETY: the buffer was just created on this device.
        let req = unsafe { d.get_buffer_memory_requirements(buffer) };
        let fallback = !want.contains(vk::MemoryPropertyFlags::HOST_VISIBLE);
        let Some(type_index) = dev.memory_type(req.memory_type_bits, want, fallback) else {
            // SAFETY: created above, unused.
            unsafe { d.destroy_buffer(buffer, None) };
            crate::bail_value!("Vulkan device `{}` has no memory type {want:?}", dev.name);
        };
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(type_index);
        // SAFETY: a live device; the info lives across the call.
        let memory = match unsafe { d.allocate_memory(&alloc, None) } {
            Ok(m) => m,
            Err(r) => {
                // SAFETY: created above, unused.
                unsafe { d.destroy_buffer(buffer, None) };
                return Err(vk_error(r, &format!("vkAllocateMemory ({size} bytes)")));
            }
        };
        let mut raw = RawBuffer {
            buffer,
            memory,
            size,
            mapped: std::ptr::null_mut(),
        };
        // SAFETY: memory of the requested size and type, not bound yet.
        if let Err(r) = unsafe { d.bind_buffer_memory(buffer, memory, 0) } {
            // SAFETY: created above, unused.
            unsafe { raw.destroy(dev) };
            return Err(vk_error(r, "vkBindBufferMemory"));
        }
        if map {
            // SAFETY: host-visible memory (asked for), mapped once for its whole life.
            match unsafe { d.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) } {
                Ok(p) => raw.mapped = p.cast(),
                Err(r) => {
                    // SAFETY: created above, unused.
                    unsafe { raw.destroy(dev) };
                    return Err(vk_error(r, "vkMapMemory"));
                }
            }
        }
        Ok(raw)
    }

    /// Destroys the buffer and frees its memory.
    ///
    /// # Safety
    /// No command that uses it is pending, and nothing uses it afterwards.
    pub unsafe fn destroy(&mut self, dev: &Device) {
        // SAFETY: per the contract; freeing the memory unmaps it.
        unsafe {
            dev.device.destroy_buffer(self.buffer, None);
            dev.device.free_memory(self.memory, None);
        }
        self.buffer = vk::Buffer::null();
        self.memory = vk::DeviceMemory::null();
        self.mapped = std::ptr::null_mut();
    }
}

/// What tvmrt knows of a live descriptor.
#[derive(Clone, Copy, Debug)]
pub struct Buffer {
    /// The buffer.
    pub buffer: vk::Buffer,
    /// Its memory.
    pub memory: vk::DeviceMemory,
    /// The Vulkan device (tvmrt's id) that owns it.
    pub device_id: i32,
    /// Its size in bytes.
    pub nbytes: usize,
}

/// Live descriptors: lookups (`lock`, `copy_side`) and the not-a-buffer error go through it.
pub static LIVE: Registry<BufferDescriptor, Buffer> = Registry::new("Vulkan");

/// The usages of a tensor's buffer: kernels read and write it, copies go both ways.
const TENSOR_USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);

/// Allocates a buffer of `nbytes` (at least 1 byte: Vulkan refuses empty buffers) in device
/// memory on device `device_id`; returns its descriptor.
pub fn alloc(device_id: i32, nbytes: usize) -> Result<*mut BufferDescriptor> {
    let ctx = context()?;
    let dev = ctx.device(device_id)?;
    let max = dev.props.limits.max_storage_buffer_range as usize;
    if nbytes > max {
        // Kernels bind the whole buffer; past this a launch could not address it.
        crate::bail_value!(
            "cannot allocate {nbytes} bytes on vulkan:{device_id} ({}): its largest storage \
             buffer is {max} bytes (maxStorageBufferRange)",
            dev.name
        );
    }
    let raw = RawBuffer::new(
        dev,
        nbytes,
        TENSOR_USAGE,
        vk::MemoryPropertyFlags::DEVICE_LOCAL,
        false,
    )?;
    Ok(LIVE.register(
        BufferDescriptor {
            buffer: raw.buffer,
            memory: raw.memory,
        },
        Buffer {
            buffer: raw.buffer,
            memory: raw.memory,
            device_id,
            nbytes,
        },
    ))
}

/// Releases a descriptor from [`alloc`] and its buffer, after the work queued on its device
/// has finished (as TVM's `FreeDataSpace` synchronizes first). A pointer that is not a live
/// descriptor is refused and left alone.
///
/// # Safety
/// Nothing uses the buffer afterwards.
pub unsafe fn free(desc: *mut BufferDescriptor) -> Result<()> {
    // SAFETY: per the contract.
    let b = unsafe { LIVE.unregister(desc)? };
    let ctx = context()?;
    let dev = ctx.device(b.device_id)?;
    // Commands recorded so far may use the buffer: run them first.
    let synced = dev.stream.lock().sync(dev);
    let mut raw = RawBuffer {
        buffer: b.buffer,
        memory: b.memory,
        size: b.nbytes,
        mapped: std::ptr::null_mut(),
    };
    // SAFETY: made by `alloc`, released once here; no pending command uses it (synced).
    unsafe { raw.destroy(dev) };
    synced
}

impl Recorded for Buffer {
    fn device_id(&self) -> i32 {
        self.device_id
    }

    fn nbytes(&self) -> usize {
        self.nbytes
    }
}

/// What `desc` is, or an error saying it is not a live descriptor.
pub fn lookup(desc: *const c_void, what: &str) -> Result<Buffer> {
    LIVE.lookup(desc, what)
}

/// How many Vulkan buffers tvmrt holds now (tensors, storage, workspaces): what a leak check
/// compares before and after.
pub fn live_count() -> usize {
    LIVE.len()
}
