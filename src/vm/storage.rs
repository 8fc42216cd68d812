//! VM memory: allocators (`vm_initialization` allocator kinds) and storage objects
//! (`vm.builtin.alloc_storage`), from which `vm.builtin.alloc_tensor` carves tensors.
//!
//! A storage's memory is a 1-D `uint8` tvmrt tensor on the allocator's device (64-byte aligned
//! on the CPU, as TVM's `kAllocAlignment`; an OpenCL buffer on OpenCL); a tensor allocated in a
//! storage is a view of it and keeps it alive, as a TVM tensor keeps its `Storage` alive. TVM (`src/runtime/memory/memory_manager.cc`,
//! `naive_allocator.h`, `pooled_allocator.h`):
//! - the naive allocator (kind 1) allocates exactly the bytes asked for and frees them when
//!   the last user goes;
//! - the pooled allocator (kind 2) rounds sizes up to 4096-byte pages and reuses freed blocks
//!   of the same rounded size. TVM returns a block to its pool when the `Storage` dies; here the
//!   pool keeps every block and a block is free when the pool holds its only reference (no
//!   storage and no tensor view uses it), which gives the same reuse without a drop hook and
//!   can never hand out memory a live tensor still views.
//!
//! TVM's pool never gives a block back. Here, when a size misses, the free blocks of the
//! least recently used sizes are released until what the pool holds stays within twice the
//! most it ever had in use at once: a model with a symbolic batch run at every batch size from
//! 1 to 16 (a server's dynamic batcher) would otherwise hold every size's intermediates at once
//! (about 8x the largest call's), while sizes used again and again stay pooled.

use parking_lot::Mutex;

use crate::abi::{type_index, DLDataType, DLDevice, DLTensor};
use crate::dtype::dtypes;
use crate::error::{Error, Result};
use crate::object::{new_object, ObjectPayload, ObjectRef};
use crate::tensor::Tensor;

/// TVM's pooled allocator page size (`PooledAllocator::kDefaultPageSize`).
pub const PAGE_SIZE: usize = 4096;

/// Allocator kinds (`memory::AllocatorType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocatorKind {
    /// Allocate and free each block (1).
    Naive,
    /// Reuse freed blocks of the same page-rounded size (2).
    Pooled,
}

impl AllocatorKind {
    /// The kind with TVM's number, or a `ValueError`.
    pub fn from_code(code: i64) -> Result<AllocatorKind> {
        match code {
            1 => Ok(AllocatorKind::Naive),
            2 => Ok(AllocatorKind::Pooled),
            c => Err(Error::value(format!(
                "unknown allocator type {c}: expected 1 (naive) or 2 (pooled)"
            ))),
        }
    }
}

/// An allocator of storage blocks on one device.
pub struct Allocator {
    kind: AllocatorKind,
    device: DLDevice,
    /// Pooled only: blocks by rounded size (a model uses few sizes, so a list beats a hash).
    pool: Mutex<Pool>,
}

/// The pooled allocator's blocks.
#[derive(Default)]
struct Pool {
    /// Blocks by rounded size, with the allocation count at that size's last use.
    sizes: Vec<SizeClass>,
    /// Allocations so far (the clock of `SizeClass::used`).
    clock: u64,
    /// The most bytes of blocks in use at once so far.
    peak_in_use: usize,
}

struct SizeClass {
    size: usize,
    blocks: Vec<Tensor>,
    used: u64,
}

/// A block that only the pool references: no storage and no tensor view uses it.
fn is_free(b: &Tensor) -> bool {
    b.object().strong_count() == 1
}

impl Pool {
    /// Releases the free blocks of the least recently used sizes until the pool, with `extra`
    /// more bytes, holds at most twice its peak in use.
    fn trim(&mut self, extra: usize) {
        let held = |p: &Pool| -> usize {
            p.sizes
                .iter()
                .map(|c| c.size * c.blocks.len())
                .sum::<usize>()
        };
        let in_use: usize = self
            .sizes
            .iter()
            .map(|c| c.size * c.blocks.iter().filter(|b| !is_free(b)).count())
            .sum::<usize>()
            + extra;
        self.peak_in_use = self.peak_in_use.max(in_use);
        let bound = self.peak_in_use.saturating_mul(2);
        while held(self) + extra > bound {
            let victim = self
                .sizes
                .iter_mut()
                .filter(|c| c.blocks.iter().any(is_free))
                .min_by_key(|c| c.used);
            let Some(class) = victim else { break };
            class.blocks.retain(|b| !is_free(b));
        }
        self.sizes.retain(|c| !c.blocks.is_empty());
    }
}

