//! What every GPU-style back end shares about kernels TVM compiled: the function-info table of
//! a device module (TVM `src/runtime/metadata.h`, serialized as `include/tvm/support/serializer.h`
//! writes it), how a kernel's trailing arguments map to its launch extents (`LaunchParamConfig`,
//! `src/runtime/thread_storage_scope.h`), and how its scalar arguments are narrowed for the
//! device (`src/runtime/pack_args.h`).
//!
//! A host launcher calls a kernel with the kernel's own arguments (buffers as opaque pointers,
//! scalars as Int or Float), then one Int per launch tag (`blockIdx.x`, `threadIdx.x`, ...),
//! then the dynamic shared memory size when the last tag is `tirx.use_dyn_shared_memory`.

use std::ffi::CString;

use crate::abi::DLDataType;
use crate::dtype::dtype_to_string;
use crate::error::{Error, Result};
use crate::module::blob::{Reader, Writer};
use crate::value::AnyView;

/// The last launch tag of a kernel that takes a dynamic shared memory size.
pub const DYN_SHARED_MEMORY_TAG: &str = "tirx.use_dyn_shared_memory";

/// Launch tags TVM emits that change how CUDA launches and mean nothing elsewhere, in the
/// order of [`LaunchFlags`]' fields (`src/runtime/metadata.h`, `launch_param`).
const CUDA_LAUNCH_FLAGS: [&str; 3] = [
    "tirx.use_programtic_dependent_launch",
    "tirx.use_cooperative_launch",
    "tirx.use_required_block_dimension",
];

/// The CUDA launch flags a kernel's tags set (other back ends ignore them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaunchFlags {
    /// Programmatic dependent launch (`cudaLaunchAttributeProgrammaticStreamSerialization`).
    pub programmatic_dependent_launch: bool,
    /// A cooperative launch (`cudaLaunchAttributeCooperative`).
    pub cooperative: bool,
    /// Launch with the kernel's compile-time block size (`CU_LAUNCH_KERNEL_REQUIRED_BLOCK_DIM`),
    /// the grid counted in clusters.
    pub required_block_dimension: bool,
    /// Whether a `clusterCtaIdx.*` tag is present.
    pub cluster: bool,
}

/// A kernel's entry in a device module's function table (TVM's `FunctionInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionInfo {
    /// The kernel's name.
    pub name: String,
    /// Its arguments' types (`handle` for buffers).
    pub arg_types: Vec<DLDataType>,
    /// Its launch parameters, in the order the host passes their extents.
    pub launch_param_tags: Vec<String>,
    /// Per-argument extra tags (TVM's `ArgExtraTags`: 0 none, 1 a CUDA tensor map); written
    /// since TVM 0.21.
    pub arg_extra_tags: Vec<i32>,
}

/// How a function table was serialized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InfoFormat {
    /// TVM 0.21 and later: name, arg types, launch tags, extra tags.
    WithExtraTags,
    /// TVM 0.20 and earlier (dmlc streams): name, arg types, launch tags.
    Classic,
}

/// What a back end's kernel takes from its table entry: how each argument is passed, where
/// the launch extents are among them, and the name as a C string for the driver's lookup.
pub struct KernelSignature {
    /// One kind per argument.
    pub args: Vec<ArgKind>,
    /// The launch parameters' place after the arguments.
    pub launch: LaunchConfig,
    /// The kernel's name, NUL-terminated.
    pub c_name: CString,
}

impl FunctionInfo {
    /// The kernel's signature, or an error naming what the entry gets wrong (an argument type
    /// no kernel takes, a launch tag TVM does not write, a NUL in the name).
    pub fn signature(&self) -> Result<KernelSignature> {
        let args = self
            .arg_types
            .iter()
            .enumerate()
            .map(|(i, &t)| ArgKind::of(t, &self.name, i))
            .collect::<Result<Vec<_>>>()?;
        let launch = LaunchConfig::new(&self.name, args.len(), &self.launch_param_tags)?;
        let c_name = CString::new(self.name.as_str()).map_err(|_| {
            Error::value(format!("kernel name `{}` contains a NUL byte", self.name))
        })?;
        Ok(KernelSignature {
            args,
            launch,
            c_name,
        })
    }

