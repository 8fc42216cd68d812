use super::*;
use std::os::unix::fs::FileExt;
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
