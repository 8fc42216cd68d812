//! Triton's system shared memory extension: a client registers a POSIX shared memory object
//! (`shm_open`'s key, a file under /dev/shm) as a named region, then names the region, an
//! offset and a byte size in an input's or an output's parameters (`shared_memory_region`,
//! `shared_memory_offset`, `shared_memory_byte_size`) instead of sending the tensor's bytes.
//! Inputs are read from the region and outputs written into it with positioned reads and
//! writes of the object's file; every offset and size is checked against the region first (a
//! clear 400, never a read outside it). Triton maps the object instead; a client that shrinks
//! it after registering would then make the server read past the mapping's end and die of
//! SIGBUS. Read through the file, the request gets a 400 and the server serves on, for the
//! price of the kernel's copy into the request's buffer.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::codec::check_size;
use crate::error::ApiError;
use crate::infer::{InferRequest, Tensor};

/// Where shared memory objects live (`shm_open`'s namespace on Linux).
const SHM_DIR: &str = "/dev/shm";

/// A tensor's place in a region, from its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShmRef {
    /// The region's name.
    pub region: String,
    /// The offset within the region.
    pub offset: u64,
    /// The bytes given to the tensor.
    pub byte_size: u64,
}

impl ShmRef {
    /// The reference a tensor's parameters make (`None`: no `shared_memory_region`);
    /// `text` and `number` read a parameter by name.
    pub fn from_parameters(
        tensor: &str,
        text: impl Fn(&str) -> Option<Result<String, ()>>,
        number: impl Fn(&str) -> Option<Result<u64, ()>>,
    ) -> Result<Option<ShmRef>, ApiError> {
        let bad = |what: &str| {
            ApiError::bad_request(format!(
                "'{tensor}': {what} must be a {}",
                if what == "shared_memory_region" {
                    "string"
                } else {
                    "non-negative integer"
                }
            ))
        };
        let region = match text("shared_memory_region") {
            None => return Ok(None),
            Some(r) => r.map_err(|_| bad("shared_memory_region"))?,
        };
        let byte_size = number("shared_memory_byte_size")
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "'{tensor}': shared_memory_region needs shared_memory_byte_size"
                ))
            })?
            .map_err(|_| bad("shared_memory_byte_size"))?;
        let offset = number("shared_memory_offset")
            .unwrap_or(Ok(0))
            .map_err(|_| bad("shared_memory_offset"))?;
        Ok(Some(ShmRef {
            region,
            offset,
            byte_size,
        }))
    }
}

/// A registered region.
#[derive(Debug)]
pub struct Region {
    /// Its name.
    pub name: String,
    /// The shared memory object's key.
    pub key: String,
    /// Its start within the object.
    pub offset: u64,
    /// Its size.
    pub byte_size: u64,
    file: File,
}

/// The registered regions.
#[derive(Default)]
pub struct Regions {
    map: Mutex<BTreeMap<String, Arc<Region>>>,
}

fn path_of(key: &str) -> Result<PathBuf, ApiError> {
    let name = key.strip_prefix('/').unwrap_or(key);
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(ApiError::bad_request(format!(
            "'{key}' is not a shared memory key (shm_open's: one name, as /name)"
        )));
    }
    Ok(PathBuf::from(SHM_DIR).join(name))
}

