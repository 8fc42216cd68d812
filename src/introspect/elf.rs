//! What a shared library's file says about itself, read without loading it: its dynamic symbols
//! (defined and imported), its `DT_NEEDED` entries, the bytes of a data symbol, and the strings
//! of its read-only data.
//!
//! Reading the file (with the `object` crate) instead of asking the dynamic linker is what lets
//! `inspect` list every function (`dlsym` can only confirm names one knows) and what the library
//! imports, and it works on a library that cannot be loaded, which is when one most needs to
//! look inside it.

use object::read::elf::{Dyn, ElfFile, FileHeader};
use object::{
    Architecture, Endianness, FileKind, Object, ObjectSection, ObjectSymbol, ObjectSymbolTable,
    RelocationFlags, RelocationTarget, SectionKind,
};

use crate::error::{Error, Result};

/// The kind of a defined symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymKind {
    /// Code.
    Function,
    /// A data object.
    Data,
    /// Anything else (sections, TLS, untyped).
    Other,
}

/// A symbol the library defines (exports).
#[derive(Clone, Debug)]
pub struct DefinedSymbol {
    /// Its name.
    pub name: String,
    /// Code or data.
    pub kind: SymKind,
    /// Its virtual address in the library.
    pub address: u64,
    /// `st_size`.
    pub size: u64,
    /// A weak definition (TVM 0.27 emits `__tvm_ffi_main` and the context pointers weak).
    pub weak: bool,
}

/// A symbol the library imports (an undefined dynamic symbol).
#[derive(Clone, Debug)]
pub struct ImportedSymbol {
    /// Its name.
    pub name: String,
    /// A weak reference (may stay unresolved).
    pub weak: bool,
}

