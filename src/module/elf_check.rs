//! Checks a shared library file before `dlopen` maps it.
//!
//! The dynamic loader trusts the file: a truncated copy (a partial download) makes it touch
//! pages past the end of the mapping (SIGBUS), and a file with bytes cut from its middle makes it
//! relocate through shifted tables (SIGSEGV). [`check_elf_file`] reads only the headers and the
//! dynamic tables and refuses, with a message naming the file and what is short, any file where:
//!
//! - the ELF header is incomplete, not ELF64 little-endian, or not a shared object/executable;
//! - the program header table, a `PT_LOAD` segment's file range, the `PT_DYNAMIC` segment, or
//!   the section header table reaches past the end of the file;
//! - a table the dynamic section names (string and symbol tables, hashes, relocations, init and
//!   fini arrays, version tables) lies outside the file-backed part of the loaded segments;
//! - a relocation writes outside the loaded segments.
//!
//! A file that is not ELF at all is left to `dlopen` (its error message is already clear).

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::error::{Error, Result};

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const ELF_HEADER_LEN: u64 = 64;
const PHDR_LEN: u64 = 56;
const SHDR_LEN: u64 = 64;
const DYN_LEN: u64 = 16;
const RELA_LEN: u64 = 24;
const REL_LEN: u64 = 16;
const SHT_STRTAB: u32 = 3;
const SHT_NOBITS: u32 = 8;
/// The last gABI section type (`SHT_SYMTAB_SHNDX` is 18, `SHT_RELR` 19).
const SHT_LAST_STANDARD: u32 = 19;
const SHT_OS_LOW: u32 = 0x6000_0000;
const SHT_OS_HIGH: u32 = 0xffff_ffff;
const SHF_ALLOC: u64 = 2;
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

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Refuses a library file the dynamic loader could crash on (see the module documentation).
/// Files that do not start with the ELF magic pass through (`dlopen` rejects them cleanly).
pub fn check_elf_file(path: &str) -> Result<()> {
    if !cfg!(all(target_pointer_width = "64", target_endian = "little")) {
        return Ok(());
    }
    let open_error = |e: std::io::Error| Error::value(format!("cannot load library `{path}`: {e}"));
    let file = File::open(path).map_err(open_error)?;
    let len = file.metadata().map_err(open_error)?.len();
    check(ElfFile {
        path,
        source: Source::File(file),
        len,
    })
}

/// [`check_elf_file`] on the bytes of a file already in memory (`name` is used in messages).
pub fn check_elf_image(name: &str, bytes: &[u8]) -> Result<()> {
    check(ElfFile {
        path: name,
        source: Source::Bytes(bytes),
        len: bytes.len() as u64,
    })
}

fn check(elf: ElfFile) -> Result<()> {
    if elf.len < 4 || elf.read(0, 4, "ELF magic")? != b"\x7fELF" {
        return Ok(());
    }
    let header = elf.read(0, ELF_HEADER_LEN, "ELF header")?;
    if header[4] != 2 || header[5] != 1 {
        return Err(elf.refuse(format_args!(
            "not a 64-bit little-endian ELF file (class {}, data encoding {})",
            header[4], header[5]
        )));
    }
    let kind = u16_at(&header, 16);
    if kind != ET_DYN && kind != ET_EXEC {
        return Err(elf.refuse(format_args!("ELF type {kind} is not a shared object")));
    }
    let segments = check_program_headers(&elf, &header)?;
    check_section_headers(&elf, &header, &segments.loads)?;
    if let Some(dynamic) = segments.dynamic {
        check_dynamic(&elf, &segments.loads, dynamic)?;
    }
    Ok(())
}

/// The segments the loader maps, and the dynamic section's file range.
struct Segments {
    loads: Vec<Segment>,
    dynamic: Option<(u64, u64)>,
}

