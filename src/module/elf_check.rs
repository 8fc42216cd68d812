//! Checks a shared library file before `dlopen` maps it.
//!
//! The dynamic loader trusts the file: a truncated copy (a partial download) makes it touch
//! pages past the end of the mapping (SIGBUS), and a file with bytes cut from its middle makes it
//! relocate through shifted tables (SIGSEGV). [`check_elf_file`] reads only the headers and the
//! dynamic tables and refuses, with a message naming the file and what is short, any file where:
//!
//! - the ELF header is incomplete, or the file is not a shared object/executable;
//! - the file is built for another machine, word size or byte order than this process
//!   (`dlopen` would only say "cannot open shared object file"): the message names both;
//! - the program header table, a `PT_LOAD` segment's file range, the `PT_DYNAMIC` segment, or
//!   the section header table reaches past the end of the file;
//! - a table the dynamic section names (string and symbol tables, hashes, relocations, init and
//!   fini arrays, version tables) lies outside the file-backed part of the loaded segments;
//! - a relocation writes outside the loaded segments.
//!
//! A file that is not ELF at all is left to `dlopen` (its error message is already clear).
//!
//! Both ELF classes are read (ELF32 for 32-bit processes such as armv7, ELF64 otherwise), in
//! the process's byte order.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::error::{Error, Result};

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const SHT_STRTAB: u32 = 3;
const SHT_NOBITS: u32 = 8;
/// The last gABI section type (`SHT_SYMTAB_SHNDX` is 18, `SHT_RELR` 19).
const SHT_LAST_STANDARD: u32 = 19;
const SHT_OS_LOW: u32 = 0x6000_0000;
const SHT_OS_HIGH: u32 = 0xffff_ffff;
const SHF_ALLOC: u64 = 2;
/// `e_ident[EI_CLASS]` values.
const ELFCLASS32: u8 = 1;
const ELFCLASS64: u8 = 2;
/// `e_ident[EI_DATA]` values.
const ELFDATA2LSB: u8 = 1;
const ELFDATA2MSB: u8 = 2;
/// More sections than this is not a TVM library.
const MAX_SECTIONS: u64 = 1 << 20;
/// More relocations than this is not a TVM library: refuse rather than read without end.
const MAX_RELOCATIONS: u64 = 1 << 24;

/// The highest dynamic tag outside the OS/processor ranges taken as valid.
const MAX_GENERIC_TAG: u64 = 0x3f;

