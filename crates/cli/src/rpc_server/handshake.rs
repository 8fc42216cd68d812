//! The key handshake of TVM's RPC (`python/tvm/rpc/base.py`, `server.py`): the client sends
//! `RPC_MAGIC`, an `i32` length and `client:<key>[ -timeout=N]`; the server answers
//! `RPC_MAGIC` (or `+2`, mismatch), an `i32` length and `server:<key>`. The tracker speaks
//! `i32` length + JSON after its own magic.

use std::io::{self, Read, Write};
use std::time::Duration;

use tvmrt::rpc::wire::{RPC_MAGIC, TRACKER_MAGIC};

/// The most bytes a key may have (TVM's keys are a name and a random number).
const MAX_KEY: i32 = 4096;

pub fn read_i32(s: &mut impl Read) -> io::Result<i32> {
    let mut b = [0u8; 4];
    s.read_exact(&mut b)?;
    Ok(i32::from_le_bytes(b))
}

fn bad(m: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m.into())
}

/// Reads an `i32`-length-prefixed string of at most [`MAX_KEY`] bytes.
pub fn read_key(s: &mut impl Read) -> io::Result<String> {
    let n = read_i32(s)?;
    if !(0..=MAX_KEY).contains(&n) {
        return Err(bad(format!("key length {n} out of range")));
    }
    let mut b = vec![0u8; n as usize];
    s.read_exact(&mut b)?;
    String::from_utf8(b).map_err(|_| bad("key is not UTF-8"))
}

pub fn write_key(s: &mut impl Write, magic: i32, key: &str) -> io::Result<()> {
    let mut out = magic.to_le_bytes().to_vec();
    out.extend_from_slice(&(key.len() as i32).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    s.write_all(&out)
}

/// What a client asked for in its key.
#[derive(Debug, PartialEq)]
pub struct ClientKey {
    /// The key after `client:`.
    pub key: String,
    /// `-timeout=N`, in seconds.
    pub timeout: Option<Duration>,
}

/// Parses `client:<key>[ -timeout=N]`.
pub fn parse_client_key(text: &str) -> Option<ClientKey> {
    let mut words = text.split_whitespace();
    let key = words.next()?.strip_prefix("client:")?.to_string();
    let mut timeout = None;
    for w in words {
        if let Some(t) = w.strip_prefix("-timeout=") {
            timeout = t
                .parse::<f64>()
                .ok()
                .filter(|t| t.is_finite() && *t > 0.0)
                .map(Duration::from_secs_f64);
        }
    }
    Some(ClientKey { key, timeout })
}

/// The server side of the handshake on a new connection: `Ok(Some(key))` when the client's
/// key is `expected`, `Ok(None)` after answering a mismatch or a non-RPC peer.
pub fn accept<S: Read + Write>(
    s: &mut S,
    expected: &str,
    server_key: &str,
) -> io::Result<Option<ClientKey>> {
    if read_i32(s)? != RPC_MAGIC {
        return Ok(None);
    }
    let text = read_key(s)?;
    match parse_client_key(&text) {
        Some(k) if k.key == expected => {
            write_key(s, RPC_MAGIC, &format!("server:{server_key}"))?;
            Ok(Some(k))
        }
        _ => {
            s.write_all(&(RPC_MAGIC + 2).to_le_bytes())?;
            Ok(None)
        }
    }
}

/// Sends one tracker message (`i32` length + JSON).
pub fn send_json(s: &mut impl Write, v: &serde_json::Value) -> io::Result<()> {
    let text = v.to_string();
    let mut out = (text.len() as i32).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    s.write_all(&out)
}

/// Reads one tracker message.
pub fn recv_json(s: &mut impl Read) -> io::Result<serde_json::Value> {
    let n = read_i32(s)?;
    if !(0..=(16 << 20)).contains(&n) {
        return Err(bad(format!("tracker message length {n} out of range")));
    }
    let mut b = vec![0u8; n as usize];
    s.read_exact(&mut b)?;
    serde_json::from_slice(&b).map_err(|e| bad(format!("tracker sent bad JSON: {e}")))
}

/// Opens a tracker conversation: its magic both ways.
pub fn tracker_hello<S: Read + Write>(s: &mut S) -> io::Result<()> {
    s.write_all(&TRACKER_MAGIC.to_le_bytes())?;
    if read_i32(s)? != TRACKER_MAGIC {
        return Err(bad("not an RPC tracker"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_keys_parse_as_tvm_sends_them() {
        assert_eq!(
            parse_client_key("client:board:0.25 -timeout=5"),
            Some(ClientKey {
                key: "board:0.25".into(),
                timeout: Some(Duration::from_secs(5))
            })
        );
        assert_eq!(parse_client_key("client:").unwrap().key, "");
        assert_eq!(parse_client_key("server:x"), None);
        assert_eq!(
            parse_client_key("client:k -timeout=0").unwrap().timeout,
            None
        );
    }

    #[test]
    fn handshake_answers_match_and_mismatch() {
        let mut input = RPC_MAGIC.to_le_bytes().to_vec();
        input.extend_from_slice(&8i32.to_le_bytes());
        input.extend_from_slice(b"client:k");
        let mut s = io::Cursor::new(input.clone());
        let mut out = Vec::new();
        let mut both = ReadWrite(&mut s, &mut out);
        assert!(accept(&mut both, "k", "k").unwrap().is_some());
        assert_eq!(&out[..4], &RPC_MAGIC.to_le_bytes());
        let mut s = io::Cursor::new(input);
        let mut out = Vec::new();
        let mut both = ReadWrite(&mut s, &mut out);
        assert!(accept(&mut both, "other", "k").unwrap().is_none());
        assert_eq!(out, (RPC_MAGIC + 2).to_le_bytes());
    }

    struct ReadWrite<'a>(&'a mut io::Cursor<Vec<u8>>, &'a mut Vec<u8>);
    impl Read for ReadWrite<'_> {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            self.0.read(b)
        }
    }
    impl Write for ReadWrite<'_> {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.1.write(b)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
}
