//! One kernel of a module: its arguments, its pipelines by device, and its launch.

use std::ffi::CString;
use std::sync::Arc;

use ash::vk;
use parking_lot::Mutex;

use crate::device::launch::{ArgKind, LaunchConfig};
use crate::device::vulkan::buffer::LIVE;
use crate::device::vulkan::context::{context, existing};
use crate::device::vulkan::device_api::current_device;
use crate::error::{Error, Result};
use crate::value::AnyView;

use super::pipeline::Pipeline;
use super::*;

/// A launch's descriptor infos, one per binding: on the stack for up to 16 bindings.
// The large variant is the point: it lives on the launch's stack, never boxed or moved.
#[allow(clippy::large_enum_variant)]
pub(super) enum Infos {
    Stack([vk::DescriptorBufferInfo; 16], usize),
    Heap(Vec<vk::DescriptorBufferInfo>),
}

impl Infos {
    pub(super) fn new(capacity: usize) -> Infos {
        if capacity <= 16 {
            Infos::Stack([vk::DescriptorBufferInfo::default(); 16], 0)
        } else {
            Infos::Heap(Vec::with_capacity(capacity))
        }
    }

    pub(super) fn push(&mut self, info: vk::DescriptorBufferInfo) {
        match self {
            Infos::Stack(a, n) if *n < a.len() => {
                a[*n] = info;
                *n += 1;
            }
            Infos::Stack(a, n) => {
                let mut v = a[..*n].to_vec();
                v.push(info);
                *self = Infos::Heap(v);
            }
            Infos::Heap(v) => v.push(info),
        }
    }
}

impl std::ops::Deref for Infos {
    type Target = [vk::DescriptorBufferInfo];
    fn deref(&self) -> &[vk::DescriptorBufferInfo] {
        match self {
            Infos::Stack(a, n) => &a[..*n],
            Infos::Heap(v) => v,
        }
    }
}

/// One kernel: what its function needs to launch it, and its per-device pipelines.
pub(super) struct Kernel {
    pub(super) name: String,
    pub(super) c_name: CString,
    pub(super) shader: Shader,
    pub(super) args: Vec<ArgKind>,
    pub(super) num_buffers: usize,
    /// The workgroup size the shader declares, when literal.
    pub(super) local_size: Option<[u32; 3]>,
    /// The SPIR-V capabilities the shader declares (`OpCapability`).
    pub(super) capabilities: Vec<u32>,
    pub(super) launch: LaunchConfig,
    /// One slot per Vulkan device, filled at the first launch there.
    pub(super) pipelines: Mutex<Vec<Option<Arc<Pipeline>>>>,
}

impl Drop for Kernel {
    fn drop(&mut self) {
        let Some(ctx) = existing() else { return };
        for (id, p) in self.pipelines.get_mut().drain(..).enumerate() {
            let (Some(p), Some(d)) = (p, ctx.devices.get(id)) else {
                continue;
            };
            // Launches recorded with the pipeline run first.
            if let Err(e) = d.stream.lock().sync(d) {
                log::warn!("Vulkan kernel `{}`: sync before release: {e}", self.name);
            }
            // SAFETY: synced: no pending command uses it; released once, here.
            unsafe { p.destroy(&d.device) };
        }
    }
}

impl Kernel {
    pub(super) fn use_ubo(&self) -> bool {
        self.shader.flag & FLAG_USE_UBO != 0
    }

    pub(super) fn num_scalars(&self) -> usize {
        self.args.len() - self.num_buffers
    }

