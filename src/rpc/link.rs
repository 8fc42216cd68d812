//! Linking what TVM's `export_library` leaves unlinked (`.tar` of objects, or one `.o`) into
//! a shared library with the board's C compiler, as TVM's server does.
//!
//! The compiler is `$CXX`, `$CC`, or the first of `g++`, `gcc`, `c++`, `cc`, `clang` on
//! `PATH` (TVM's `tvm.support.cc.get_cc` order, roughly). A board without one gets an error
//! saying so: ship `.so` files there (`export_library("x.so")`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};

/// The C compiler to link with, if the board has one.
pub fn find_compiler() -> Option<String> {
    for var in ["CXX", "CC"] {
        if let Ok(v) = std::env::var(var) {
            if !v.trim().is_empty() {
                return Some(v);
            }
        }
    }
    let path = std::env::var_os("PATH")?;
    ["g++", "gcc", "c++", "cc", "clang"]
        .into_iter()
        .find(|c| std::env::split_paths(&path).any(|d| d.join(c).is_file()))
        .map(str::to_string)
}

/// Links `path` (`.tar` or `.o`) into `path.so`; returns the library's path.
pub fn link_shared(path: &Path) -> Result<PathBuf> {
    let objects = if path.extension().is_some_and(|e| e == "tar") {
        let dir = path.with_extension("");
        let data = std::fs::read(path)
            .map_err(|e| Error::runtime(format!("RPC: reading {}: {e}", path.display())))?;
        untar(&gunzip(data)?, &dir)?
    } else {
        vec![path.to_path_buf()]
    };
    let cc = find_compiler().ok_or_else(|| {
        Error::runtime(format!(
            "RPC: cannot link {}: no C compiler on this board (set CC, or install one; or \
             export the library as a .so on the host)",
            path.display()
        ))
    })?;
    let mut out = path.as_os_str().to_owned();
    out.push(".so");
    let out = PathBuf::from(out);
    let mut words = cc.split_whitespace();
    let program = words.next().unwrap_or("cc");
    let output = Command::new(program)
        .args(words)
        .arg("-shared")
        .arg("-fPIC")
        .arg("-o")
        .arg(&out)
        .args(&objects)
        .output()
        .map_err(|e| Error::runtime(format!("RPC: running the C compiler {cc}: {e}")))?;
    if !output.status.success() {
        return Err(Error::runtime(format!(
            "RPC: linking {} with {cc} failed: {}",
            path.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(out)
}

/// The data itself, or its gzip decompression when it starts with gzip's magic (TVM's
/// `tvm.support.tar` writes `w:gz`).
pub fn gunzip(data: Vec<u8>) -> Result<Vec<u8>> {
    use std::io::Read as _;
    if !data.starts_with(&[0x1f, 0x8b]) {
        return Ok(data);
    }
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&data[..])
        .read_to_end(&mut out)
        .map_err(|e| Error::value(format!("RPC: bad gzip in a .tar upload: {e}")))?;
    Ok(out)
}

fn octal(field: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(field).ok()?;
    let text = text.trim_matches(|c: char| c == '\0' || c == ' ');
    if text.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(text, 8).ok()
}

fn text(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

/// Extracts the regular files of a POSIX/GNU/PAX tar archive into `dir` (flat: no file may
/// leave it); returns their paths.
pub fn untar(data: &[u8], dir: &Path) -> Result<Vec<PathBuf>> {
    let bad = |m: &str| Error::value(format!("RPC: bad tar archive: {m}"));
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::runtime(format!("RPC: creating {}: {e}", dir.display())))?;
    let mut files = Vec::new();
    let mut pos = 0usize;
    let mut long_name: Option<String> = None;
    while pos + 512 <= data.len() {
        let h = &data[pos..pos + 512];
        if h.iter().all(|&b| b == 0) {
            break;
        }
        let size = octal(&h[124..136]).ok_or_else(|| bad("size field"))?;
        let size = usize::try_from(size).map_err(|_| bad("size"))?;
        let start = pos + 512;
        let end = start.checked_add(size).filter(|&e| e <= data.len());
        let end = end.ok_or_else(|| bad("a member runs past the end"))?;
        let body = &data[start..end];
        let kind = h[156];
        let mut name = text(&h[0..100]);
        let prefix = text(&h[345..500]);
        if &h[257..262] == b"ustar" && !prefix.is_empty() {
            name = format!("{prefix}/{name}");
        }
        match kind {
            b'L' => long_name = Some(text(body)),
            b'x' => {
                // A PAX header: take its `path=` record.
                for rec in String::from_utf8_lossy(body).lines() {
                    if let Some((_, kv)) = rec.split_once(' ') {
                        if let Some(p) = kv.strip_prefix("path=") {
                            long_name = Some(p.to_string());
                        }
                    }
                }
            }
            b'0' | 0 => {
                let name = long_name.take().unwrap_or(name);
                let base = Path::new(&name)
                    .file_name()
                    .ok_or_else(|| bad("a member without a file name"))?;
                let out = dir.join(base);
                std::fs::write(&out, body)
                    .map_err(|e| Error::runtime(format!("RPC: writing {}: {e}", out.display())))?;
                files.push(out);
            }
            _ => long_name = None,
        }
        pos = start + size.div_ceil(512) * 512;
    }
    if files.is_empty() {
        return Err(bad("no files in it"));
    }
    Ok(files)
}
