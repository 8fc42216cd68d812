//! The program and section header tables: each table, segment and section lies inside the
//! file, and the segments the loader maps.

use super::format::*;
use crate::error::Result;

/// The segments the loader maps, and the dynamic section's file range.
pub(super) struct Segments {
    pub(super) loads: Vec<Segment>,
    pub(super) dynamic: Option<(u64, u64)>,
}

pub(super) fn check_program_headers(elf: &ElfFile, header: &[u8]) -> Result<Segments> {
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
pub(super) fn check_section_headers(elf: &ElfFile, header: &[u8], loads: &[Segment]) -> Result<()> {
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
pub(super) fn file_range(loads: &[Segment], addr: u64, len: u64) -> Option<u64> {
    loads.iter().find_map(|s| {
        let inside =
            addr >= s.vaddr && addr as u128 + len as u128 <= s.vaddr as u128 + s.filesz as u128;
        inside.then(|| s.offset + (addr - s.vaddr))
    })
}

/// Whether the `len` bytes at `addr` lie in the memory of one loaded segment.
pub(super) fn in_memory(loads: &[Segment], addr: u64, len: u64) -> bool {
    loads
        .iter()
        .any(|s| addr >= s.vaddr && addr as u128 + len as u128 <= s.vaddr as u128 + s.memsz as u128)
}