/// A parsed shared library.
pub struct ElfLibrary<'a> {
    data: &'a [u8],
    /// `ELF64 x86_64`-style description.
    pub format: String,
    /// Defined dynamic symbols, sorted by name.
    pub defined: Vec<DefinedSymbol>,
    /// Undefined dynamic symbols, sorted by name.
    pub imported: Vec<ImportedSymbol>,
    /// `DT_NEEDED` entries, in order.
    pub needed: Vec<String>,
    /// Read-only sections: (address, bytes).
    rodata: Vec<(u64, &'a [u8])>,
    /// Sections with file contents: (address, bytes), to read data symbols from.
    sections: Vec<(u64, &'a [u8])>,
    /// The architecture.
    arch: Architecture,
    /// Dynamic relocations that bind a slot (e.g. a GOT entry) to a named symbol.
    slot_symbols: Vec<(u64, String)>,
    /// The symbols of the PLT's jump slots, in the order of the PLT's entries.
    plt_symbols: Vec<String>,
    /// The `.plt` section: (address, size).
    plt: Option<(u64, u64)>,
}

fn elf_error(path_hint: &str, e: object::read::Error) -> Error {
    Error::value(format!("{path_hint}: malformed ELF file: {e}"))
}

impl<'a> ElfLibrary<'a> {
    /// Parses `data` (the whole file). `what` names it in errors.
    pub fn parse(data: &'a [u8], what: &str) -> Result<ElfLibrary<'a>> {
        match FileKind::parse(data) {
            Ok(FileKind::Elf64) => {
                let f = ElfFile::<object::elf::FileHeader64<Endianness>>::parse(data)
                    .map_err(|e| elf_error(what, e))?;
                Self::from_elf(data, &f, what)
            }
            Ok(FileKind::Elf32) => {
                let f = ElfFile::<object::elf::FileHeader32<Endianness>>::parse(data)
                    .map_err(|e| elf_error(what, e))?;
                Self::from_elf(data, &f, what)
            }
            Ok(kind) => Err(Error::value(format!(
                "{what}: a {kind:?} file; tvmrt reads the symbols of ELF shared libraries only"
            ))),
            Err(_) => Err(Error::value(format!(
                "{what}: not a shared library (unrecognized file format)"
            ))),
        }
    }

    fn from_elf<H: FileHeader<Endian = Endianness>>(
        data: &'a [u8],
        f: &ElfFile<'a, H>,
        what: &str,
    ) -> Result<ElfLibrary<'a>> {
        let format = format!(
            "ELF{} {:?}",
            if f.is_64() { 64 } else { 32 },
            f.architecture()
        );
        let mut defined = Vec::new();
        let mut imported = Vec::new();
        for sym in f.dynamic_symbols() {
            let Ok(name) = sym.name() else { continue };
            if name.is_empty() {
                continue;
            }
            if sym.is_undefined() {
                imported.push(ImportedSymbol {
                    name: name.to_string(),
                    weak: sym.is_weak(),
                });
            } else if sym.is_definition() || sym.kind() == object::SymbolKind::Data {
                let kind = match sym.kind() {
                    object::SymbolKind::Text => SymKind::Function,
                    object::SymbolKind::Data => SymKind::Data,
                    _ => SymKind::Other,
                };
                defined.push(DefinedSymbol {
                    name: name.to_string(),
                    kind,
                    address: sym.address(),
                    size: sym.size(),
                    weak: sym.is_weak(),
                });
            }
        }
        crate::cold_sort::sort_by(&mut defined, |a, b| a.name.cmp(&b.name));
        crate::cold_sort::sort_by(&mut imported, |a, b| a.name.cmp(&b.name));

        let mut rodata = Vec::new();
        let mut sections = Vec::new();
        for s in f.sections() {
            let Ok(bytes) = s.data() else { continue };
            if bytes.is_empty() {
                continue;
            }
            sections.push((s.address(), bytes));
            if matches!(
                s.kind(),
                SectionKind::ReadOnlyData | SectionKind::ReadOnlyString
            ) {
                rodata.push((s.address(), bytes));
            }
        }
        let mut slot_symbols = Vec::new();
        let mut plt_symbols = Vec::new();
        let jump_slot = jump_slot_type(f.architecture());
        if let (Some(relocs), Some(table)) = (f.dynamic_relocations(), f.dynamic_symbol_table()) {
            for (offset, r) in relocs {
                if let RelocationTarget::Symbol(idx) = r.target() {
                    if let Some(name) = table.symbol_by_index(idx).ok().and_then(|s| s.name().ok())
                    {
                        let is_jump_slot = matches!(r.flags(),
                            RelocationFlags::Elf { r_type } if Some(r_type) == jump_slot);
                        if is_jump_slot {
                            plt_symbols.push(name.to_string());
                        }
                        slot_symbols.push((offset, name.to_string()));
                    }
                }
            }
        }
        let plt = f.section_by_name(".plt").map(|s| (s.address(), s.size()));
        Ok(ElfLibrary {
            data,
            format,
            defined,
            imported,
            needed: needed_libraries(f).map_err(|e| elf_error(what, e))?,
            rodata,
            sections,
            arch: f.architecture(),
            slot_symbols,
            plt_symbols,
            plt,
        })
    }

    /// `n` bytes of the file's contents at virtual address `addr`.
    fn bytes_at(&self, addr: u64, n: usize) -> Option<&'a [u8]> {
        let (base, bytes) = self
            .sections
            .iter()
            .find(|(base, bytes)| addr >= *base && addr - *base < bytes.len() as u64)?;
        let start = usize::try_from(addr - base).ok()?;
        bytes.get(start..start.checked_add(n)?)
    }

    /// The symbol a function that is a bare jump lands in: the function it branches to, or
    /// the symbol of the PLT entry it branches to. TVM 0.27 emits `__tvm_ffi_main` as such a
    /// branch to the entry function, on every CPU: `jmp rel32` on x86-64 (to the function or
    /// to a PLT entry `[endbr64] [bnd] jmp *slot(%rip)` whose slot a dynamic relocation binds),
    /// `b` on aarch64 and armv7, `auipc t1` + `jr t1` on riscv64 (to a PLT entry). `None` for
    /// any other code or CPU.
    pub fn jump_target(&self, addr: u64) -> Option<String> {
        let word = |at: u64| -> Option<u32> {
            let b = self.bytes_at(at, 4)?;
            Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        // Sign-extends the low `bits` bits of `v`.
        let signed = |v: u64, bits: u32| ((v << (64 - bits)) as i64) >> (64 - bits);
        let target = match self.arch {
            Architecture::X86_64 => {
                if self.bytes_at(addr, 1)?[0] != 0xe9 {
                    return None;
                }
                let rel = i64::from(word(addr + 1)? as i32);
                (addr as i64).checked_add(5)?.checked_add(rel)? as u64
            }
            // B imm26: 000101 then the word offset.
            Architecture::Aarch64 => {
                let insn = word(addr)?;
                if insn >> 26 != 0b000101 {
                    return None;
                }
                (addr as i64).checked_add(signed(u64::from(insn & 0x03ff_ffff), 26) * 4)? as u64
            }
            // B<always> imm24 (ARM state), relative to the instruction's address plus 8.
            Architecture::Arm => {
                let insn = word(addr)?;
                if insn >> 24 != 0xea {
                    return None;
                }
                (addr as i64)
                    .checked_add(8)?
                    .checked_add(signed(u64::from(insn & 0x00ff_ffff), 24) * 4)?
                    as u64
            }
            // AUIPC t1, hi20; JALR x0, lo12(t1).
            Architecture::Riscv64 => {
                let (auipc, jalr) = (word(addr)?, word(addr + 4)?);
                let t1 = 6;
                if auipc & 0x7f != 0x17 || (auipc >> 7) & 0x1f != t1 {
                    return None;
                }
                if jalr & 0x7f != 0x67 || (jalr >> 7) & 0x1f != 0 || (jalr >> 15) & 0x1f != t1 {
                    return None;
                }
                let hi = signed(u64::from(auipc & 0xffff_f000), 32);
                let lo = signed(u64::from(jalr >> 20), 12);
                (addr as i64).checked_add(hi)?.checked_add(lo)? as u64
            }
            _ => return None,
        };
        if let Some(s) = self
            .defined
            .iter()
            .find(|s| s.kind == SymKind::Function && s.address == target)
        {
            return Some(s.name.clone());
        }
        if self.arch == Architecture::X86_64 {
            // A PLT entry: find `ff 25` (jmp *rel32(%rip)) in its first bytes.
            let entry = self.bytes_at(target, 16)?;
            let at = entry.windows(2).take(8).position(|w| w == [0xff, 0x25])? as u64;
            let insn_end = target + at + 6;
            let rel = i64::from(word(target + at + 2)? as i32);
            let slot = (insn_end as i64).checked_add(rel)? as u64;
            return self
                .slot_symbols
                .iter()
                .find(|(off, _)| *off == slot)
                .map(|(_, name)| name.clone());
        }
        // Elsewhere the PLT is a header then one fixed-size entry per jump slot, in the order
        // of the jump-slot relocations (binutils' layouts).
        let (header, entry) = match self.arch {
            Architecture::Aarch64 | Architecture::Riscv64 => (32, 16),
            Architecture::Arm => (20, 12),
            _ => return None,
        };
        let (plt, size) = self.plt?;
        if target < plt + header || target >= plt + size || (target - plt - header) % entry != 0 {
            return None;
        }
        let index = usize::try_from((target - plt - header) / entry).ok()?;
        self.plt_symbols.get(index).cloned()
    }

    /// The file's size in bytes.
    pub fn file_size(&self) -> usize {
        self.data.len()
    }

    /// The defined symbol `name`.
    pub fn symbol(&self, name: &str) -> Option<&DefinedSymbol> {
        self.defined
            .binary_search_by(|s| s.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.defined[i])
    }

    /// The bytes of a data symbol: `st_size` bytes at its address, or (when the size is 0) the
    /// rest of its section. `None` when the symbol lies in no section with file contents (e.g.
    /// `.bss`).
    pub fn symbol_bytes(&self, sym: &DefinedSymbol) -> Option<&'a [u8]> {
        let (base, bytes) = self.sections.iter().find(|(base, bytes)| {
            sym.address >= *base && sym.address - *base < bytes.len() as u64
        })?;
        let start = usize::try_from(sym.address - base).ok()?;
        let rest = &bytes[start..];
        if sym.size == 0 {
            return Some(rest);
        }
        let len = usize::try_from(sym.size).ok()?;
        rest.get(..len)
    }

    /// The NUL-terminated UTF-8 strings of the read-only data sections.
    pub fn rodata_strings(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.rodata.iter().flat_map(|(_, bytes)| {
            bytes
                .split(|&b| b == 0)
                .filter(|s| s.len() > 1)
                .filter_map(|s| std::str::from_utf8(s).ok())
        })
    }
}

