//! A loaded library's own dynamic symbols, looked up in its GNU hash table (`DT_GNU_HASH`)
//! through glibc's link map, without `dlsym`.
//!
//! Loading probes a dozen names that most libraries do not define (context pointers, ABI
//! markers, blobs). Each `dlsym` miss pays glibc's error-catching machinery (about 1,500
//! instructions); a hash-table miss is a bloom-filter test. Only this object's definitions are
//! found (not its dependencies'), each name's default version only (as `dlsym`). GNU indirect
//! functions and objects without a GNU hash table are left to `dlsym` ([`Lookup::Ask`]).
//!
//! The tables are those of the process's own ELF class: `Elf64_Dyn`/`Elf64_Sym` and 64-bit
//! bloom words on 64-bit targets, their 32-bit forms (a different `Elf32_Sym` field order)
//! on 32-bit ones.

use std::ffi::c_void;
use std::ptr::NonNull;

use super::library::{SymbolInfo, SymbolKind};

/// `DT_*` tags read here (`<elf.h>`).
const DT_NULL: isize = 0;
const DT_STRTAB: isize = 5;
const DT_SYMTAB: isize = 6;
const DT_GNU_HASH: isize = 0x6fff_fef5;
const DT_VERSYM: isize = 0x6fff_fff0;
/// A version index marking a non-default (hidden) version of a name.
const VERSYM_HIDDEN: u16 = 0x8000;
/// Symbol types (`st_info & 0xf`).
const STT_OBJECT: u8 = 1;
const STT_FUNC: u8 = 2;
const STT_COMMON: u8 = 5;
const STT_GNU_IFUNC: u8 = 10;
/// Longest hash chain followed (a sane table's chains are a few entries).
const MAX_CHAIN: usize = 1 << 16;

/// The public head of glibc's `struct link_map`.
#[repr(C)]
struct LinkMap {
    l_addr: usize,
    l_name: *const u8,
    l_ld: *const ElfDyn,
}

/// `ElfN_Dyn`: a tag and a value, each address-sized.
#[repr(C)]
struct ElfDyn {
    d_tag: isize,
    d_val: usize,
}

/// `Elf64_Sym`: one entry of a dynamic symbol table.
#[cfg(target_pointer_width = "64")]
#[repr(C)]
pub(crate) struct ElfSym {
    pub st_name: u32,
    pub st_info: u8,
    pub st_other: u8,
    pub st_shndx: u16,
    pub st_value: u64,
    pub st_size: u64,
}

/// `Elf32_Sym`: the value and size come before the info bytes.
#[cfg(target_pointer_width = "32")]
#[repr(C)]
pub(crate) struct ElfSym {
    pub st_name: u32,
    pub st_value: u32,
    pub st_size: u32,
    pub st_info: u8,
    pub st_other: u8,
    pub st_shndx: u16,
}

/// A GNU hash bloom-filter word: `ElfN_Addr`.
type BloomWord = usize;
const BLOOM_BITS: u32 = usize::BITS;

impl ElfSym {
    /// Whether the symbol is a GNU indirect function (its address comes from a resolver).
    pub(crate) fn is_indirect(&self) -> bool {
        self.st_info & 0xf == STT_GNU_IFUNC
    }

    /// What the symbol's type says it is (an indirect function is a function).
    pub(crate) fn kind(&self) -> SymbolKind {
        match self.st_info & 0xf {
            STT_FUNC | STT_GNU_IFUNC => SymbolKind::Function,
            STT_OBJECT | STT_COMMON => SymbolKind::Data,
            _ => SymbolKind::Unknown,
        }
    }
}

/// What the table says of a name.
pub(crate) enum Lookup {
    Found(SymbolInfo),
    Absent,
    /// Not decidable here (an indirect function): ask `dlsym`.
    Ask,
}

/// The tables of one loaded object (addresses, valid while it stays loaded).
pub(crate) struct DynSymbols {
    base: usize,
    symtab: usize,
    strtab: usize,
    gnu_hash: usize,
    /// The version index of each symbol (0 without versioning).
    versym: usize,
}

/// The GNU hash of a symbol name (`dl_new_hash`).
fn gnu_hash(name: &[u8]) -> u32 {
    name.iter().fold(5381u32, |h, &c| {
        h.wrapping_mul(33).wrapping_add(u32::from(c))
    })
}

impl DynSymbols {
    /// The tables of the object `link_map` describes, or `None` without a GNU hash table.
    ///
    /// # Safety
    /// `link_map` is the glibc `link_map` of a loaded object that stays loaded while the
    /// result is used.
    pub(crate) unsafe fn of(link_map: usize) -> Option<DynSymbols> {
        if link_map == 0 {
            return None;
        }
        // SAFETY: per the contract.
        let lm = unsafe { &*(link_map as *const LinkMap) };
        if lm.l_ld.is_null() {
            return None;
        }
        let (mut symtab, mut strtab, mut gnu_hash, mut versym) = (0usize, 0usize, 0usize, 0usize);
        // SAFETY: `l_ld` is the object's dynamic section, terminated by `DT_NULL`.
        let mut d = lm.l_ld;
        loop {
            let e = unsafe { &*d };
            match e.d_tag {
                DT_NULL => break,
                DT_SYMTAB => symtab = e.d_val,
                DT_STRTAB => strtab = e.d_val,
                DT_GNU_HASH => gnu_hash = e.d_val,
                DT_VERSYM => versym = e.d_val,
                _ => {}
            }
            // SAFETY: not past `DT_NULL` yet.
            d = unsafe { d.add(1) };
        }
        if symtab == 0 || strtab == 0 || gnu_hash == 0 {
            return None;
        }
        // glibc relocates these entries in place when the dynamic section is writable (x86-64)
        // and leaves them as offsets otherwise: an address below the load base is an offset.
        let fix = |p: usize| if p < lm.l_addr { p + lm.l_addr } else { p };
        Some(DynSymbols {
            base: lm.l_addr,
            symtab: fix(symtab),
            strtab: fix(strtab),
            gnu_hash: fix(gnu_hash),
            versym: if versym == 0 { 0 } else { fix(versym) },
        })
    }