impl Allocator {
    /// A new allocator of `kind` on `device`.
    pub fn new(kind: AllocatorKind, device: DLDevice) -> Allocator {
        Allocator {
            kind,
            device,
            pool: Mutex::new(Pool::default()),
        }
    }

    /// The device its blocks live on.
    pub fn device(&self) -> DLDevice {
        self.device
    }

    /// The kind.
    pub fn kind(&self) -> AllocatorKind {
        self.kind
    }

    /// A block of at least `nbytes` bytes (exactly, for the naive allocator).
    pub fn alloc(&self, nbytes: usize) -> Result<Tensor> {
        match self.kind {
            AllocatorKind::Naive => new_block(nbytes, self.device),
            AllocatorKind::Pooled => {
                let size = nbytes
                    .checked_next_multiple_of(PAGE_SIZE)
                    .ok_or_else(|| Error::value(format!("cannot allocate {nbytes} bytes")))?;
                let mut pool = self.pool.lock();
                pool.clock += 1;
                let clock = pool.clock;
                // The smallest free block that holds `size` bytes: a call with fewer rows than
                // an earlier one (a smaller batch of a symbolic model) runs in that call's
                // blocks instead of adding its own. Only the pool references a free block;
                // nobody else can take a new reference to it while we hold the lock, so the
                // count cannot change under us.
                let best = pool
                    .sizes
                    .iter_mut()
                    .filter(|c| c.size >= size)
                    .filter_map(|c| c.blocks.iter().position(is_free).map(|i| (c, i)))
                    .min_by_key(|(c, _)| c.size);
                if let Some((class, i)) = best {
                    class.used = clock;
                    return Ok(class.blocks[i].clone());
                }
                pool.trim(size);
                let b = new_block(size, self.device)?;
                match pool.sizes.iter_mut().find(|c| c.size == size) {
                    Some(class) => {
                        class.used = clock;
                        class.blocks.push(b.clone());
                    }
                    None => pool.sizes.push(SizeClass {
                        size,
                        blocks: vec![b.clone()],
                        used: clock,
                    }),
                }
                Ok(b)
            }
        }
    }

    /// Bytes held by the pool (pooled allocator; 0 for naive).
    pub fn pooled_bytes(&self) -> usize {
        self.pool
            .lock()
            .sizes
            .iter()
            .map(|c| c.size * c.blocks.len())
            .sum()
    }

    /// Number of blocks in the pool.
    pub fn pooled_blocks(&self) -> usize {
        self.pool.lock().sizes.iter().map(|c| c.blocks.len()).sum()
    }
}

fn new_block(nbytes: usize, device: DLDevice) -> Result<Tensor> {
    let n = i64::try_from(nbytes)
        .map_err(|_| Error::value(format!("cannot allocate {nbytes} bytes")))?;
    Tensor::empty(&[n], dtypes::UINT8, device)
}

/// Payload of a storage object (TVM `vm.Storage`). tvmrt gives it the generic object type
/// index (64): the type is private to the VM and only its builtins look inside.
pub struct StorageObj {
    block: Tensor,
}

// SAFETY: no public cell; the block is an immutable tensor reference.
unsafe impl ObjectPayload for StorageObj {
    const TYPE_INDEX: i32 = type_index::OBJECT;
}

/// A new storage object over `block`.
pub fn new_storage(block: Tensor) -> ObjectRef {
    new_object(StorageObj { block })
}

/// The block of a storage object, or `None` for other objects.
pub fn storage_block(obj: &ObjectRef) -> Option<&Tensor> {
    obj.downcast_ref::<StorageObj>().map(|s| &s.block)
}

