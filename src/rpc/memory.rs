//! The memory an RPC session hands out by address, and the check every address the peer
//! sends back goes through.
//!
//! TVM's server trusts the `data` address of every tensor a client sends. tvmrt's keeps each
//! region it gave out (an allocation, or the data of a tensor a call returned) and accepts an
//! address only if it is one of them, on the same device, with the bytes the shape needs: a
//! stale, forged or too small address is an error, never a wild write.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::Arc;

use super::wire::WireTensor;
use crate::abi::{DLDataType, DLDevice};
use crate::device::{self, DeviceBlock};
use crate::error::{Error, Result};
use crate::object::ObjectRef;
use crate::tensor::layout::shape_bytes;
use crate::tensor::Tensor;

/// What keeps a region's memory alive.
enum Owner {
    /// Memory the peer allocated (`DevAllocData*`), freed when the last view goes.
    Block(#[allow(dead_code)] DeviceBlock),
    /// The data of a tensor a call returned.
    Tensor(#[allow(dead_code)] ObjectRef),
}

/// One region the peer may name by address: `extent` bytes from `data` on `device`.
pub struct Region {
    data: *mut c_void,
    extent: usize,
    device: DLDevice,
    owner: Owner,
}

// SAFETY: the region's memory is owned by `owner` (a device block or a tensor object, both
// usable from any thread); the raw pointer is only an address into it.
unsafe impl Send for Region {}
// SAFETY: as above; the region is never mutated after construction.
unsafe impl Sync for Region {}

impl Region {
    /// The region's base address.
    pub fn data(&self) -> *mut c_void {
        self.data
    }

    /// Its device.
    pub fn device(&self) -> DLDevice {
        self.device
    }
}

/// A checked tensor the peer named: its region (kept alive) and its place in it.
pub struct Resolved {
    pub region: Arc<Region>,
    pub byte_offset: u64,
    pub nbytes: usize,
    pub shape: Vec<i64>,
    pub dtype: DLDataType,
}

impl Resolved {
    /// A tensor object over the region (it keeps the region alive while it lives).
    pub fn to_tensor(&self) -> Result<Tensor> {
        let owner: Arc<dyn std::any::Any + Send + Sync> = self.region.clone();
        // SAFETY: `resolve` checked that the region holds `byte_offset + nbytes` bytes on this
        // device, and the tensor keeps the region (and so its owner) alive.
        unsafe {
            Tensor::over_shared(
                self.region.data,
                self.byte_offset,
                &self.shape,
                self.dtype,
                self.region.device,
                owner,
            )
        }
    }

    /// `len` bytes from `offset` into this tensor, as a tensor of bytes.
    pub fn bytes_view(&self, offset: usize, len: usize) -> Result<Tensor> {
        if offset.checked_add(len).is_none_or(|end| end > self.nbytes) {
            return Err(Error::value("RPC: byte view outside the tensor"));
        }
        let owner: Arc<dyn std::any::Any + Send + Sync> = self.region.clone();
        let u8_type = DLDataType {
            code: crate::abi::DLDataTypeCode(1),
            bits: 8,
            lanes: 1,
        };
        // SAFETY: inside the checked tensor, so inside the region, which the view keeps alive.
        unsafe {
            Tensor::over_shared(
                self.region.data,
                self.byte_offset + offset as u64,
                &[len as i64],
                u8_type,
                self.region.device,
                owner,
            )
        }
    }

    /// The host address of the first byte, when the region is host memory.
    pub fn host_ptr(&self) -> Option<*mut u8> {
        device::is_host_accessible(self.region.device).then(|| {
            self.region
                .data
                .cast::<u8>()
                .wrapping_add(self.byte_offset as usize)
        })
    }
}

/// Every region of one session, by base address.
#[derive(Default)]
pub struct MemoryTable {
    regions: BTreeMap<u64, Vec<(u64, Arc<Region>)>>,
    next_id: u64,
    /// Bytes the peer has allocated and not freed.
    allocated: usize,
    /// The most it may hold at once (`None`: no limit but the machine's).
    limit: Option<usize>,
}

impl MemoryTable {
    /// A table whose allocations may total at most `limit` bytes at once.
    pub fn with_limit(limit: usize) -> MemoryTable {
        MemoryTable {
            limit: Some(limit),
            ..MemoryTable::default()
        }
    }

    /// Allocates `shape`/`dtype` on `dev` (zero-filled on the host) and records it; returns
    /// its address.
    pub fn allocate(
        &mut self,
        dev: DLDevice,
        shape: &[i64],
        dtype: DLDataType,
        mem_scope: Option<&str>,
    ) -> Result<u64> {
        let nbytes = shape_bytes(shape, dtype)?;
        if let Some(limit) = self.limit {
            if nbytes > limit.saturating_sub(self.allocated) {
                return Err(Error::value(format!(
                    "RPC: allocating {nbytes} bytes on {} would take the session past its \
                     memory limit of {limit} bytes ({} held)",
                    device::device_name(dev),
                    self.allocated
                )));
            }
        }
        let block = DeviceBlock::alloc_tensor(dev, shape, dtype, mem_scope)?;
        self.allocated += block.nbytes();
        let region = Region {
            data: block.data(),
            extent: block.nbytes(),
            device: dev,
            owner: Owner::Block(block),
        };
        let addr = region.data as u64;
        self.insert(region);
        Ok(addr)
    }

    /// Records the data of tensor `t` (returned to the peer); returns the region's id, to
    /// [`MemoryTable::release`] when the peer frees the tensor.
    pub fn record_tensor(&mut self, t: &Tensor) -> Result<(u64, u64)> {
        let extent = (t.byte_offset() as usize)
            .checked_add(t.nbytes())
            .ok_or_else(|| Error::value("RPC: tensor extent overflows"))?;
        let region = Region {
            data: t.data_ptr(),
            extent,
            device: t.device(),
            owner: Owner::Tensor(t.object().clone()),
        };
        let addr = region.data as u64;
        Ok((addr, self.insert(region)))
    }

    fn insert(&mut self, region: Region) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.regions
            .entry(region.data as u64)
            .or_default()
            .push((id, Arc::new(region)));
        id
    }

    /// Forgets region `id` at `addr` (its memory goes when no tensor over it is left).
    pub fn release(&mut self, addr: u64, id: u64) {
        if let Some(list) = self.regions.get_mut(&addr) {
            list.retain(|(i, _)| *i != id);
            if list.is_empty() {
                self.regions.remove(&addr);
            }
        }
    }

    /// `DevFreeData`: forgets the allocation at `addr` on `dev`.
    pub fn free_allocation(&mut self, dev: DLDevice, addr: u64) -> Result<()> {
        let list = self.regions.get_mut(&addr);
        let pos = list.as_ref().and_then(|l| {
            l.iter()
                .position(|(_, r)| matches!(r.owner, Owner::Block(_)) && r.device == dev)
        });
        match (list, pos) {
            (Some(list), Some(pos)) => {
                let (_, region) = list.remove(pos);
                self.allocated = self.allocated.saturating_sub(region.extent);
                if list.is_empty() {
                    self.regions.remove(&addr);
                }
                Ok(())
            }
            _ => Err(Error::value(format!(
                "RPC: free of 0x{addr:x} on {}: no allocation of this session is there",
                device::device_name(dev)
            ))),
        }
    }

    /// Checks that `t` names memory of this session on its device with the bytes its shape
    /// needs from its offset.
    pub fn resolve(&self, t: &WireTensor, what: &str) -> Result<Resolved> {
        let nbytes = shape_bytes(&t.shape, t.dtype)
            .map_err(|e| Error::value(format!("RPC: {what}: {}", e.message)))?;
        let fits = |r: &Region| {
            r.device == t.device && (t.byte_offset as u128 + nbytes as u128) <= r.extent as u128
        };
        let found = self
            .regions
            .get(&t.data)
            .and_then(|l| l.iter().rev().find(|(_, r)| fits(r)));
        let Some((_, region)) = found else {
            return Err(Error::value(format!(
                "RPC: {what}: no memory of this session at 0x{:x} on {} holds {} bytes from \
                 offset {} (freed, never allocated, or too small)",
                t.data,
                device::device_name(t.device),
                nbytes,
                t.byte_offset
            )));
        };
        Ok(Resolved {
            region: region.clone(),
            byte_offset: t.byte_offset,
            nbytes,
            shape: t.shape.clone(),
            dtype: t.dtype,
        })
    }

    /// How many regions the session holds.
    pub fn len(&self) -> usize {
        self.regions.values().map(Vec::len).sum()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::abi::{DLDataTypeCode, DLDeviceType};

    pub(crate) const CPU: DLDevice = DLDevice {
        device_type: DLDeviceType(1),
        device_id: 0,
    };
    pub(crate) const F32: DLDataType = DLDataType {
        code: DLDataTypeCode(2),
        bits: 32,
        lanes: 1,
    };

    fn wire(data: u64, shape: Vec<i64>, byte_offset: u64) -> WireTensor {
        WireTensor {
            data,
            device: CPU,
            dtype: F32,
            shape,
            byte_offset,
        }
    }

    #[test]
    fn only_live_allocations_of_the_right_size_resolve() {
        let mut m = MemoryTable::default();
        let a = m.allocate(CPU, &[4], F32, None).unwrap();
        assert!(m.resolve(&wire(a, vec![4], 0), "t").is_ok());
        assert!(m.resolve(&wire(a, vec![2], 8), "t").is_ok());
        let e = m.resolve(&wire(a, vec![5], 0), "t").err().unwrap();
        assert!(e.message.contains("holds 20 bytes"), "{e}");
        assert!(m.resolve(&wire(a, vec![2], 12), "t").is_err());
        assert!(m.resolve(&wire(a + 4, vec![1], 0), "t").is_err());
        let mut gpu = wire(a, vec![4], 0);
        gpu.device.device_type = DLDeviceType(2);
        assert!(m.resolve(&gpu, "t").is_err());
        // A view outlives the free: its memory stays until the view goes.
        let view = m
            .resolve(&wire(a, vec![4], 0), "t")
            .unwrap()
            .to_tensor()
            .unwrap();
        m.free_allocation(CPU, a).unwrap();
        assert!(m.resolve(&wire(a, vec![4], 0), "t").is_err());
        assert!(m.free_allocation(CPU, a).is_err());
        assert_eq!(view.to_vec().unwrap(), vec![0u8; 16]);
        assert!(m.is_empty());
    }

    #[test]
    fn allocations_stay_within_the_limit() {
        let mut m = MemoryTable::with_limit(100);
        let a = m.allocate(CPU, &[20], F32, None).unwrap();
        let e = m.allocate(CPU, &[6], F32, None).unwrap_err();
        assert!(
            e.message.contains("memory limit of 100 bytes (80 held)"),
            "{e}"
        );
        assert!(m.allocate(CPU, &[1 << 40], F32, None).is_err());
        m.free_allocation(CPU, a).unwrap();
        m.allocate(CPU, &[25], F32, None).unwrap();
    }

    #[test]
    fn returned_tensors_resolve_until_released() {
        let mut m = MemoryTable::default();
        let t = Tensor::empty(&[3], F32, CPU).unwrap();
        let (addr, id) = m.record_tensor(&t).unwrap();
        assert_eq!(addr, t.data_ptr() as u64);
        assert!(m.resolve(&wire(addr, vec![3], 0), "t").is_ok());
        // Not an allocation: DevFreeData refuses it.
        assert!(m.free_allocation(CPU, addr).is_err());
        m.release(addr, id);
        assert!(m.resolve(&wire(addr, vec![3], 0), "t").is_err());
        assert_eq!(m.len(), 0);
    }
}
