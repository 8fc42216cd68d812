//! NVRTC, NVIDIA's run-time CUDA C++ compiler, opened at run time and used only for modules
//! whose code is CUDA C source (fmt `cuda`: what TVM exports when it cannot compile at export
//! time). TVM 0.27 compiles such source with NVRTC when it loads the module
//! (`tvm_callback_cuda_compile`, `tvm/support/nvcc.py`); tvmrt does the same the first time a
//! kernel runs on a device, for that device's architecture: a cubin when this NVRTC knows the
//! architecture, else PTX for the newest architecture it knows below it (the driver compiles
//! that PTX for the device).
//!
//! Where NVRTC is looked for, first found wins: the file `TVMRT_NVRTC_LIBRARY` names; the
//! loader's path (`libnvrtc.so.13`, `.so.12`, `.so`, `.so.11.2`); `lib64/` of `CUDA_HOME`,
//! `CUDA_PATH` and `/usr/local/cuda`; the PyPI packages (`nvidia-cuda-nvrtc-cu12`:
//! `nvidia/cuda_nvrtc/lib/`, CUDA 13's `nvidia-cuda-nvrtc`: `nvidia/cu13/lib/`) in the
//! site-packages of `VIRTUAL_ENV`, `CONDA_PREFIX` and `PYTHONPATH`. TVM's source includes
//! libcu++ headers (`<cuda/std/cstdint>`) under NVRTC: the include directories are
//! `TVMRT_CUDA_INCLUDE` (`:`-separated) and those beside the library found (the toolkit's
//! `include/`, `include/cccl/`, `targets/x86_64-linux/include/`; the packages'
//! `nvidia/cuda_runtime/include/` and `nvidia/cuda_cccl/include/`, or `nvidia/cu13/include/`).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};

use once_cell::sync::OnceCell;

use crate::error::{Error, Result};

type NvrtcResult = c_int;
type Program = *mut c_void;

/// The NVRTC functions tvmrt uses.
pub struct Nvrtc {
    version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> NvrtcResult,
    get_error_string: unsafe extern "C" fn(NvrtcResult) -> *const c_char,
    create_program: unsafe extern "C" fn(
        *mut Program,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> NvrtcResult,
    destroy_program: unsafe extern "C" fn(*mut Program) -> NvrtcResult,
    compile_program: unsafe extern "C" fn(Program, c_int, *const *const c_char) -> NvrtcResult,
    get_program_log_size: unsafe extern "C" fn(Program, *mut usize) -> NvrtcResult,
    get_program_log: unsafe extern "C" fn(Program, *mut c_char) -> NvrtcResult,
    get_ptx_size: unsafe extern "C" fn(Program, *mut usize) -> NvrtcResult,
    get_ptx: unsafe extern "C" fn(Program, *mut c_char) -> NvrtcResult,
    get_cubin_size: Option<unsafe extern "C" fn(Program, *mut usize) -> NvrtcResult>,
    get_cubin: Option<unsafe extern "C" fn(Program, *mut c_char) -> NvrtcResult>,
    get_num_supported_archs: Option<unsafe extern "C" fn(*mut c_int) -> NvrtcResult>,
    get_supported_archs: Option<unsafe extern "C" fn(*mut c_int) -> NvrtcResult>,
    /// The file opened.
    pub path: String,
    /// Include directories for CUDA's headers.
    pub includes: Vec<PathBuf>,
    _library: libloading::Library,
}

/// The environment variable naming the NVRTC library to open.
pub const LIBRARY_ENV: &str = "TVMRT_NVRTC_LIBRARY";
/// The environment variable listing include directories (`:`-separated).
pub const INCLUDE_ENV: &str = "TVMRT_CUDA_INCLUDE";

const SONAMES: &[&str] = &[
    "libnvrtc.so.13",
    "libnvrtc.so.12",
    "libnvrtc.so",
    "libnvrtc.so.11.2",
];

static NVRTC: OnceCell<std::result::Result<Nvrtc, String>> = OnceCell::new();

/// NVRTC, opened on first use; the same error every time when it cannot be found.
pub fn nvrtc() -> Result<&'static Nvrtc> {
    NVRTC
        .get_or_init(open)
        .as_ref()
        .map_err(|m| Error::runtime(m.clone()))
}

/// Entries of `dir` whose names start with `prefix`, sorted (newest version last).
fn files_starting(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect();
    crate::cold_sort::sort(&mut v);
    v
}