    /// Packs the scalars into `out` as TVM's `ArgUnion64` slots, one 8-byte slot each
    /// (`pack_args.h`: 32-bit values narrowed into the low half; `out` holds exactly that many).
    fn pack_scalars(&self, args: &[AnyView<'_>], out: &mut [u8]) -> Result<()> {
        let mut slots = out.chunks_exact_mut(SLOT);
        for (i, (kind, v)) in self.args.iter().zip(args).enumerate() {
            let what = || format!("Vulkan kernel `{}` argument {i}", self.name);
            if *kind == ArgKind::Buffer {
                continue;
            }
            let slot = kind.scalar_slot(v, &what)?;
            if let Some(out) = slots.next() {
                out.copy_from_slice(&slot.to_le_bytes());
            }
        }
        Ok(())
    }

    /// Records the kernel's dispatch with a host launcher's arguments.
    pub(super) fn launch(&self, args: &[AnyView<'_>]) -> Result<()> {
        let work = self.launch.extract_call("Vulkan", &self.name, args)?;
        let ctx = context()?;
        let device_id = current_device();
        let d = ctx.device(device_id)?;
        let limits = &d.props.limits;
        let mut grid = [0u32; 3];
        for (i, &g) in work.grid.iter().enumerate() {
            let max = limits.max_compute_work_group_count[i];
            grid[i] = u32::try_from(g).ok().filter(|&g| g <= max).ok_or_else(|| {
                Error::value(format!(
                    "Vulkan kernel `{}`: a grid of {g} workgroups in dimension {i} exceeds \
                     vulkan:{device_id}'s {max}",
                    self.name
                ))
            })?;
        }
        // On the stack when they fit (every push-constant kernel: at most 128 bytes), so a
        // launch allocates nothing.
        let n_bytes = self.num_scalars() * SLOT;
        let (mut stack, mut heap) = ([0u8; 128], Vec::new());
        let scalars: &mut [u8] = if n_bytes <= stack.len() {
            &mut stack[..n_bytes]
        } else {
            heap.resize(n_bytes, 0);
            &mut heap
        };
        self.pack_scalars(args, scalars)?;
        let scalars: &[u8] = scalars;
        let pipe = self.pipeline(ctx, device_id)?;
        // Held until the dispatch is recorded: no buffer argument can be freed in between
        // (a free waits for this lock, then syncs the stream before destroying the buffer).
        let live = LIVE.lock();
        let mut infos = Infos::new(self.num_buffers + 1);
        for (i, v) in args[..self.num_buffers].iter().enumerate() {
            let what = || format!("Vulkan kernel `{}` argument {i}", self.name);
            let b = live.kernel_arg(v, crate::device::vulkan::DEVICE_TYPE, device_id, what)?;
            infos.push(vk::DescriptorBufferInfo {
                buffer: b.buffer,
                offset: 0,
                range: vk::WHOLE_SIZE,
            });
        }
        let mut s = d.stream.lock();
        let ubo = self.use_ubo().then_some(scalars);
        let set_layout = (!d.use_push_descriptors()).then_some(pipe.set_layout);
        let (set, slot) = s.prepare(d, set_layout, ubo)?;
        if let Some((buffer, offset)) = slot {
            infos.push(vk::DescriptorBufferInfo {
                buffer,
                offset,
                range: scalars.len().max(1) as u64,
            });
        }
        let cmd = s.cmd(d)?;
        let dd = &d.device;
        // SAFETY: a recording command buffer of the device's stream (its lock held), the
        // pipeline and layout of this device, descriptors of live buffers of this device (the
        // registry's lock held), push constants of the layout's declared size; the push
        // template reads `infos`, one entry per binding, alive across the call.
        unsafe {
            dd.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipe.pipeline);
            match (&d.push, set) {
                (_, Some(set)) => {
                    let writes: Vec<vk::WriteDescriptorSet<'_>> = infos
                        .iter()
                        .enumerate()
                        .map(|(i, info)| {
                            let ty = if i == self.num_buffers {
                                vk::DescriptorType::UNIFORM_BUFFER
                            } else {
                                vk::DescriptorType::STORAGE_BUFFER
                            };
                            vk::WriteDescriptorSet::default()
                                .dst_set(set)
                                .dst_binding(i as u32)
                                .descriptor_type(ty)
                                .buffer_info(std::slice::from_ref(info))
                        })
                        .collect();
                    if !writes.is_empty() {
                        dd.update_descriptor_sets(&writes, &[]);
                    }
                    dd.cmd_bind_descriptor_sets(
                        cmd,
                        vk::PipelineBindPoint::COMPUTE,
                        pipe.layout,
                        0,
                        &[set],
                        &[],
                    );
                }
                (Some(push), None) => {
                    if !infos.is_empty() {
                        // The template reads one `DescriptorBufferInfo` per binding, in order:
                        // `infos` holds exactly the pipeline's bindings.
                        push.cmd_push_descriptor_set_with_template(
                            cmd,
                            pipe.template,
                            pipe.layout,
                            0,
                            infos.as_ptr().cast(),
                        );
                    }
                }
                (None, None) => unreachable!("a set is allocated without push descriptors"),
            }
            if !self.use_ubo() && !scalars.is_empty() {
                dd.cmd_push_constants(cmd, pipe.layout, vk::ShaderStageFlags::COMPUTE, 0, scalars);
            }
            dd.cmd_dispatch(cmd, grid[0], grid[1], grid[2]);
        }
        s.barrier(d)?;
        s.launches += 1;
        drop(s);
        drop(live);
        Ok(())
    }
}
