//! A kernel's compute pipeline on one device: built at its first launch there, checked
//! against the device's features.

use std::sync::Arc;

use ash::vk;

use crate::device::vulkan::context::{vk_error, Context, Device};
use crate::error::{Error, Result};

use super::kernel::Kernel;
use super::*;

/// A kernel's pipeline on one device.
pub(super) struct Pipeline {
    shader: vk::ShaderModule,
    pub(super) set_layout: vk::DescriptorSetLayout,
    pub(super) layout: vk::PipelineLayout,
    pub(super) pipeline: vk::Pipeline,
    /// With push descriptors: the template that pushes a launch's `DescriptorBufferInfo`s,
    /// one per binding in binding order (TVM's immediate path), so a launch builds no
    /// `WriteDescriptorSet`s.
    pub(super) template: vk::DescriptorUpdateTemplate,
}

impl Pipeline {
    /// Destroys what was made (null handles are skipped by Vulkan).
    ///
    /// # Safety
    /// No pending command uses it.
    pub(super) unsafe fn destroy(&self, d: &ash::Device) {
        // SAFETY: per the contract.
        unsafe {
            d.destroy_pipeline(self.pipeline, None);
            d.destroy_descriptor_update_template(self.template, None);
            d.destroy_pipeline_layout(self.layout, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
            d.destroy_shader_module(self.shader, None);
        }
    }
}

/// The SPIR-V capabilities that need a device feature (the SPIR-V spec's capability numbers,
/// the features TVM's codegen asks for): a driver given a shader it has no feature for may
/// crash (SwiftShader stops on float64 with an illegal instruction), so such kernels are
/// refused by name instead.
fn missing_feature(capabilities: &[u32], f: &vk::PhysicalDeviceFeatures) -> Option<&'static str> {
    capabilities.iter().find_map(|&c| match c {
        10 if f.shader_float64 != vk::TRUE => Some("Float64 (shaderFloat64)"),
        11 if f.shader_int64 != vk::TRUE => Some("Int64 (shaderInt64)"),
        22 if f.shader_int16 != vk::TRUE => Some("Int16 (shaderInt16)"),
        _ => None,
    })
}

impl Kernel {
    /// The pipeline on device `id`, built the first time.
    pub(super) fn pipeline(&self, ctx: &Context, id: i32) -> Result<Arc<Pipeline>> {
        let mut slots = self.pipelines.lock();
        if slots.len() < ctx.devices.len() {
            slots.resize(ctx.devices.len(), None);
        }
        let slot = &mut slots[id as usize];
        if let Some(p) = slot {
            return Ok(p.clone());
        }
        let d = ctx.device(id)?;
        let mut p = Pipeline {
            shader: vk::ShaderModule::null(),
            set_layout: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
            template: vk::DescriptorUpdateTemplate::null(),
        };
        match self.build(d, id, &mut p) {
            Ok(()) => {
                let p = Arc::new(p);
                *slot = Some(p.clone());
                Ok(p)
            }
            Err(e) => {
                // SAFETY: made above, never used by a command.
                unsafe { p.destroy(&d.device) };
                Err(e)
            }
        }
    }