/// Python `site-packages` directories under the environments the process runs in.
fn site_packages() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(prefix) = std::env::var_os(var) {
            for py in files_starting(&Path::new(&prefix).join("lib"), "python3") {
                out.push(py.join("site-packages"));
            }
        }
    }
    if let Some(pp) = std::env::var_os("PYTHONPATH") {
        out.extend(std::env::split_paths(&pp));
    }
    out
}

/// Candidate NVRTC files outside the loader's path, in search order.
fn candidate_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut roots: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(|v| std::env::var_os(v).map(PathBuf::from))
        .collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    for root in roots {
        out.extend(
            files_starting(&root.join("lib64"), "libnvrtc.so")
                .into_iter()
                .rev(),
        );
    }
    for site in site_packages() {
        for sub in ["nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"] {
            let libs = files_starting(&site.join(sub), "libnvrtc.so");
            out.extend(libs.into_iter().rev());
        }
    }
    out.retain(|p| {
        !p.to_string_lossy().contains("builtins") && !p.to_string_lossy().contains(".alt.")
    });
    out
}

/// Include directories that go with the NVRTC at `lib`.
fn includes_beside(lib: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::env::var_os(INCLUDE_ENV)
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Some(dir) = lib.parent().and_then(Path::parent) {
        roots.push(dir.to_path_buf());
        // nvidia/cuda_nvrtc/lib -> nvidia/{cuda_runtime,cuda_cccl}/include
        if let Some(nvidia) = dir.parent() {
            for pkg in ["cuda_runtime", "cuda_cccl"] {
                out.push(nvidia.join(pkg).join("include"));
            }
        }
    }
    for v in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(r) = std::env::var_os(v) {
            roots.push(PathBuf::from(r));
        }
    }
    roots.push(PathBuf::from("/usr/local/cuda"));
    for root in roots {
        out.push(root.join("include"));
        out.push(root.join("include/cccl"));
        out.push(root.join("targets/x86_64-linux/include"));
        out.push(root.join("targets/x86_64-linux/include/cccl"));
    }
    let mut seen = Vec::new();
    out.retain(|p| {
        let keep = p.is_dir() && !seen.contains(p);
        seen.push(p.clone());
        keep
    });
    out
}

fn open() -> std::result::Result<Nvrtc, String> {
    let mut tried = Vec::new();
    let mut found = None;
    let explicit = crate::device::library_override(LIBRARY_ENV);
    let names: Vec<PathBuf> = match &explicit {
        Some(p) => vec![PathBuf::from(p)],
        None => SONAMES
            .iter()
            .map(PathBuf::from)
            .chain(candidate_files())
            .collect(),
    };
    for name in names {
        // SAFETY: NVRTC's initializers only set up the library; it stays loaded for the life
        // of the process (kept in the static `NVRTC`).
        match unsafe { libloading::Library::new(&name) } {
            Ok(lib) => {
                found = Some((name, lib));
                break;
            }
            Err(e) => tried.push(format!(
                "{} ({})",
                name.display(),
                crate::device::library_error(&e)
            )),
        }
    }
    let Some((path, library)) = found else {
        return Err(format!(
            "NVRTC is not available, and this module holds CUDA C source (fmt `cuda`), which \
             tvmrt compiles with NVRTC: install the CUDA toolkit or `pip install \
             nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12 nvidia-cuda-cccl-cu12`, or set \
             {LIBRARY_ENV} to libnvrtc.so's path (tried: {})",
            tried.join("; ")
        ));
    };
    let shown = path.display().to_string();
    let lacks = |sym: &str, e: String| format!("NVRTC library `{shown}` lacks `{sym}` ({e})");
    macro_rules! sym {
        ($name:literal) => {{
            let p = crate::device::library_symbol(&library, concat!($name, "\0"), &lacks)?;
            // SAFETY: the symbol is the NVRTC function of that name, whose C signature
            // (`nvrtc.h`) the field's type spells out.
            unsafe { crate::device::function_from(p) }
        }};
    }
    macro_rules! optional {
        ($name:literal) => {
            crate::device::library_symbol(&library, concat!($name, "\0"), &lacks)
                .ok()
                // SAFETY: as in `sym!`; absent in older NVRTC versions, which is allowed.
                .map(|p| unsafe { crate::device::function_from(p) })
        };
    }
    let path_buf = PathBuf::from(&path);
    // A bare soname: the directory is where the loader found it.
    let located = if path_buf.components().count() > 1 {
        path_buf.clone()
    } else {
        loaded_path(&library).unwrap_or(path_buf.clone())
    };
    Ok(Nvrtc {
        version: sym!("nvrtcVersion"),
        get_error_string: sym!("nvrtcGetErrorString"),
        create_program: sym!("nvrtcCreateProgram"),
        destroy_program: sym!("nvrtcDestroyProgram"),
        compile_program: sym!("nvrtcCompileProgram"),
        get_program_log_size: sym!("nvrtcGetProgramLogSize"),
        get_program_log: sym!("nvrtcGetProgramLog"),
        get_ptx_size: sym!("nvrtcGetPTXSize"),
        get_ptx: sym!("nvrtcGetPTX"),
        get_cubin_size: optional!("nvrtcGetCUBINSize"),
        get_cubin: optional!("nvrtcGetCUBIN"),
        get_num_supported_archs: optional!("nvrtcGetNumSupportedArchs"),
        get_supported_archs: optional!("nvrtcGetSupportedArchs"),
        includes: includes_beside(&located),
        path: located.display().to_string(),
        _library: library,
    })
}

