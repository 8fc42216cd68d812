//! The tensor cache (TVM `tensor_cache_support.cc`): MLC-LLM's weight format and a
//! process-wide table of named tensors the VM's parameters come from.
//!
//! A weight directory holds `tensor-cache.json` and shard files. The JSON lists the shards
//! (`dataPath`, `format: "raw-shard"`, `nbytes`) and, for each, its records (`name`, `shape`,
//! `dtype`, `format`, `nbytes`, `byteOffset`). A record is stored `raw`, or `f32-to-bf16`: a
//! float32 tensor kept as the upper 16 bits of each value (decoded by shifting them back).
//!
//! Shards are mapped, not read: on the CPU a raw record whose bytes start 64-byte aligned in
//! the shard is used in place (a read-only tensor over the mapping), others are decoded or
//! copied out. A load checks every shard and record first (missing shard, sizes that disagree
//! with the shard or the shape) and changes the table only when all of them are good. A shard
//! truncated by another process while its tensors are in use would fault, as any mapped file.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use once_cell::sync::Lazy;
use parking_lot::Mutex;
use serde_json::Value;

use super::args::Args;
use crate::abi::{DLDataType, DLDevice};
use crate::device::api::ALLOC_ALIGNMENT;
use crate::dtype::{dtype_from_str, dtypes};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::{Module, ModuleKind};
use crate::object::containers::array::new_array;
use crate::tensor::layout::{check_shape, data_size, CPU};
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

static TABLE: Lazy<Mutex<HashMap<String, Tensor>>> = Lazy::new(|| Mutex::new(HashMap::new()));

/// The tensor cached under `name`.
pub fn get(name: &str) -> Option<Tensor> {
    TABLE.lock().get(name).cloned()
}

/// Caches `t` under `name`; an existing name is an error unless `replace`.
pub fn update(name: &str, t: Tensor, replace: bool) -> Result<()> {
    let mut table = TABLE.lock();
    if !replace && table.contains_key(name) {
        crate::bail_value!("Name {name} already exists in the cache");
    }
    table.insert(name.to_string(), t);
    Ok(())
}

/// Drops `name` from the cache.
pub fn remove(name: &str) {
    TABLE.lock().remove(name);
}

/// Drops every cached tensor.
pub fn clear() {
    TABLE.lock().clear();
}

/// A read-only mapping of a whole file, unmapped when the last tensor over it goes.
struct MappedFile {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and never changes while it lives.
unsafe impl Send for MappedFile {}
// SAFETY: as above.
unsafe impl Sync for MappedFile {}

impl MappedFile {
    fn open(path: &Path) -> std::io::Result<MappedFile> {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len() as usize;
        if len == 0 {
            return Ok(MappedFile {
                ptr: std::ptr::null_mut(),
                len: 0,
            });
        }
        // SAFETY: a fresh private read-only mapping of an open file of `len` bytes; the
        // descriptor may close afterwards (the mapping keeps the file).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(MappedFile { ptr, len })
    }

    fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `len` readable bytes are mapped at `ptr` until `self` drops.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: unmaps exactly the mapping `open` made, once.
            unsafe { libc::munmap(self.ptr, self.len) };
        }
    }
}

/// One record of a shard.
struct Record {
    name: String,
    shape: Vec<i64>,
    dtype: DLDataType,
    /// Stored as the upper halves of float32 values.
    bf16: bool,
    nbytes: usize,
    byte_offset: usize,
}

fn field<'a>(v: &'a Value, key: &str, what: &str) -> Result<&'a Value> {
    v.get(key)
        .ok_or_else(|| Error::value(format!("tensor-cache.json: {what} has no \"{key}\"")))
}

fn str_field<'a>(v: &'a Value, key: &str, what: &str) -> Result<&'a str> {
    field(v, key, what)?.as_str().ok_or_else(|| {
        Error::value(format!(
            "tensor-cache.json: \"{key}\" of {what} is not a string"
        ))
    })
}

fn uint_field(v: &Value, key: &str, what: &str) -> Result<usize> {
    field(v, key, what)?
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| {
            Error::value(format!(
                "tensor-cache.json: \"{key}\" of {what} is not a non-negative integer"
            ))
        })
}

