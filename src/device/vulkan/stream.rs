//! A device's stream (TVM's `VulkanStream`): one command buffer that kernel launches and
//! device-to-device copies are recorded into, submitted to the device's queue and waited for
//! at a sync (`TVMSynchronize`, a copy to or from the host, a buffer freed).
//!
//! What a recorded launch needs until its submission has finished lives here too and is
//! recycled at each sync: descriptor sets (the descriptor-set path allocates one per launch
//! from the stream's pool), uniform-buffer slots (kernels with many scalars get their own slot
//! of the stream's uniform arena per launch, so launches recorded back to back never share
//! one), and the staging buffer host copies go through.

use ash::vk;

use super::buffer::RawBuffer;
use super::context::{vk_error, Device};
use crate::error::Result;

/// Descriptor sets the pool holds before a launch must wait for a sync.
const MAX_SETS: u32 = 1024;
/// Bytes of the uniform arena (kernels' scalars when they are too many for push constants).
const UBO_ARENA: usize = 64 * 1024;
/// The largest staging buffer kept between copies; larger copies go in pieces.
pub const STAGING_CHUNK: usize = 16 << 20;

/// What [`Stream::prepare`] gives a launch: its descriptor set (the descriptor-set path) and
/// its uniform slot (buffer, offset).
pub type Prepared = (Option<vk::DescriptorSet>, Option<(vk::Buffer, u64)>);

/// The recording state of one device.
pub struct Stream {
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    /// Whether `cmd` has been begun (and so holds commands to submit).
    recording: bool,
    descriptors: vk::DescriptorPool,
    ubo: Option<RawBuffer>,
    ubo_used: usize,
    staging: Option<RawBuffer>,
    /// Launches recorded since the last sync.
    pub launches: usize,
}

