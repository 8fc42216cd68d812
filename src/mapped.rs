//! Bytes of a mapped library lent to the loaders that read them, so large data (a Relax
//! executable's weights) can be used in place or copied once, instead of copied three times.
//!
//! A library's blob lives in memory the dynamic linker mapped from the file. While the blob's
//! modules are restored, [`lend`] records that memory with an owner that keeps it mapped (the
//! loaded library). A reader that finds its bytes inside the lent region ([`owner_of`]) can
//! keep them by holding the owner, and once it has copied bytes elsewhere, [`release`] lets
//! the kernel drop their pages: pages of a read-only file mapping that were never written are
//! clean, so dropping them loses nothing (touching them again reads the file back) and the
//! process's resident memory no longer counts the weights twice.
//!
//! The lent regions are per thread: loaders run on the thread that loads the library.

use std::cell::RefCell;
use std::sync::Arc;

/// Something that keeps lent bytes mapped while it lives.
pub type Owner = Arc<dyn std::any::Any + Send + Sync>;

/// A lent region: an address range, its owner, and whether its pages may be dropped.
#[derive(Clone)]
struct Region {
    start: usize,
    end: usize,
    owner: Owner,
    releasable: bool,
}

thread_local! {
    static LENT: RefCell<Vec<Region>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with `bytes` lent: kept mapped by `owner`, their pages droppable after a copy when
/// `releasable` (only for memory of a read-only file mapping that nothing ever writes).
pub fn lend<R>(bytes: &[u8], owner: Owner, releasable: bool, f: impl FnOnce() -> R) -> R {
    let start = bytes.as_ptr() as usize;
    let region = Region {
        start,
        end: start + bytes.len(),
        owner,
        releasable,
    };
    LENT.with(|l| l.borrow_mut().push(region));
    // Popped even when `f` unwinds, so a failed load leaves no region behind.
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            LENT.with(|l| l.borrow_mut().pop());
        }
    }
    let _pop = Pop;
    f()
}

fn find(bytes: &[u8]) -> Option<Region> {
    let start = bytes.as_ptr() as usize;
    let end = start.checked_add(bytes.len())?;
    LENT.with(|l| {
        l.borrow()
            .iter()
            .rev()
            .find(|r| r.start <= start && end <= r.end)
            .cloned()
    })
}

/// The owner of `bytes` if they lie wholly inside a region lent on this thread.
pub fn owner_of(bytes: &[u8]) -> Option<Owner> {
    find(bytes).map(|r| r.owner)
}

/// Drops from memory the pages wholly inside `bytes`, if they lie in a releasable lent region;
/// returns how many bytes of pages were dropped. The bytes stay readable (the pages come back
/// from the file); the caller has copied what it needs.
pub fn release(bytes: &[u8]) -> usize {
    let Some(region) = find(bytes) else {
        return 0;
    };
    if !region.releasable {
        return 0;
    }
    let page = page_size();
    let start = bytes.as_ptr() as usize;
    let first = start.next_multiple_of(page);
    let last = (start + bytes.len()) / page * page;
    if last <= first {
        return 0;
    }
    // SAFETY: [first, last) is whole pages inside a region the owner keeps mapped, which the
    // lender promised is a read-only, never-written file mapping: MADV_DONTNEED only drops
    // clean pages that the kernel reads back from the file on the next access.
    let rc = unsafe {
        libc::madvise(
            first as *mut libc::c_void,
            last - first,
            libc::MADV_DONTNEED,
        )
    };
    if rc == 0 {
        last - first
    } else {
        0
    }
}

/// Bytes kept for later: a reference to lent bytes (holding their owner), or a copy of others.
pub struct KeptBytes {
    /// Where lent bytes start (unused for a copy).
    start: usize,
    len: usize,
    keep: Keep,
}

enum Keep {
    Copy(Box<[u8]>),
    Lent(#[allow(dead_code)] Owner),
}

impl KeptBytes {
    /// Keeps `bytes`: without a copy when they lie in a region lent on this thread.
    pub fn keep(bytes: &[u8]) -> KeptBytes {
        let keep = match owner_of(bytes) {
            Some(owner) => Keep::Lent(owner),
            None => Keep::Copy(bytes.into()),
        };
        KeptBytes {
            start: bytes.as_ptr() as usize,
            len: bytes.len(),
            keep,
        }
    }

