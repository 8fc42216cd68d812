//! The ELF format as the check reads it: constants, each class's field layout, this
//! process's target, and the file being read.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::error::{Error, Result};

pub(super) const PT_LOAD: u32 = 1;
pub(super) const PT_DYNAMIC: u32 = 2;
pub(super) const ET_EXEC: u16 = 2;
pub(super) const ET_DYN: u16 = 3;
pub(super) const SHT_STRTAB: u32 = 3;
pub(super) const SHT_NOBITS: u32 = 8;
/// The last gABI section type (`SHT_SYMTAB_SHNDX` is 18, `SHT_RELR` 19).
pub(super) const SHT_LAST_STANDARD: u32 = 19;
pub(super) const SHT_OS_LOW: u32 = 0x6000_0000;
pub(super) const SHT_OS_HIGH: u32 = 0xffff_ffff;
pub(super) const SHF_ALLOC: u64 = 2;
/// `e_ident[EI_CLASS]` values.
pub(super) const ELFCLASS32: u8 = 1;
pub(super) const ELFCLASS64: u8 = 2;
/// `e_ident[EI_DATA]` values.
pub(super) const ELFDATA2LSB: u8 = 1;
pub(super) const ELFDATA2MSB: u8 = 2;
/// More sections than this is not a TVM library.
pub(super) const MAX_SECTIONS: u64 = 1 << 20;
/// More relocations than this is not a TVM library: refuse rather than read without end.
pub(super) const MAX_RELOCATIONS: u64 = 1 << 24;

/// The highest dynamic tag outside the OS/processor ranges taken as valid.
pub(super) const MAX_GENERIC_TAG: u64 = 0x3f;

/// Dynamic tags this check reads (`<elf.h>` values).
pub(super) mod tag {
    pub const NULL: u64 = 0;
    pub const HASH: u64 = 4;
    pub const STRTAB: u64 = 5;
    pub const SYMTAB: u64 = 6;
    pub const RELA: u64 = 7;
    pub const RELASZ: u64 = 8;
    pub const STRSZ: u64 = 10;
    pub const INIT: u64 = 12;
    pub const FINI: u64 = 13;
    pub const REL: u64 = 17;
    pub const RELSZ: u64 = 18;
    pub const PLTREL: u64 = 20;
    pub const JMPREL: u64 = 23;
    pub const PLTRELSZ: u64 = 2;
    pub const INIT_ARRAY: u64 = 25;
    pub const FINI_ARRAY: u64 = 26;
    pub const INIT_ARRAYSZ: u64 = 27;
    pub const FINI_ARRAYSZ: u64 = 28;
    pub const RELRSZ: u64 = 35;
    pub const RELR: u64 = 36;
    pub const GNU_HASH: u64 = 0x6fff_fef5;
    pub const VERSYM: u64 = 0x6fff_fff0;
    pub const VERDEF: u64 = 0x6fff_fffc;
    pub const VERNEED: u64 = 0x6fff_fffe;
}

/// Where the fields this check reads sit in one ELF class (`<elf.h>`'s `Elf32_*` and
/// `Elf64_*` structures): an address-sized field is 4 bytes in ELF32 and 8 in ELF64.
pub(super) struct Layout {
    /// Bytes in an address-sized field (`ElfN_Addr`, `ElfN_Off`, `ElfN_Xword`/`Word`).
    pub(super) word: u64,
    pub(super) header_len: u64,
    /// `e_phoff`, `e_shoff`, then the 16-bit `e_phentsize` (followed by `e_phnum`,
    /// `e_shentsize`, `e_shnum`, `e_shstrndx`, two bytes each).
    pub(super) phoff: usize,
    pub(super) shoff: usize,
    pub(super) phentsize: usize,
    pub(super) phdr_len: u64,
    /// `p_offset`, `p_vaddr`, `p_filesz`, `p_memsz`.
    pub(super) ph_fields: [usize; 4],
    pub(super) shdr_len: u64,
    /// `sh_flags`, `sh_addr`, `sh_offset`, `sh_size` (`sh_type` is at 4 in both).
    pub(super) sh_fields: [usize; 4],
    pub(super) dyn_len: u64,
    pub(super) rela_len: u64,
    pub(super) rel_len: u64,
}

pub(super) const ELF64: Layout = Layout {
    word: 8,
    header_len: 64,
    phoff: 32,
    shoff: 40,
    phentsize: 54,
    phdr_len: 56,
    ph_fields: [8, 16, 32, 40],
    shdr_len: 64,
    sh_fields: [8, 16, 24, 32],
    dyn_len: 16,
    rela_len: 24,
    rel_len: 16,
};

pub(super) const ELF32: Layout = Layout {
    word: 4,
    header_len: 52,
    phoff: 28,
    shoff: 32,
    phentsize: 42,
    phdr_len: 32,
    ph_fields: [4, 8, 16, 20],
    shdr_len: 40,
    sh_fields: [8, 12, 16, 20],
    dyn_len: 8,
    rela_len: 12,
    rel_len: 8,
};

