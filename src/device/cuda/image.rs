//! What a CUDA module's code holds, read without the driver: PTX text, a cubin (an ELF file for
//! one GPU architecture) or a fatbin (a container of cubins and PTX), each with the
//! architectures it targets and the kernels it defines, so that a payload naming a kernel the
//! code lacks, or code no device architecture can run, is refused with a message before the
//! driver is asked.
//!
//! Formats, as NVIDIA's tools write them:
//! - PTX: text with `.version X.Y`, `.target sm_XY[a|f]` and one `.entry <name>` per kernel.
//! - cubin: ELF64, `e_machine` 190 (`EM_CUDA`); the SM version is the low byte of `e_flags`
//!   (ELF ABI version 7, up to CUDA 12.x's sm_90) or its second byte (ABI version 8, sm_100 and
//!   later); an architecture-specific target (`sm_90a`) sets bit `0x800` (ABI 7) / `0x8`
//!   (ABI 8). Kernels are its global function symbols.
//! - fatbin: a 16-byte header (magic `0xBA55ED50`, version, header size, size of the rest),
//!   then entries, each a header (`u16` kind: 1 PTX, 2 cubin; `u32` header size at 4, `u64`
//!   payload size at 8, `u32` SM version at 28, `u64` flags at 40, bit `0x2000` = compressed)
//!   and its payload. Compressed entries are checked by architecture only.
//!
//! Compatibility follows CUDA's rules: a cubin for sm_XY runs on devices of major X and a minor
//! of at least Y (an architecture-specific `sm_XYa` cubin only on sm_XY); PTX for compute_XY is
//! compiled by the driver for any device of compute capability X.Y or higher (`a` targets:
//! X.Y only).

use crate::error::{Error, Result};

/// A GPU architecture: SM version (`80` for sm_80) and whether code for it is
/// architecture-specific (`sm_90a`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arch {
    /// `major * 10 + minor`.
    pub sm: u32,
    /// Whether it runs only on exactly this architecture.
    pub specific: bool,
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.sm, if self.specific { "a" } else { "" })
    }
}

/// One piece of code for one architecture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// PTX (compiled by the driver at load) or a cubin (machine code).
    pub ptx: bool,
    /// The architecture it targets.
    pub arch: Arch,
    /// Its kernels' names; `None` when they cannot be read (a compressed fatbin entry).
    pub kernels: Option<Vec<String>>,
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.ptx {
            write!(f, "PTX for compute_{}", self.arch)
        } else {
            write!(f, "cubin for sm_{}", self.arch)
        }
    }
}

/// The kind of code a module holds, by content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// PTX text.
    Ptx,
    /// One cubin.
    Cubin,
    /// A fatbin.
    Fatbin,
}

impl ImageKind {
    /// TVM's `fmt` name.
    pub fn name(self) -> &'static str {
        match self {
            ImageKind::Ptx => "ptx",
            ImageKind::Cubin => "cubin",
            ImageKind::Fatbin => "fatbin",
        }
    }
}

/// What a code image holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// Its kind.
    pub kind: ImageKind,
    /// Its pieces (one for PTX and cubins).
    pub entries: Vec<Entry>,
    /// The PTX ISA version (`8.8`), for PTX images.
    pub ptx_version: Option<String>,
}

const ELF_MAGIC: &[u8] = b"\x7fELF";
const FATBIN_MAGIC: u32 = 0xBA55_ED50;
const EM_CUDA: u16 = 190;

/// Detects the kind of `code` from its first bytes.
pub fn sniff(code: &[u8]) -> Option<ImageKind> {
    if code.starts_with(ELF_MAGIC) {
        Some(ImageKind::Cubin)
    } else if code.len() >= 4
        && u32::from_le_bytes([code[0], code[1], code[2], code[3]]) == FATBIN_MAGIC
    {
        Some(ImageKind::Fatbin)
    } else if std::str::from_utf8(code)
        .is_ok_and(|s| s.contains(".target") && s.contains(".version"))
    {
        Some(ImageKind::Ptx)
    } else {
        None
    }
}