    /// Reads one entry.
    pub fn read(r: &mut Reader<'_>, format: InfoFormat) -> Result<FunctionInfo> {
        let name = r.read_string()?.to_string();
        let n = r.read_u64()?;
        if n > (r.remaining() / 4) as u64 {
            crate::bail_value!("function `{name}`: {n} argument types but the payload ends first");
        }
        let mut arg_types = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let b = r.read_raw(4)?;
            arg_types.push(crate::dtype::dtype(
                b[0],
                b[1],
                u16::from_le_bytes([b[2], b[3]]),
            ));
        }
        let launch_param_tags = r
            .read_string_vec()?
            .into_iter()
            .map(str::to_string)
            .collect();
        let arg_extra_tags = match format {
            InfoFormat::Classic => Vec::new(),
            InfoFormat::WithExtraTags => {
                let n = r.read_u64()?;
                if n > (r.remaining() / 4) as u64 {
                    crate::bail_value!(
                        "function `{name}`: {n} argument tags but the payload ends first"
                    );
                }
                (0..n)
                    .map(|_| r.read_u32().map(|v| v as i32))
                    .collect::<Result<_>>()?
            }
        };
        Ok(FunctionInfo {
            name,
            arg_types,
            launch_param_tags,
            arg_extra_tags,
        })
    }

    /// Writes the entry as TVM 0.21+ does.
    pub fn write(&self, w: &mut Writer) {
        w.write_string(&self.name);
        w.write_u64(self.arg_types.len() as u64);
        for t in &self.arg_types {
            w.write_raw(&[t.code.0, t.bits]);
            w.write_raw(&t.lanes.to_le_bytes());
        }
        w.write_string_vec(&self.launch_param_tags);
        w.write_u64(self.arg_extra_tags.len() as u64);
        for &t in &self.arg_extra_tags {
            w.write_u32(t as u32);
        }
    }

    /// The argument types as TVM names them (`float32`, `handle`).
    pub fn arg_type_names(&self) -> Vec<String> {
        self.arg_types
            .iter()
            .map(|&t| {
                dtype_to_string(t).unwrap_or_else(|_| format!("dtype({},{})", t.code.0, t.bits))
            })
            .collect()
    }
}

/// Reads a function table: a `u64` count, then `(name, FunctionInfo)` pairs (a map in TVM), in
/// the order written.
pub fn read_function_table(r: &mut Reader<'_>, format: InfoFormat) -> Result<Vec<FunctionInfo>> {
    let n = r.read_u64()?;
    // Each entry needs at least its key and name lengths and two counts.
    if n > (r.remaining() / 32) as u64 {
        crate::bail_value!("function table of {n} kernels but the payload ends first");
    }
    let mut out: Vec<FunctionInfo> = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let key = r.read_string()?.to_string();
        let info = FunctionInfo::read(r, format)?;
        if info.name != key {
            crate::bail_value!(
                "function table entry `{key}` describes a function named `{}`",
                info.name
            );
        }
        if out.iter().any(|f| f.name == key) {
            crate::bail_value!("function table lists `{key}` twice");
        }
        out.push(info);
    }
    Ok(out)
}

/// Writes a function table as TVM 0.21+ does.
pub fn write_function_table(w: &mut Writer, table: &[FunctionInfo]) {
    w.write_u64(table.len() as u64);
    for f in table {
        w.write_string(&f.name);
        f.write(w);
    }
}

/// How a scalar argument reaches the device (`pack_args.h`'s `ArgConvertCode`): 32-bit types
/// are narrowed from the host's 64-bit values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// A buffer (the back end's memory handle).
    Buffer,
    /// `int32`.
    I32,
    /// `uint32`.
    U32,
    /// `int64`.
    I64,
    /// `float32`.
    F32,
    /// `float64`.
    F64,
}

