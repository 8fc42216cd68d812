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

mod kernel;
mod payload;
mod pipeline;

use kernel::Kernel;
use payload::{check_spirv, read_shaders};
pub use payload::{write_payload, write_payload_in};

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::device::launch::{kernel_by_name, InfoFormat, KernelSignature};
use crate::device::launch::{read_function_table, ArgKind, FunctionInfo};
use crate::device::payload::module_loaders;
use crate::device::DeviceModuleInfo;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::blob::Reader;
use crate::module::{Module, ModuleKind};

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
            let KernelSignature {
                args,
                launch,
                c_name,
            } = f.signature()?;
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

impl ModuleKind for VulkanModule {
    fn kind(&self) -> &str {
        KIND
    }

    fn get_function(&self, this: &Module, name: &str) -> Result<Option<Function>> {
        Ok(kernel_by_name(this, &self.kernels, name, Kernel::launch))
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
    use super::kernel::Infos;
    use super::*;
    use crate::dtype::{dtype, dtypes};
    use ash::vk;

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