    /// What the object defines under `name`.
    pub(crate) fn lookup(&self, name: &str) -> Lookup {
        let h = gnu_hash(name.as_bytes());
        // SAFETY (the reads below): `DT_VERSYM` holds one `u16` per symbol; `DT_GNU_HASH` points at `nbuckets, symoffset, bloom_size,
        // bloom_shift`, then `bloom_size` address-sized bloom words, `nbuckets` bucket words and the
        // chain, indexed by symbol index minus `symoffset`; glibc resolved the object through
        // the same tables when it loaded it.
        unsafe {
            let hdr = self.gnu_hash as *const u32;
            let (nbuckets, symoffset, bloom_size, shift) =
                (*hdr, *hdr.add(1), *hdr.add(2), *hdr.add(3));
            if nbuckets == 0 || bloom_size == 0 {
                return Lookup::Absent;
            }
            let bloom = hdr.add(4) as *const BloomWord;
            let word = *bloom.add((h / BLOOM_BITS) as usize % bloom_size as usize);
            let mask: BloomWord =
                (1 << (h % BLOOM_BITS)) | (1 << ((h >> (shift % 32)) % BLOOM_BITS));
            if word & mask != mask {
                return Lookup::Absent;
            }
            let buckets = bloom.add(bloom_size as usize) as *const u32;
            let chain = buckets.add(nbuckets as usize);
            let first = *buckets.add((h % nbuckets) as usize) as usize;
            if first < symoffset as usize {
                return Lookup::Absent;
            }
            for i in first..first + MAX_CHAIN {
                let h2 = *chain.add(i - symoffset as usize);
                if (h | 1) == (h2 | 1) {
                    let sym = &*(self.symtab as *const ElfSym).add(i);
                    let sname = std::ffi::CStr::from_ptr(
                        (self.strtab as *const std::ffi::c_char).add(sym.st_name as usize),
                    );
                    let hidden = self.versym != 0
                        && *(self.versym as *const u16).add(i) & VERSYM_HIDDEN != 0;
                    if sname.to_bytes() == name.as_bytes() && sym.st_shndx != 0 && !hidden {
                        return self.found(sym);
                    }
                }
                if h2 & 1 == 1 {
                    return Lookup::Absent;
                }
            }
            Lookup::Ask
        }
    }

    fn found(&self, sym: &ElfSym) -> Lookup {
        if sym.is_indirect() {
            return Lookup::Ask;
        }
        let kind = sym.kind();
        let Some(addr) = NonNull::new(self.base.wrapping_add(sym.st_value as usize) as *mut c_void)
        else {
            return Lookup::Ask;
        };
        Lookup::Found(SymbolInfo {
            addr,
            kind,
            size: usize::try_from(sym.st_size).ok(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every probe of this process's libc agrees with `dlsym`: the same address for a default
    /// definition, absent for a name libc does not define, `Ask` for indirect functions.
    #[test]
    fn lookups_agree_with_dlsym() {
        // SAFETY: libc is loaded for the life of the process; RTLD_NOLOAD only finds it.
        let handle =
            unsafe { libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        assert!(!handle.is_null());
        let mut lm: *mut c_void = std::ptr::null_mut();
        // SAFETY: a live handle; dlinfo writes one pointer.
        assert_eq!(
            unsafe { libc::dlinfo(handle, 2, (&mut lm as *mut *mut c_void).cast()) },
            0
        );
        // SAFETY: libc stays loaded.
        let table = unsafe { DynSymbols::of(lm as usize) }.expect("libc has a GNU hash table");
        let names = [
            "malloc",
            "free",
            "printf",
            "fopen",
            "qsort",
            "getenv",
            "dlopen",
            "pthread_create",
            "memcpy",
            "strlen",
            "no_such_symbol_here",
            "TVMFFIFunctionCall",
            "",
        ];
        let mut found = 0;
        for name in names {
            let c = std::ffi::CString::new(name).unwrap();
            // SAFETY: a live handle and a NUL-terminated name.
            let want = unsafe { libc::dlsym(handle, c.as_ptr()) };
            match table.lookup(name) {
                Lookup::Found(info) => {
                    assert_eq!(info.addr.as_ptr(), want, "{name}");
                    found += 1;
                }
                Lookup::Absent => assert!(want.is_null(), "{name}: dlsym found {want:?}"),
                Lookup::Ask => {}
            }
        }
        assert!(found >= 6, "only {found} names found");
        // SAFETY: the handle from RTLD_NOLOAD holds a reference.
        unsafe { libc::dlclose(handle) };
    }

    #[test]
    fn the_gnu_hash_is_dl_new_hash() {
        // Values from the ELF gABI extension's reference function.
        assert_eq!(gnu_hash(b""), 0x0000_1505);
        assert_eq!(gnu_hash(b"printf"), 0x156b_2bb8);
        assert_eq!(gnu_hash(b"exit"), 0x7c96_7e3f);
        assert_eq!(gnu_hash(b"syscall"), 0xbac2_12a0);
    }
}