impl ArgKind {
    /// The kind for an argument type, or an error naming the kernel and the argument.
    pub fn of(t: DLDataType, kernel: &str, index: usize) -> Result<ArgKind> {
        let kind = match (t.code.0, t.bits, t.lanes) {
            (3, _, 1) => Some(ArgKind::Buffer),
            (0, 32, 1) => Some(ArgKind::I32),
            (0, 64, 1) => Some(ArgKind::I64),
            (1, 32, 1) => Some(ArgKind::U32),
            (2, 32, 1) => Some(ArgKind::F32),
            (2, 64, 1) => Some(ArgKind::F64),
            _ => None,
        };
        kind.ok_or_else(|| {
            Error::type_error(format!(
                "kernel `{kernel}`: argument {index} has type {}, which cannot be passed to a \
                 device kernel (TVM passes handles, int32, uint32, int64, float32 and float64)",
                crate::tensor::layout::dtype_label(t)
            ))
        })
    }

    /// A scalar argument's 64-bit slot (TVM's `ArgUnion64`): 32-bit types narrowed as
    /// `pack_args.h` does (`static_cast`) into the low half, which is the slot's first four
    /// bytes in memory on the little-endian hosts tvmrt runs on. `what` names the argument in
    /// a type error; a buffer has no slot (an `InternalError`: back ends pass it themselves).
    pub fn scalar_slot(self, v: &AnyView<'_>, what: &dyn Fn() -> String) -> Result<u64> {
        let int = || v.as_i64().ok_or_else(|| v.type_mismatch(&what(), "int"));
        let float = || v.as_f64().ok_or_else(|| v.type_mismatch(&what(), "float"));
        Ok(match self {
            ArgKind::I64 => int()? as u64,
            ArgKind::I32 | ArgKind::U32 => int()? as u32 as u64,
            ArgKind::F32 => (float()? as f32).to_bits() as u64,
            ArgKind::F64 => float()?.to_bits(),
            ArgKind::Buffer => {
                return Err(Error::new(
                    "InternalError",
                    format!("{}: a buffer has no scalar slot", what()),
                ))
            }
        })
    }

    /// The value's size as the kernel takes it (a buffer: the back end's handle size).
    pub fn size(self, handle_size: usize) -> usize {
        match self {
            ArgKind::Buffer => handle_size,
            ArgKind::I32 | ArgKind::U32 | ArgKind::F32 => 4,
            ArgKind::I64 | ArgKind::F64 => 8,
        }
    }
}

/// How a kernel's trailing arguments give its launch extents (TVM's `LaunchParamConfig`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Index of the first launch argument (the kernel's argument count).
    base: usize,
    /// For each launch tag, its slot in `[grid x, y, z, block x, y, z, cluster x, y, z,
    /// preferred cluster x, y, z]` (TVM's `ThreadWorkLoad::work_size`).
    slots: Vec<usize>,
    /// Dimensions used (1 to 3).
    work_dim: usize,
    /// Whether a dynamic shared memory size follows the extents.
    dyn_shared_memory: bool,
    /// CUDA's launch flags.
    flags: LaunchFlags,
}

/// A launch's extents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkLoad {
    /// Blocks (work groups) per dimension.
    pub grid: [usize; 3],
    /// Threads (work items) per block per dimension.
    pub block: [usize; 3],
    /// Bytes of dynamic shared memory.
    pub dyn_shared_memory: usize,
    /// Blocks per thread-block cluster per dimension (CUDA; 1 when not clustered).
    pub cluster: [usize; 3],
    /// Preferred cluster size per dimension (CUDA 12.8+; 1 when not given).
    pub preferred_cluster: [usize; 3],
}

