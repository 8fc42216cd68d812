//! The `vulkan` module kind (TVM `vulkan_module.cc`, `vulkan_wrapped_func.cc`): the device
//! half of a library TVM built for Vulkan, holding one SPIR-V shader per kernel; its functions
//! record the kernels' dispatches on the current device's stream.
//!
//! Payload (`SaveToBytes`, and `SaveToBinary` before TVM 0.21, the same bytes but for the
//! function table): `[String fmt = "vulkan"][Map<String, FunctionInfo>][shader map]`, a shader
//! being `u32 flag, u64 nwords, nwords x u32` SPIR-V words; flag bit 0 says the kernel's
//! scalars are in a uniform buffer instead of push constants. Up to TVM 0.23 the map holds the
//! shaders themselves (`unordered_map<string, SPIRVShader>`); from TVM 0.24 on it is a
//! `Map<String, Bytes>` whose values are the shaders serialized, so each shader comes after a
//! `u64` byte length (found by running libraries TVM's own SPIR-V codegen exported:
//! tests/fixtures/vulkan/tvm_codegen). Both are read, told apart per shader; the 0.24+ layout
//! is written. Map order is not guaranteed.
//!
//! Kernel ABI (TVM's SPIR-V code generator): the buffers come first, each a storage buffer at
//! descriptor set 0, binding i; then the scalars, each in an 8-byte slot (32-bit values in the
//! low half), as push constants, or in a uniform buffer at binding `num_buffers` when flag bit
//! 0 is set; the entry point is a `GLCompute` function named after the kernel, its workgroup
//! size fixed in the shader, and the grid the `blockIdx` extents of the launch arguments. A
//! barrier after each dispatch makes its writes visible to the next dispatch or copy.
//!
//! Each kernel's pipeline is built the first time it runs on a device and kept for that
//! device. Two launch paths, as in TVM: push descriptors (`VK_KHR_push_descriptor`, through a
//! descriptor update template made with the pipeline) where the
//! device has them, else one descriptor set per launch from the stream's pool (TVM's deferred
//! path; `TVM_VULKAN_DISABLE_PUSH_DESCRIPTOR=1` forces it).

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Arc;

use ash::vk;
use parking_lot::Mutex;

use super::buffer::LIVE;
use super::context::{context, existing, vk_error, Context, Device};
use super::device_api::current_device;
use crate::device::launch::{kernel_function, InfoFormat, LaunchConfig};
use crate::device::launch::{read_function_table, write_function_table, ArgKind, FunctionInfo};
use crate::device::payload::module_loaders;
use crate::device::DeviceModuleInfo;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::blob::{Reader, Writer};
use crate::module::{Module, ModuleKind};
use crate::value::AnyView;

/// The module kind (TVM's `VulkanModuleNode::kind`).
pub const KIND: &str = "vulkan";

/// The format TVM writes.
const FORMAT: &str = "vulkan";

/// SPIR-V's magic number, the first word of every module.
const SPIRV_MAGIC: u32 = 0x0723_0203;

/// Flag bit 0: the scalars are in a uniform buffer (TVM's `kUseUBO`).
const FLAG_USE_UBO: u32 = 1;

/// Bytes of each scalar's slot (TVM's `ArgUnion64`).
const SLOT: usize = 8;

/// One kernel's SPIR-V.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shader {
    /// TVM's metadata flags (bit 0: scalars in a uniform buffer).
    pub flag: u32,
    /// The SPIR-V words.
    pub words: Vec<u32>,
}

/// A kernel's pipeline on one device.
struct Pipeline {
    shader: vk::ShaderModule,
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    /// With push descriptors: the template that pushes a launch's `DescriptorBufferInfo`s,
    /// one per binding in binding order (TVM's immediate path), so a launch builds no
    /// `WriteDescriptorSet`s.
    template: vk::DescriptorUpdateTemplate,
}