/// The relocation type of a PLT jump slot (`R_*_JUMP_SLOT`) on `arch`.
fn jump_slot_type(arch: Architecture) -> Option<u32> {
    match arch {
        Architecture::X86_64 => Some(object::elf::R_X86_64_JUMP_SLOT),
        Architecture::Aarch64 => Some(object::elf::R_AARCH64_JUMP_SLOT),
        Architecture::Arm => Some(object::elf::R_ARM_JUMP_SLOT),
        Architecture::Riscv64 => Some(object::elf::R_RISCV_JUMP_SLOT),
        _ => None,
    }
}

/// The `DT_NEEDED` entries of the dynamic section.
fn needed_libraries<H: FileHeader<Endian = Endianness>>(
    f: &ElfFile<'_, H>,
) -> std::result::Result<Vec<String>, object::read::Error> {
    let endian = f.endian();
    let data = f.data();
    let table = f.elf_section_table();
    let Some((entries, link)) = table.dynamic(endian, data)? else {
        return Ok(Vec::new());
    };
    let strings = table.strings(endian, data, link)?;
    let mut out = Vec::new();
    for d in entries {
        if d.tag32(endian) == Some(object::elf::DT_NEEDED) {
            let name = d.string(endian, strings)?;
            out.push(String::from_utf8_lossy(name).into_owned());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TVM's `__tvm_ffi_main` in the libraries apache-tvm 0.27 cross-compiled: a branch to the
    /// PLT entry of `__tvm_ffi_double_it` on every CPU, read from the file whatever this
    /// process runs on.
    #[test]
    fn the_entry_alias_is_followed_on_every_cpu() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cross");
        for (dir, format) in [
            ("x86_64", "ELF64 X86_64"),
            ("aarch64", "ELF64 Aarch64"),
            ("armv7", "ELF32 Arm"),
            ("riscv64", "ELF64 Riscv64"),
        ] {
            let bytes = std::fs::read(root.join(dir).join("single.so")).unwrap();
            let lib = ElfLibrary::parse(&bytes, dir).unwrap();
            assert_eq!(lib.format, format);
            let main = lib.symbol("__tvm_ffi_main").expect("TVM's entry alias");
            assert_eq!(
                lib.jump_target(main.address).as_deref(),
                Some("__tvm_ffi_double_it"),
                "{dir}"
            );
            let kernel = lib.symbol("__tvm_ffi_double_it").expect("the kernel");
            assert_eq!(lib.jump_target(kernel.address), None, "{dir}: not a branch");
        }
    }
}