/// Payload of a tensor carved from a storage block: a tensor object (type index 70) like any
/// other, whose `DLTensor` follows the header, with its dims (shape then compact strides) in
/// one allocation and a reference to the block it views. `vm.builtin.alloc_tensor` runs several
/// times per model call, so this keeps it to two allocations, as TVM's `StorageObj::AllocTensor`.
#[repr(C)]
pub struct StorageTensorObj {
    dl: DLTensor,
    dims: Box<[i64]>,
    _block: ObjectRef,
}

// SAFETY: the payload starts with the `DLTensor` tvm-ffi's tensor object has after its header
// (type index 70), which is all that generated code and `Tensor` read; the descriptor is
// immutable and the dims it points to live in `dims`, owned by the object. The data is shared
// memory whose synchronization is the users' (as in TVM).
unsafe impl ObjectPayload for StorageTensorObj {
    const TYPE_INDEX: i32 = type_index::TENSOR;
}

/// A tensor of `shape` and `dtype` at `offset` bytes into a storage's block
/// (`StorageObj::AllocTensor`), keeping the block alive. Where the device allows pointer
/// arithmetic (the CPU) the offset is folded into the data pointer; elsewhere the tensor shares
/// the block's pointer and carries the offset in `byte_offset`, as TVM's.
pub fn alloc_tensor_in(
    block: &Tensor,
    offset: i64,
    shape: &[i64],
    dtype: DLDataType,
) -> Result<Tensor> {
    // The common dtypes skip the full check (this runs several times per model call).
    let common = dtype.lanes == 1
        && matches!(
            (dtype.code.0, dtype.bits),
            (0 | 1, 8 | 16 | 32 | 64) | (2, 16 | 32 | 64) | (6, 8)
        );
    if !common {
        crate::tensor::layout::check_dtype(dtype)?;
    }
    let ndim = crate::tensor::layout::check_ndim(shape.len() as i64)?;
    let numel = crate::tensor::layout::check_shape(shape)?;
    let needed = (numel as u128 * dtype.bits as u128 * dtype.lanes as u128).div_ceil(8);
    // Blocks are 1-d uint8 tensors: their one dim is their size in bytes.
    let size = block.shape().first().copied().unwrap_or(0).max(0) as u128;
    let fits = offset >= 0 && (offset as u128).saturating_add(needed) <= size;
    if !fits {
        return Err(Error::runtime(format!(
            "storage allocation failure, attempted to allocate {needed} at offset {offset} in \
             region that is {size}bytes"
        )));
    }
    let mut dims = vec![0i64; 2 * ndim].into_boxed_slice();
    dims[..ndim].copy_from_slice(shape);
    crate::tensor::layout::fill_compact_strides(shape, &mut dims[ndim..]);
    let (shape_ptr, strides_ptr) = if ndim == 0 {
        (std::ptr::null_mut(), std::ptr::null_mut())
    } else {
        (dims.as_mut_ptr(), dims[ndim..].as_mut_ptr())
    };
    let device = block.device();
    let folds = device.device_type.0 == crate::device::CPU
        || crate::device::api_of(device)?.pointer_arithmetic();
    let (data, byte_offset) = if folds {
        // In bounds: checked above against the block's size.
        let p = block.data_ptr().cast::<u8>().wrapping_add(offset as usize);
        (p.cast(), 0)
    } else {
        (block.dl().data, block.byte_offset() + offset as u64)
    };
    let dl = DLTensor {
        data,
        device,
        ndim: ndim as i32,
        dtype,
        shape: shape_ptr,
        strides: strides_ptr,
        byte_offset,
    };
    let obj = new_object(StorageTensorObj {
        dl,
        dims,
        _block: block.object().clone(),
    });
    Tensor::from_object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_reuses_free_blocks_only() {
        let a = Allocator::new(AllocatorKind::Pooled, crate::device::cpu());
        let b1 = a.alloc(100).unwrap();
        assert_eq!(b1.nbytes(), PAGE_SIZE);
        let p1 = b1.data_ptr();
        // In use: a second request gets a new block.
        let b2 = a.alloc(200).unwrap();
        assert_ne!(b2.data_ptr(), p1);
        drop(b1);
        // Free again: reused.
        let b3 = a.alloc(4000).unwrap();
        assert_eq!(b3.data_ptr(), p1);
        // A live view keeps its block out of the pool.
        let v = alloc_tensor_in(&b3, 64, &[4], dtypes::FLOAT32).unwrap();
        drop(b3);
        let b4 = a.alloc(10).unwrap();
        assert_ne!(b4.data_ptr(), p1);
        assert_eq!(v.data_ptr() as usize, p1 as usize + 64);
        // A (held by the view), B (held by b2) and the new one.
        assert_eq!(a.pooled_blocks(), 3);
    }

    #[test]
    fn pooled_releases_the_least_recently_used_sizes_beyond_twice_its_peak() {
        let a = Allocator::new(AllocatorKind::Pooled, crate::device::cpu());
        // One call at a time, each of a new size (as batch sizes 1..16 of a symbolic model):
        // the pool keeps at most twice the largest call, not every size.
        for pages in 1..=16 {
            drop(a.alloc(pages * PAGE_SIZE).unwrap());
        }
        let held = a.pooled_bytes();
        assert!(held <= 2 * 16 * PAGE_SIZE, "{held}");
        assert!(held >= 16 * PAGE_SIZE, "{held}");
        // Sizes in steady use stay pooled: the same blocks come back.
        let (x, y) = (
            a.alloc(3 * PAGE_SIZE).unwrap(),
            a.alloc(5 * PAGE_SIZE).unwrap(),
        );
        let (px, py) = (x.data_ptr(), y.data_ptr());
        drop((x, y));
        for _ in 0..3 {
            let (x, y) = (
                a.alloc(3 * PAGE_SIZE).unwrap(),
                a.alloc(5 * PAGE_SIZE).unwrap(),
            );
            assert_eq!((x.data_ptr(), y.data_ptr()), (px, py));
        }
        // Blocks in use are never released.
        let live: Vec<Tensor> = (1..=4)
            .map(|p| a.alloc(p * 7 * PAGE_SIZE).unwrap())
            .collect();
        drop(a.alloc(40 * PAGE_SIZE).unwrap());
        let ptrs: Vec<_> = live.iter().map(|t| t.data_ptr()).collect();
        assert!(ptrs.iter().all(|p| !p.is_null()));
        assert!(a.pooled_bytes() >= 70 * PAGE_SIZE);
    }

    #[test]
    fn pooled_runs_smaller_calls_in_the_blocks_of_larger_ones() {
        let a = Allocator::new(AllocatorKind::Pooled, crate::device::cpu());
        // A batch of 16 rows, then batches of 15 down to 1 (as a dynamic batcher runs them):
        // each smaller call's blocks are the first call's, and nothing more is held.
        let big: Vec<Tensor> = [16, 8, 4]
            .iter()
            .map(|p| a.alloc(p * PAGE_SIZE).unwrap())
            .collect();
        let ptrs: Vec<_> = big.iter().map(|t| t.data_ptr()).collect();
        drop(big);
        for rows in (1..16).rev() {
            let call: Vec<Tensor> = [rows, rows / 2, rows / 4]
                .iter()
                .map(|p| a.alloc(p.max(&1) * PAGE_SIZE - 100).unwrap())
                .collect();
            let mut got: Vec<_> = call.iter().map(|t| t.data_ptr()).collect();
            got.sort();
            let mut want = ptrs.clone();
            want.sort();
            assert_eq!(got, want, "{rows} rows");
        }
        assert_eq!(a.pooled_bytes(), 28 * PAGE_SIZE);
        assert_eq!(a.pooled_blocks(), 3);
        // The smallest free block that fits is the one taken.
        let small = a.alloc(3 * PAGE_SIZE).unwrap();
        assert_eq!(small.nbytes(), 4 * PAGE_SIZE);
        assert_eq!(small.data_ptr(), ptrs[2]);
    }

    #[test]
    fn naive_is_exact_and_bounds_are_checked() {
        let a = Allocator::new(AllocatorKind::Naive, crate::device::cpu());
        let b = a.alloc(16).unwrap();
        assert_eq!(b.nbytes(), 16);
        assert!(alloc_tensor_in(&b, 0, &[4], dtypes::FLOAT32).is_ok());
        let e = alloc_tensor_in(&b, 4, &[4], dtypes::FLOAT32).unwrap_err();
        assert!(
            e.message.contains("attempted to allocate 16 at offset 4"),
            "{e}"
        );
        assert!(AllocatorKind::from_code(3).is_err());
    }
}
