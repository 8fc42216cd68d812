//! The `opencl` module kind (TVM `opencl_module.cc`): the device half of a library TVM built
//! for OpenCL, holding the kernels' OpenCL C source; its functions launch them.
//!
//! Payload (`SaveToBytes`): `[String fmt][Map<String, FunctionInfo>][Bytes code]`. For fmt
//! `cl` the code is OpenCL C, one kernel after each `// Function: <name>` line (TVM's
//! `SplitKernels`; what precedes the first such line belongs to no kernel). Each kernel is
//! built into its own program the first time it runs on a device, then cached with its
//! `cl_kernel` for that device (TVM does the same per kernel). A program that does not build is
//! an error carrying the compiler's log. The FPGA binary formats TVM also knows (`xclbin`,
//! `awsxclbin`, `aocx`) are refused at load.
//!
//! A kernel function takes the kernel's arguments (buffers as opaque pointers to
//! [`BufferDescriptor`](super::buffer::BufferDescriptor)s, scalars as Int/Float), then its
//! launch extents ([`LaunchConfig`]), and enqueues the kernel on the calling thread's current
//! OpenCL device (`__tvm_set_device`): global size = grid x block, local size = block. Every
//! buffer must be a live tvmrt buffer of that device. Launches are queued, not waited for.
//! `clSetKernelArg` is not thread-safe on one kernel object, so each (kernel, device) keeps
//! its `cl_kernel` under a lock held from setting arguments to enqueueing.

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::Arc;

use once_cell::sync::OnceCell;
use parking_lot::Mutex;

use super::buffer::LIVE;
use super::device_api::current_device;
use super::error::{cl_error, code_name, ClInt, CL_BUILD_PROGRAM_FAILURE, CL_SUCCESS};
use super::loader::Handle;
use super::platform::{platform, Platform};
use crate::device::launch::{
    kernel_by_name, ArgKind, FunctionInfo, InfoFormat, KernelSignature, LaunchConfig,
};
use crate::device::payload::{payload_loaders, write_payload, DevicePayload};
use crate::device::DeviceModuleInfo;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::{Module, ModuleKind};
use crate::value::AnyView;

/// The module kind (TVM's `OpenCLModuleNode::kind`).
pub const KIND: &str = "opencl";

/// The line that starts each kernel's source.
const KERNEL_DELIMITER: &str = "// Function: ";

/// `CL_PROGRAM_BUILD_LOG`.
const CL_PROGRAM_BUILD_LOG: u32 = 0x1183;

/// A built kernel for one device.
struct Built {
    program: Handle,
    kernel: Handle,
}

/// One kernel: what its function needs to launch it, and its per-device builds.
struct Kernel {
    name: String,
    c_name: CString,
    source: String,
    args: Vec<ArgKind>,
    launch: LaunchConfig,
    /// One slot per OpenCL device, made at the first launch.
    builds: OnceCell<Box<[Mutex<Option<Built>>]>>,
}

// SAFETY: the OpenCL handles in `builds` are used under their mutex (clSetKernelArg on one
// kernel object is the only call OpenCL does not make thread-safe).
unsafe impl Send for Kernel {}
// SAFETY: as above.
unsafe impl Sync for Kernel {}

impl Drop for Kernel {
    fn drop(&mut self) {
        let (Some(builds), Ok(p)) = (self.builds.get(), platform()) else {
            return;
        };
        for slot in builds.iter() {
            if let Some(b) = slot.lock().take() {
                // SAFETY: created by `build` and released once, here; queued launches keep
                // their own references (OpenCL retains a kernel until its commands finish).
                unsafe {
                    (p.cl.release_kernel)(b.kernel);
                    (p.cl.release_program)(b.program);
                }
            }
        }
    }
}

/// A loaded `opencl` module.
pub struct OpenClModule {
    fmt: String,
    table: Vec<FunctionInfo>,
    code: Vec<u8>,
    kernels: HashMap<String, Arc<Kernel>>,
}

impl std::fmt::Debug for OpenClModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenClModule")
            .field("fmt", &self.fmt)
            .field("kernels", &self.table.len())
            .finish()
    }
}

