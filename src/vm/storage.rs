//! VM memory: allocators (`vm_initialization` allocator kinds) and storage objects
//! (`vm.builtin.alloc_storage`), from which `vm.builtin.alloc_tensor` carves tensors.
//!
//! A storage's memory is a 1-D `uint8` tvmrt tensor (64-byte aligned, as TVM's
//! `kAllocAlignment`); a tensor allocated in a storage is a view of it and keeps it alive, as a
//! TVM tensor keeps its `Storage` alive. TVM (`src/runtime/memory/memory_manager.cc`,
//! `naive_allocator.h`, `pooled_allocator.h`):
//! - the naive allocator (kind 1) allocates exactly the bytes asked for and frees them when
//!   the last user goes;
//! - the pooled allocator (kind 2) rounds sizes up to 4096-byte pages and reuses freed blocks
//!   of the same rounded size. TVM returns a block to its pool when the `Storage` dies; here the
//!   pool keeps every block and a block is free when the pool holds its only reference (no
//!   storage and no tensor view uses it), which gives the same reuse without a drop hook and
//!   can never hand out memory a live tensor still views.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::abi::{type_index, DLDataType};
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

/// A CPU allocator of storage blocks.
pub struct Allocator {
    kind: AllocatorKind,
    /// Pooled only: blocks by rounded size.
    pool: Mutex<HashMap<usize, Vec<Tensor>>>,
}

impl Allocator {
    /// A new allocator of `kind`.
    pub fn new(kind: AllocatorKind) -> Allocator {
        Allocator {
            kind,
            pool: Mutex::new(HashMap::new()),
        }
    }

    /// The kind.
    pub fn kind(&self) -> AllocatorKind {
        self.kind
    }

    /// A block of at least `nbytes` bytes (exactly, for the naive allocator).
    pub fn alloc(&self, nbytes: usize) -> Result<Tensor> {
        match self.kind {
            AllocatorKind::Naive => new_block(nbytes),
            AllocatorKind::Pooled => {
                let size = nbytes
                    .checked_next_multiple_of(PAGE_SIZE)
                    .ok_or_else(|| Error::value(format!("cannot allocate {nbytes} bytes")))?;
                let mut pool = self.pool.lock();
                let blocks = pool.entry(size).or_default();
                // Only the pool references a free block; nobody else can take a new reference
                // to it while we hold the lock, so the count cannot change under us.
                if let Some(b) = blocks.iter().find(|b| b.object().strong_count() == 1) {
                    return Ok(b.clone());
                }
                let b = new_block(size)?;
                blocks.push(b.clone());
                Ok(b)
            }
        }
    }

    /// Bytes held by the pool (pooled allocator; 0 for naive).
    pub fn pooled_bytes(&self) -> usize {
        self.pool
            .lock()
            .iter()
            .map(|(size, blocks)| size * blocks.len())
            .sum()
    }

    /// Number of blocks in the pool.
    pub fn pooled_blocks(&self) -> usize {
        self.pool.lock().values().map(Vec::len).sum()
    }
}

fn new_block(nbytes: usize) -> Result<Tensor> {
    let n = i64::try_from(nbytes)
        .map_err(|_| Error::value(format!("cannot allocate {nbytes} bytes")))?;
    Tensor::empty(&[n], dtypes::UINT8, crate::tensor::layout::cpu())
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

/// A tensor of `shape` and `dtype` at `offset` bytes into a storage's block
/// (`StorageObj::AllocTensor`).
pub fn alloc_tensor_in(block: &Tensor, offset: i64, shape: &[i64], dtype: DLDataType) -> Result<Tensor> {
    crate::tensor::layout::check_dtype(dtype)?;
    let numel = crate::tensor::layout::check_shape(shape)?;
    let needed = crate::tensor::layout::data_size(numel, dtype)?;
    let size = block.nbytes();
    let fits = u64::try_from(offset)
        .ok()
        .and_then(|o| o.checked_add(needed as u64))
        .is_some_and(|end| end <= size as u64);
    if !fits {
        return Err(Error::runtime(format!(
            "storage allocation failure, attempted to allocate {needed} at offset {offset} in \
             region that is {size}bytes"
        )));
    }
    block.view(shape, dtype, offset as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_reuses_free_blocks_only() {
        let a = Allocator::new(AllocatorKind::Pooled);
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
        assert_eq!(a.pooled_blocks(), 2);
    }

    #[test]
    fn naive_is_exact_and_bounds_are_checked() {
        let a = Allocator::new(AllocatorKind::Naive);
        let b = a.alloc(16).unwrap();
        assert_eq!(b.nbytes(), 16);
        assert!(alloc_tensor_in(&b, 0, &[4], dtypes::FLOAT32).is_ok());
        let e = alloc_tensor_in(&b, 4, &[4], dtypes::FLOAT32).unwrap_err();
        assert!(e.message.contains("attempted to allocate 16 at offset 4"), "{e}");
        assert!(AllocatorKind::from_code(3).is_err());
    }
}
