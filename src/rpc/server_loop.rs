//! The server's packet loop over any byte channel (a socket, or a pair of send/receive
//! functions): reads a packet, answers it through the [`Session`], until `Shutdown` or the
//! peer closes between packets.
//!
//! A packet's length is checked against [`MAX_PACKET`] and its body is read as it arrives,
//! so memory follows what was received, not what a length claims. `CopyToRemote` data goes
//! straight from the channel into host memory (in bounded chunks to device memory).

use std::io::{self, Read, Write};

use super::session::{Reply, Session};
use super::wire::{self, Code, Reader, WireTensor, MAX_NDIM};
use crate::error::{Error, Result};
use crate::tensor::layout::shape_bytes;

/// The largest packet accepted (an upload is one packet).
pub const MAX_PACKET: u64 = 1 << 34;
/// Chunk of a copy staged through the host for device memory.
const STAGE: usize = 8 << 20;

/// How a session ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// The peer sent `Shutdown`.
    Shutdown,
    /// The peer closed the connection between packets.
    Closed,
}

fn io_error(e: io::Error, what: &str) -> Error {
    Error::new("RPCError", format!("RPC: {what}: {e}"))
}

/// Reads exactly `buf.len()` bytes; `Ok(false)` when the channel closes before the first.
fn read_exact_or_eof(ch: &mut impl Read, buf: &mut [u8]) -> Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match ch.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => {
                return Err(Error::new(
                    "RPCError",
                    "RPC: the connection closed in the middle of a packet",
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(e, "read")),
        }
    }
    Ok(true)
}

fn read_exact(ch: &mut impl Read, buf: &mut [u8]) -> Result<()> {
    if !read_exact_or_eof(ch, buf)? && !buf.is_empty() {
        return Err(Error::new(
            "RPCError",
            "RPC: the connection closed in the middle of a packet",
        ));
    }
    Ok(())
}

/// Reads `n` bytes into a vector that grows as they arrive.
fn read_body(ch: &mut impl Read, n: u64) -> Result<Vec<u8>> {
    let mut body = Vec::with_capacity(n.min(1 << 20) as usize);
    let got = ch
        .take(n)
        .read_to_end(&mut body)
        .map_err(|e| io_error(e, "read"))?;
    if got as u64 != n {
        return Err(Error::new(
            "RPCError",
            "RPC: the connection closed in the middle of a packet",
        ));
    }
    Ok(body)
}

/// Discards `n` bytes.
fn skip(ch: &mut impl Read, n: u64) -> Result<()> {
    let got = io::copy(&mut ch.take(n), &mut io::sink()).map_err(|e| io_error(e, "read"))?;
    if got != n {
        return Err(Error::new(
            "RPCError",
            "RPC: the connection closed in the middle of a packet",
        ));
    }
    Ok(())
}

fn send(ch: &mut impl Write, bytes: &[u8]) -> Result<()> {
    ch.write_all(bytes).map_err(|e| io_error(e, "write"))
}

/// Serves one session on `ch` until it ends. An error is a broken channel or protocol: the
/// session cannot go on (bad requests are answered with `Exception` packets instead).
pub fn serve<C: Read + Write>(ch: &mut C, session: &mut Session) -> Result<Ended> {
    // Small packets arrive in one read; a large copy's data bypasses the buffer (BufReader
    // reads straight into a destination at least as large as its capacity).
    let mut ch = io::BufReader::with_capacity(64 << 10, ch);
    let ch = &mut ch;
    loop {
        let mut len = [0u8; 8];
        if !read_exact_or_eof(ch, &mut len)? {
            return Ok(Ended::Closed);
        }
        let n = u64::from_le_bytes(len);
        if n == 0 {
            continue;
        }
        if !(4..=MAX_PACKET).contains(&n) {
            return Err(Error::value(format!(
                "RPC: packet length {n} out of range 4..={MAX_PACKET} (not a TVM RPC peer?)"
            )));
        }
        let mut code = [0u8; 4];
        read_exact(ch, &mut code)?;
        let code = i32::from_le_bytes(code);
        let rest = n - 4;
        if code == Code::Shutdown as i32 {
            skip(ch, rest)?;
            return Ok(Ended::Shutdown);
        }
        if code == Code::CopyToRemote as i32 {
            let reply = copy_to_remote(ch, session, rest)?;
            send(ch.get_mut(), &reply)?;
            continue;
        }
        let body = read_body(ch, rest)?;
        match session.answer(code, &body) {
            Reply::Packet(p) => send(ch.get_mut(), &p)?,
            Reply::HostAck(r) => {
                let mut head = Vec::with_capacity(12);
                head.extend_from_slice(&(4 + r.nbytes as u64).to_le_bytes());
                head.extend_from_slice(&(Code::CopyAck as i32).to_le_bytes());
                send(ch.get_mut(), &head)?;
                let ptr = r.host_ptr().expect("host memory");
                // SAFETY: the session resolved `nbytes` bytes of host memory from this address,
                // and `r` keeps their region alive while they are sent.
                let data = unsafe { std::slice::from_raw_parts(ptr.cast_const(), r.nbytes) };
                send(ch.get_mut(), data)?;
            }
        }
    }
}