/// Dynamic tags this check reads (`<elf.h>` values).
mod tag {
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
struct Layout {
    /// Bytes in an address-sized field (`ElfN_Addr`, `ElfN_Off`, `ElfN_Xword`/`Word`).
    word: u64,
    header_len: u64,
    /// `e_phoff`, `e_shoff`, then the 16-bit `e_phentsize` (followed by `e_phnum`,
    /// `e_shentsize`, `e_shnum`, `e_shstrndx`, two bytes each).
    phoff: usize,
    shoff: usize,
    phentsize: usize,
    phdr_len: u64,
    /// `p_offset`, `p_vaddr`, `p_filesz`, `p_memsz`.
    ph_fields: [usize; 4],
    shdr_len: u64,
    /// `sh_flags`, `sh_addr`, `sh_offset`, `sh_size` (`sh_type` is at 4 in both).
    sh_fields: [usize; 4],
    dyn_len: u64,
    rela_len: u64,
    rel_len: u64,
}

const ELF64: Layout = Layout {
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

const ELF32: Layout = Layout {
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
const NATIVE_CLASS: u8 = if cfg!(target_pointer_width = "64") {
    ELFCLASS64
} else {
    ELFCLASS32
};

/// The byte order this process loads.
const NATIVE_DATA: u8 = if cfg!(target_endian = "little") {
    ELFDATA2LSB
} else {
    ELFDATA2MSB
};

/// `e_machine` of this process's architecture (`EM_*` of `<elf.h>`), where known.
const NATIVE_MACHINE: Option<u16> = if cfg!(target_arch = "x86_64") {
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
fn machine_name(machine: u16) -> String {
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
fn describe_target(machine: u16, class: u8, data: u8) -> String {
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
struct Segment {
    offset: u64,
    filesz: u64,
    vaddr: u64,
    memsz: u64,
}

/// Where the bytes being checked live.
enum Source<'a> {
    File(File),
    Bytes(&'a [u8]),
}

/// The file being checked: reads at offsets, each bounded by the file's length.
struct ElfFile<'a> {
    path: &'a str,
    source: Source<'a>,
    len: u64,
    layout: &'static Layout,
}

impl ElfFile<'_> {
    fn refuse(&self, what: impl std::fmt::Display) -> Error {
        Error::value(format!("cannot load library `{}`: {what}", self.path))
    }

    fn truncated(&self, what: impl std::fmt::Display, end: u128) -> Error {
        self.refuse(format_args!(
            "truncated ELF file: {what} ends at byte {end} but the file has {} bytes",
            self.len
        ))
    }

    /// `len` bytes at `offset`, which must lie inside the file (`what` names them otherwise).
    fn read(&self, offset: u64, len: u64, what: &str) -> Result<Vec<u8>> {
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
    fn address_limit(&self) -> u64 {
        if self.layout.word == 8 {
            u64::MAX
        } else {
            1 << 32
        }
    }

    /// The address-sized field at `at` (`ElfN_Addr`, `ElfN_Off`, a dynamic entry's value).
    fn word_at(&self, b: &[u8], at: usize) -> u64 {
        if self.layout.word == 8 {
            u64_at(b, at)
        } else {
            u64::from(u32_at(b, at))
        }
    }
}

// The file's byte order is the process's (checked first), so fields read in native order.
fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Refuses a library file the dynamic loader could crash on (see the module documentation).
/// Files that do not start with the ELF magic pass through (`dlopen` rejects them cleanly).
pub fn check_elf_file(path: &str) -> Result<()> {
    let open_error = |e: std::io::Error| Error::value(format!("cannot load library `{path}`: {e}"));
    let file = File::open(path).map_err(open_error)?;
    let len = file.metadata().map_err(open_error)?.len();
    check(ElfFile {
        path,
        source: Source::File(file),
        len,
        layout: &ELF64,
    })
}

/// [`check_elf_file`] on the bytes of a file already in memory (`name` is used in messages).
pub fn check_elf_image(name: &str, bytes: &[u8]) -> Result<()> {
    check(ElfFile {
        path: name,
        source: Source::Bytes(bytes),
        len: bytes.len() as u64,
        layout: &ELF64,
    })
}

fn check(mut elf: ElfFile) -> Result<()> {
    if elf.len < 4 || elf.read(0, 4, "ELF magic")? != b"\x7fELF" {
        return Ok(());
    }
    check_target(&elf)?;
    elf.layout = if NATIVE_CLASS == ELFCLASS64 {
        &ELF64
    } else {
        &ELF32
    };
    check_structure(&elf)
}

/// The headers, segments, sections and dynamic tables of a file of this process's class.
fn check_structure(elf: &ElfFile) -> Result<()> {
    let header = elf.read(0, elf.layout.header_len, "ELF header")?;
    let kind = u16_at(&header, 16);
    if kind != ET_DYN && kind != ET_EXEC {
        return Err(elf.refuse(format_args!("ELF type {kind} is not a shared object")));
    }
    let segments = check_program_headers(elf, &header)?;
    check_section_headers(elf, &header, &segments.loads)?;
    if let Some(dynamic) = segments.dynamic {
        check_dynamic(elf, &segments.loads, dynamic)?;
    }
    Ok(())
}

/// The file is built for this process: its machine (`e_machine`), class and byte order. A
/// library for another machine would fail in `dlopen` with a misleading "cannot open shared
/// object file"; the message names both architectures instead.
fn check_target(elf: &ElfFile) -> Result<()> {
    // `e_ident` (16 bytes), `e_type`, then `e_machine`: the same place in both classes. Its
    // byte order is the file's own.
    let ident = elf.read(0, 20, "ELF header")?;
    let (class, data) = (ident[4], ident[5]);
    let raw = [ident[18], ident[19]];
    let machine = if data == ELFDATA2MSB {
        u16::from_be_bytes(raw)
    } else {
        u16::from_le_bytes(raw)
    };
    let native_machine = NATIVE_MACHINE.unwrap_or(machine);
    if machine == native_machine && class == NATIVE_CLASS && data == NATIVE_DATA {
        return Ok(());
    }
    let file_name = std::path::Path::new(elf.path)
        .file_name()
        .map_or(elf.path.into(), |n| n.to_string_lossy());
    let (file, this) = if machine != native_machine {
        (machine_name(machine), machine_name(native_machine))
    } else if NATIVE_MACHINE.is_some() {
        (
            describe_target(machine, class, data),
            describe_target(native_machine, NATIVE_CLASS, NATIVE_DATA),
        )
    } else {
        let this = format!(
            "{} ({}-bit)",
            std::env::consts::ARCH,
            8 * std::mem::size_of::<usize>()
        );
        (describe_target(machine, class, data), this)
    };
    Err(elf.refuse(format_args!(
        "{file_name} is built for {file} but this process runs on {this}"
    )))
}

/// The segments the loader maps, and the dynamic section's file range.
struct Segments {
    loads: Vec<Segment>,
    dynamic: Option<(u64, u64)>,
}

fn check_program_headers(elf: &ElfFile, header: &[u8]) -> Result<Segments> {
    let l = elf.layout;
    let phoff = elf.word_at(header, l.phoff);
    let phentsize = u16_at(header, l.phentsize) as u64;
    let phnum = u16_at(header, l.phentsize + 2) as u64;
    if phnum == 0 {
        return Err(elf.refuse("ELF file has no program headers"));
    }
    if phentsize != l.phdr_len {
        return Err(elf.refuse(format_args!(
            "ELF program header size is {phentsize} bytes, not {}",
            l.phdr_len
        )));
    }
    let table = elf.read(phoff, phnum * l.phdr_len, "program header table")?;
    let mut loads = Vec::new();
    let mut dynamic = None;
    for (i, ph) in table.chunks_exact(l.phdr_len as usize).enumerate() {
        let [offset, vaddr, filesz, memsz] = l.ph_fields.map(|at| elf.word_at(ph, at));
        let kind = u32_at(ph, 0);
        let end = offset as u128 + filesz as u128;
        match kind {
            PT_LOAD => {
                if end > elf.len as u128 {
                    return Err(elf.truncated(format_args!("PT_LOAD segment {i}"), end));
                }
                if filesz > memsz {
                    return Err(elf.refuse(format_args!(
                        "PT_LOAD segment {i} has {filesz} bytes in the file but {memsz} in memory"
                    )));
                }
                if vaddr
                    .checked_add(memsz)
                    .is_none_or(|end| end > elf.address_limit())
                {
                    return Err(elf.refuse(format_args!(
                        "PT_LOAD segment {i} wraps around the address space"
                    )));
                }
                loads.push(Segment {
                    offset,
                    filesz,
                    vaddr,
                    memsz,
                });
            }
            PT_DYNAMIC => {
                if end > elf.len as u128 {
                    return Err(elf.truncated("dynamic section (PT_DYNAMIC)", end));
                }
                dynamic = Some((offset, filesz));
            }
            _ => {}
        }
    }
    if loads.is_empty() {
        return Err(elf.refuse("ELF file has no PT_LOAD segment"));
    }
    Ok(Segments { loads, dynamic })
}

/// The section header table lies in the file, and every section agrees with it and with the
/// segments: its bytes lie in the file, and an allocated section sits at the same place in the
/// file as the segment that loads it. Bytes cut from (or inserted into) the file before the
/// table shift it, and this catches the mismatch.
fn check_section_headers(elf: &ElfFile, header: &[u8], loads: &[Segment]) -> Result<()> {
    let l = elf.layout;
    let shoff = elf.word_at(header, l.shoff);
    let shentsize = u16_at(header, l.phentsize + 4) as u64;
    let shnum = u16_at(header, l.phentsize + 6) as u64;
    if shoff == 0 {
        return Ok(());
    }
    if shentsize != l.shdr_len {
        return Err(elf.refuse(format_args!(
            "ELF section header size is {shentsize} bytes, not {}",
            l.shdr_len
        )));
    }
    // More than 0xff00 sections: the count lives in section 0's size field.
    let count = if shnum == 0 {
        let first = elf.read(shoff, l.shdr_len, "section header table")?;
        elf.word_at(&first, l.sh_fields[3])
    } else {
        shnum
    };
    if count > MAX_SECTIONS {
        return Err(elf.refuse(format_args!("ELF file claims {count} sections")));
    }
    let table = elf.read(shoff, count * l.shdr_len, "section header table")?;
    // The section names' string table: a zeroed or shifted table fails here.
    let names = u16_at(header, l.phentsize + 8) as u64;
    if names != 0 && names != 0xffff {
        let at = (names * l.shdr_len) as usize;
        let kind = table.get(at + 4..at + 8).map(|b| u32_at(b, 0));
        if kind != Some(SHT_STRTAB) {
            return Err(elf.refuse(format_args!(
                "section {names} (the section names) is not a string table (is the file \
                 shifted?)"
            )));
        }
    }
    for (i, sh) in table.chunks_exact(l.shdr_len as usize).enumerate().skip(1) {
        let kind = u32_at(sh, 4);
        let [flags, addr, offset, size] = l.sh_fields.map(|at| elf.word_at(sh, at));
        if kind > SHT_LAST_STANDARD && !(SHT_OS_LOW..=SHT_OS_HIGH).contains(&kind) {
            return Err(elf.refuse(format_args!(
                "section header {i} has unknown type {kind:#x} (is the file shifted?)"
            )));
        }
        if kind == SHT_NOBITS {
            continue;
        }
        let end = offset as u128 + size as u128;
        if end > elf.len as u128 {
            return Err(elf.truncated(format_args!("section {i}"), end));
        }
        if flags & SHF_ALLOC != 0 && size > 0 && file_range(loads, addr, size) != Some(offset) {
            return Err(elf.refuse(format_args!(
                "section {i} (address {addr:#x}, file offset {offset}) does not match the \
                 segment that loads it (is the file shifted?)"
            )));
        }
    }
    Ok(())
}

/// The file offset of the `len` bytes at virtual address `addr`, if they lie in the
/// file-backed part of one loaded segment.
fn file_range(loads: &[Segment], addr: u64, len: u64) -> Option<u64> {
    loads.iter().find_map(|s| {
        let inside =
            addr >= s.vaddr && addr as u128 + len as u128 <= s.vaddr as u128 + s.filesz as u128;
        inside.then(|| s.offset + (addr - s.vaddr))
    })
}

/// Whether the `len` bytes at `addr` lie in the memory of one loaded segment.
fn in_memory(loads: &[Segment], addr: u64, len: u64) -> bool {
    loads
        .iter()
        .any(|s| addr >= s.vaddr && addr as u128 + len as u128 <= s.vaddr as u128 + s.memsz as u128)
}

fn check_dynamic(elf: &ElfFile, loads: &[Segment], (offset, size): (u64, u64)) -> Result<()> {
    let l = elf.layout;
    let bytes = elf.read(offset, size, "dynamic section")?;
    let mut entries = Vec::new();
    for entry in bytes.chunks_exact(l.dyn_len as usize) {
        let (t, v) = (elf.word_at(entry, 0), elf.word_at(entry, l.word as usize));
        if t == tag::NULL {
            break;
        }
        // The gABI's tags (0..=37 today, with room for a few more) and the OS- and
        // processor-specific ranges; a shifted table reads addresses or sizes here instead.
        if t > MAX_GENERIC_TAG && !(0x6000_000d..=0x7fff_ffff).contains(&t) {
            return Err(elf.refuse(format_args!(
                "dynamic section entry {} has unknown tag {t:#x}",
                entries.len()
            )));
        }
        entries.push((t, v));
    }
    let value = |t: u64| entries.iter().find(|&&(k, _)| k == t).map(|&(_, v)| v);
    // Tables with a known size must lie whole in the file-backed part of a segment.
    let sized = [
        (tag::STRTAB, tag::STRSZ, "string table (DT_STRTAB)"),
        (tag::RELA, tag::RELASZ, "relocation table (DT_RELA)"),
        (tag::REL, tag::RELSZ, "relocation table (DT_REL)"),
        (
            tag::JMPREL,
            tag::PLTRELSZ,
            "PLT relocation table (DT_JMPREL)",
        ),
        (
            tag::RELR,
            tag::RELRSZ,
            "relative relocation table (DT_RELR)",
        ),
        (
            tag::INIT_ARRAY,
            tag::INIT_ARRAYSZ,
            "init array (DT_INIT_ARRAY)",
        ),
        (
            tag::FINI_ARRAY,
            tag::FINI_ARRAYSZ,
            "fini array (DT_FINI_ARRAY)",
        ),
    ];
    for (addr_tag, size_tag, what) in sized {
        if let Some(addr) = value(addr_tag) {
            let len = value(size_tag).unwrap_or(0);
            if file_range(loads, addr, len).is_none() {
                return Err(elf.refuse(format_args!(
                    "the {what} at address {addr:#x} ({len} bytes) lies outside the file's \
                     loaded segments"
                )));
            }
        }
    }
    // Tables the loader reads from their start; code addresses it calls.
    let located = [
        (tag::SYMTAB, "symbol table (DT_SYMTAB)"),
        (tag::HASH, "hash table (DT_HASH)"),
        (tag::GNU_HASH, "GNU hash table (DT_GNU_HASH)"),
        (tag::VERSYM, "symbol versions (DT_VERSYM)"),
        (tag::VERDEF, "version definitions (DT_VERDEF)"),
        (tag::VERNEED, "version needs (DT_VERNEED)"),
        (tag::INIT, "initializer (DT_INIT)"),
        (tag::FINI, "finalizer (DT_FINI)"),
    ];
    for (addr_tag, what) in located {
        if let Some(addr) = value(addr_tag) {
            if file_range(loads, addr, 1).is_none() {
                return Err(elf.refuse(format_args!(
                    "the {what} at address {addr:#x} lies outside the file's loaded segments"
                )));
            }
        }
    }
    let tables = [
        (tag::RELA, tag::RELASZ, l.rela_len),
        (tag::REL, tag::RELSZ, l.rel_len),
    ];
    for (addr_tag, size_tag, entry_len) in tables {
        if let (Some(addr), Some(len)) = (value(addr_tag), value(size_tag)) {
            check_relocation_targets(elf, loads, addr, len, entry_len)?;
        }
    }
    if let (Some(addr), Some(len)) = (value(tag::JMPREL), value(tag::PLTRELSZ)) {
        let entry_len = if value(tag::PLTREL) == Some(tag::REL) {
            l.rel_len
        } else {
            l.rela_len
        };
        check_relocation_targets(elf, loads, addr, len, entry_len)?;
    }
    Ok(())
}

/// Every relocation of the table at `addr` (`len` bytes) writes inside a loaded segment.
fn check_relocation_targets(
    elf: &ElfFile,
    loads: &[Segment],
    addr: u64,
    len: u64,
    entry_len: u64,
) -> Result<()> {
    if len / entry_len > MAX_RELOCATIONS {
        return Err(elf.refuse(format_args!(
            "relocation table at {addr:#x} has {} entries (more than {MAX_RELOCATIONS})",
            len / entry_len
        )));
    }
    let offset = file_range(loads, addr, len).expect("checked by check_dynamic");
    let table = elf.read(offset, len, "relocation table")?;
    for (i, entry) in table.chunks_exact(entry_len as usize).enumerate() {
        let target = elf.word_at(entry, 0);
        if !in_memory(loads, target, elf.layout.word) {
            return Err(elf.refuse(format_args!(
                "relocation {i} of the table at {addr:#x} writes to address {target:#x}, \
                 outside the file's loaded segments"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    /// The files of the shared objects this process has loaded (libc, libm, the dynamic
    /// loader, ...), as the dynamic loader names them.
    fn loaded_objects() -> Vec<PathBuf> {
        unsafe extern "C" fn visit(
            info: *mut libc::dl_phdr_info,
            _size: libc::size_t,
            data: *mut libc::c_void,
        ) -> libc::c_int {
            // SAFETY: `data` is the Vec below; `info` is valid during the callback.
            let (out, info) = unsafe { (&mut *data.cast::<Vec<PathBuf>>(), &*info) };
            if !info.dlpi_name.is_null() {
                // SAFETY: a NUL-terminated name.
                let name = unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) };
                if let Ok(name) = name.to_str() {
                    if name.starts_with('/') {
                        out.push(PathBuf::from(name));
                    }
                }
            }
            0
        }
        let mut out: Vec<PathBuf> = Vec::new();
        // SAFETY: `visit` only pushes to `out`, which outlives the call.
        unsafe { libc::dl_iterate_phdr(Some(visit), (&mut out as *mut Vec<PathBuf>).cast()) };
        out
    }

    /// The `e_machine` of an ELF file, if it is one.
    fn machine_of(path: &Path) -> Option<u16> {
        let mut ident = [0u8; 20];
        File::open(path)
            .and_then(|f| f.read_exact_at(&mut ident, 0))
            .ok()?;
        (&ident[..4] == b"\x7fELF").then(|| u16::from_ne_bytes([ident[18], ident[19]]))
    }

    /// Every shared object this process loaded, and every library of this machine in the
    /// directory libc came from, passes the check: it refuses damage, not the output of
    /// ordinary toolchains. (Under qemu-user a directory listing may show the host's files:
    /// only this machine's count.)
    #[test]
    fn system_libraries_pass() {
        let loaded = loaded_objects();
        let libc_dir = loaded
            .iter()
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("libc.so"))
            })
            .and_then(|p| p.parent())
            .map(Path::to_path_buf);
        let mut files = loaded.clone();
        if let Some(dir) = &libc_dir {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                let so = path.to_string_lossy().contains(".so") && path.is_file();
                if so && machine_of(&path) == NATIVE_MACHINE {
                    files.push(path);
                }
            }
        }
        let mut checked = 0;
        for path in files {
            let name = path.to_string_lossy().into_owned();
            check_elf_file(&name).unwrap_or_else(|e| panic!("{name}: {}", e.message));
            checked += 1;
        }
        assert!(
            loaded.len() >= 3 && checked >= loaded.len(),
            "only {checked} libraries checked ({} loaded: {loaded:?}; libc's directory {libc_dir:?})",
            loaded.len()
        );
    }

    /// The first 20 bytes of an ELF header for this process: magic, class, byte order,
    /// version, then `e_type` (a shared object) and `e_machine`.
    fn native_ident() -> Vec<u8> {
        let mut bytes = b"\x7fELF".to_vec();
        bytes.extend([NATIVE_CLASS, NATIVE_DATA, 1]);
        bytes.resize(16, 0);
        bytes.extend(ET_DYN.to_ne_bytes());
        bytes.extend(NATIVE_MACHINE.unwrap_or(0).to_ne_bytes());
        bytes
    }

    #[test]
    fn a_truncated_header_is_refused_with_the_sizes() {
        let mut bytes = native_ident();
        bytes.resize(40, 0);
        let e = check_elf_image("short.so", &bytes).unwrap_err();
        let header_len = if NATIVE_CLASS == ELFCLASS64 { 64 } else { 52 };
        let want = format!(
            "truncated ELF file: ELF header ends at byte {header_len} but the file has 40 bytes"
        );
        assert!(e.message.contains(&want), "{}", e.message);
    }

    /// The libraries apache-tvm 0.27 cross-compiled (tests/fixtures/cross), one directory
    /// per architecture, with the name the check gives that architecture.
    fn cross_fixtures() -> Vec<(&'static str, &'static str, PathBuf)> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cross");
        let mut out = Vec::new();
        for (dir, name) in [
            ("x86_64", "x86-64"),
            ("aarch64", "AArch64"),
            ("armv7", "ARM"),
            ("riscv64", "RISC-V"),
        ] {
            for lib in ["model.so", "kernels.so"] {
                out.push((dir, name, root.join(dir).join(lib)));
            }
        }
        out
    }

    /// The fixtures directory built for this process's architecture.
    fn native_dir() -> &'static str {
        match std::env::consts::ARCH {
            "arm" => "armv7",
            other => other,
        }
    }

    /// A library built for another machine is refused before `dlopen`, with both
    /// architectures named; the one built for this machine passes.
    #[test]
    fn libraries_for_other_machines_are_refused_naming_both() {
        let this = NATIVE_MACHINE.map(machine_name);
        let mut refused = 0;
        for (dir, arch, path) in cross_fixtures() {
            let result = check_elf_file(path.to_str().unwrap());
            if dir == native_dir() {
                result.unwrap_or_else(|e| panic!("{}: {}", path.display(), e.message));
                continue;
            }
            let e = result.expect_err("a library for another machine");
            let file = path.file_name().unwrap().to_str().unwrap();
            let want = format!(
                "cannot load library `{}`: {file} is built for {arch} but this process runs on ",
                path.display()
            );
            assert!(e.message.starts_with(&want), "{}", e.message);
            if let Some(this) = &this {
                assert!(e.message.ends_with(this.as_str()), "{}", e.message);
            }
            refused += 1;
        }
        assert!(refused >= 6, "only {refused} libraries for other machines");
    }

    /// Same machine, other class or byte order: both sides spelled out.
    #[test]
    fn another_class_or_byte_order_is_named() {
        let mut bytes = native_ident();
        bytes[4] = if NATIVE_CLASS == ELFCLASS64 {
            ELFCLASS32
        } else {
            ELFCLASS64
        };
        bytes.resize(64, 0);
        let e = check_elf_image("other_class.so", &bytes).unwrap_err();
        assert!(
            e.message.contains("other_class.so is built for ")
                && e.message.contains(if NATIVE_CLASS == ELFCLASS64 {
                    "(32-bit, little-endian) but this process runs on "
                } else {
                    "(64-bit, little-endian) but this process runs on "
                }),
            "{}",
            e.message
        );
        let mut bytes = native_ident();
        bytes[5] = ELFDATA2MSB;
        bytes[18..20].copy_from_slice(&NATIVE_MACHINE.unwrap_or(0).to_be_bytes());
        bytes.resize(64, 0);
        let e = check_elf_image("big.so", &bytes).unwrap_err();
        assert!(
            e.message.contains("big-endian) but this process"),
            "{}",
            e.message
        );
    }

    /// The structural checks read both classes, whatever this process is: every
    /// cross-compiled fixture passes with its own class's layout, and a copy cut short (or
    /// with its section table shifted) is refused.
    #[test]
    fn both_elf_classes_are_checked() {
        for (dir, _, path) in cross_fixtures() {
            let bytes = std::fs::read(&path).unwrap();
            let layout = if bytes[4] == ELFCLASS64 {
                &ELF64
            } else {
                &ELF32
            };
            assert_eq!(layout.word == 4, dir == "armv7", "{}", path.display());
            let elf = |b: &'static [u8]| ElfFile {
                path: "fixture.so",
                source: Source::Bytes(b),
                len: b.len() as u64,
                layout,
            };
            let whole: &'static [u8] = bytes.clone().leak();
            check_structure(&elf(whole))
                .unwrap_or_else(|e| panic!("{}: {}", path.display(), e.message));
            let cut: &'static [u8] = bytes[..bytes.len() * 2 / 3].to_vec().leak();
            let e = check_structure(&elf(cut)).unwrap_err();
            assert!(
                e.message.contains("truncated ELF file"),
                "{}: {}",
                path.display(),
                e.message
            );
            let mut shifted = bytes.clone();
            shifted.remove(200);
            shifted.push(0);
            let shifted: &'static [u8] = shifted.leak();
            assert!(
                check_structure(&elf(shifted)).is_err(),
                "{}",
                path.display()
            );
        }
    }
}