fn check_program_headers(elf: &ElfFile, header: &[u8]) -> Result<Segments> {
    let phoff = u64_at(header, 32);
    let phentsize = u16_at(header, 54) as u64;
    let phnum = u16_at(header, 56) as u64;
    if phnum == 0 {
        return Err(elf.refuse("ELF file has no program headers"));
    }
    if phentsize != PHDR_LEN {
        return Err(elf.refuse(format_args!(
            "ELF program header size is {phentsize} bytes, not {PHDR_LEN}"
        )));
    }
    let table = elf.read(phoff, phnum * PHDR_LEN, "program header table")?;
    let mut loads = Vec::new();
    let mut dynamic = None;
    for i in 0..phnum as usize {
        let ph = &table[i * PHDR_LEN as usize..(i + 1) * PHDR_LEN as usize];
        let (kind, offset, vaddr) = (u32_at(ph, 0), u64_at(ph, 8), u64_at(ph, 16));
        let (filesz, memsz) = (u64_at(ph, 32), u64_at(ph, 40));
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
                if vaddr.checked_add(memsz).is_none() {
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
    let shoff = u64_at(header, 40);
    let shentsize = u16_at(header, 58) as u64;
    let shnum = u16_at(header, 60) as u64;
    if shoff == 0 {
        return Ok(());
    }
    if shentsize != SHDR_LEN {
        return Err(elf.refuse(format_args!(
            "ELF section header size is {shentsize} bytes, not {SHDR_LEN}"
        )));
    }
    // More than 0xff00 sections: the count lives in section 0's size field.
    let count = if shnum == 0 {
        let first = elf.read(shoff, SHDR_LEN, "section header table")?;
        u64_at(&first, 32)
    } else {
        shnum
    };
    if count > MAX_SECTIONS {
        return Err(elf.refuse(format_args!("ELF file claims {count} sections")));
    }
    let table = elf.read(shoff, count * SHDR_LEN, "section header table")?;
    // The section names' string table: a zeroed or shifted table fails here.
    let names = u16_at(header, 62) as u64;
    if names != 0 && names != 0xffff {
        let at = (names * SHDR_LEN) as usize;
        let kind = table.get(at + 4..at + 8).map(|b| u32_at(b, 0));
        if kind != Some(SHT_STRTAB) {
            return Err(elf.refuse(format_args!(
                "section {names} (the section names) is not a string table (is the file \
                 shifted?)"
            )));
        }
    }
    for (i, sh) in table.chunks_exact(SHDR_LEN as usize).enumerate().skip(1) {
        let (kind, flags, addr) = (u32_at(sh, 4), u64_at(sh, 8), u64_at(sh, 16));
        let (offset, size) = (u64_at(sh, 24), u64_at(sh, 32));
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
    let bytes = elf.read(offset, size, "dynamic section")?;
    let mut entries = Vec::new();
    for entry in bytes.chunks_exact(DYN_LEN as usize) {
        let (t, v) = (u64_at(entry, 0), u64_at(entry, 8));
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
        (tag::RELA, tag::RELASZ, RELA_LEN),
        (tag::REL, tag::RELSZ, REL_LEN),
    ];
    for (addr_tag, size_tag, entry_len) in tables {
        if let (Some(addr), Some(len)) = (value(addr_tag), value(size_tag)) {
            check_relocation_targets(elf, loads, addr, len, entry_len)?;
        }
    }
    if let (Some(addr), Some(len)) = (value(tag::JMPREL), value(tag::PLTRELSZ)) {
        let entry_len = if value(tag::PLTREL) == Some(tag::REL) {
            REL_LEN
        } else {
            RELA_LEN
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
        let target = u64_at(entry, 0);
        if !in_memory(loads, target, 8) {
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

    /// Every shared library of the system's library directories passes the check: it refuses
    /// damage, not the output of ordinary toolchains.
    #[test]
    fn system_libraries_pass() {
        let mut checked = 0;
        for dir in [
            "/lib/x86_64-linux-gnu",
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib64",
        ] {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let name = path.to_string_lossy().into_owned();
                if !name.contains(".so") || !path.is_file() {
                    continue;
                }
                let mut magic = [0u8; 4];
                let is_elf = File::open(&path)
                    .and_then(|f| f.read_exact_at(&mut magic, 0))
                    .is_ok()
                    && &magic == b"\x7fELF";
                if is_elf {
                    check_elf_file(&name).unwrap_or_else(|e| panic!("{name}: {}", e.message));
                    checked += 1;
                }
            }
        }
        assert!(checked > 10, "only {checked} system libraries found");
    }

    #[test]
    fn a_truncated_header_is_refused_with_the_sizes() {
        let dir = std::env::temp_dir().join(format!("tvmrt_elf_check_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("short.so");
        let mut bytes = b"\x7fELF\x02\x01\x01".to_vec();
        bytes.resize(40, 0);
        std::fs::write(&path, &bytes).unwrap();
        let e = check_elf_file(path.to_str().unwrap()).unwrap_err();
        assert!(
            e.message.contains(
                "truncated ELF file: ELF header ends at byte 64 but the file has 40 bytes"
            ),
            "{}",
            e.message
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
