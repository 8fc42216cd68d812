//! The CUDA memory tvmrt has allocated and not freed: device blocks by address and device,
//! page-locked host blocks. Frees of anything else are refused, copies range-checked, and a
//! kernel's buffer argument is checked to be device memory of the launching device before the
//! driver sees it (`cuPointerGetAttribute` for memory tvmrt did not allocate, such as a
//! PyTorch tensor passed in through DLPack).

use std::collections::BTreeMap;

use parking_lot::Mutex;

use super::driver::{
    cu, CuDevicePtr, CUDA_SUCCESS, MEMORYTYPE_DEVICE, MEMORYTYPE_HOST, MEMORYTYPE_UNIFIED,
    POINTER_ATTRIBUTE_DEVICE_ORDINAL, POINTER_ATTRIBUTE_MEMORY_TYPE,
};
use crate::error::{Error, Result};

/// A live block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// Its address.
    pub start: CuDevicePtr,
    /// Its size as requested.
    pub size: usize,
    /// The device (for page-locked memory, the `kDLCUDAHost` device id).
    pub device: i32,
    /// Whether it is page-locked host memory.
    pub host: bool,
}

static LIVE: Mutex<BTreeMap<(bool, CuDevicePtr), Block>> = Mutex::new(BTreeMap::new());

/// Records a new block.
pub fn record(b: Block) {
    LIVE.lock().insert((b.host, b.start), b);
}

/// Removes and returns the block starting at `start`, if live.
pub fn take(start: CuDevicePtr, host: bool) -> Option<Block> {
    LIVE.lock().remove(&(host, start))
}

/// The live device block holding address `addr`.
pub fn containing(addr: CuDevicePtr) -> Option<Block> {
    let live = LIVE.lock();
    let (_, b) = live.range(..=(false, addr)).next_back()?;
    (!b.host && addr < b.start + b.size.max(1) as u64).then_some(*b)
}

/// How many blocks (device and page-locked) tvmrt holds now.
pub fn live_count() -> usize {
    LIVE.lock().len()
}

/// Fails unless each of `addrs` (argument index, address) is memory a kernel on `device` can
/// use: null, a live tvmrt block of that device, or memory the driver says is that device's,
/// page-locked or managed. `what(i)` names argument `i`. tvmrt's own blocks are looked up under
/// one lock; only other memory (a PyTorch tensor's) costs a driver call.
pub fn check_kernel_pointers(
    addrs: &[(usize, CuDevicePtr)],
    device: i32,
    what: &dyn Fn(usize) -> String,
) -> Result<()> {
    // Memory tvmrt did not allocate (allocates only when there is some).
    let mut unknown: Vec<(usize, CuDevicePtr)> = Vec::new();
    {
        let live = LIVE.lock();
        for &(i, addr) in addrs {
            if addr == 0 {
                continue;
            }
            let block = live
                .range(..=(false, addr))
                .next_back()
                .map(|(_, b)| *b)
                .filter(|b| !b.host && addr < b.start + b.size.max(1) as u64);
            match block {
                Some(b) if b.device == device => {}
                Some(b) => {
                    return Err(Error::value(format!(
                        "{}: its memory is on cuda:{}, the kernel runs on cuda:{device}",
                        what(i),
                        b.device
                    )))
                }
                None => unknown.push((i, addr)),
            }
        }
    }
    for &(i, addr) in &unknown {
        check_with_driver(i, addr, device, what)?;
    }
    Ok(())
}

/// Asks the driver whether `addr`, which tvmrt did not allocate, is usable on `device`.
fn check_with_driver(
    i: usize,
    addr: CuDevicePtr,
    device: i32,
    what: &dyn Fn(usize) -> String,
) -> Result<()> {
    let c = cu()?;
    let mut kind: u32 = 0;
    // SAFETY: a writable `CUmemorytype`; any address may be asked about.
    let rc = unsafe {
        (c.pointer_get_attribute)(
            (&mut kind as *mut u32).cast(),
            POINTER_ATTRIBUTE_MEMORY_TYPE,
            addr,
        )
    };
    if rc != CUDA_SUCCESS {
        return Err(Error::value(format!(
            "{}: {addr:#x} is not CUDA memory (a host tensor given to a CUDA kernel? copy it to \
             the device first)",
            what(i)
        )));
    }
    match kind {
        MEMORYTYPE_HOST | MEMORYTYPE_UNIFIED => Ok(()),
        MEMORYTYPE_DEVICE => {
            let mut ordinal: i32 = -1;
            // SAFETY: a writable int; the address is device memory (asked above).
            let rc = unsafe {
                (c.pointer_get_attribute)(
                    (&mut ordinal as *mut i32).cast(),
                    POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                    addr,
                )
            };
            if rc == CUDA_SUCCESS && ordinal != device {
                return Err(Error::value(format!(
                    "{}: its memory is on cuda:{ordinal}, the kernel runs on cuda:{device}",
                    what(i)
                )));
            }
            Ok(())
        }
        other => Err(Error::value(format!(
            "{}: {addr:#x} is CUDA memory of type {other}, which a kernel cannot use",
            what(i)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containing_finds_the_block() {
        let b = Block {
            start: 0x7000_0000_1000,
            size: 256,
            device: 1,
            host: false,
        };
        record(b);
        assert_eq!(containing(0x7000_0000_1000), Some(b));
        assert_eq!(containing(0x7000_0000_10ff), Some(b));
        assert_eq!(containing(0x7000_0000_1100), None);
        assert_eq!(containing(0x7000_0000_0fff), None);
        assert_eq!(take(b.start, true), None, "not a host block");
        assert_eq!(take(b.start, false), Some(b));
        assert_eq!(containing(0x7000_0000_1000), None);
    }
}
