//! The `cuda` module kind (TVM `cuda_module.cc`): the device half of a library TVM built for
//! CUDA. Its functions launch its kernels.
//!
//! Payload: `[String fmt][Map<String, FunctionInfo>][Bytes code]` ([`DevicePayload`]), fmt
//! `cuda` (CUDA C source), `ptx`, `cubin` or `fatbin`. The code is checked when the module is
//! loaded, without the driver: binary code is read by content (TVM 0.27 itself labels a fatbin
//! `cubin`), its architectures noted and every kernel of the function table looked for in it;
//! source must define every kernel. The code is loaded into a device the first time one of its
//! kernels runs there (`cuModuleLoadDataEx`, after checking the device's architecture can run
//! it, with the driver's JIT log on failure); source is first compiled with NVRTC for that
//! device's architecture (once per architecture).
//!
//! A kernel function takes the kernel's arguments (device pointers as opaque pointers, or
//! tensors; scalars as Int/Float, narrowed as TVM's `pack_args.h`), then its launch extents
//! ([`LaunchConfig`]), and launches on the calling thread's current CUDA device
//! (`__tvm_set_device`) and current stream (`TVMFFIEnvGetStream(kDLCUDA, id)`): `cuLaunchKernel`,
//! or `cuLaunchKernelEx` for thread-block clusters and TVM's cooperative and
//! programmatic-dependent launches. Before the driver sees a launch, tvmrt checks what would
//! otherwise be a bare `CUDA_ERROR_INVALID_VALUE` or a fault on the device: block and grid
//! sizes against the device's limits, shared memory (static + dynamic) against the device's
//! opt-in limit (above 48 KiB the kernel's `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` is
//! raised, as TVM does), and every buffer against the device's memory (a host pointer is
//! refused). Launches are queued, not waited for.

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use once_cell::sync::OnceCell;
use parking_lot::Mutex;

use super::context::{self, bind, Device, MAX_DEVICES};
use super::driver::{
    check, cu, cu_error, Handle, LaunchAttribute, LaunchConfig as CuLaunchConfig,
    CUDA_ERROR_NOT_FOUND, CUDA_SUCCESS, FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
    FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, JIT_ERROR_LOG_BUFFER, JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, LAUNCH_ATTRIBUTE_COOPERATIVE,
    LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION,
    LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
};
use super::image::{source_kernels, Image, ImageKind};
use super::memory::check_kernel_pointers;
use super::nvrtc::nvrtc;
use crate::device::launch::{
    kernel_function, ArgKind, FunctionInfo, KernelSignature, LaunchConfig, WorkLoad,
};
use crate::device::payload::{payload_loaders, DevicePayload};
use crate::device::{device_name, DeviceModuleInfo};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::{Module, ModuleKind};
use crate::value::AnyView;

/// The module kind (TVM's `CUDAModuleNode::kind`).
pub const KIND: &str = "cuda";

/// `ArgExtraTags::kTensorMap`: the argument is a host pointer to a 128-byte `CUtensorMap`
/// passed by value.
const TENSOR_MAP_TAG: i32 = 1;

/// Shared memory a block may use without opting in.
const SHARED_DEFAULT: usize = 48 << 10;

/// What a module's code is.
enum Code {
    /// CUDA C source, compiled with NVRTC per architecture.
    Source(String),
    /// PTX, a cubin or a fatbin, as the driver takes it (PTX NUL-terminated).
    Binary(Image, Vec<u8>),
}

/// A module's code and its per-device loads, shared by its kernel functions.
struct Inner {
    payload: DevicePayload,
    code: Code,
    /// Per device ordinal, the `CUmodule` loaded there.
    loaded: Box<[Mutex<Option<usize>>]>,
    /// NVRTC's output per SM version (source modules).
    compiled: Mutex<HashMap<u32, Arc<Vec<u8>>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let Some(c) = super::driver::opened() else {
            return;
        };
        for (id, slot) in self.loaded.iter().enumerate() {
            if let Some(m) = slot.lock().take() {
                // Errors are ignored: at process exit the driver may be gone
                // (CUDA_ERROR_DEINITIALIZED), as TVM ignores them.
                if bind(id as i32).is_ok() {
                    // SAFETY: a module this value loaded into that device, unloaded once.
                    unsafe { (c.module_unload)(m as Handle) };
                }
            }
        }
    }
}