/// Where the dynamic loader found a library opened by soname.
fn loaded_path(library: &libloading::Library) -> Option<PathBuf> {
    // SAFETY: looking up a symbol the library must have; only its address is used.
    let sym = unsafe { library.get::<*const c_void>(b"nvrtcVersion\0") }.ok()?;
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr fills `info` for an address inside a loaded object.
    if unsafe { libc::dladdr(*sym, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr's file name is a NUL-terminated string owned by the loader.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    Some(PathBuf::from(name.to_string_lossy().into_owned()))
}

/// Code NVRTC made for a device.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// A cubin, or NUL-terminated PTX.
    pub code: Vec<u8>,
    /// Whether `code` is PTX.
    pub ptx: bool,
    /// The `--gpu-architecture` it was made for (`sm_86`, `compute_80`).
    pub arch: String,
}

/// Options TVM 0.27 passes NVRTC (`tvm/support/nvcc.py`, `_compile_cuda_nvrtc`), less the
/// architecture and include directories.
const TVM_OPTIONS: &[&str] = &[
    "-default-device",
    "-D__NV_SILENCE_DEPRECATION_BEGIN=",
    "-D__NV_SILENCE_DEPRECATION_END=",
    "-D__NV_SILENCE_HOST_DEPRECATION_BEGIN=",
    "-D__NV_SILENCE_HOST_DEPRECATION_END=",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT162_OPERATORS__",
    "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
    "--use_fast_math",
];

/// Integer types for sources that do not bring their own under NVRTC (TVM before 0.21 wrote
/// `int64_t` and friends expecting nvcc's host headers).
const PREAMBLE: &str = "#include <cuda/std/cstdint>\nusing cuda::std::uint8_t;\n\
using cuda::std::uint16_t;\nusing cuda::std::uint32_t;\nusing cuda::std::uint64_t;\n\
using cuda::std::int8_t;\nusing cuda::std::int16_t;\nusing cuda::std::int32_t;\n\
using cuda::std::int64_t;\n";

impl Nvrtc {
    /// NVRTC's version, `(major, minor)`.
    pub fn version(&self) -> (i32, i32) {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: two writable ints.
        unsafe { (self.version)(&mut major, &mut minor) };
        (major, minor)
    }

    /// The SM versions this NVRTC compiles for (empty if it cannot say).
    pub fn supported_archs(&self) -> Vec<u32> {
        let (Some(count), Some(list)) = (self.get_num_supported_archs, self.get_supported_archs)
        else {
            return Vec::new();
        };
        let mut n = 0;
        // SAFETY: a writable int.
        if unsafe { count(&mut n) } != 0 || n <= 0 {
            return Vec::new();
        }
        let mut v = vec![0 as c_int; n as usize];
        // SAFETY: `v` holds the `n` ints NVRTC writes.
        if unsafe { list(v.as_mut_ptr()) } != 0 {
            return Vec::new();
        }
        v.into_iter().map(|a| a as u32).collect()
    }

    fn error_string(&self, rc: NvrtcResult) -> String {
        // SAFETY: NVRTC returns a static string for any code.
        let p = unsafe { (self.get_error_string)(rc) };
        if p.is_null() {
            format!("NVRTC error {rc}")
        } else {
            // SAFETY: a NUL-terminated static string.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    }

    /// The `--gpu-architecture` for a device of SM version `sm`, and whether it gives PTX.
    pub fn choose_arch(&self, sm: u32) -> Result<(String, bool)> {
        let supported = self.supported_archs();
        let has_cubin = self.get_cubin.is_some() && self.get_cubin_size.is_some();
        if supported.is_empty() {
            // An NVRTC too old to list its architectures: ask for the device's own, as PTX.
            return Ok((format!("compute_{sm}"), true));
        }
        if has_cubin && supported.contains(&sm) {
            return Ok((format!("sm_{sm}"), false));
        }
        match supported.iter().copied().filter(|&a| a <= sm).max() {
            Some(a) => Ok((format!("compute_{a}"), true)),
            None => Err(Error::runtime(format!(
                "NVRTC {}.{} ({}) cannot compile for sm_{sm}: it knows {:?}",
                self.version().0,
                self.version().1,
                self.path,
                supported
            ))),
        }
    }

    /// Compiles TVM's CUDA source for a device of SM version `sm`.
    pub fn compile(&self, source: &str, sm: u32) -> Result<Compiled> {
        let (arch, ptx) = self.choose_arch(sm)?;
        let mut text: String = source
            .lines()
            .filter(|l| l.trim() != "#include <cuda.h>")
            .collect::<Vec<_>>()
            .join("\n");
        if !source.contains("__CUDACC_RTC__") {
            text.insert_str(0, PREAMBLE);
        }
        let mut options: Vec<CString> = vec![cstring(format!("--gpu-architecture={arch}"))?];
        if self.version().0 >= 12 {
            // nvcc enables 128-bit integers on Linux; NVRTC needs the flag (TVM passes it).
            options.push(cstring("--device-int128".into())?);
        }
        for o in TVM_OPTIONS {
            options.push(cstring(o.to_string())?);
        }
        for dir in &self.includes {
            options.push(cstring(format!("-I{}", dir.display()))?);
        }
        let ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let src = cstring(text)?;
        let mut prog: Program = std::ptr::null_mut();
        // SAFETY: NUL-terminated source and name, no headers passed in memory.
        let rc = unsafe {
            (self.create_program)(
                &mut prog,
                src.as_ptr(),
                c"tvm_kernels.cu".as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return Err(Error::runtime(format!(
                "nvrtcCreateProgram failed: {}",
                self.error_string(rc)
            )));
        }
        let out = self.compile_program(prog, &ptrs, &arch, ptx);
        // SAFETY: the program created above, destroyed once.
        unsafe { (self.destroy_program)(&mut prog) };
        out
    }

    fn compile_program(
        &self,
        prog: Program,
        options: &[*const c_char],
        arch: &str,
        ptx: bool,
    ) -> Result<Compiled> {
        // SAFETY: a live program; `options` are NUL-terminated strings alive for the call.
        let rc = unsafe { (self.compile_program)(prog, options.len() as c_int, options.as_ptr()) };
        if rc != 0 {
            let log = self.read(prog, self.get_program_log_size, self.get_program_log);
            let log = log.map(|l| {
                String::from_utf8_lossy(&l)
                    .trim_end_matches('\0')
                    .to_string()
            });
            return Err(Error::new(
                "CUDAError",
                format!(
                    "NVRTC ({}) could not compile the module's CUDA source for {arch}: {}; \
                     compiler log:\n{}",
                    self.path,
                    self.error_string(rc),
                    log.unwrap_or_else(|e| e.message.clone()).trim_end()
                ),
            ));
        }
        let code = if ptx {
            self.read(prog, self.get_ptx_size, self.get_ptx)?
        } else {
            match (self.get_cubin_size, self.get_cubin) {
                (Some(size), Some(get)) => self.read(prog, size, get)?,
                _ => unreachable!("choose_arch asks for a cubin only when NVRTC can give one"),
            }
        };
        Ok(Compiled {
            code,
            ptx,
            arch: arch.to_string(),
        })
    }

    fn read(
        &self,
        prog: Program,
        size: unsafe extern "C" fn(Program, *mut usize) -> NvrtcResult,
        get: unsafe extern "C" fn(Program, *mut c_char) -> NvrtcResult,
    ) -> Result<Vec<u8>> {
        let mut n = 0usize;
        // SAFETY: a live program; writes one size.
        let rc = unsafe { size(prog, &mut n) };
        if rc != 0 {
            return Err(Error::runtime(format!("NVRTC: {}", self.error_string(rc))));
        }
        let mut buf = vec![0u8; n];
        // SAFETY: `buf` holds the `n` bytes NVRTC said it writes.
        let rc = unsafe { get(prog, buf.as_mut_ptr().cast()) };
        if rc != 0 {
            return Err(Error::runtime(format!("NVRTC: {}", self.error_string(rc))));
        }
        Ok(buf)
    }
}

fn cstring(s: String) -> Result<CString> {
    CString::new(s).map_err(|_| Error::value("CUDA source or NVRTC option contains a NUL byte"))
}