impl Stream {
    /// A stream on `device`'s queue family `family`.
    pub fn new(device: &ash::Device, family: u32) -> Result<Stream> {
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(family)
            .flags(vk::CommandPoolCreateFlags::TRANSIENT);
        // SAFETY: a live device; infos live across each call. Objects made before a failure
        // are destroyed on the error paths.
        unsafe {
            let pool = device
                .create_command_pool(&info, None)
                .map_err(|r| vk_error(r, "vkCreateCommandPool"))?;
            let alloc = vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1);
            let cmd = match device.allocate_command_buffers(&alloc) {
                Ok(v) => v[0],
                Err(r) => {
                    device.destroy_command_pool(pool, None);
                    return Err(vk_error(r, "vkAllocateCommandBuffers"));
                }
            };
            let fence = match device.create_fence(&vk::FenceCreateInfo::default(), None) {
                Ok(f) => f,
                Err(r) => {
                    device.destroy_command_pool(pool, None);
                    return Err(vk_error(r, "vkCreateFence"));
                }
            };
            let sizes = [
                vk::DescriptorPoolSize {
                    ty: vk::DescriptorType::STORAGE_BUFFER,
                    descriptor_count: MAX_SETS * 8,
                },
                vk::DescriptorPoolSize {
                    ty: vk::DescriptorType::UNIFORM_BUFFER,
                    descriptor_count: MAX_SETS,
                },
            ];
            let dinfo = vk::DescriptorPoolCreateInfo::default()
                .max_sets(MAX_SETS)
                .pool_sizes(&sizes);
            let descriptors = match device.create_descriptor_pool(&dinfo, None) {
                Ok(p) => p,
                Err(r) => {
                    device.destroy_fence(fence, None);
                    device.destroy_command_pool(pool, None);
                    return Err(vk_error(r, "vkCreateDescriptorPool"));
                }
            };
            Ok(Stream {
                pool,
                cmd,
                fence,
                recording: false,
                descriptors,
                ubo: None,
                ubo_used: 0,
                staging: None,
                launches: 0,
            })
        }
    }

    /// The command buffer, begun if it was not.
    pub fn cmd(&mut self, dev: &Device) -> Result<vk::CommandBuffer> {
        if !self.recording {
            let info = vk::CommandBufferBeginInfo::default()
                .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
            // SAFETY: the buffer is not recording and not pending (every submission is waited
            // for), and this stream's lock serializes its use.
            unsafe { dev.device.begin_command_buffer(self.cmd, &info) }
                .map_err(|r| vk_error(r, "vkBeginCommandBuffer"))?;
            self.recording = true;
        }
        Ok(self.cmd)
    }

    /// Whether commands wait to be submitted.
    pub fn has_work(&self) -> bool {
        self.recording
    }

    /// Records a barrier making what compute shaders and transfers wrote so far visible to the
    /// compute shaders and transfers that follow (TVM puts one after every dispatch).
    pub fn barrier(&mut self, dev: &Device) -> Result<()> {
        let cmd = self.cmd(dev)?;
        let access = vk::AccessFlags::SHADER_READ
            | vk::AccessFlags::SHADER_WRITE
            | vk::AccessFlags::TRANSFER_READ
            | vk::AccessFlags::TRANSFER_WRITE;
        let stages = vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER;
        let barrier = [vk::MemoryBarrier::default()
            .src_access_mask(access)
            .dst_access_mask(access)];
        // SAFETY: a recording command buffer of this stream.
        unsafe {
            dev.device.cmd_pipeline_barrier(
                cmd,
                stages,
                stages,
                vk::DependencyFlags::empty(),
                &barrier,
                &[],
                &[],
            )
        };
        Ok(())
    }

    /// Submits what was recorded and waits for it; recycles descriptor sets and uniform slots.
    pub fn sync(&mut self, dev: &Device) -> Result<()> {
        if !self.recording {
            return Ok(());
        }
        self.recording = false;
        self.launches = 0;
        let d = &dev.device;
        // SAFETY: the command buffer is recording (ended here), submitted to the device's
        // queue under this stream's lock and waited for before anything it uses is reset.
        let submitted = unsafe {
            d.end_command_buffer(self.cmd)
                .map_err(|r| vk_error(r, "vkEndCommandBuffer"))
                .and_then(|()| {
                    let cmds = [self.cmd];
                    let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
                    d.queue_submit(dev.queue, &submit, self.fence)
                        .map_err(|r| vk_error(r, "vkQueueSubmit"))
                })
                .and_then(|()| {
                    d.wait_for_fences(&[self.fence], true, u64::MAX)
                        .map_err(|r| vk_error(r, "vkWaitForFences"))
                })
        };
        // SAFETY: nothing of this stream is pending any more (waited for, or never submitted).
        let reset = unsafe {
            let _ = d.reset_fences(&[self.fence]);
            d.reset_command_pool(self.pool, vk::CommandPoolResetFlags::empty())
                .map_err(|r| vk_error(r, "vkResetCommandPool"))
                .and_then(|()| {
                    d.reset_descriptor_pool(self.descriptors, vk::DescriptorPoolResetFlags::empty())
                        .map_err(|r| vk_error(r, "vkResetDescriptorPool"))
                })
        };
        self.ubo_used = 0;
        submitted.and(reset)
    }

    /// What one launch needs besides its command: a descriptor set of `layout` (the
    /// descriptor-set path) and a uniform slot holding `ubo` (many scalars), both valid until
    /// the next sync. Makes room first (running the recorded launches when the pool or the
    /// arena is full), so neither is recycled before this launch is recorded.
    pub fn prepare(
        &mut self,
        dev: &Device,
        layout: Option<vk::DescriptorSetLayout>,
        ubo: Option<&[u8]>,
    ) -> Result<Prepared> {
        if let Some(bytes) = ubo {
            self.reserve_uniform(dev, bytes.len())?;
        }
        let set = match layout {
            None => None,
            Some(l) => Some(match self.try_descriptor_set(dev, l)? {
                Some(set) => set,
                None => {
                    // The pool is full of sets of recorded launches: run them, reuse it.
                    self.sync(dev)?;
                    self.try_descriptor_set(dev, l)?.ok_or_else(|| {
                        vk_error(
                            vk::Result::ERROR_OUT_OF_POOL_MEMORY,
                            "vkAllocateDescriptorSets",
                        )
                    })?
                }
            }),
        };
        let slot = ubo.map(|bytes| self.write_uniform(dev, bytes));
        Ok((set, slot))
    }

    fn try_descriptor_set(
        &mut self,
        dev: &Device,
        layout: vk::DescriptorSetLayout,
    ) -> Result<Option<vk::DescriptorSet>> {
        let layouts = [layout];
        let info = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(self.descriptors)
            .set_layouts(&layouts);
        // SAFETY: the pool is this stream's, used under its lock.
        match unsafe { dev.device.allocate_descriptor_sets(&info) } {
            Ok(v) => Ok(Some(v[0])),
            Err(vk::Result::ERROR_OUT_OF_POOL_MEMORY | vk::Result::ERROR_FRAGMENTED_POOL) => {
                Ok(None)
            }
            Err(r) => Err(vk_error(r, "vkAllocateDescriptorSets")),
        }
    }

    fn uniform_align(dev: &Device) -> usize {
        (dev.props.limits.min_uniform_buffer_offset_alignment as usize).max(16)
    }

    /// Makes room for a slot of `nbytes` in the uniform arena.
    fn reserve_uniform(&mut self, dev: &Device, nbytes: usize) -> Result<()> {
        let need = nbytes.max(1);
        let at = self.ubo_used.next_multiple_of(Self::uniform_align(dev));
        let cap = self.ubo.map_or(0, |u| u.size);
        if at + need <= cap {
            return Ok(());
        }
        // Full (or too small for this launch): run the recorded launches, start over.
        self.sync(dev)?;
        if need > cap {
            if let Some(mut old) = self.ubo.take() {
                // SAFETY: synced: no pending command uses it.
                unsafe { old.destroy(dev) };
            }
            self.ubo = Some(RawBuffer::new(
                dev,
                need.max(UBO_ARENA),
                vk::BufferUsageFlags::UNIFORM_BUFFER,
                vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
                true,
            )?);
        }
        Ok(())
    }

    /// Takes the next slot of the arena (room made by `reserve_uniform`) and writes `bytes`.
    fn write_uniform(&mut self, dev: &Device, bytes: &[u8]) -> (vk::Buffer, u64) {
        let at = self.ubo_used.next_multiple_of(Self::uniform_align(dev));
        let ubo = self.ubo.expect("reserved");
        debug_assert!(at + bytes.len() <= ubo.size);
        // SAFETY: the arena is mapped, the slot lies inside it (reserved) and belongs to no
        // recorded launch (slots only grow until the next sync).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), ubo.mapped.add(at), bytes.len());
        }
        self.ubo_used = at + bytes.len().max(1);
        (ubo.buffer, at as u64)
    }

    /// The staging buffer, at least `nbytes` (at most [`STAGING_CHUNK`]) long. Call after a
    /// sync: nothing pending may use it.
    pub fn staging(&mut self, dev: &Device, nbytes: usize) -> Result<RawBuffer> {
        debug_assert!(!self.recording);
        match self.staging {
            Some(s) if s.size >= nbytes => Ok(s),
            _ => {
                if let Some(mut old) = self.staging.take() {
                    // SAFETY: nothing pending uses it (the caller synced).
                    unsafe { old.destroy(dev) };
                }
                let s = RawBuffer::new(
                    dev,
                    nbytes.next_power_of_two().clamp(64 * 1024, STAGING_CHUNK),
                    vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST,
                    vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
                    true,
                )?;
                self.staging = Some(s);
                Ok(s)
            }
        }
    }

    /// Destroys the stream's objects.
    ///
    /// # Safety
    /// Nothing of the stream is pending, and it is not used afterwards.
    pub unsafe fn destroy(&mut self, d: &ash::Device) {
        // SAFETY: per the contract.
        unsafe {
            for b in [self.ubo.take(), self.staging.take()].into_iter().flatten() {
                d.destroy_buffer(b.buffer, None);
                d.free_memory(b.memory, None);
            }
            d.destroy_descriptor_pool(self.descriptors, None);
            d.destroy_fence(self.fence, None);
            d.destroy_command_pool(self.pool, None);
        }
    }
}