fn parse_record(v: &Value, shard: &str) -> Result<Record> {
    let name = str_field(v, "name", &format!("a record of {shard}"))?.to_string();
    let what = format!("record `{name}` of {shard}");
    let shape: Vec<i64> = field(v, "shape", &what)?
        .as_array()
        .ok_or_else(|| {
            Error::value(format!(
                "tensor-cache.json: the shape of {what} is not a list"
            ))
        })?
        .iter()
        .map(|d| {
            d.as_i64().filter(|&d| d >= 0).ok_or_else(|| {
                Error::value(format!("tensor-cache.json: bad dimension {d} in {what}"))
            })
        })
        .collect::<Result<_>>()?;
    let dtype = dtype_from_str(str_field(v, "dtype", &what)?)
        .map_err(|e| e.context(format!("tensor-cache.json: {what}")))?;
    let format = str_field(v, "format", &what)?;
    let nbytes = uint_field(v, "nbytes", &what)?;
    let byte_offset = uint_field(v, "byteOffset", &what)?;
    let numel = check_shape(&shape)?;
    let bf16 = format == "f32-to-bf16" && dtype == dtypes::FLOAT32;
    let stored = if bf16 {
        data_size(numel, dtypes::BFLOAT16)?
    } else {
        data_size(numel, dtype)?
    };
    if stored != nbytes {
        crate::bail_value!(
            "tensor-cache.json: {what} says {nbytes} bytes, but a {format} {} tensor of shape \
             {shape:?} takes {stored}",
            crate::dtype::dtype_to_string(dtype).unwrap_or_default()
        );
    }
    Ok(Record {
        name,
        shape,
        dtype,
        bf16,
        nbytes,
        byte_offset,
    })
}

/// Reads one shard and makes its tensors.
fn load_shard(dir: &Path, shard: &Value, device: DLDevice) -> Result<Vec<(String, Tensor)>> {
    let path = str_field(shard, "dataPath", "a shard")?;
    let what = format!("shard `{path}`");
    let format = str_field(shard, "format", &what)?;
    if format != "raw-shard" {
        crate::bail_value!("Only `raw-shard` format is supported (shard `{path}` is `{format}`)");
    }
    let nbytes = uint_field(shard, "nbytes", &what)?;
    let records = field(shard, "records", &what)?
        .as_array()
        .ok_or_else(|| {
            Error::value(format!(
                "tensor-cache.json: records of {what} is not a list"
            ))
        })?
        .iter()
        .map(|r| parse_record(r, &what))
        .collect::<Result<Vec<_>>>()?;
    let file = dir.join(path);
    let mapped = MappedFile::open(&file).map_err(|e| {
        Error::value(format!(
            "Error when loading parameters from {path}: cannot open {}: {e}",
            file.display()
        ))
    })?;
    if mapped.len != nbytes {
        crate::bail_value!(
            "Error when loading parameters from {path}: Encountered an corrupted parameter \
             shard. It means it is not downloaded completely or downloading is interrupted. \
             Please try to download again. (tensor-cache.json says {nbytes} bytes, the file \
             has {})",
            mapped.len
        );
    }
    for r in &records {
        if r.byte_offset
            .checked_add(r.nbytes)
            .is_none_or(|end| end > nbytes)
        {
            crate::bail_value!(
                "Error when loading parameters from {path}: record `{}` ({} bytes at offset {}) \
                 lies outside the {nbytes}-byte shard",
                r.name,
                r.nbytes,
                r.byte_offset
            );
        }
    }
    let owner: crate::mapped::Owner = Arc::new(mapped);
    let mapped = owner.downcast_ref::<MappedFile>().unwrap();
    let mut out = Vec::with_capacity(records.len());
    for r in records {
        let bytes = &mapped.bytes()[r.byte_offset..r.byte_offset + r.nbytes];
        let t = if r.bf16 {
            let decoded: Vec<u8> = bytes
                .chunks_exact(2)
                .flat_map(|h| ((u16::from_le_bytes([h[0], h[1]]) as u32) << 16).to_le_bytes())
                .collect();
            let t = Tensor::empty(&r.shape, r.dtype, device)?;
            t.copy_from_bytes(&decoded)?;
            t
        } else if device.device_type.0 == CPU
            && (bytes.as_ptr() as usize).is_multiple_of(ALLOC_ALIGNMENT)
            && !bytes.is_empty()
        {
            Tensor::over_mapped(bytes, &r.shape, r.dtype, device, owner.clone())?
        } else {
            let t = Tensor::empty(&r.shape, r.dtype, device)?;
            t.copy_from_bytes(bytes)?;
            t
        };
        out.push((r.name, t));
    }
    Ok(out)
}