impl Image {
    /// Reads a PTX, cubin or fatbin image, whichever `code` is.
    pub fn parse(code: &[u8]) -> Result<Image> {
        match sniff(code) {
            Some(ImageKind::Ptx) => parse_ptx(code),
            Some(ImageKind::Cubin) => Ok(Image {
                kind: ImageKind::Cubin,
                entries: vec![parse_cubin(code)?],
                ptx_version: None,
            }),
            Some(ImageKind::Fatbin) => parse_fatbin(code),
            None => Err(Error::value(format!(
                "the CUDA module's code ({} bytes, starting {:02x?}) is neither PTX text, a cubin \
                 (ELF) nor a fatbin",
                code.len(),
                &code[..code.len().min(8)]
            ))),
        }
    }

    /// Fails unless every entry whose kernels can be read defines `kernel`.
    pub fn check_kernel(&self, kernel: &str) -> Result<()> {
        for e in &self.entries {
            if let Some(names) = &e.kernels {
                if !names.iter().any(|n| n == kernel) {
                    return Err(Error::value(format!(
                        "the function table lists kernel `{kernel}`, but the module's {e} does not \
                         define it (it defines: {})",
                        if names.is_empty() { "nothing".into() } else { names.join(", ") }
                    )));
                }
            }
        }
        Ok(())
    }

    /// The entry the driver would run on a device of `device_sm` (a matching cubin first,
    /// then PTX it can compile), or an error naming the device (`device`, with its
    /// architecture) and what the image holds.
    pub fn select(&self, device_sm: u32, device: &str) -> Result<&Entry> {
        let runs = |e: &&Entry| {
            if e.ptx {
                if e.arch.specific {
                    e.arch.sm == device_sm
                } else {
                    e.arch.sm <= device_sm
                }
            } else if e.arch.specific {
                e.arch.sm == device_sm
            } else {
                e.arch.sm / 10 == device_sm / 10 && e.arch.sm <= device_sm
            }
        };
        self.entries
            .iter()
            .filter(|e| !e.ptx)
            .find(runs)
            .or_else(|| self.entries.iter().filter(|e| e.ptx).find(runs))
            .ok_or_else(|| {
                let held: Vec<String> = self.entries.iter().map(|e| e.to_string()).collect();
                Error::new(
                    "CUDAError",
                    format!(
                        "the CUDA module cannot run on {device}: it holds {}; rebuild it for \
                         this architecture (target \"arch\": \"sm_{device_sm}\") or include PTX \
                         for an older one",
                        held.join(", "),
                    ),
                )
            })
    }
}

/// `sm_80`, `sm_90a`, `compute_80` -> its architecture.
pub fn parse_arch(name: &str) -> Option<Arch> {
    let digits = name
        .strip_prefix("sm_")
        .or_else(|| name.strip_prefix("compute_"))?;
    let (num, suffix) = digits.split_at(
        digits
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(digits.len()),
    );
    let sm = num.parse::<u32>().ok()?;
    match suffix {
        "" | "f" => Some(Arch {
            sm,
            specific: false,
        }),
        "a" => Some(Arch { sm, specific: true }),
        _ => None,
    }
}

