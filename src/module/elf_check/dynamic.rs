//! The dynamic section: every table it names lies in the file-backed part of the loaded
//! segments, and every relocation writes inside them.

use super::format::*;
use super::headers::{file_range, in_memory};
use crate::error::Result;

pub(super) fn check_dynamic(
    elf: &ElfFile,
    loads: &[Segment],
    (offset, size): (u64, u64),
) -> Result<()> {
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
