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

use crate::error::{Error, Result};

mod dynamic;
mod format;
mod headers;
#[cfg(test)]
mod tests;

use dynamic::check_dynamic;
use format::*;
use headers::{check_program_headers, check_section_headers};

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