impl Regions {
    /// Registers region `name`: `byte_size` bytes at `offset` of the object `key`.
    pub fn register(
        &self,
        name: &str,
        key: &str,
        offset: u64,
        byte_size: u64,
    ) -> Result<(), ApiError> {
        let mut map = self.map.lock();
        if map.contains_key(name) {
            return Err(ApiError::bad_request(format!(
                "shared memory region '{name}' is already registered (unregister it first)"
            )));
        }
        let path = path_of(key)?;
        let file = File::options()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| {
                ApiError::bad_request(format!("cannot open shared memory object '{key}': {e}"))
            })?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        if offset.checked_add(byte_size).is_none_or(|end| end > size) {
            return Err(ApiError::bad_request(format!(
                "shared memory region '{name}': offset {offset} + byte size {byte_size} is past \
                 the end of '{key}' ({size} bytes)"
            )));
        }
        let region = Region {
            name: name.to_string(),
            key: key.to_string(),
            offset,
            byte_size,
            file,
        };
        map.insert(name.to_string(), Arc::new(region));
        Ok(())
    }

    /// Unregisters region `name`, or every region (`None`); an unknown name is no error.
    pub fn unregister(&self, name: Option<&str>) {
        let mut map = self.map.lock();
        match name {
            Some(n) => {
                map.remove(n);
            }
            None => map.clear(),
        }
    }

    /// Region `name`, or every region (`None`); an unknown name is a 404.
    pub fn status(&self, name: Option<&str>) -> Result<Vec<Arc<Region>>, ApiError> {
        let map = self.map.lock();
        match name {
            None => Ok(map.values().cloned().collect()),
            Some(n) => map.get(n).cloned().map(|r| vec![r]).ok_or_else(|| {
                ApiError::not_found(format!(
                    "no system shared memory region '{n}' is registered"
                ))
            }),
        }
    }

    fn place(&self, r: &ShmRef, tensor: &str) -> Result<(Arc<Region>, u64), ApiError> {
        let region = self.map.lock().get(&r.region).cloned().ok_or_else(|| {
            ApiError::bad_request(format!(
                "'{tensor}': no system shared memory region '{}' is registered",
                r.region
            ))
        })?;
        if r.offset
            .checked_add(r.byte_size)
            .is_none_or(|end| end > region.byte_size)
        {
            return Err(ApiError::bad_request(format!(
                "'{tensor}': offset {} + byte size {} is past the end of shared memory region \
                 '{}' ({} bytes)",
                r.offset, r.byte_size, r.region, region.byte_size
            )));
        }
        let at = region.offset + r.offset;
        Ok((region, at))
    }

    /// Reads the inputs of `request` that are in shared memory, checked against their shapes
    /// before anything is read or allocated.
    pub fn read_inputs(&self, request: &mut InferRequest) -> Result<(), ApiError> {
        for (name, r) in std::mem::take(&mut request.shm_inputs) {
            let bad = |e: String| ApiError::bad_request(format!("input '{name}': {e}"));
            let (region, at) = self.place(&r, &name)?;
            let t = request
                .inputs
                .iter_mut()
                .find(|t| t.name == name)
                .ok_or_else(|| ApiError::bad_request(format!("no input '{name}'")))?;
            let count = crate::codec::element_count(&t.shape).map_err(bad)?;
            if let Some(size) = t.datatype.element_bytes() {
                if count.checked_mul(size).map(|n| n as u64) != Some(r.byte_size) {
                    return Err(bad(format!(
                        "shared_memory_byte_size is {}, its shape needs {} ({count} elements \
                         of {size} bytes)",
                        r.byte_size,
                        count as u128 * size as u128
                    )));
                }
            }
            let mut data = Vec::new();
            usize::try_from(r.byte_size)
                .ok()
                .and_then(|n| data.try_reserve_exact(n).ok())
                .ok_or_else(|| {
                    ApiError::new(
                        axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                        format!(
                            "input '{name}': cannot allocate {} bytes to read from shared memory",
                            r.byte_size
                        ),
                    )
                })?;
            data.resize(r.byte_size as usize, 0);
            region.file.read_exact_at(&mut data, at).map_err(|e| {
                let why = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    format!(
                        "region '{}' is shorter than registered: its object was cut short \
                         after it was registered",
                        r.region
                    )
                } else {
                    e.to_string()
                };
                ApiError::bad_request(format!("'{name}': cannot read shared memory: {why}"))
            })?;
            check_size(&data, t.datatype, count).map_err(bad)?;
            t.data = data;
        }
        Ok(())
    }

    /// Writes the outputs `request` asked for in shared memory there (their data is then
    /// emptied: the response carries their metadata only).
    pub fn write_outputs(
        &self,
        request: &InferRequest,
        outputs: &mut [Tensor],
    ) -> Result<(), ApiError> {
        for o in &request.outputs {
            let Some(r) = &o.shm else { continue };
            let Some(t) = outputs.iter_mut().find(|t| t.name == o.name) else {
                continue;
            };
            if t.data.len() as u64 > r.byte_size {
                return Err(ApiError::bad_request(format!(
                    "output '{}' holds {} bytes, more than its shared_memory_byte_size {}",
                    o.name,
                    t.data.len(),
                    r.byte_size
                )));
            }
            let (region, at) = self.place(r, &o.name)?;
            region.file.write_all_at(&t.data, at).map_err(|e| {
                ApiError::new(
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    format!("output '{}': cannot write shared memory: {e}", o.name),
                )
            })?;
            t.data = Vec::new();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_check_keys_and_bounds() {
        let regions = Regions::default();
        let key = format!("/tvmrt_shm_test_{}", std::process::id());
        let path = path_of(&key).unwrap();
        std::fs::write(&path, [0u8; 64]).unwrap();
        let e = regions.register("r", &key, 32, 64).unwrap_err();
        assert!(e.message.contains("past the end"), "{}", e.message);
        assert!(regions.register("r", "/../etc/passwd", 0, 1).is_err());
        assert!(regions.register("r", "/nowhere_at_all_x", 0, 1).is_err());
        regions.register("r", &key, 16, 48).unwrap();
        assert!(regions.register("r", &key, 0, 1).is_err());
        let far = ShmRef {
            region: "r".into(),
            offset: 40,
            byte_size: 16,
        };
        let e = regions.place(&far, "x").unwrap_err();
        assert_eq!(e.status, 400);
        assert!(e
            .message
            .contains("past the end of shared memory region 'r' (48 bytes)"));
        let near = ShmRef { offset: 8, ..far };
        assert_eq!(regions.place(&near, "x").unwrap().1, 24);
        assert_eq!(regions.status(None).unwrap().len(), 1);
        regions.unregister(Some("r"));
        assert_eq!(regions.status(Some("r")).unwrap_err().status, 404);
        std::fs::remove_file(path).unwrap();
    }
}