impl LaunchConfig {
    /// The config of a kernel with `num_args` arguments and these launch tags.
    pub fn new(kernel: &str, num_args: usize, tags: &[String]) -> Result<LaunchConfig> {
        let mut slots = Vec::new();
        let mut dyn_shared_memory = false;
        let mut filled = [false; 12];
        let mut flags = LaunchFlags::default();
        for (i, tag) in tags.iter().enumerate() {
            if tag == DYN_SHARED_MEMORY_TAG {
                if i + 1 != tags.len() {
                    crate::bail_value!(
                        "kernel `{kernel}`: `{DYN_SHARED_MEMORY_TAG}` must be the last launch tag"
                    );
                }
                dyn_shared_memory = true;
                continue;
            }
            if let Some(k) = CUDA_LAUNCH_FLAGS.iter().position(|f| f == tag) {
                match k {
                    0 => flags.programmatic_dependent_launch = true,
                    1 => flags.cooperative = true,
                    _ => flags.required_block_dimension = true,
                }
                continue;
            }
            let (rank, axis) = if let Some(a) = tag.strip_prefix("blockIdx.") {
                (0, a)
            } else if let Some(a) = tag.strip_prefix("threadIdx.") {
                (1, a)
            } else if let Some(a) = tag.strip_prefix("clusterCtaIdx.") {
                flags.cluster = true;
                (2, a)
            } else if let Some(a) = tag.strip_prefix("preferredClusterCtaIdx.") {
                (3, a)
            } else {
                crate::bail_value!(
                    "kernel `{kernel}`: launch tag `{tag}` is not supported (expected \
                     blockIdx.x/y/z, threadIdx.x/y/z, clusterCtaIdx.x/y/z, \
                     preferredClusterCtaIdx.x/y/z or {DYN_SHARED_MEMORY_TAG})"
                );
            };
            let dim = match axis {
                "x" => 0,
                "y" => 1,
                "z" => 2,
                _ => crate::bail_value!("kernel `{kernel}`: bad launch tag `{tag}`"),
            };
            let slot = rank * 3 + dim;
            if filled[slot] {
                crate::bail_value!("kernel `{kernel}`: launch tag `{tag}` appears twice");
            }
            filled[slot] = true;
            slots.push(slot);
        }
        let work_dim = (0..3)
            .filter(|&i| filled[i] || filled[i + 3])
            .map(|i| i + 1)
            .max()
            .unwrap_or(1);
        Ok(LaunchConfig {
            base: num_args,
            slots,
            work_dim,
            dyn_shared_memory,
            flags,
        })
    }

    /// The CUDA launch flags of the kernel's tags.
    pub fn flags(&self) -> LaunchFlags {
        self.flags
    }

    /// Arguments a call passes: the kernel's, the extents, the dynamic shared memory size.
    pub fn num_call_args(&self) -> usize {
        self.base + self.num_launch_args()
    }

    /// Dimensions of the launch.
    pub fn work_dim(&self) -> usize {
        self.work_dim
    }

    /// Arguments after the kernel's own: the extents, then the dynamic shared memory size.
    pub fn num_launch_args(&self) -> usize {
        self.slots.len() + usize::from(self.dyn_shared_memory)
    }