/// A kernel's driver function on one device.
struct Func {
    handle: usize,
    static_shared: usize,
    /// Dynamic shared memory the function is allowed now.
    dyn_allowed: AtomicU32,
}

/// One kernel of a module.
struct Kernel {
    name: String,
    c_name: CString,
    args: Vec<ArgKind>,
    tensor_map: Vec<bool>,
    launch: LaunchConfig,
    funcs: Box<[OnceCell<Func>]>,
}

/// A loaded `cuda` module.
pub struct CudaModule {
    inner: Arc<Inner>,
    kernels: HashMap<String, Arc<Kernel>>,
}

impl std::fmt::Debug for CudaModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaModule")
            .field("fmt", &self.inner.payload.fmt)
            .field("kernels", &self.kernels.len())
            .finish()
    }
}

impl CudaModule {
    /// A module from its payload, checked: a known format, code that is what it says, every
    /// kernel of the table present in it with launchable argument types and tags.
    pub fn new(payload: DevicePayload) -> Result<CudaModule> {
        let fmt = payload.fmt.as_str();
        let code =
            match fmt {
                "cuda" => {
                    let text = std::str::from_utf8(&payload.code).map_err(|e| {
                        Error::value(format!(
                            "the CUDA module's source is not valid UTF-8 text (byte {})",
                            e.valid_up_to()
                        ))
                    })?;
                    let defined = source_kernels(text);
                    for f in &payload.table {
                        if !defined.contains(&f.name) {
                            crate::bail_value!(
                            "the function table lists kernel `{}`, but the module's CUDA source \
                             defines no `extern \"C\" __global__` function of that name (it \
                             defines: {})",
                            f.name,
                            if defined.is_empty() { "none".into() } else { defined.join(", ") }
                        );
                        }
                    }
                    Code::Source(text.to_string())
                }
                "ptx" | "cubin" | "fatbin" => {
                    let image = Image::parse(&payload.code)?;
                    // TVM 0.27 names any binary JIT output `cubin`, fatbins included; PTX given
                    // as a cubin (or the reverse) is a mislabelled payload.
                    let declared_binary = fmt != "ptx";
                    if declared_binary == (image.kind == ImageKind::Ptx) {
                        crate::bail_value!(
                            "the CUDA module says its code is {fmt} but it is {}",
                            image.kind.name()
                        );
                    }
                    for f in &payload.table {
                        image.check_kernel(&f.name)?;
                    }
                    let mut bytes = payload.code.clone();
                    if image.kind == ImageKind::Ptx && bytes.last() != Some(&0) {
                        bytes.push(0);
                    }
                    Code::Binary(image, bytes)
                }
                other => crate::bail_value!(
                    "unknown CUDA module format `{other}` (TVM writes cuda, ptx, cubin or fatbin)"
                ),
            };
        let mut kernels = HashMap::new();
        for f in &payload.table {
            kernels.insert(f.name.clone(), Arc::new(Kernel::new(f)?));
        }
        Ok(CudaModule {
            inner: Arc::new(Inner {
                payload,
                code,
                loaded: (0..MAX_DEVICES).map(|_| Mutex::new(None)).collect(),
                compiled: Mutex::new(HashMap::new()),
            }),
            kernels,
        })
    }

    /// The function table.
    pub fn functions(&self) -> &[FunctionInfo] {
        &self.inner.payload.table
    }

    /// The code's format as the payload names it.
    pub fn format(&self) -> &str {
        &self.inner.payload.fmt
    }

    /// What the code holds (`None` for source).
    pub fn image(&self) -> Option<&Image> {
        match &self.inner.code {
            Code::Binary(img, _) => Some(img),
            Code::Source(_) => None,
        }
    }

