//! The module's payload: reading and writing its shader map, and checking each shader's SPIR-V.

use crate::device::launch::{write_function_table, FunctionInfo};
use crate::error::{Error, Result};
use crate::module::blob::{Reader, Writer};

use super::*;

/// Whether the shader at `r` is in TVM 0.24+'s layout, the serialized shader as `Bytes` (a
/// `u64` byte length first), rather than the shader itself (TVM <= 0.23). The length is then
/// exactly `12 + 4 * nwords`; read the other way, the first `u64` would be a flag of 0 or 1
/// with a word count above it, which can never match.
fn length_prefixed(r: &Reader<'_>) -> bool {
    let mut p = r.clone();
    match (p.read_u64(), p.read_u32(), p.read_u64()) {
        (Ok(len), Ok(_flag), Ok(nwords)) => {
            nwords.checked_mul(4).and_then(|b| b.checked_add(12)) == Some(len)
        }
        _ => false,
    }
}

/// Reads the shader map, in either layout.
pub(super) fn read_shaders(r: &mut Reader<'_>) -> Result<Vec<(String, Shader)>> {
    let n = r.read_u64()?;
    // Each entry holds at least a name length, a flag and a word count.
    if n > (r.remaining() / 20) as u64 {
        crate::bail_value!("shader map of {n} kernels but the payload ends first");
    }
    let mut out: Vec<(String, Shader)> = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let name = r.read_string()?.to_string();
        if length_prefixed(r) {
            r.read_u64()?;
        }
        let flag = r.read_u32()?;
        let nwords = r.read_u64()?;
        if nwords > (r.remaining() / 4) as u64 {
            crate::bail_value!("shader `{name}`: {nwords} SPIR-V words but the payload ends first");
        }
        let words = r
            .read_raw(nwords as usize * 4)?
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if out.iter().any(|(k, _)| *k == name) {
            crate::bail_value!("shader map lists `{name}` twice");
        }
        out.push((name, Shader { flag, words }));
    }
    Ok(out)
}

/// Writes a payload from its parts, as TVM 0.24+ does (each shader as `Bytes`).
pub fn write_payload(fmt: &str, table: &[FunctionInfo], shaders: &[(String, Shader)]) -> Vec<u8> {
    write_payload_in(fmt, table, shaders, true)
}

/// Writes a payload; `prefixed`: each shader after its byte length (TVM 0.24+), else bare
/// (TVM <= 0.23).
pub fn write_payload_in(
    fmt: &str,
    table: &[FunctionInfo],
    shaders: &[(String, Shader)],
    prefixed: bool,
) -> Vec<u8> {
    let mut w = Writer::new();
    w.write_string(fmt);
    write_function_table(&mut w, table);
    w.write_u64(shaders.len() as u64);
    for (name, s) in shaders {
        w.write_string(name);
        if prefixed {
            w.write_u64(12 + 4 * s.words.len() as u64);
        }
        w.write_u32(s.flag);
        w.write_u64(s.words.len() as u64);
        for &word in &s.words {
            w.write_u32(word);
        }
    }
    w.into_inner()
}

/// Checks a shader's structure: the SPIR-V header, every instruction's length, and a
/// `GLCompute` entry point named `name` (so a broken module is an error here rather than a
/// driver's crash). Returns the entry point's workgroup size (`LocalSize`), when literal, and
/// the capabilities the module declares.
pub(super) fn check_spirv(name: &str, words: &[u32]) -> Result<(Option<[u32; 3]>, Vec<u32>)> {
    let bad = |why: &str| Error::value(format!("kernel `{name}`: invalid SPIR-V ({why})"));
    if words.len() < 5 {
        return Err(bad(&format!(
            "{} words, shorter than the header",
            words.len()
        )));
    }
    if words[0] != SPIRV_MAGIC {
        return Err(bad(&format!(
            "first word {:#010x}, not the magic number 0x07230203",
            words[0]
        )));
    }
    let mut at = 5;
    let mut entry = None;
    let mut sizes: Vec<(u32, [u32; 3])> = Vec::new();
    let mut capabilities = Vec::new();
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        let opcode = words[at] & 0xffff;
        if count == 0 || at + count > words.len() {
            return Err(bad(&format!("instruction at word {at} runs past the end")));
        }
        // OpEntryPoint: execution model, function id, name (NUL-terminated), interface ids.
        if opcode == 15 && count >= 4 && words[at + 1] == 5 {
            let bytes: Vec<u8> = words[at + 3..at + count]
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect();
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            if &bytes[..end] == name.as_bytes() {
                entry = Some(words[at + 2]);
            }
        }
        // OpCapability.
        if opcode == 17 && count == 2 {
            capabilities.push(words[at + 1]);
        }
        // OpExecutionMode %entry LocalSize x y z.
        if opcode == 16 && count == 6 && words[at + 2] == 17 {
            sizes.push((words[at + 1], [words[at + 3], words[at + 4], words[at + 5]]));
        }
        at += count;
    }
    let Some(entry) = entry else {
        return Err(bad(&format!("no GLCompute entry point named `{name}`")));
    };
    let size = sizes.iter().find(|(id, _)| *id == entry).map(|(_, s)| *s);
    Ok((size, capabilities))
}