/// The ELF class this process loads.
pub(super) const NATIVE_CLASS: u8 = if cfg!(target_pointer_width = "64") {
    ELFCLASS64
} else {
    ELFCLASS32
};

/// The byte order this process loads.
pub(super) const NATIVE_DATA: u8 = if cfg!(target_endian = "little") {
    ELFDATA2LSB
} else {
    ELFDATA2MSB
};

/// `e_machine` of this process's architecture (`EM_*` of `<elf.h>`), where known.
pub(super) const NATIVE_MACHINE: Option<u16> = if cfg!(target_arch = "x86_64") {
    Some(62)
} else if cfg!(target_arch = "aarch64") {
    Some(183)
} else if cfg!(target_arch = "arm") {
    Some(40)
} else if cfg!(any(target_arch = "riscv64", target_arch = "riscv32")) {
    Some(243)
} else if cfg!(target_arch = "x86") {
    Some(3)
} else if cfg!(target_arch = "powerpc64") {
    Some(21)
} else if cfg!(target_arch = "powerpc") {
    Some(20)
} else if cfg!(target_arch = "s390x") {
    Some(22)
} else if cfg!(target_arch = "loongarch64") {
    Some(258)
} else if cfg!(any(target_arch = "mips", target_arch = "mips64")) {
    Some(8)
} else {
    None
};

/// The architecture an `e_machine` value names.
pub(super) fn machine_name(machine: u16) -> String {
    let name = match machine {
        3 => "x86",
        8 => "MIPS",
        20 => "PowerPC",
        21 => "PowerPC64",
        22 => "S/390",
        40 => "ARM",
        43 => "SPARC V9",
        50 => "IA-64",
        62 => "x86-64",
        183 => "AArch64",
        243 => "RISC-V",
        258 => "LoongArch",
        _ => return format!("ELF machine {machine}"),
    };
    name.to_string()
}

/// "x86-64 (64-bit, little-endian)": for a file of this process's machine that differs in
/// class or byte order.
pub(super) fn describe_target(machine: u16, class: u8, data: u8) -> String {
    let bits = match class {
        ELFCLASS32 => "32-bit",
        ELFCLASS64 => "64-bit",
        _ => "unknown class",
    };
    let order = match data {
        ELFDATA2LSB => "little-endian",
        ELFDATA2MSB => "big-endian",
        _ => "unknown byte order",
    };
    format!("{} ({bits}, {order})", machine_name(machine))
}

/// A `PT_LOAD` segment: where it lies in the file and in memory.
#[derive(Clone, Copy)]
pub(super) struct Segment {
    pub(super) offset: u64,
    pub(super) filesz: u64,
    pub(super) vaddr: u64,
    pub(super) memsz: u64,
}

/// Where the bytes being checked live.
pub(super) enum Source<'a> {
    File(File),
    Bytes(&'a [u8]),
}

/// The file being checked: reads at offsets, each bounded by the file's length.
pub(super) struct ElfFile<'a> {
    pub(super) path: &'a str,
    pub(super) source: Source<'a>,
    pub(super) len: u64,
    pub(super) layout: &'static Layout,
}

impl ElfFile<'_> {
    pub(super) fn refuse(&self, what: impl std::fmt::Display) -> Error {
        Error::value(format!("cannot load library `{}`: {what}", self.path))
    }

    pub(super) fn truncated(&self, what: impl std::fmt::Display, end: u128) -> Error {
        self.refuse(format_args!(
            "truncated ELF file: {what} ends at byte {end} but the file has {} bytes",
            self.len
        ))
    }

    /// `len` bytes at `offset`, which must lie inside the file (`what` names them otherwise).
    pub(super) fn read(&self, offset: u64, len: u64, what: &str) -> Result<Vec<u8>> {
        let end = offset as u128 + len as u128;
        if end > self.len as u128 {
            return Err(self.truncated(what, end));
        }
        match &self.source {
            Source::Bytes(bytes) => Ok(bytes[offset as usize..end as usize].to_vec()),
            Source::File(file) => {
                let mut buf = vec![0u8; len as usize];
                file.read_exact_at(&mut buf, offset)
                    .map_err(|e| self.refuse(format_args!("cannot read the {what}: {e}")))?;
                Ok(buf)
            }
        }
    }
}

impl ElfFile<'_> {
    /// One past the highest address the file's class can name.
    pub(super) fn address_limit(&self) -> u64 {
        if self.layout.word == 8 {
            u64::MAX
        } else {
            1 << 32
        }
    }

    /// The address-sized field at `at` (`ElfN_Addr`, `ElfN_Off`, a dynamic entry's value).
    pub(super) fn word_at(&self, b: &[u8], at: usize) -> u64 {
        if self.layout.word == 8 {
            u64_at(b, at)
        } else {
            u64::from(u32_at(b, at))
        }
    }
}

// The file's byte order is the process's (checked first), so fields read in native order.
pub(super) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

pub(super) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

pub(super) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