    /// Whether the bytes are used where they were lent (not copied).
    pub fn is_lent(&self) -> bool {
        matches!(self.keep, Keep::Lent(_))
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match &self.keep {
            Keep::Copy(b) => b,
            // SAFETY: `start..start + len` are lent bytes whose owner this value holds, which
            // keeps them mapped and unchanged.
            Keep::Lent(_) => unsafe {
                std::slice::from_raw_parts(self.start as *const u8, self.len)
            },
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

/// The program header type of this process's ELF class (`dl_phdr_info` hands out those).
#[cfg(target_pointer_width = "64")]
type ProgramHeader = libc::Elf64_Phdr;
#[cfg(target_pointer_width = "32")]
type ProgramHeader = libc::Elf32_Phdr;

/// Whether `bytes` lie in a loaded object's read-only segment, outside its relocation-protected
/// part: memory the dynamic linker mapped from the file and never wrote, whose pages
/// [`release`] may drop. False when no loaded object holds them.
pub fn in_read_only_segment(bytes: &[u8]) -> bool {
    struct Query {
        start: usize,
        end: usize,
        found: bool,
    }
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the `Query` passed below; `info` and its program headers are valid
        // during the callback (dl_iterate_phdr's contract).
        let (q, info) = unsafe { (&mut *data.cast::<Query>(), &*info) };
        if info.dlpi_phdr.is_null() {
            return 0;
        }
        // SAFETY: as above: `dlpi_phnum` headers at `dlpi_phdr`.
        let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum.into()) };
        let base = info.dlpi_addr as usize;
        let range = |h: &ProgramHeader| {
            let s = base.wrapping_add(h.p_vaddr as usize);
            (s, s.wrapping_add(h.p_memsz as usize))
        };
        let inside = headers.iter().find(|h| {
            let (s, e) = range(h);
            h.p_type == libc::PT_LOAD && s <= q.start && q.end <= e
        });
        let Some(segment) = inside else {
            return 0;
        };
        let relro = headers.iter().any(|h| {
            let (s, e) = range(h);
            h.p_type == libc::PT_GNU_RELRO && s < q.end && q.start < e
        });
        q.found = segment.p_flags & libc::PF_W == 0 && !relro;
        1
    }
    let start = bytes.as_ptr() as usize;
    let mut q = Query {
        start,
        end: start + bytes.len(),
        found: false,
    };
    // SAFETY: `visit` only reads what dl_iterate_phdr hands it and writes `q`, which outlives
    // the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut q as *mut Query).cast()) };
    q.found
}

#[cfg(test)]
mod tests {
    use super::*;

    static TABLE: [u8; 3 * 65536] = [7; 3 * 65536];

    #[test]
    fn lent_bytes_have_their_owner_only_inside_the_call() {
        let owner: Owner = Arc::new(5u32);
        let inner = &TABLE[100..200];
        assert!(owner_of(inner).is_none());
        lend(&TABLE[..], owner.clone(), false, || {
            let got = owner_of(inner).expect("inside the lent region");
            assert!(Arc::ptr_eq(&got, &owner));
            assert!(owner_of(&[1u8, 2][..]).is_none());
            assert_eq!(release(inner), 0, "not releasable");
        });
        assert!(owner_of(inner).is_none());
    }

    #[test]
    fn kept_bytes_copy_unless_lent() {
        let copied = KeptBytes::keep(&TABLE[..10]);
        assert!(!copied.is_lent());
        assert_ne!(copied.as_slice().as_ptr(), TABLE.as_ptr());
        assert_eq!(copied.as_slice(), &[7u8; 10]);
        let lent = lend(&TABLE[..], Arc::new(()), false, || {
            KeptBytes::keep(&TABLE[5..15])
        });
        assert!(lent.is_lent());
        assert_eq!(lent.as_slice().as_ptr(), TABLE[5..].as_ptr());
        assert_eq!(lent.as_slice(), &[7u8; 10]);
    }

    #[test]
    fn read_only_data_of_this_binary_is_releasable_and_reads_back() {
        // TABLE is immutable static data: the test binary's read-only segment.
        assert!(in_read_only_segment(&TABLE[..]));
        let heap = vec![0u8; 64];
        assert!(!in_read_only_segment(&heap));
        lend(&TABLE[..], Arc::new(()), true, || {
            let dropped = release(&TABLE[1..]);
            assert!(dropped >= 65536, "dropped {dropped}");
        });
        // The pages come back from the file.
        assert!(TABLE.iter().all(|&b| b == 7));
    }
}