/// `CopyToRemote`: the tensor's wire form and size, checked, then the data read straight
/// into its place. A refused copy still reads its data, so the next packet starts in place.
fn copy_to_remote(ch: &mut impl Read, session: &mut Session, rest: u64) -> Result<Vec<u8>> {
    // data, device, ndim, dtype: 24 bytes; then the shape, byte_offset and size.
    let mut head = [0u8; 24];
    if rest < 24 {
        return Err(Error::value("RPC: CopyToRemote packet too short"));
    }
    read_exact(ch, &mut head)?;
    let ndim = i32::from_le_bytes(head[16..20].try_into().expect("4 bytes"));
    if !(0..=MAX_NDIM).contains(&ndim) || rest < 24 + 8 * ndim as u64 + 16 {
        return Err(Error::value(format!(
            "RPC: CopyToRemote with ndim {ndim} in a packet of {rest} bytes"
        )));
    }
    let mut tail = vec![0u8; 8 * ndim as usize + 16];
    read_exact(ch, &mut tail)?;
    let mut all = head.to_vec();
    all.extend_from_slice(&tail);
    let mut r = Reader::new(&all);
    let t: WireTensor = r.tensor()?;
    let nbytes = r.u64("copy size")?;
    let data_len = rest - all.len() as u64;
    if nbytes != data_len {
        return Err(Error::value(format!(
            "RPC: CopyToRemote says {nbytes} bytes but its packet holds {data_len}"
        )));
    }
    let target = if session.initialized() {
        session.copy_target(&t, nbytes, "copy to remote")
    } else {
        Err(Error::value("RPC: the session is not initialized"))
    };
    let target = match target {
        Ok(t) => t,
        Err(e) => {
            skip(ch, data_len)?;
            return Ok(wire::exception_packet(&e.message));
        }
    };
    if let Some(ptr) = target.host_ptr() {
        // SAFETY: the session resolved `nbytes` bytes of host memory from this address, and
        // `target` keeps their region alive while they are written.
        let dst = unsafe { std::slice::from_raw_parts_mut(ptr, target.nbytes) };
        read_exact(ch, dst)?;
        return Ok(wire::return_packet(&[wire::WireValue::None]));
    }
    // Device memory: staged through the host in chunks of whole elements.
    let elem = shape_bytes(&[1], target.dtype).unwrap_or(1).max(1);
    let chunk = (STAGE / elem).max(1) * elem;
    let mut staged = vec![0u8; chunk.min(target.nbytes)];
    let mut done = 0usize;
    let mut failure = None;
    while done < target.nbytes {
        let n = chunk.min(target.nbytes - done);
        read_exact(ch, &mut staged[..n])?;
        if failure.is_none() {
            let copied = target
                .bytes_view(done, n)
                .and_then(|v| v.copy_from_bytes(&staged[..n]));
            failure = copied.err().map(|e| e.message.clone());
        }
        done += n;
    }
    Ok(match failure {
        None => wire::return_packet(&[wire::WireValue::None]),
        Some(m) => wire::exception_packet(&m),
    })
}

/// A channel over bytes in memory: reads what it was given, collects what is written (tests,
/// fuzzing, and replaying a recorded session).
pub struct MemoryChannel {
    input: io::Cursor<Vec<u8>>,
    /// Everything written so far.
    pub output: Vec<u8>,
}

impl MemoryChannel {
    pub fn new(input: Vec<u8>) -> MemoryChannel {
        MemoryChannel {
            input: io::Cursor::new(input),
            output: Vec::new(),
        }
    }
}

impl Read for MemoryChannel {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        self.input.read(b)
    }
}

impl Write for MemoryChannel {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.output.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