    fn build(&self, d: &Device, id: i32, p: &mut Pipeline) -> Result<()> {
        let dd = &d.device;
        let scalar_bytes = self.num_scalars() * SLOT;
        let max_push = d.props.limits.max_push_constants_size as usize;
        if !self.use_ubo() && scalar_bytes > max_push {
            crate::bail_value!(
                "Vulkan kernel `{}` takes {scalar_bytes} bytes of push constants, but \
                 vulkan:{id} ({}) allows {max_push}: rebuild it with a smaller \
                 max_push_constants_size in the target",
                self.name,
                d.name
            );
        }
        if let Some(what) = missing_feature(&self.capabilities, &d.features) {
            crate::bail_value!(
                "Vulkan kernel `{}` does not run on vulkan:{id} ({}): its SPIR-V uses {what}, \
                 which the device does not support",
                self.name,
                d.name
            );
        }
        if let Some(size) = self.local_size {
            // Past these limits a driver's behaviour is undefined (often a crash): refuse.
            let max = d.props.limits.max_compute_work_group_size;
            let total = size.iter().map(|&x| x as u64).product::<u64>();
            let max_total = d.props.limits.max_compute_work_group_invocations as u64;
            if size.iter().zip(max).any(|(&s, m)| s > m) || total > max_total {
                crate::bail_value!(
                    "Vulkan kernel `{}` does not run on vulkan:{id} ({}): its workgroup of \
                     {size:?} threads exceeds the device's limits ({max:?}, {max_total} in all)",
                    self.name,
                    d.name
                );
            }
        }
        let info = vk::ShaderModuleCreateInfo::default().code(&self.shader.words);
        // SAFETY: well-formed SPIR-V words (checked at load); the info lives across the call.
        p.shader = unsafe { dd.create_shader_module(&info, None) }
            .map_err(|r| vk_error(r, &format!("vkCreateShaderModule (kernel `{}`)", self.name)))?;
        let mut bindings: Vec<vk::DescriptorSetLayoutBinding> = (0..self.num_buffers)
            .map(|i| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        if self.use_ubo() {
            bindings.push(
                vk::DescriptorSetLayoutBinding::default()
                    .binding(self.num_buffers as u32)
                    .descriptor_type(vk::DescriptorType::UNIFORM_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE),
            );
        }
        let flags = if d.use_push_descriptors() {
            vk::DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR_KHR
        } else {
            vk::DescriptorSetLayoutCreateFlags::empty()
        };
        let info = vk::DescriptorSetLayoutCreateInfo::default()
            .flags(flags)
            .bindings(&bindings);
        // SAFETY: a live device; the info lives across the call.
        p.set_layout = unsafe { dd.create_descriptor_set_layout(&info, None) }
            .map_err(|r| vk_error(r, "vkCreateDescriptorSetLayout"))?;
        let layouts = [p.set_layout];
        let ranges = [vk::PushConstantRange {
            stage_flags: vk::ShaderStageFlags::COMPUTE,
            offset: 0,
            size: scalar_bytes as u32,
        }];
        let mut info = vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts);
        if scalar_bytes > 0 && !self.use_ubo() {
            info = info.push_constant_ranges(&ranges);
        }
        // SAFETY: as above.
        p.layout = unsafe { dd.create_pipeline_layout(&info, None) }
            .map_err(|r| vk_error(r, "vkCreatePipelineLayout"))?;
        if d.use_push_descriptors() && !bindings.is_empty() {
            let stride = std::mem::size_of::<vk::DescriptorBufferInfo>();
            let entries: Vec<vk::DescriptorUpdateTemplateEntry> = bindings
                .iter()
                .enumerate()
                .map(|(i, b)| vk::DescriptorUpdateTemplateEntry {
                    dst_binding: b.binding,
                    dst_array_element: 0,
                    descriptor_count: 1,
                    descriptor_type: b.descriptor_type,
                    offset: i * stride,
                    stride,
                })
                .collect();
            let info = vk::DescriptorUpdateTemplateCreateInfo::default()
                .descriptor_update_entries(&entries)
                .template_type(vk::DescriptorUpdateTemplateType::PUSH_DESCRIPTORS_KHR)
                .descriptor_set_layout(p.set_layout)
                .pipeline_bind_point(vk::PipelineBindPoint::COMPUTE)
                .pipeline_layout(p.layout)
                .set(0);
            // SAFETY: as above; the entries live across the call.
            p.template = unsafe { dd.create_descriptor_update_template(&info, None) }
                .map_err(|r| vk_error(r, "vkCreateDescriptorUpdateTemplate"))?;
        }
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(p.shader)
            .name(&self.c_name);
        let info = [vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(p.layout)];
        // SAFETY: as above.
        p.pipeline = unsafe { dd.create_compute_pipelines(vk::PipelineCache::null(), &info, None) }
            .map_err(|(_, r)| {
                Error::new(
                    "InternalError",
                    format!(
                        "Vulkan kernel `{}` does not build for vulkan:{id} ({}): \
                         vkCreateComputePipelines returned {r:?} ({r})",
                        self.name, d.name
                    ),
                )
            })?[0];
        log::debug!("built Vulkan kernel `{}` for vulkan:{id}", self.name);
        Ok(())
    }
}