    /// The launch extents of a host launcher's call to a kernel function: checks the argument
    /// count (the kernel's own, then the launch arguments) and reads the trailing Ints. `api`
    /// names the back end in messages (`CUDA`, `OpenCL`).
    pub fn extract_call(&self, api: &str, kernel: &str, args: &[AnyView<'_>]) -> Result<WorkLoad> {
        let expected = self.num_call_args();
        if args.len() != expected {
            crate::bail_type!(
                "{api} kernel `{kernel}` expects {expected} arguments ({} kernel arguments, then \
                 launch extents), got {}",
                self.base,
                args.len()
            );
        }
        // At most 12 extents and a shared memory size (`new` refuses repeated tags).
        let mut tail = [0i64; 13];
        for (k, v) in args[self.base..].iter().enumerate() {
            match v.as_i64() {
                Some(x) => tail[k] = x,
                None => return Err(launch_arg_mismatch(api, kernel, self.base + k, v)),
            }
        }
        self.extract(kernel, &tail[..args.len() - self.base])
    }

    /// The launch extents from a call's trailing integer arguments (`tail`, as many as
    /// [`LaunchConfig::num_launch_args`]). An extent of 0 (an empty dynamic shape) launches 1,
    /// as TVM does; a negative one is an error.
    pub fn extract(&self, kernel: &str, tail: &[i64]) -> Result<WorkLoad> {
        if tail.len() != self.num_launch_args() {
            crate::bail_type!(
                "kernel `{kernel}`: expected {} launch arguments, got {}",
                self.num_launch_args(),
                tail.len()
            );
        }
        let mut size = [1usize; 12];
        for (k, &slot) in self.slots.iter().enumerate() {
            let v = tail[k];
            if v < 0 {
                return Err(negative_extent(kernel, k, v));
            }
            if v > 0 {
                size[slot] = v as usize;
            }
        }
        let dyn_shared_memory = if self.dyn_shared_memory {
            let v = tail[self.slots.len()];
            usize::try_from(v).map_err(|_| {
                Error::value(format!(
                    "kernel `{kernel}`: negative dynamic shared memory size {v}"
                ))
            })?
        } else {
            0
        };
        Ok(WorkLoad {
            grid: [size[0], size[1], size[2]],
            block: [size[3], size[4], size[5]],
            dyn_shared_memory,
            cluster: [size[6], size[7], size[8]],
            preferred_cluster: [size[9], size[10], size[11]],
        })
    }
}

impl WorkLoad {
    /// Threads per dimension over the whole launch (OpenCL's global size), checked.
    pub fn global_size(&self, kernel: &str) -> Result<[usize; 3]> {
        let mut out = [0usize; 3];
        for (i, (g, b)) in self.grid.iter().zip(&self.block).enumerate() {
            out[i] = match g.checked_mul(*b) {
                Some(n) => n,
                None => return Err(launch_overflow(kernel, *g, *b, i)),
            };
        }
        Ok(out)
    }
}

#[cold]
fn launch_arg_mismatch(api: &str, kernel: &str, at: usize, v: &AnyView<'_>) -> Error {
    v.type_mismatch(
        &format!("{api} kernel `{kernel}` launch argument {at}"),
        "int",
    )
}

#[cold]
fn negative_extent(kernel: &str, k: usize, v: i64) -> Error {
    Error::value(format!(
        "kernel `{kernel}`: launch extent {k} is negative ({v})"
    ))
}

#[cold]
fn launch_overflow(kernel: &str, g: usize, b: usize, dim: usize) -> Error {
    Error::value(format!(
        "kernel `{kernel}`: launch of {g} x {b} threads in dimension {dim} overflows"
    ))
}

/// The function a device module hands out for one kernel: `launch` with the call's arguments,
/// returning nothing; it holds `module` so the kernel's code stays loaded while the function
/// lives.
pub fn kernel_function<F>(module: &crate::module::Module, launch: F) -> crate::function::Function
where
    F: Fn(&[AnyView<'_>]) -> Result<()> + Send + Sync + 'static,
{
    let keep = module.clone();
    crate::function::Function::from_fn(move |args| {
        let _ = &keep;
        launch(args)?;
        Ok(crate::value::Any::none())
    })
}

/// A device module's function for its kernel `name` (`None` when it has none): `launch` with
/// that kernel and the call's arguments, holding `module` as [`kernel_function`] does.
pub fn kernel_by_name<K: Send + Sync + 'static>(
    module: &crate::module::Module,
    kernels: &std::collections::HashMap<String, std::sync::Arc<K>>,
    name: &str,
    launch: fn(&K, &[AnyView<'_>]) -> Result<()>,
) -> Option<crate::function::Function> {
    let kernel = kernels.get(name)?.clone();
    Some(kernel_function(module, move |args| launch(&kernel, args)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::dtypes;

    fn tags(t: &[&str]) -> Vec<String> {
        t.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn launch_config_maps_tags_like_tvm() {
        let c = LaunchConfig::new(
            "k",
            3,
            &tags(&[
                "blockIdx.x",
                "threadIdx.x",
                "threadIdx.y",
                DYN_SHARED_MEMORY_TAG,
            ]),
        )
        .unwrap();
        assert_eq!(c.num_call_args(), 3 + 3 + 1);
        assert_eq!(c.work_dim(), 2);
        let w = c.extract("k", &[5, 8, 4, 256]).unwrap();
        assert_eq!(w.grid, [5, 1, 1]);
        assert_eq!(w.block, [8, 4, 1]);
        assert_eq!(w.dyn_shared_memory, 256);
        assert_eq!(w.global_size("k").unwrap(), [40, 4, 1]);
        // An empty dynamic extent launches one block.
        assert_eq!(c.extract("k", &[0, 8, 4, 0]).unwrap().grid, [1, 1, 1]);
        assert!(c.extract("k", &[-1, 8, 4, 0]).is_err());
        assert!(c.extract("k", &[1, 8, 4]).is_err());
        assert!(LaunchConfig::new("k", 0, &tags(&["blockIdx.x", "blockIdx.x"])).is_err());
        assert!(LaunchConfig::new("k", 0, &tags(&[DYN_SHARED_MEMORY_TAG, "blockIdx.x"])).is_err());
        assert!(LaunchConfig::new("k", 0, &tags(&["warpIdx.x"])).is_err());
        // CUDA's thread-block clusters and launch flags.
        let c = LaunchConfig::new(
            "k",
            1,
            &tags(&[
                "blockIdx.x",
                "threadIdx.x",
                "clusterCtaIdx.y",
                "preferredClusterCtaIdx.x",
                "tirx.use_cooperative_launch",
            ]),
        )
        .unwrap();
        assert_eq!(c.num_launch_args(), 4, "flags take no argument");
        let w = c.extract("k", &[16, 128, 2, 4]).unwrap();
        assert_eq!((w.grid, w.block), ([16, 1, 1], [128, 1, 1]));
        assert_eq!((w.cluster, w.preferred_cluster), ([1, 2, 1], [4, 1, 1]));
        let f = c.flags();
        assert!(f.cluster && f.cooperative && !f.programmatic_dependent_launch);
        assert!(!f.required_block_dimension);
        assert_eq!(c.work_dim(), 1, "clusters do not add OpenCL dimensions");
        assert!(LaunchConfig::new("k", 0, &tags(&["blockIdx.w"])).is_err());
        let z = LaunchConfig::new("k", 0, &tags(&["blockIdx.z"])).unwrap();
        assert_eq!(z.work_dim(), 3);
    }

    #[test]
    fn function_tables_round_trip_and_check_lengths() {
        let f = FunctionInfo {
            name: "add_kernel".into(),
            arg_types: vec![
                dtypes::FLOAT32,
                crate::dtype::dtype(3, 64, 1),
                dtypes::INT32,
            ],
            launch_param_tags: tags(&["blockIdx.x", "threadIdx.x"]),
            arg_extra_tags: vec![0, 0, 0],
        };
        let mut w = Writer::new();
        write_function_table(&mut w, std::slice::from_ref(&f));
        let bytes = w.into_inner();
        let back =
            read_function_table(&mut Reader::new(&bytes), InfoFormat::WithExtraTags).unwrap();
        assert_eq!(back, vec![f.clone()]);
        for cut in 0..bytes.len() {
            assert!(
                read_function_table(&mut Reader::new(&bytes[..cut]), InfoFormat::WithExtraTags)
                    .is_err(),
                "cut at {cut}"
            );
        }
        assert_eq!(f.arg_type_names(), ["float32", "handle", "int32"]);
        assert_eq!(ArgKind::of(dtypes::INT32, "k", 0).unwrap(), ArgKind::I32);
        assert!(ArgKind::of(dtypes::INT8, "k", 2)
            .unwrap_err()
            .message
            .contains("argument 2 has type int8"));
    }

    #[test]
    fn scalar_slots_narrow_like_pack_args() {
        use crate::value::Any;
        let what = || "kernel `k` argument 1".to_string();
        let slot = |k: ArgKind, v: Any| k.scalar_slot(&v.view(), &what);
        assert_eq!(
            slot(ArgKind::I64, Any::from(-2i64)).unwrap(),
            (-2i64) as u64
        );
        // 32-bit kinds keep the low half, zero above (static_cast, then the slot's low bytes).
        assert_eq!(slot(ArgKind::I32, Any::from(-2i64)).unwrap(), 0xFFFF_FFFE);
        assert_eq!(slot(ArgKind::U32, Any::from(1i64 << 32 | 7)).unwrap(), 7);
        assert_eq!(
            slot(ArgKind::F32, Any::from(1.5f64)).unwrap(),
            1.5f32.to_bits() as u64
        );
        assert_eq!(
            slot(ArgKind::F64, Any::from(-0.25f64)).unwrap(),
            (-0.25f64).to_bits()
        );
        assert_eq!(
            &slot(ArgKind::I32, Any::from(-2i64)).unwrap().to_le_bytes()[..4],
            &(-2i32).to_le_bytes()
        );
        let e = slot(ArgKind::I32, Any::from(1.5f64)).unwrap_err();
        assert!(e.message.contains("kernel `k` argument 1"), "{e}");
        assert_eq!(
            slot(ArgKind::Buffer, Any::from(1i64)).unwrap_err().kind,
            "InternalError"
        );
    }
}