    /// Compiles the module's source with NVRTC for SM version `sm` (as it would be for a
    /// device of that architecture); `None` for binary modules. No driver is needed.
    pub fn compile_for(&self, sm: u32) -> Result<Option<Arc<Vec<u8>>>> {
        match &self.inner.code {
            Code::Source(text) => self.inner.compiled_source(text, sm).map(Some),
            Code::Binary(..) => Ok(None),
        }
    }

    /// What `tvmrt inspect` shows.
    pub fn describe(&self) -> DeviceModuleInfo {
        let format = match &self.inner.code {
            Code::Binary(img, _) => {
                let archs: Vec<String> = img.entries.iter().map(|e| e.to_string()).collect();
                format!("{} ({})", self.inner.payload.fmt, archs.join(", "))
            }
            Code::Source(_) => "cuda (CUDA C source, compiled with NVRTC at first use)".into(),
        };
        DeviceModuleInfo::new(format, &self.inner.payload.table)
    }
}

impl Inner {
    fn compiled_source(&self, text: &str, sm: u32) -> Result<Arc<Vec<u8>>> {
        if let Some(c) = self.compiled.lock().get(&sm) {
            return Ok(c.clone());
        }
        let n = nvrtc()?;
        let out = n.compile(text, sm)?;
        log::debug!(
            "NVRTC {}.{} compiled the CUDA module's source for {} ({} bytes of {})",
            n.version().0,
            n.version().1,
            out.arch,
            out.code.len(),
            if out.ptx { "PTX" } else { "cubin" }
        );
        let code = Arc::new(out.code);
        self.compiled.lock().insert(sm, code.clone());
        Ok(code)
    }