impl Pipeline {
    /// Destroys what was made (null handles are skipped by Vulkan).
    ///
    /// # Safety
    /// No pending command uses it.
    unsafe fn destroy(&self, d: &ash::Device) {
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

/// A launch's descriptor infos, one per binding: on the stack for up to 16 bindings.
// The large variant is the point: it lives on the launch's stack, never boxed or moved.
#[allow(clippy::large_enum_variant)]
enum Infos {
    Stack([vk::DescriptorBufferInfo; 16], usize),
    Heap(Vec<vk::DescriptorBufferInfo>),
}

impl Infos {
    fn new(capacity: usize) -> Infos {
        if capacity <= 16 {
            Infos::Stack([vk::DescriptorBufferInfo::default(); 16], 0)
        } else {
            Infos::Heap(Vec::with_capacity(capacity))
        }
    }

    fn push(&mut self, info: vk::DescriptorBufferInfo) {
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
struct Kernel {
    name: String,
    c_name: CString,
    shader: Shader,
    args: Vec<ArgKind>,
    num_buffers: usize,
    /// The workgroup size the shader declares, when literal.
    local_size: Option<[u32; 3]>,
    /// The SPIR-V capabilities the shader declares (`OpCapability`).
    capabilities: Vec<u32>,
    launch: LaunchConfig,
    /// One slot per Vulkan device, filled at the first launch there.
    pipelines: Mutex<Vec<Option<Arc<Pipeline>>>>,
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

/// A loaded `vulkan` module.
pub struct VulkanModule {
    fmt: String,
    table: Vec<FunctionInfo>,
    shaders: Vec<(String, Shader)>,
    kernels: HashMap<String, Arc<Kernel>>,
}

impl std::fmt::Debug for VulkanModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VulkanModule")
            .field("fmt", &self.fmt)
            .field("kernels", &self.table.len())
            .finish()
    }
}

/// Whether the shader at `r` is in TVM 0.24+'s layout, the serialized shader as `Bytes` (a
/// `u64` byte length first), rather than the shader itself (TVM <= 0.23). The length is then
/// exactly `12 + 4 * nwords`; read the other way, the first `u64` would be a flag of 0 or 1
/// with a word count above it, which can never match.
fn length_prefixed(r: &Reader<'_>) -> bool {
    let mut p = r.clone();
    match (p.read_u64(), p.read_u32(), p.read_u64()) {
        (Ok(len), Ok(_flag), Ok(nwords)) => {
            nwords.checked_mul(4).and_then(|b| b.checked_add(12)) == Some(len)
        }
        _ => false,
    }
}

/// Reads the shader map, in either layout.
fn read_shaders(r: &mut Reader<'_>) -> Result<Vec<(String, Shader)>> {
    let n = r.read_u64()?;
    // Each entry holds at least a name length, a flag and a word count.
    if n > (r.remaining() / 20) as u64 {
        crate::bail_value!("shader map of {n} kernels but the payload ends first");
    }
    let mut out: Vec<(String, Shader)> = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let name = r.read_string()?.to_string();
        if length_prefixed(r) {
            r.read_u64()?;
        }
        let flag = r.read_u32()?;
        let nwords = r.read_u64()?;
        if nwords > (r.remaining() / 4) as u64 {
            crate::bail_value!("shader `{name}`: {nwords} SPIR-V words but the payload ends first");
        }
        let words = r
            .read_raw(nwords as usize * 4)?
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if out.iter().any(|(k, _)| *k == name) {
            crate::bail_value!("shader map lists `{name}` twice");
        }
        out.push((name, Shader { flag, words }));
    }
    Ok(out)
}

/// Writes a payload from its parts, as TVM 0.24+ does (each shader as `Bytes`).
pub fn write_payload(fmt: &str, table: &[FunctionInfo], shaders: &[(String, Shader)]) -> Vec<u8> {
    write_payload_in(fmt, table, shaders, true)
}

/// Writes a payload; `prefixed`: each shader after its byte length (TVM 0.24+), else bare
/// (TVM <= 0.23).
pub fn write_payload_in(
    fmt: &str,
    table: &[FunctionInfo],
    shaders: &[(String, Shader)],
    prefixed: bool,
) -> Vec<u8> {
    let mut w = Writer::new();
    w.write_string(fmt);
    write_function_table(&mut w, table);
    w.write_u64(shaders.len() as u64);
    for (name, s) in shaders {
        w.write_string(name);
        if prefixed {
            w.write_u64(12 + 4 * s.words.len() as u64);
        }
        w.write_u32(s.flag);
        w.write_u64(s.words.len() as u64);
        for &word in &s.words {
            w.write_u32(word);
        }
    }
    w.into_inner()
}

/// Checks a shader's structure: the SPIR-V header, every instruction's length, and a
/// `GLCompute` entry point named `name` (so a broken module is an error here rather than a
/// driver's crash). Returns the entry point's workgroup size (`LocalSize`), when literal, and
/// the capabilities the module declares.
fn check_spirv(name: &str, words: &[u32]) -> Result<(Option<[u32; 3]>, Vec<u32>)> {
    let bad = |why: &str| Error::value(format!("kernel `{name}`: invalid SPIR-V ({why})"));
    if words.len() < 5 {
        return Err(bad(&format!(
            "{} words, shorter than the header",
            words.len()
        )));
    }
    if words[0] != SPIRV_MAGIC {
        return Err(bad(&format!(
            "first word {:#010x}, not the magic number 0x07230203",
            words[0]
        )));
    }
    let mut at = 5;
    let mut entry = None;
    let mut sizes: Vec<(u32, [u32; 3])> = Vec::new();
    let mut capabilities = Vec::new();
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        let opcode = words[at] & 0xffff;
        if count == 0 || at + count > words.len() {
            return Err(bad(&format!("instruction at word {at} runs past the end")));
        }
        // OpEntryPoint: execution model, function id, name (NUL-terminated), interface ids.
        if opcode == 15 && count >= 4 && words[at + 1] == 5 {
            let bytes: Vec<u8> = words[at + 3..at + count]
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect();
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            if &bytes[..end] == name.as_bytes() {
                entry = Some(words[at + 2]);
            }
        }
        // OpCapability.
        if opcode == 17 && count == 2 {
            capabilities.push(words[at + 1]);
        }
        // OpExecutionMode %entry LocalSize x y z.
        if opcode == 16 && count == 6 && words[at + 2] == 17 {
            sizes.push((words[at + 1], [words[at + 3], words[at + 4], words[at + 5]]));
        }
        at += count;
    }
    let Some(entry) = entry else {
        return Err(bad(&format!("no GLCompute entry point named `{name}`")));
    };
    let size = sizes.iter().find(|(id, _)| *id == entry).map(|(_, s)| *s);
    Ok((size, capabilities))
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

impl VulkanModule {
    /// Reads a payload from the front of `bytes`; returns the module and the bytes it took.
    pub fn read(bytes: &[u8], format: InfoFormat) -> Result<(VulkanModule, usize)> {
        let mut r = Reader::new(bytes);
        let fmt = r.read_string()?.to_string();
        let table = read_function_table(&mut r, format)?;
        let shaders = read_shaders(&mut r)?;
        Ok((VulkanModule::new(fmt, table, shaders)?, r.position()))
    }

    /// A module from its parts, checked: the format is TVM's, every kernel of the table has a
    /// well-formed shader, launchable argument types (buffers first) and tags.
    pub fn new(
        fmt: String,
        table: Vec<FunctionInfo>,
        shaders: Vec<(String, Shader)>,
    ) -> Result<VulkanModule> {
        if fmt != FORMAT {
            crate::bail_value!(
                "unknown Vulkan module format `{fmt}` (TVM writes SPIR-V as `{FORMAT}`)"
            );
        }
        let mut kernels = HashMap::new();
        for f in &table {
            let shader = shaders
                .iter()
                .find(|(k, _)| *k == f.name)
                .map(|(_, s)| s.clone())
                .ok_or_else(|| {
                    Error::value(format!("the Vulkan module has no shader for `{}`", f.name))
                })?;
            let (local_size, capabilities) = check_spirv(&f.name, &shader.words)?;
            let args = f
                .arg_types
                .iter()
                .enumerate()
                .map(|(i, &t)| ArgKind::of(t, &f.name, i))
                .collect::<Result<Vec<_>>>()?;
            let num_buffers = args.iter().take_while(|&&k| k == ArgKind::Buffer).count();
            if args[num_buffers..].contains(&ArgKind::Buffer) {
                // TVM's NumBufferArgs: SPIR-V kernels take every buffer before any scalar.
                crate::bail_value!(
                    "kernel `{}`: a buffer argument follows a scalar one (Vulkan kernels take \
                     their buffers first)",
                    f.name
                );
            }
            let num_scalars = args.len() - num_buffers;
            if shader.flag & FLAG_USE_UBO == 0 && num_scalars * SLOT > 128 {
                log::debug!(
                    "kernel `{}` has {} bytes of push constants, more than the 128 every \
                     device has",
                    f.name,
                    num_scalars * SLOT
                );
            }
            let launch = LaunchConfig::new(&f.name, args.len(), &f.launch_param_tags)?;
            let c_name = CString::new(f.name.as_str()).map_err(|_| {
                Error::value(format!("kernel name `{}` contains a NUL byte", f.name))
            })?;
            kernels.insert(
                f.name.clone(),
                Arc::new(Kernel {
                    name: f.name.clone(),
                    c_name,
                    shader,
                    args,
                    num_buffers,
                    local_size,
                    capabilities,
                    launch,
                    pipelines: Mutex::new(Vec::new()),
                }),
            );
        }
        Ok(VulkanModule {
            fmt,
            table,
            shaders,
            kernels,
        })
    }

    /// The function table.
    pub fn functions(&self) -> &[FunctionInfo] {
        &self.table
    }

    /// What `tvmrt inspect` shows.
    pub fn describe(&self) -> DeviceModuleInfo {
        DeviceModuleInfo::new(self.fmt.clone(), &self.table)
    }
}

impl Kernel {
    fn use_ubo(&self) -> bool {
        self.shader.flag & FLAG_USE_UBO != 0
    }

    fn num_scalars(&self) -> usize {
        self.args.len() - self.num_buffers
    }

    /// The pipeline on device `id`, built the first time.
    fn pipeline(&self, ctx: &Context, id: i32) -> Result<Arc<Pipeline>> {
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

    /// Packs the scalars as TVM's `ArgUnion64` slots (`pack_args.h`: 32-bit values narrowed
    /// into the low half).
    /// Writes the scalars into `out`, one 8-byte slot each (`out` holds exactly that many).
    fn pack_scalars(&self, args: &[AnyView<'_>], out: &mut [u8]) -> Result<()> {
        let mut slots = out.chunks_exact_mut(SLOT);
        for (i, (kind, v)) in self.args.iter().zip(args).enumerate() {
            let what = || format!("Vulkan kernel `{}` argument {i}", self.name);
            let mut slot = [0u8; SLOT];
            match kind {
                ArgKind::Buffer => continue,
                ArgKind::I32 | ArgKind::U32 | ArgKind::I64 => {
                    let x = v.as_i64().ok_or_else(|| v.type_mismatch(&what(), "int"))?;
                    if *kind == ArgKind::I64 {
                        slot = x.to_le_bytes();
                    } else {
                        slot[..4].copy_from_slice(&(x as i32).to_le_bytes());
                    }
                }
                ArgKind::F32 | ArgKind::F64 => {
                    let x = v
                        .as_f64()
                        .ok_or_else(|| v.type_mismatch(&what(), "float"))?;
                    if *kind == ArgKind::F64 {
                        slot = x.to_le_bytes();
                    } else {
                        slot[..4].copy_from_slice(&(x as f32).to_le_bytes());
                    }
                }
            }
            if let Some(out) = slots.next() {
                out.copy_from_slice(&slot);
            }
        }
        Ok(())
    }

    /// Records the kernel's dispatch with a host launcher's arguments.
    fn launch(&self, args: &[AnyView<'_>]) -> Result<()> {
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
            let b = live.kernel_arg(v, super::DEVICE_TYPE, device_id, what)?;
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

impl ModuleKind for VulkanModule {
    fn kind(&self) -> &str {
        KIND
    }

    fn get_function(&self, this: &Module, name: &str) -> Result<Option<Function>> {
        Ok(self.kernels.get(name).map(|k| {
            let k = k.clone();
            kernel_function(this, move |args| k.launch(args))
        }))
    }

    fn implements_function(&self, _this: &Module, name: &str) -> bool {
        self.kernels.contains_key(name)
    }

    fn save_to_bytes(&self) -> Result<Vec<u8>> {
        Ok(write_payload(&self.fmt, &self.table, &self.shaders))
    }

    /// Binary-serializable and runnable.
    fn property_mask(&self) -> i32 {
        3
    }
}

/// The loaders, with TVM's names: `ffi.Module.load_from_bytes.vulkan` (TVM 0.21+: exactly
/// the payload) and `runtime.module.loadbinary_vulkan` (TVM <= 0.20 blobs: the payload at the
/// front of the rest of the blob, with the function table of that era).
pub fn loaders() -> Vec<(&'static str, Function)> {
    module_loaders(
        [
            "ffi.Module.load_from_bytes.vulkan",
            "runtime.module.loadbinary_vulkan",
        ],
        "Vulkan module payload",
        |bytes, format| {
            let (m, n) = VulkanModule::read(bytes, format)?;
            Ok((Module::new(m), n))
        },
    )
}

/// `tvmrt inspect`'s view of a `vulkan` module.
pub fn describe(m: &Module) -> Option<DeviceModuleInfo> {
    m.downcast::<VulkanModule>().map(VulkanModule::describe)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{dtype, dtypes};

    #[test]
    fn descriptor_infos_move_to_the_heap_past_16() {
        for cap in [3, 16, 17] {
            let mut infos = Infos::new(cap);
            for i in 0..20u64 {
                infos.push(vk::DescriptorBufferInfo {
                    buffer: vk::Buffer::null(),
                    offset: i,
                    range: 1,
                });
            }
            let offsets: Vec<u64> = infos.iter().map(|i| i.offset).collect();
            assert_eq!(offsets, (0..20).collect::<Vec<_>>());
        }
    }

    /// A minimal header and `OpEntryPoint GLCompute %1 "k"`.
    fn spirv(name: &str) -> Vec<u32> {
        let mut words = vec![SPIRV_MAGIC, 0x0001_0000, 0, 10, 0];
        let mut bytes = name.as_bytes().to_vec();
        bytes.push(0);
        while !bytes.len().is_multiple_of(4) {
            bytes.push(0);
        }
        let name_words: Vec<u32> = bytes
            .chunks(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        words.push(((3 + name_words.len() as u32) << 16) | 15);
        words.extend([5, 1]);
        words.extend(name_words);
        words
    }

    fn table() -> Vec<FunctionInfo> {
        vec![FunctionInfo {
            name: "k".into(),
            arg_types: vec![dtype(3, 64, 1), dtypes::INT32],
            launch_param_tags: vec!["blockIdx.x".into(), "threadIdx.x".into()],
            arg_extra_tags: vec![0, 0],
        }]
    }

    #[test]
    fn payload_round_trip_and_refusals() {
        let shaders = vec![(
            "k".to_string(),
            Shader {
                flag: 0,
                words: spirv("k"),
            },
        )];
        let m = VulkanModule::new("vulkan".into(), table(), shaders.clone()).unwrap();
        let bytes = m.save_to_bytes().unwrap();
        let (back, n) = VulkanModule::read(&bytes, InfoFormat::WithExtraTags).unwrap();
        assert_eq!(n, bytes.len());
        assert_eq!(back.functions(), m.functions());
        assert_eq!(back.shaders, shaders);
        // TVM <= 0.23's layout (no byte length before each shader) reads the same, with a
        // flag set too; it is 8 bytes shorter per shader.
        let mut flagged = shaders.clone();
        flagged[0].1.flag = 1;
        let bare = write_payload_in("vulkan", &table(), &flagged, false);
        assert_eq!(bare.len() + 8, bytes.len());
        let (old, n) = VulkanModule::read(&bare, InfoFormat::WithExtraTags).unwrap();
        assert_eq!(n, bare.len());
        assert_eq!(old.shaders, flagged);
        for cut in 0..bare.len() {
            assert!(VulkanModule::read(&bare[..cut], InfoFormat::WithExtraTags).is_err());
        }
        for cut in 0..bytes.len() {
            assert!(
                VulkanModule::read(&bytes[..cut], InfoFormat::WithExtraTags).is_err(),
                "cut at {cut}"
            );
        }
        let e = VulkanModule::new("spv".into(), table(), shaders.clone()).unwrap_err();
        assert!(e.message.contains("unknown Vulkan module format"), "{e}");
        let e = VulkanModule::new("vulkan".into(), table(), vec![]).unwrap_err();
        assert!(e.message.contains("no shader for `k`"), "{e}");
        let other = vec![(
            "k".to_string(),
            Shader {
                flag: 0,
                words: spirv("other"),
            },
        )];
        let e = VulkanModule::new("vulkan".into(), table(), other).unwrap_err();
        assert!(
            e.message.contains("no GLCompute entry point named `k`"),
            "{e}"
        );
        let mut garbled = spirv("k");
        garbled[5] = 0xffff_0000 | 15;
        let e = check_spirv("k", &garbled).unwrap_err();
        assert!(e.message.contains("runs past the end"), "{e}");
        assert!(check_spirv("k", &[1, 2, 3, 4, 5]).is_err());
        let mut sized = spirv("k");
        sized.extend([(6 << 16) | 16, 1, 17, 64, 2, 1]);
        assert_eq!(check_spirv("k", &sized).unwrap().0, Some([64, 2, 1]));
        let mut bad = table();
        bad[0].arg_types = vec![dtypes::INT32, dtype(3, 64, 1)];
        let e = VulkanModule::new("vulkan".into(), bad, shaders).unwrap_err();
        assert!(e.message.contains("take their buffers first"), "{e}");
    }
}