/// TVM's `SplitKernels`: kernel name -> its source.
fn split_kernels(source: &str) -> HashMap<&str, &str> {
    let mut out = HashMap::new();
    let mut rest = match source.find(KERNEL_DELIMITER) {
        Some(i) => &source[i..],
        None => return out,
    };
    while let Some(body) = rest.strip_prefix(KERNEL_DELIMITER) {
        let (name, after) = body.split_once('\n').unwrap_or((body, ""));
        let end = after.find(KERNEL_DELIMITER).unwrap_or(after.len());
        out.insert(name.trim_end_matches('\r'), &after[..end]);
        rest = &after[end..];
    }
    out
}

impl OpenClModule {
    /// Reads a payload from the front of `bytes`; returns the module and the bytes it took.
    pub fn read(bytes: &[u8], format: InfoFormat) -> Result<(OpenClModule, usize)> {
        let (p, n) = DevicePayload::read(bytes, format)?;
        Ok((OpenClModule::new(p.fmt, p.table, p.code)?, n))
    }

    /// A module from its parts, checked: the format is OpenCL C, every kernel of the table has
    /// source and launchable argument types and tags.
    pub fn new(fmt: String, table: Vec<FunctionInfo>, code: Vec<u8>) -> Result<OpenClModule> {
        match fmt.as_str() {
            "cl" => {}
            "xclbin" | "awsxclbin" | "aocx" => crate::bail_value!(
                "OpenCL module format `{fmt}` is a precompiled FPGA binary (Xilinx SDAccel / \
                 Intel FPGA), which tvmrt does not run: it runs OpenCL C source (`cl`)"
            ),
            other => crate::bail_value!(
                "unknown OpenCL module format `{other}` (tvmrt runs OpenCL C source, `cl`)"
            ),
        }
        let source = std::str::from_utf8(&code).map_err(|e| {
            Error::value(format!(
                "the OpenCL module's source is not valid UTF-8 text (byte {})",
                e.valid_up_to()
            ))
        })?;
        let parts = split_kernels(source);
        if parts.len() != table.len() {
            crate::bail_value!(
                "the OpenCL module's source holds {} kernels (`{KERNEL_DELIMITER}<name>` lines) \
                 but its function table lists {}",
                parts.len(),
                table.len()
            );
        }
        let mut kernels = HashMap::new();
        for f in &table {
            let src = parts.get(f.name.as_str()).ok_or_else(|| {
                Error::value(format!(
                    "the OpenCL module's source has no kernel `{}` (no `{KERNEL_DELIMITER}{}` \
                     line)",
                    f.name, f.name
                ))
            })?;
            let KernelSignature {
                args,
                launch,
                c_name,
            } = f.signature()?;
            kernels.insert(
                f.name.clone(),
                Arc::new(Kernel {
                    name: f.name.clone(),
                    c_name,
                    source: src.to_string(),
                    args,
                    launch,
                    builds: OnceCell::new(),
                }),
            );
        }
        Ok(OpenClModule {
            fmt,
            table,
            code,
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
    fn build(&self, p: &Platform, device_id: i32) -> Result<Built> {
        let dev = p.device(device_id)?;
        let cl = p.cl;
        let mut rc: ClInt = 0;
        let text = self.source.as_ptr().cast();
        let len = self.source.len();
        // SAFETY: one string of `len` bytes (no NUL needed with a length) in a live context.
        let program =
            unsafe { (cl.create_program_with_source)(dev.context, 1, &text, &len, &mut rc) };
        if rc != CL_SUCCESS || program.is_null() {
            return Err(cl_error(rc, "clCreateProgramWithSource"));
        }
        // SAFETY: a program of the device's context, built for that device, no callback.
        let built = unsafe {
            (cl.build_program)(
                program,
                1,
                &dev.id,
                std::ptr::null(),
                None,
                std::ptr::null_mut(),
            )
        };
        if built != CL_SUCCESS {
            let rc = built;
            let log = build_log(p, program, dev.id);
            // SAFETY: the program was created above and is released once.
            unsafe { (cl.release_program)(program) };
            let what = if rc == CL_BUILD_PROGRAM_FAILURE {
                "does not build"
            } else {
                "could not be built"
            };
            return Err(Error::new(
                "InternalError",
                format!(
                    "OpenCL kernel `{}` {what} for opencl:{device_id} ({}): clBuildProgram \
                     returned {} ({rc}); build log:\n{}",
                    self.name,
                    dev.name,
                    code_name(rc),
                    log.trim_end()
                ),
            ));
        }
        // SAFETY: a built program; the name is NUL-terminated.
        let kernel = unsafe { (cl.create_kernel)(program, self.c_name.as_ptr(), &mut rc) };
        if rc != CL_SUCCESS || kernel.is_null() {
            // SAFETY: as above.
            unsafe { (cl.release_program)(program) };
            return Err(cl_error(rc, &format!("clCreateKernel (`{}`)", self.name)));
        }
        log::debug!("built OpenCL kernel `{}` for opencl:{device_id}", self.name);
        Ok(Built { program, kernel })
    }

    /// Launches the kernel with a host launcher's arguments.
    fn launch(&self, args: &[AnyView<'_>]) -> Result<()> {
        let work = self.launch.extract_call("OpenCL", &self.name, args)?;
        let global = work.global_size(&self.name)?;
        let p = platform()?;
        let device_id = current_device();
        let dev = p.device(device_id)?;
        let builds = self.builds.get_or_init(|| {
            (0..p.devices.len())
                .map(|_| Mutex::new(None))
                .collect::<Vec<_>>()
                .into_boxed_slice()
        });
        let mut slot = builds[device_id as usize].lock();
        if slot.is_none() {
            *slot = Some(self.build(p, device_id)?);
        }
        let kernel = slot.as_ref().map_or(std::ptr::null_mut(), |b| b.kernel);
        let cl = p.cl;
        // Held until the launch is queued: no buffer argument can be freed in between.
        let live = LIVE.lock();
        for (i, (kind, v)) in self.args.iter().zip(args).enumerate() {
            let what = || format!("OpenCL kernel `{}` argument {i}", self.name);
            // The argument's bytes as the kernel takes them (32-bit scalars narrowed as TVM's
            // pack_args, with static_cast).
            let mut bytes = [0u8; 8];
            let size = match kind {
                ArgKind::Buffer => {
                    let b = live.kernel_arg(v, super::DEVICE_TYPE, device_id, what)?;
                    let handle = (b.mem as usize).to_ne_bytes();
                    bytes[..handle.len()].copy_from_slice(&handle);
                    handle.len()
                }
                scalar => {
                    bytes = scalar.scalar_slot(v, &what)?.to_le_bytes();
                    scalar.size(0)
                }
            };
            let value: *const c_void = bytes.as_ptr().cast();
            // SAFETY: `kernel` is this slot's, used under its lock; `value` points to `size`
            // bytes alive until the call returns (OpenCL copies argument values).
            let rc = unsafe { (cl.set_kernel_arg)(kernel, i as u32, size, value) };
            if rc != CL_SUCCESS {
                return Err(cl_error(
                    rc,
                    &format!("clSetKernelArg (`{}`, argument {i})", self.name),
                ));
            }
        }
        let dims = self.launch.work_dim();
        // SAFETY: every argument is set; the sizes hold `dims` entries each.
        let rc = unsafe {
            (cl.enqueue_nd_range_kernel)(
                dev.queue,
                kernel,
                dims as u32,
                std::ptr::null(),
                global.as_ptr(),
                work.block.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        };
        drop(live);
        if rc != CL_SUCCESS {
            return Err(cl_error(
                rc,
                &format!(
                    "clEnqueueNDRangeKernel (`{}`, global {:?}, local {:?})",
                    self.name,
                    &global[..dims],
                    &work.block[..dims]
                ),
            ));
        }
        Ok(())
    }
}

/// The compiler's log of a program that failed to build.
fn build_log(p: &Platform, program: Handle, device: Handle) -> String {
    let mut len = 0usize;
    // SAFETY: a size query writes only `len`.
    let rc = unsafe {
        (p.cl.get_program_build_info)(
            program,
            device,
            CL_PROGRAM_BUILD_LOG,
            0,
            std::ptr::null_mut(),
            &mut len,
        )
    };
    if rc != CL_SUCCESS {
        return format!("(no build log: {})", code_name(rc));
    }
    let mut buf = vec![0u8; len.max(1)];
    // SAFETY: `buf` holds the `len` bytes the driver asked for.
    let rc = unsafe {
        (p.cl.get_program_build_info)(
            program,
            device,
            CL_PROGRAM_BUILD_LOG,
            buf.len(),
            buf.as_mut_ptr().cast(),
            std::ptr::null_mut(),
        )
    };
    if rc != CL_SUCCESS {
        return format!("(no build log: {})", code_name(rc));
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

impl ModuleKind for OpenClModule {
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
        Ok(write_payload(&self.fmt, &self.table, &self.code))
    }

    /// Binary-serializable and runnable.
    fn property_mask(&self) -> i32 {
        3
    }

    fn inspect_source(&self, format: &str) -> String {
        match format {
            "" | "cl" => String::from_utf8_lossy(&self.code).into_owned(),
            _ => String::new(),
        }
    }
}

/// The loaders, with TVM's names: `ffi.Module.load_from_bytes.opencl` (TVM 0.21+: exactly the
/// payload) and `runtime.module.loadbinary_opencl` (TVM <= 0.20 blobs: the payload at the
/// front of the rest of the blob, with the function table of that era; the count of bytes read
/// goes through the `int64_t*` second argument, tvmrt's classic loader protocol).
pub fn loaders() -> Vec<(&'static str, Function)> {
    payload_loaders(
        [
            "ffi.Module.load_from_bytes.opencl",
            "runtime.module.loadbinary_opencl",
        ],
        "OpenCL module payload",
        |p| Ok(Module::new(OpenClModule::new(p.fmt, p.table, p.code)?)),
    )
}

/// `tvmrt inspect`'s view of an `opencl` module.
pub fn describe(m: &Module) -> Option<DeviceModuleInfo> {
    m.downcast::<OpenClModule>().map(OpenClModule::describe)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{dtype, dtypes};

    fn table() -> Vec<FunctionInfo> {
        vec![FunctionInfo {
            name: "add_kernel".into(),
            arg_types: vec![dtype(3, 64, 1), dtype(3, 64, 1), dtypes::INT32],
            launch_param_tags: vec!["blockIdx.x".into(), "threadIdx.x".into()],
            arg_extra_tags: vec![0, 0, 0],
        }]
    }

    const SRC: &str = "// Function: add_kernel\n__kernel void add_kernel(__global float* a, \
                       __global float* b, int n) { int i = get_global_id(0); if (i < n) b[i] = \
                       a[i]; }\n";

    #[test]
    fn split_like_tvm() {
        let s = "prelude\n// Function: a\nA1\nA2\n// Function: b\r\nB\n";
        let parts = split_kernels(s);
        assert_eq!(parts["a"], "A1\nA2\n");
        assert_eq!(parts["b"], "B\n");
        assert!(split_kernels("no delimiter").is_empty());
    }

    #[test]
    fn payload_round_trip_and_refusals() {
        let m = OpenClModule::new("cl".into(), table(), SRC.as_bytes().to_vec()).unwrap();
        let bytes = m.save_to_bytes().unwrap();
        let (back, n) = OpenClModule::read(&bytes, InfoFormat::WithExtraTags).unwrap();
        assert_eq!(n, bytes.len());
        assert_eq!(back.functions(), m.functions());
        assert_eq!(
            back.describe().kernels[0].arg_types,
            ["handle", "handle", "int32"]
        );
        for cut in 0..bytes.len() {
            assert!(
                OpenClModule::read(&bytes[..cut], InfoFormat::WithExtraTags).is_err(),
                "cut at {cut}"
            );
        }
        let e = OpenClModule::new("aocx".into(), table(), vec![]).unwrap_err();
        assert!(e.message.contains("precompiled FPGA binary"), "{e}");
        let e = OpenClModule::new("ptx".into(), table(), vec![]).unwrap_err();
        assert!(
            e.message.contains("unknown OpenCL module format `ptx`"),
            "{e}"
        );
        let e =
            OpenClModule::new("cl".into(), table(), b"// Function: other\nx".to_vec()).unwrap_err();
        assert!(e.message.contains("no kernel `add_kernel`"), "{e}");
        let e = OpenClModule::new("cl".into(), table(), b"nothing".to_vec()).unwrap_err();
        assert!(e.message.contains("holds 0 kernels"), "{e}");
        let mut bad = table();
        bad[0].arg_types[2] = dtypes::INT8;
        let e = OpenClModule::new("cl".into(), bad, SRC.as_bytes().to_vec()).unwrap_err();
        assert!(e.message.contains("argument 2 has type int8"), "{e}");
    }
}