    /// The module loaded into `dev` (whose context is current), loading it the first time.
    fn module_on(&self, dev: &Device) -> Result<Handle> {
        let mut slot = self.loaded[dev.ordinal as usize].lock();
        if let Some(m) = *slot {
            return Ok(m as Handle);
        }
        let label = dev.label();
        let source_code;
        let (bytes, ptx_version): (&[u8], Option<&str>) = match &self.code {
            Code::Binary(img, bytes) => {
                img.select(dev.sm, &label)?;
                (bytes, img.ptx_version.as_deref())
            }
            Code::Source(text) => {
                source_code = self.compiled_source(text, dev.sm)?;
                (&source_code, None)
            }
        };
        let c = cu()?;
        let mut log = vec![0u8; 8192];
        let mut options = [JIT_ERROR_LOG_BUFFER, JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
        let mut values: [*mut c_void; 2] = [log.as_mut_ptr().cast(), log.len() as *mut c_void];
        let mut m: Handle = std::ptr::null_mut();
        // SAFETY: `bytes` is an image the driver reads (PTX NUL-terminated); the options name
        // a log buffer of the size given, alive for the call; the device's context is current.
        let rc = unsafe {
            (c.module_load_data_ex)(
                &mut m,
                bytes.as_ptr().cast(),
                2,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        if rc != CUDA_SUCCESS {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let jit = String::from_utf8_lossy(&log[..end]);
            let mut e = cu_error(rc, &format!("cuModuleLoadData on {label}"));
            if let Some(v) = ptx_version {
                e.message
                    .push_str(&format!(" (the PTX is ISA version {v})"));
            }
            if !jit.trim().is_empty() {
                e.message
                    .push_str(&format!("; JIT log:\n{}", jit.trim_end()));
            }
            return Err(e);
        }
        *slot = Some(m as usize);
        Ok(m)
    }
}

impl Kernel {
    fn new(f: &FunctionInfo) -> Result<Kernel> {
        let KernelSignature {
            args,
            launch,
            c_name,
        } = f.signature()?;
        let tensor_map = (0..args.len())
            .map(|i| f.arg_extra_tags.get(i) == Some(&TENSOR_MAP_TAG))
            .collect();
        Ok(Kernel {
            name: f.name.clone(),
            c_name,
            args,
            tensor_map,
            launch,
            funcs: (0..MAX_DEVICES).map(|_| OnceCell::new()).collect(),
        })
    }

    /// The kernel's function on `dev`, loading the module there first if needed.
    fn func(&self, inner: &Inner, dev: &Device) -> Result<&Func> {
        self.funcs[dev.ordinal as usize].get_or_try_init(|| {
            let m = inner.module_on(dev)?;
            let c = cu()?;
            let mut f: Handle = std::ptr::null_mut();
            // SAFETY: a loaded module; the name is NUL-terminated.
            let rc = unsafe { (c.module_get_function)(&mut f, m, self.c_name.as_ptr()) };
            if rc == CUDA_ERROR_NOT_FOUND {
                return Err(Error::value(format!(
                    "the CUDA module's code has no kernel `{}` for {}",
                    self.name,
                    dev.label()
                )));
            }
            check(rc, &format!("cuModuleGetFunction (`{}`)", self.name))?;
            let mut shared = 0;
            // SAFETY: a function of a loaded module; writes one int.
            check(
                unsafe { (c.func_get_attribute)(&mut shared, FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f) },
                "cuFuncGetAttribute",
            )?;
            let static_shared = shared.max(0) as usize;
            Ok(Func {
                handle: f as usize,
                static_shared,
                dyn_allowed: AtomicU32::new(SHARED_DEFAULT.saturating_sub(static_shared) as u32),
            })
        })
    }

    /// Checks a launch against the device's limits and raises the function's dynamic shared
    /// memory allowance when it needs more than the default.
    fn check_limits(&self, dev: &Device, f: &Func, w: &WorkLoad) -> Result<()> {
        let threads: usize = w.block.iter().product();

        if threads > dev.max_threads_per_block as usize {
            crate::bail_value!(
                "CUDA kernel `{}`: a block of {:?} = {threads} threads exceeds {}'s limit of {} \
                 threads per block",
                self.name,
                w.block,
                dev.label(),
                dev.max_threads_per_block
            );
        }
        for (i, axis) in ["x", "y", "z"].iter().enumerate() {
            if w.block[i] > dev.max_block[i] as usize || w.grid[i] > dev.max_grid[i] as usize {
                crate::bail_value!(
                    "CUDA kernel `{}`: launch of grid {:?} x block {:?} exceeds {}'s limits in \
                     {} (block {}, grid {})",
                    self.name,
                    w.grid,
                    w.block,
                    dev.label(),
                    axis,
                    dev.max_block[i],
                    dev.max_grid[i]
                );
            }
        }
        let total = f.static_shared.saturating_add(w.dyn_shared_memory);
        if total > dev.shared_optin as usize {
            crate::bail_value!(
                "CUDA kernel `{}` asks for {} bytes of dynamic shared memory (plus {} static): \
                 {} has {} bytes of shared memory per block",
                self.name,
                w.dyn_shared_memory,
                f.static_shared,
                dev.label(),
                dev.shared_optin
            );
        }
        let want = w.dyn_shared_memory as u32;
        if want > f.dyn_allowed.load(Ordering::Relaxed) {
            // SAFETY: a function of a loaded module; the size is within the device's limit.
            check(
                unsafe {
                    (cu()?.func_set_attribute)(
                        f.handle as Handle,
                        FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        want as i32,
                    )
                },
                &format!(
                    "cuFuncSetAttribute (`{}`: allow {want} bytes of dynamic shared memory)",
                    self.name
                ),
            )?;
            f.dyn_allowed.fetch_max(want, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Launches the kernel with a host launcher's arguments.
    fn launch(&self, inner: &Inner, args: &[AnyView<'_>]) -> Result<()> {
        let work = self.launch.extract_call("CUDA", &self.name, args)?;
        let device_id = context::current();
        let dev = bind(device_id)?;
        let f = self.func(inner, dev)?;
        self.check_limits(dev, f, &work)?;

        let n = self.args.len();
        let mut small_values = [0u64; 16];
        let mut small_ptrs = [std::ptr::null_mut::<c_void>(); 16];
        let (mut big_values, mut big_ptrs);
        let (values, ptrs): (&mut [u64], &mut [*mut c_void]) = if n <= 16 {
            (&mut small_values[..n], &mut small_ptrs[..n])
        } else {
            big_values = vec![0u64; n];
            big_ptrs = vec![std::ptr::null_mut(); n];
            (&mut big_values, &mut big_ptrs)
        };
        let what_i = |i: usize| format!("CUDA kernel `{}` argument {i}", self.name);
        // Buffer addresses, checked together under one lock of the block table below.
        let mut small_buffers = [(0usize, 0u64); 16];
        let mut big_buffers = Vec::new();
        let mut n_buffers = 0;
        for (i, (kind, v)) in self.args.iter().zip(args).enumerate() {
            let what = || what_i(i);
            values[i] = match kind {
                ArgKind::Buffer => {
                    let addr = buffer_address(v, dev, &what)?;
                    if self.tensor_map[i] {
                        // The kernel takes the 128-byte map by value: its address is the
                        // argument's slot (TVM's HANDLE_TO_TENSORMAP).
                        if addr == 0 {
                            crate::bail_value!("{}: a null tensor map", what());
                        }
                        ptrs[i] = addr as usize as *mut c_void;
                        continue;
                    }
                    if n_buffers < small_buffers.len() {
                        small_buffers[n_buffers] = (i, addr);
                    } else {
                        big_buffers.push((i, addr));
                    }
                    n_buffers += 1;
                    addr
                }
                scalar => scalar.scalar_slot(v, &what)?,
            };
        }
        check_kernel_pointers(
            &small_buffers[..n_buffers.min(small_buffers.len())],
            dev.ordinal,
            &what_i,
        )?;
        check_kernel_pointers(&big_buffers, dev.ordinal, &what_i)?;
        for i in 0..n {
            if !self.tensor_map[i] || self.args[i] != ArgKind::Buffer {
                ptrs[i] = (&mut values[i] as *mut u64).cast();
            }
        }
        let stream = crate::device::stream::current(super::DEVICE_TYPE as i32, device_id);
        self.enqueue(dev, f, &work, stream, ptrs)
    }

    fn enqueue(
        &self,
        dev: &Device,
        f: &Func,
        w: &WorkLoad,
        stream: Handle,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let c = cu()?;
        let flags = self.launch.flags();
        let (mut grid, mut block) = (w.grid, w.block);
        if flags.required_block_dimension {
            for (g, c) in grid.iter_mut().zip(w.cluster) {
                *g /= c.max(1);
            }
            // CU_LAUNCH_KERNEL_REQUIRED_BLOCK_DIM: the kernel's compile-time block size.
            block = [1, 1, 1];
        }
        let dim = |v: usize| v as u32;
        let mut attrs: [LaunchAttribute; 4] = [LaunchAttribute {
            id: 0,
            pad: 0,
            value: [0; 16],
        }; 4];
        let mut count = 0;
        let mut push = |id: u32, vals: &[u32]| {
            attrs[count].id = id;
            attrs[count].value[..vals.len()].copy_from_slice(vals);
            count += 1;
        };
        let triple = |v: [usize; 3]| [dim(v[0]), dim(v[1]), dim(v[2])];
        if !flags.required_block_dimension {
            if flags.cluster {
                push(LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &triple(w.cluster));
            }
            if w.preferred_cluster != [1, 1, 1] {
                push(
                    LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION,
                    &triple(w.preferred_cluster),
                );
            }
        }
        if flags.programmatic_dependent_launch {
            push(LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, &[1]);
        }
        if flags.cooperative {
            push(LAUNCH_ATTRIBUTE_COOPERATIVE, &[1]);
        }
        let handle = f.handle as Handle;
        let rc = if count == 0 && !flags.required_block_dimension {
            // SAFETY: a function of the bound context; `params` holds one pointer per kernel
            // argument to a value of the kernel's parameter size, alive for the call (the
            // driver copies them); the stream is the thread's current one for this device.
            unsafe {
                (c.launch_kernel)(
                    handle,
                    dim(grid[0]),
                    dim(grid[1]),
                    dim(grid[2]),
                    dim(block[0]),
                    dim(block[1]),
                    dim(block[2]),
                    w.dyn_shared_memory as u32,
                    stream,
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            }
        } else {
            let ex = c.launch_kernel_ex.ok_or_else(|| {
                Error::new(
                    "CUDAError",
                    format!(
                        "CUDA kernel `{}` needs cuLaunchKernelEx (thread-block clusters or \
                         cooperative / programmatic launches), which this driver lacks: it needs \
                         CUDA 12.0 or later",
                        self.name
                    ),
                )
            })?;
            let config = CuLaunchConfig {
                grid: triple(grid),
                block: triple(block),
                shared_mem_bytes: w.dyn_shared_memory as u32,
                stream,
                attrs: if count == 0 {
                    std::ptr::null_mut()
                } else {
                    attrs.as_mut_ptr()
                },
                num_attrs: count as u32,
            };
            // SAFETY: as above; `config` and its attributes live for the call.
            unsafe { ex(&config, handle, params.as_mut_ptr(), std::ptr::null_mut()) }
        };
        if rc != CUDA_SUCCESS {
            let mut e = cu_error(
                rc,
                &format!(
                    "launching CUDA kernel `{}` on {} (grid {:?}, block {:?}, {} bytes of \
                     dynamic shared memory)",
                    self.name,
                    dev.label(),
                    grid,
                    block,
                    w.dyn_shared_memory
                ),
            );
            e.kind = "InternalError".into();
            return Err(e);
        }
        Ok(())
    }
}

/// A buffer argument's device address: an opaque pointer (what host launchers pass), or a
/// tensor, which must be on the launching device.
fn buffer_address(v: &AnyView<'_>, dev: &Device, what: &dyn Fn() -> String) -> Result<u64> {
    if let Some(p) = v.as_opaque_ptr() {
        return Ok(p as u64);
    }
    if let Some(t) = v.as_dltensor() {
        if t.is_null() {
            crate::bail_value!("{}: a null tensor", what());
        }
        // SAFETY: a tensor argument's DLTensor is readable for the call.
        let t = unsafe { &*t };
        let on = t.device;
        if on.device_type.0 != super::DEVICE_TYPE || on.device_id != dev.ordinal {
            crate::bail_value!(
                "{}: the tensor is on {}, but the kernel runs on cuda:{} (copy it to the device \
                 first)",
                what(),
                device_name(on),
                dev.ordinal
            );
        }
        return Ok((t.data as u64).wrapping_add(t.byte_offset));
    }
    Err(v.type_mismatch(&what(), "a device pointer (opaque pointer) or a tensor"))
}

impl ModuleKind for CudaModule {
    fn kind(&self) -> &str {
        KIND
    }

    fn get_function(&self, this: &Module, name: &str) -> Result<Option<Function>> {
        Ok(self.kernels.get(name).map(|k| {
            let (k, inner) = (k.clone(), self.inner.clone());
            kernel_function(this, move |args| k.launch(&inner, args))
        }))
    }

    fn implements_function(&self, _this: &Module, name: &str) -> bool {
        self.kernels.contains_key(name)
    }

    fn save_to_bytes(&self) -> Result<Vec<u8>> {
        Ok(self.inner.payload.to_bytes())
    }

    /// Binary-serializable and runnable.
    fn property_mask(&self) -> i32 {
        3
    }

    fn inspect_source(&self, format: &str) -> String {
        let fmt = self.inner.payload.fmt.as_str();
        let textual = fmt == "ptx" || fmt == "cuda";
        if format == fmt || (format.is_empty() && textual) {
            String::from_utf8_lossy(&self.inner.payload.code).into_owned()
        } else {
            String::new()
        }
    }
}

/// The loaders, with TVM's names.
pub fn loaders() -> Vec<(&'static str, Function)> {
    payload_loaders(
        [
            "ffi.Module.load_from_bytes.cuda",
            "runtime.module.loadbinary_cuda",
        ],
        "CUDA module payload",
        |p| Ok(Module::new(CudaModule::new(p)?)),
    )
}

/// `tvmrt inspect`'s view of a `cuda` module.
pub fn describe(m: &Module) -> Option<DeviceModuleInfo> {
    m.downcast::<CudaModule>().map(CudaModule::describe)
}