/// Every tensor of the weight directory `dir` (its `tensor-cache.json` and shards), in the
/// file's order, on `device`, without caching them: for a host that keeps each model's weights
/// apart (two models may name their tensors alike). Fails unless every shard loads.
pub fn read(dir: &Path, device: DLDevice) -> Result<Vec<(String, Tensor)>> {
    let json_path = dir.join("tensor-cache.json");
    let text = std::fs::read_to_string(&json_path)
        .map_err(|e| Error::value(format!("cannot read {}: {e}", json_path.display())))?;
    let json: Value = serde_json::from_str(&text)
        .map_err(|e| Error::value(format!("Failed to parse JSON {}: {e}", json_path.display())))?;
    if !json.is_object() {
        crate::bail_value!(
            "The given string is not a JSON object: {}",
            json_path.display()
        );
    }
    let shards = field(&json, "records", "tensor-cache.json")?
        .as_array()
        .ok_or_else(|| Error::value("tensor-cache.json: \"records\" is not a list"))?;
    let mut all = Vec::new();
    for shard in shards {
        all.extend(load_shard(dir, shard, device)?);
    }
    Ok(all)
}

/// `vm.builtin.tensor_cache.load`: every tensor of the weight directory `dir` into the
/// cache, on `device`; nothing changes unless every shard loads.
pub fn load(dir: &Path, device: DLDevice) -> Result<usize> {
    let all = read(dir, device)?;
    let n = all.len();
    let mut table = TABLE.lock();
    for (name, t) in all {
        table.insert(name, t);
    }
    Ok(n)
}

/// `param_array_from_cache`: `prefix_0`, `prefix_1`, ... (`num_params` of them, or all that
/// exist when it is -1).
pub fn params_by_prefix(prefix: &str, num_params: i64) -> Result<Vec<Tensor>> {
    let table = TABLE.lock();
    let mut out = Vec::new();
    let mut i = 0i64;
    while num_params == -1 || i < num_params {
        let name = format!("{prefix}_{i}");
        match table.get(&name) {
            Some(t) => out.push(t.clone()),
            None if num_params == -1 => break,
            None => return Err(Error::runtime(format!("Cannot find {name} in cache"))),
        }
        i += 1;
    }
    Ok(out)
}

/// `param_array_from_cache_by_name`.
pub fn params_by_name(names: &[String]) -> Result<Vec<Tensor>> {
    let table = TABLE.lock();
    names
        .iter()
        .map(|n| {
            table
                .get(n)
                .cloned()
                .ok_or_else(|| Error::value(format!("Cannot find parameter in cache: {n}")))
        })
        .collect()
}

fn tensor_array(ts: Vec<Tensor>) -> Any {
    Any::from_object(new_array(ts.into_iter().map(Any::from).collect()))
}

/// A module holding parameters (`param_module`), whose `get_params` returns them.
struct ParamModule {
    params: Vec<Tensor>,
}

impl ModuleKind for ParamModule {
    fn kind(&self) -> &str {
        "param_module"
    }

    fn get_function(&self, _this: &Module, name: &str) -> Result<Option<Function>> {
        if name != "get_params" {
            return Ok(None);
        }
        let params = self.params.clone();
        Ok(Some(Function::from_fn(move |_| {
            Ok(tensor_array(params.clone()))
        })))
    }
}

fn param_module(params: Vec<Tensor>) -> Any {
    Any::from_object(Module::new(ParamModule { params }).into_object())
}