/// The `.entry` names of PTX text.
fn ptx_entries(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(".entry") {
        let after = &rest[i + ".entry".len()..];
        let boundary_ok = i == 0 || rest.as_bytes()[i - 1].is_ascii_whitespace();
        let starts_ws = after.starts_with(|c: char| c.is_whitespace());
        if boundary_ok && starts_ws {
            let name: String = after
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'))
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
        rest = after;
    }
    out
}

fn parse_ptx(code: &[u8]) -> Result<Image> {
    let text = std::str::from_utf8(code).map_err(|e| {
        Error::value(format!(
            "the PTX is not UTF-8 text (byte {})",
            e.valid_up_to()
        ))
    })?;
    let directive = |name: &str| {
        text.lines()
            .map(str::trim_start)
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    let target =
        directive(".target ").ok_or_else(|| Error::value("the PTX has no `.target` line"))?;
    let first = target.split(',').next().unwrap_or("").trim();
    let arch = parse_arch(first).ok_or_else(|| {
        Error::value(format!(
            "the PTX targets `{first}`, which is not an sm_XY architecture"
        ))
    })?;
    Ok(Image {
        kind: ImageKind::Ptx,
        entries: vec![Entry {
            ptx: true,
            arch,
            kernels: Some(ptx_entries(text)),
        }],
        ptx_version: directive(".version "),
    })
}

fn parse_cubin(code: &[u8]) -> Result<Entry> {
    use object::read::elf::{ElfFile64, FileHeader};
    use object::{Object, ObjectSymbol, SymbolKind};
    let bad = |why: String| Error::value(format!("the cubin is not a valid CUDA ELF file: {why}"));
    let file = ElfFile64::<object::Endianness>::parse(code).map_err(|e| bad(e.to_string()))?;
    let endian = file.endian();
    let header = file.elf_header();
    let machine = header.e_machine(endian);
    if machine != EM_CUDA {
        return Err(bad(format!("its machine is {machine}, not 190 (EM_CUDA)")));
    }
    let flags = header.e_flags(endian);
    let abi = header.e_ident().abi_version;
    let arch = if abi >= 8 {
        Arch {
            sm: (flags >> 8) & 0xff,
            specific: flags & 0x8 != 0,
        }
    } else {
        Arch {
            sm: flags & 0xff,
            specific: flags & 0x800 != 0,
        }
    };
    if arch.sm < 10 {
        return Err(bad(format!("its flags {flags:#x} name no SM version")));
    }
    let kernels = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.is_global())
        .filter_map(|s| s.name().ok().map(str::to_string))
        .collect();
    Ok(Entry {
        ptx: false,
        arch,
        kernels: Some(kernels),
    })
}

fn parse_fatbin(code: &[u8]) -> Result<Image> {
    let bad = |why: String| Error::value(format!("the fatbin is truncated or corrupt: {why}"));
    let u16_at = |o: usize| code.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        code.get(o..o + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    };
    let u64_at = |o: usize| {
        code.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    };
    let header_size = u16_at(6).ok_or_else(|| bad("no header".into()))? as usize;
    let rest = u64_at(8).ok_or_else(|| bad("no header".into()))?;
    let end = (header_size as u64)
        .checked_add(rest)
        .filter(|&e| e <= code.len() as u64)
        .ok_or_else(|| {
            bad(format!(
                "it says {rest} bytes follow its header, {} do",
                code.len().saturating_sub(header_size)
            ))
        })? as usize;
    let mut entries = Vec::new();
    let mut at = header_size;
    while at < end {
        let (Some(kind), Some(h), Some(size), Some(sm), Some(flags)) = (
            u16_at(at),
            u32_at(at + 4),
            u64_at(at + 8),
            u32_at(at + 28),
            u64_at(at + 40),
        ) else {
            return Err(bad(format!("entry at byte {at} is cut")));
        };
        let start = at.checked_add(h as usize).filter(|&s| s <= end);
        let stop = start
            .and_then(|s| s.checked_add(usize::try_from(size).ok()?))
            .filter(|&s| s <= end);
        let (Some(start), Some(stop)) = (start, stop) else {
            return Err(bad(format!("entry at byte {at} runs past the end")));
        };
        if h < 32 {
            return Err(bad(format!("entry at byte {at} has a {h}-byte header")));
        }
        let compressed = flags & 0x2000 != 0;
        let arch = Arch {
            sm,
            specific: false,
        };
        let payload = &code[start..stop];
        match kind {
            1 => {
                let kernels = if compressed {
                    None
                } else {
                    let text = payload.split(|&b| b == 0).next().unwrap_or(payload);
                    let img = parse_ptx(text)?;
                    img.entries.into_iter().next().and_then(|e| e.kernels)
                };
                entries.push(Entry {
                    ptx: true,
                    arch,
                    kernels,
                });
            }
            2 => {
                if compressed {
                    entries.push(Entry {
                        ptx: false,
                        arch,
                        kernels: None,
                    });
                } else {
                    entries.push(parse_cubin(payload)?);
                }
            }
            // Other kinds (NVVM IR for link-time optimization) are not loadable by themselves.
            _ => {}
        }
        at = stop;
    }
    if entries.is_empty() {
        return Err(bad("it holds no PTX and no cubin".into()));
    }
    Ok(Image {
        kind: ImageKind::Fatbin,
        entries,
        ptx_version: None,
    })
}

/// The kernels (`extern "C" __global__` functions) CUDA C source defines, as TVM writes them
/// (`extern "C" __global__ void __launch_bounds__(64) main_kernel(...)`).
pub fn source_kernels(source: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, _) in source.match_indices("__global__") {
        let mut rest = &source[i + "__global__".len()..];
        loop {
            rest = rest.trim_start();
            let ident: &str = &rest[..rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len())];
            if ident.is_empty() {
                break;
            }
            rest = rest[ident.len()..].trim_start();
            if ident == "__launch_bounds__" && rest.starts_with('(') {
                match rest.find(')') {
                    Some(close) => rest = &rest[close + 1..],
                    None => break,
                }
                continue;
            }
            if rest.starts_with('(') {
                if !out.iter().any(|n| n == ident) {
                    out.push(ident.to_string());
                }
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_names() {
        assert_eq!(
            parse_arch("sm_80"),
            Some(Arch {
                sm: 80,
                specific: false
            })
        );
        assert_eq!(
            parse_arch("sm_90a"),
            Some(Arch {
                sm: 90,
                specific: true
            })
        );
        assert_eq!(
            parse_arch("compute_120"),
            Some(Arch {
                sm: 120,
                specific: false
            })
        );
        assert_eq!(parse_arch("sm_x"), None);
        assert_eq!(parse_arch("gfx90a"), None);
    }

    #[test]
    fn source_kernels_like_tvm_writes_them() {
        let src = "extern \"C\" __global__ void __launch_bounds__(64) main_kernel(float* a);\n\
                   extern \"C\" __global__ void __launch_bounds__(64) main_kernel(float* a) {}\n\
                   extern \"C\" __global__ void other_kernel (int n) {}\n\
                   __device__ int helper(int x) { return x; }";
        assert_eq!(source_kernels(src), ["main_kernel", "other_kernel"]);
    }

    #[test]
    fn ptx_text() {
        let ptx = b".version 8.8\n.target sm_80\n.address_size 64\n\n.visible .entry add_one(\n\
                    .param .u64 p0\n)\n{ ret; }\n.entry twice(\n) { ret; }\n";
        let img = Image::parse(ptx).unwrap();
        assert_eq!(img.kind, ImageKind::Ptx);
        assert_eq!(img.ptx_version.as_deref(), Some("8.8"));
        let e = &img.entries[0];
        assert!(e.ptx);
        assert_eq!(e.arch.sm, 80);
        assert_eq!(e.kernels.as_deref().unwrap(), ["add_one", "twice"]);
        img.check_kernel("twice").unwrap();
        let err = img.check_kernel("missing").unwrap_err();
        assert!(err.message.contains("does not define it"), "{err}");
        assert_eq!(img.select(86, "cuda:0").unwrap().arch.sm, 80);
        let err = img.select(75, "cuda:0 (sm_75)").unwrap_err();
        assert!(
            err.message
                .contains("cannot run on cuda:0 (sm_75): it holds PTX for compute_80"),
            "{err}"
        );
        assert!(err.message.contains("\"arch\": \"sm_75\""), "{err}");
    }

    #[test]
    fn garbage_is_refused() {
        assert!(Image::parse(b"hello").is_err());
        assert!(Image::parse(b"\x7fELF\x02\x01").is_err());
        let mut fat = vec![0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0];
        fat.extend_from_slice(&1000u64.to_le_bytes());
        let e = Image::parse(&fat).unwrap_err();
        assert!(e.message.contains("fatbin is truncated"), "{e}");
        assert!(Image::parse(b".version 8.0\n.target gfx90a\n").is_err());
    }

    #[test]
    fn cubin_compatibility() {
        let img = Image {
            kind: ImageKind::Fatbin,
            entries: vec![
                Entry {
                    ptx: false,
                    arch: Arch {
                        sm: 80,
                        specific: false,
                    },
                    kernels: None,
                },
                Entry {
                    ptx: false,
                    arch: Arch {
                        sm: 90,
                        specific: true,
                    },
                    kernels: None,
                },
            ],
            ptx_version: None,
        };
        assert_eq!(img.select(86, "cuda:0").unwrap().arch.sm, 80);
        assert_eq!(img.select(90, "cuda:0").unwrap().arch.sm, 90);
        assert!(img.select(89, "cuda:0").is_ok());
        assert!(
            img.select(100, "cuda:0").is_err(),
            "sm_80 machine code does not run on sm_100"
        );
        assert!(img.select(75, "cuda:0").is_err());
    }
}