/// `vm.builtin.tensor_cache.*`, `vm.builtin.param_array_from_cache*`,
/// `vm.builtin.param_module_from_cache*`.
pub(super) fn builtins() -> Vec<(&'static str, Function)> {
    type F = fn(&Args<'_, '_>) -> Result<Any>;
    let entries: Vec<(&'static str, usize, usize, F)> = vec![
        ("vm.builtin.tensor_cache.get", 1, 1, |a| {
            Ok(get(a.str(0, "name")?).map(Any::from).unwrap_or_default())
        }),
        ("vm.builtin.tensor_cache.update", 2, 3, |a| {
            let name = a.str(0, "name")?;
            let replace = a.len() == 3 && a.bool(2, "override")?;
            let t = match a.get(1).type_index() {
                crate::abi::type_index::DL_TENSOR_PTR => {
                    let p = a.get(1).as_dltensor().unwrap();
                    crate::error::non_null(p, "arr")?;
                    // SAFETY: a non-null DLTensor* argument describes live memory for the call.
                    unsafe { Tensor::copy_of_dltensor(&*p)? }
                }
                _ => a.tensor(1, "arr")?,
            };
            update(name, t, replace)?;
            Ok(Any::none())
        }),
        ("vm.builtin.tensor_cache.remove", 1, 1, |a| {
            remove(a.str(0, "name")?);
            Ok(Any::none())
        }),
        ("vm.builtin.tensor_cache.clear", 0, 0, |_| {
            clear();
            Ok(Any::none())
        }),
        ("vm.builtin.tensor_cache.load", 3, 3, |a| {
            let device = DLDevice {
                device_type: crate::abi::DLDeviceType(a.i32(1, "device_type")? as u32),
                device_id: a.i32(2, "device_id")?,
            };
            load(Path::new(a.str(0, "cache_path")?), device)?;
            Ok(Any::none())
        }),
        ("vm.builtin.param_array_from_cache", 2, 2, |a| {
            Ok(tensor_array(params_by_prefix(
                a.str(0, "prefix")?,
                a.i64(1, "num_params")?,
            )?))
        }),
        ("vm.builtin.param_array_from_cache_by_name", 1, 1, |a| {
            Ok(tensor_array(params_by_name(&a.strings(0, "names")?)?))
        }),
        ("vm.builtin.param_module_from_cache", 2, 2, |a| {
            Ok(param_module(params_by_prefix(
                a.str(0, "prefix")?,
                a.i64(1, "num_params")?,
            )?))
        }),
        ("vm.builtin.param_module_from_cache_by_name", 1, 1, |a| {
            Ok(param_module(params_by_name(&a.strings(0, "names")?)?))
        }),
    ];
    let mut out: Vec<(&'static str, Function)> = entries
        .into_iter()
        .map(|(name, min, max, f)| {
            (
                name,
                Function::from_fn(move |raw: &[AnyView<'_>]| {
                    f(&Args::between(name, raw, min, max)?)
                }),
            )
        })
        .collect();
    out.push((
        "vm.builtin.param_array_from_cache_by_name_unpacked",
        Function::from_fn(|raw: &[AnyView<'_>]| {
            let names = raw
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.as_str().map(str::to_string).ok_or_else(|| {
                        Error::value(format!(
                            "Expect string as input, but get {} at {i}",
                            v.type_name()
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(tensor_array(params_by_name(&names)?))
        }),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("tvmrt-tc-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn write(d: &Path, name: &str, bytes: &[u8]) {
        std::fs::File::create(d.join(name))
            .unwrap()
            .write_all(bytes)
            .unwrap();
    }

    fn f32s(t: &Tensor) -> Vec<f32> {
        t.to_vec()
            .unwrap()
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn raw_records_are_used_in_place_and_bf16_is_decoded() {
        let d = dir("ok");
        let a: Vec<f32> = (0..16).map(|i| i as f32 * 0.5).collect();
        let mut shard: Vec<u8> = a.iter().flat_map(|v| v.to_le_bytes()).collect();
        // 1.5 and -2.0 as bfloat16, then an unaligned raw record.
        shard.extend_from_slice(&0x3fc0u16.to_le_bytes());
        shard.extend_from_slice(&0xc000u16.to_le_bytes());
        shard.extend_from_slice(&7.25f32.to_le_bytes());
        write(&d, "s0.bin", &shard);
        let json = format!(
            r#"{{"metadata": {{}}, "records": [{{"dataPath": "s0.bin", "format": "raw-shard",
              "nbytes": {}, "records": [
              {{"name": "tc.a", "shape": [4, 4], "dtype": "float32", "format": "raw",
                "nbytes": 64, "byteOffset": 0}},
              {{"name": "tc.b", "shape": [2], "dtype": "float32", "format": "f32-to-bf16",
                "nbytes": 4, "byteOffset": 64}},
              {{"name": "tc.c", "shape": [1], "dtype": "float32", "format": "raw",
                "nbytes": 4, "byteOffset": 68}}]}}]}}"#,
            shard.len()
        );
        write(&d, "tensor-cache.json", json.as_bytes());
        assert_eq!(load(&d, crate::tensor::layout::cpu()).unwrap(), 3);
        let ta = get("tc.a").unwrap();
        assert!(ta.is_read_only(), "aligned raw records are used in place");
        assert_eq!(f32s(&ta), a);
        assert_eq!(f32s(&get("tc.b").unwrap()), vec![1.5, -2.0]);
        let tc = get("tc.c").unwrap();
        assert!(!tc.is_read_only(), "unaligned records are copied");
        assert_eq!(f32s(&tc), vec![7.25]);
        let by_name = params_by_name(&["tc.c".into(), "tc.a".into()]).unwrap();
        assert_eq!(by_name.len(), 2);
        std::fs::remove_dir_all(&d).unwrap();
        // The mapping outlives the files and the directory.
        assert_eq!(f32s(&ta)[15], 7.5);
        for n in ["tc.a", "tc.b", "tc.c"] {
            remove(n);
        }
    }

    #[test]
    fn read_keeps_the_file_order_and_caches_nothing() {
        let d = dir("read");
        let shard: Vec<u8> = [1.0f32, 2.0, 3.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        write(&d, "s0.bin", &shard);
        let json = r#"{"records": [{"dataPath": "s0.bin", "format": "raw-shard", "nbytes": 12,
            "records": [
            {"name": "tcread.z", "shape": [2], "dtype": "float32", "format": "raw",
             "nbytes": 8, "byteOffset": 0},
            {"name": "tcread.a", "shape": [1], "dtype": "float32", "format": "raw",
             "nbytes": 4, "byteOffset": 8}]}]}"#;
        write(&d, "tensor-cache.json", json.as_bytes());
        let got = read(&d, crate::tensor::layout::cpu()).unwrap();
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["tcread.z", "tcread.a"]);
        assert_eq!(f32s(&got[0].1), vec![1.0, 2.0]);
        assert_eq!(f32s(&got[1].1), vec![3.0]);
        assert!(get("tcread.z").is_none() && get("tcread.a").is_none());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn bad_caches_are_refused_and_change_nothing() {
        let d = dir("bad");
        write(&d, "s0.bin", &[0u8; 8]);
        let good = r#"{"dataPath": "s0.bin", "format": "raw-shard", "nbytes": 8, "records": [
            {"name": "tcbad.x", "shape": [2], "dtype": "float32", "format": "raw",
             "nbytes": 8, "byteOffset": 0}]}"#;
        let cases = [
            (
                r#"{"dataPath": "missing.bin", "format": "raw-shard", "nbytes": 8, "records": []}"#,
                "cannot open",
            ),
            (
                r#"{"dataPath": "s0.bin", "format": "raw-shard", "nbytes": 9, "records": []}"#,
                "corrupted parameter shard",
            ),
            (
                r#"{"dataPath": "s0.bin", "format": "raw-shard", "nbytes": 8, "records": [
                {"name": "y", "shape": [3], "dtype": "float32", "format": "raw",
                 "nbytes": 8, "byteOffset": 0}]}"#,
                "takes 12",
            ),
            (
                r#"{"dataPath": "s0.bin", "format": "raw-shard", "nbytes": 8, "records": [
                {"name": "y", "shape": [2], "dtype": "float32", "format": "raw",
                 "nbytes": 8, "byteOffset": 4}]}"#,
                "outside the 8-byte shard",
            ),
            (
                r#"{"dataPath": "s0.bin", "format": "zip", "nbytes": 8, "records": []}"#,
                "Only `raw-shard`",
            ),
            (
                r#"{"dataPath": "s0.bin", "format": "raw-shard", "nbytes": 8, "records": [
                {"name": "y", "dtype": "float32", "format": "raw", "nbytes": 8,
                 "byteOffset": 0}]}"#,
                "has no \"shape\"",
            ),
        ];
        for (bad, msg) in cases {
            let json = format!(r#"{{"records": [{good}, {bad}]}}"#);
            write(&d, "tensor-cache.json", json.as_bytes());
            let e = load(&d, crate::tensor::layout::cpu()).unwrap_err();
            assert!(e.message.contains(msg), "{msg}: {e}");
            assert!(get("tcbad.x").is_none(), "a failed load caches nothing");
        }
        write(&d, "tensor-cache.json", b"[1, 2]");
        assert!(load(&d, crate::tensor::layout::cpu()).is_err());
        std::fs::remove_dir_all(&d).unwrap();
        assert!(load(&d, crate::tensor::layout::cpu())
            .unwrap_err()
            .message
            .contains("cannot read"));
    }
}
