//! The client's end of one RPC connection: the key handshake, `InitServer`, and request /
//! answer round trips (TVM `rpc_socket_impl.cc`'s `RPCConnect`, `rpc_endpoint.cc`'s
//! `InitRemoteSession`, `CallFunc` and the syscalls).
//!
//! One request is in flight at a time (the connection is behind a lock, as TVM's endpoint
//! is). A broken channel or protocol ends the session: later requests fail at once with the
//! reason, never by waiting on a dead socket. The session is closed with `Shutdown` when the
//! last [`Endpoint`] reference goes.

use std::io::{self, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::rpc::server_loop::MAX_PACKET;
use crate::rpc::wire::{Code, Reader, WireValue, Writer, PROTOCOL_VERSION, RPC_MAGIC};

/// The longest remote key accepted in the handshake.
const MAX_KEY: i32 = 1 << 16;

/// How a connection is made: the bounds on waiting for a peer.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// Bound on the TCP connect and on each read of the handshake and `InitServer`.
    pub connect_timeout: Duration,
    /// Bound on waiting for a call's answer (`None`: wait as long as the remote runs, as
    /// TVM's client does; a dropped connection still ends the wait at once).
    pub call_timeout: Option<Duration>,
    /// Arguments of `InitServer` (the remote session's constructor and its arguments; empty
    /// for the server's local session).
    pub init_seq: Vec<WireValue>,
    /// Log every packet sent and every answer to stderr, one line each (`rpc.Connect`'s
    /// `enable_logging`, TVM's `RPCChannelLogging`).
    pub log: bool,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            connect_timeout: Duration::from_secs(60),
            call_timeout: None,
            init_seq: Vec::new(),
            log: false,
        }
    }
}

struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

/// One connected session's channel.
pub struct Endpoint {
    /// `None` once the session is shut down or its channel broke.
    conn: Mutex<Option<Conn>>,
    /// Why the channel is gone, for the errors of later requests.
    gone: Mutex<Option<String>>,
    /// `host:port`, for messages.
    peer: String,
    /// The key the server announced.
    remote_key: String,
    /// This session's index in the session table (the device-type mask), set once.
    table_index: AtomicI32,
    /// Whether packets are logged ([`ConnectOptions::log`]).
    log: bool,
}

fn rpc_error(message: impl Into<String>) -> Error {
    Error::new("RPCError", message)
}

fn read_i32(r: &mut impl Read) -> io::Result<i32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(i32::from_le_bytes(b))
}

/// The key handshake (`RPCConnect`): magic and `client:<key>` out, the server's magic and key
/// back. Returns the server's key.
fn handshake(stream: &mut TcpStream, peer: &str, key: &str) -> Result<String> {
    let io = |e: io::Error| {
        let why = match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => "no answer in time".to_string(),
            io::ErrorKind::UnexpectedEof => "the peer closed the connection".to_string(),
            _ => e.to_string(),
        };
        rpc_error(format!("RPC: handshake with {peer} failed: {why}"))
    };
    let key = format!("client:{key}");
    let mut hello = Vec::with_capacity(8 + key.len());
    hello.extend_from_slice(&RPC_MAGIC.to_le_bytes());
    hello.extend_from_slice(&(key.len() as i32).to_le_bytes());
    hello.extend_from_slice(key.as_bytes());
    stream.write_all(&hello).map_err(io)?;
    let code = read_i32(stream).map_err(io)?;
    if code == RPC_MAGIC + 2 {
        return Err(rpc_error(format!(
            "RPC: {peer} cannot find a server that matches key={key}"
        )));
    } else if code == RPC_MAGIC + 1 {
        return Err(rpc_error(format!(
            "RPC: {peer}: the server already has key={key}"
        )));
    } else if code != RPC_MAGIC {
        return Err(rpc_error(format!(
            "RPC: {peer} is not a TVM RPC server (handshake answer 0x{code:x})"
        )));
    }
    let len = read_i32(stream).map_err(io)?;
    if !(0..=MAX_KEY).contains(&len) {
        return Err(rpc_error(format!(
            "RPC: {peer} announced a key of {len} bytes"
        )));
    }
    let mut remote = vec![0u8; len as usize];
    stream.read_exact(&mut remote).map_err(io)?;
    Ok(String::from_utf8_lossy(&remote).into_owned())
}

impl Endpoint {
    /// Connects to `host:port`, does the key handshake and `InitServer`.
    pub fn connect(host: &str, port: u16, key: &str, opts: &ConnectOptions) -> Result<Endpoint> {
        let peer = format!("{host}:{port}");
        let addrs: Vec<_> = (host, port)
            .to_socket_addrs()
            .map_err(|e| rpc_error(format!("RPC: cannot resolve {peer}: {e}")))?
            .collect();
        let mut last = None;
        let mut stream = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, opts.connect_timeout) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let mut stream = stream.ok_or_else(|| {
            let why = last.map_or("no address".to_string(), |e| e.to_string());
            rpc_error(format!("RPC: connect to {peer} failed: {why}"))
        })?;
        let setup = |s: &TcpStream, t: Option<Duration>| {
            s.set_read_timeout(t)
                .and_then(|()| s.set_write_timeout(t))
                .and_then(|()| s.set_nodelay(true))
                .map_err(|e| rpc_error(format!("RPC: socket to {peer}: {e}")))
        };
        setup(&stream, Some(opts.connect_timeout))?;
        let remote_key = handshake(&mut stream, &peer, key)?;
        let writer = stream
            .try_clone()
            .map_err(|e| rpc_error(format!("RPC: socket to {peer}: {e}")))?;
        let ep = Endpoint {
            conn: Mutex::new(Some(Conn {
                reader: BufReader::with_capacity(64 << 10, stream),
                writer,
            })),
            gone: Mutex::new(None),
            peer: peer.clone(),
            remote_key,
            table_index: AtomicI32::new(-1),
            log: opts.log,
        };
        let mut init = Writer::packet(Code::InitServer);
        init.bytes(PROTOCOL_VERSION.as_bytes())
            .values(&opts.init_seq);
        ep.request(init.finish())?;
        if let Some(c) = ep.conn.lock().as_ref() {
            setup(&c.writer, opts.call_timeout)?;
        }
        Ok(ep)
    }

    /// The server's address, `host:port`.
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// The key the server announced in the handshake.
    pub fn remote_key(&self) -> &str {
        &self.remote_key
    }

    /// This session's index in the session table (-1 before it is entered).
    pub fn table_index(&self) -> i32 {
        self.table_index.load(Ordering::Relaxed)
    }

    pub(crate) fn set_table_index(&self, i: i32) {
        self.table_index.store(i, Ordering::Relaxed);
    }

    /// Whether the session can still take requests.
    pub fn is_open(&self) -> bool {
        self.conn.lock().is_some()
    }

    /// Sends `packet` and waits for its answer: the values of a `Return` (a `CopyAck`'s data
    /// as one bytes value), or the remote error of an `Exception` (TVM's `RPCError`, with
    /// the server's message).
    pub fn request(&self, packet: Vec<u8>) -> Result<Vec<WireValue>> {
        let mut guard = self.conn.lock();
        let Some(conn) = guard.as_mut() else {
            let why = self.gone.lock().clone();
            return Err(rpc_error(format!(
                "RPC: the session with {} is closed{}",
                self.peer,
                why.map(|w| format!(" ({w})")).unwrap_or_default()
            )));
        };
        if self.log {
            log_request(&self.peer, &packet);
        }
        let answer = round_trip(conn, &packet);
        if self.log {
            log_answer(&self.peer, &answer);
        }
        match answer {
            Ok(Answer::Return(values)) => Ok(values),
            Ok(Answer::CopyAck(data)) => Ok(vec![WireValue::Bytes(data)]),
            Ok(Answer::Exception(msg)) => Err(remote_error(msg)),
            Err(why) => {
                // The channel is out of step or dead: nothing more can be asked on it.
                *guard = None;
                let msg = format!("RPC: the connection to {} broke: {why}", self.peer);
                *self.gone.lock() = Some(why);
                Err(rpc_error(msg))
            }
        }
    }

    /// `GetGlobalFunc`: the remote handle of global `name`, or `None`.
    pub fn get_global(&self, name: &str) -> Result<Option<u64>> {
        let mut w = Writer::packet(Code::GetGlobalFunc);
        w.values(&[WireValue::Str(name.to_string())]);
        Ok(match self.request(w.finish())?.first() {
            Some(WireValue::Opaque(h) | WireValue::Function(h)) if *h != 0 => Some(*h),
            Some(WireValue::None | WireValue::Opaque(0)) | None => None,
            Some(other) => {
                return Err(rpc_error(format!(
                    "RPC: GetGlobalFunc {name} answered {other:?}"
                )))
            }
        })
    }

    /// `CallFunc`: calls remote function `handle`; the answer's values (type index first).
    pub fn call(&self, handle: u64, args: &[WireValue]) -> Result<Vec<WireValue>> {
        let mut w = Writer::packet(Code::CallFunc);
        w.u64(handle).values(args);
        self.request(w.finish())
    }

    /// `FreeHandle`: releases a remote handle (nothing to do once the session is gone: the
    /// server frees what a closed session held).
    pub fn free_handle(&self, handle: u64) -> Result<()> {
        if !self.is_open() {
            return Ok(());
        }
        let mut w = Writer::packet(Code::FreeHandle);
        w.values(&[WireValue::Opaque(handle)]);
        self.request(w.finish()).map(|_| ())
    }

    /// A syscall packet (`code` and its values); the answer's one value.
    pub fn syscall(&self, code: Code, args: &[WireValue]) -> Result<WireValue> {
        let mut w = Writer::packet(code);
        w.values(args);
        Ok(self
            .request(w.finish())?
            .into_iter()
            .next()
            .unwrap_or(WireValue::None))
    }

    /// Ends the session: `Shutdown` is sent and the connection closed (later requests fail).
    pub fn shutdown(&self) {
        if let Some(mut c) = self.conn.lock().take() {
            let _ = c.writer.write_all(&Writer::packet(Code::Shutdown).finish());
            let _ = c.writer.shutdown(std::net::Shutdown::Both);
            *self.gone.lock() = Some("shut down".into());
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The longest text of a logged value list.
const LOG_VALUES: usize = 240;

/// `text`, cut to [`LOG_VALUES`] characters.
fn log_cut(text: String) -> String {
    match text.char_indices().nth(LOG_VALUES) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text,
    }
}

/// Values as a log line shows them: bytes by their count, the rest as they print.
fn summary(values: &[WireValue]) -> String {
    let each: Vec<String> = values
        .iter()
        .map(|v| match v {
            WireValue::Bytes(b) => format!("Bytes({} bytes)", b.len()),
            v => log_cut(format!("{v:?}")),
        })
        .collect();
    format!("[{}]", each.join(", "))
}

/// Logs a request packet (as [`Writer::finish`] makes it): its code, size and, for calls and
/// syscalls, its values.
fn log_request(peer: &str, packet: &[u8]) {
    let body = packet.get(8..).unwrap_or_default();
    let mut r = Reader::new(body);
    let Ok(code) = r.i32("packet code") else {
        return;
    };
    let name = Code::from_i32(code).map_or_else(|_| format!("code {code}"), |c| format!("{c:?}"));
    let detail = match Code::from_i32(code) {
        Ok(Code::CallFunc) => r.u64("handle").ok().map(|h| {
            format!(
                " handle {h:#x} {}",
                summary(&r.values().unwrap_or_default())
            )
        }),
        Ok(Code::CopyToRemote | Code::CopyFromRemote | Code::InitServer) => None,
        Ok(_) => r.values().ok().map(|v| format!(" {}", summary(&v))),
        Err(_) => None,
    };
    eprintln!(
        "rpc {peer}: -> {name} ({} bytes){}",
        body.len(),
        log_cut(detail.unwrap_or_default())
    );
}

/// Logs what a request was answered with.
fn log_answer(peer: &str, answer: &std::result::Result<Answer, String>) {
    let line = match answer {
        Ok(Answer::Return(values)) => format!("Return {}", summary(values)),
        Ok(Answer::Exception(msg)) => format!("Exception {msg:?}"),
        Ok(Answer::CopyAck(data)) => format!("CopyAck ({} bytes)", data.len()),
        Err(why) => format!("broken channel: {why}"),
    };
    eprintln!("rpc {peer}: <- {}", log_cut(line));
}

/// What a request was answered with.
enum Answer {
    Return(Vec<WireValue>),
    Exception(String),
    /// A `CopyAck`'s data (the answer to `CopyFromRemote`).
    CopyAck(Vec<u8>),
}

/// The caller's error for a remote `Exception`, as TVM's client raises it.
fn remote_error(msg: String) -> Error {
    if msg.starts_with("RPCSessionTimeoutError: ") {
        Error::new("RPCSessionTimeoutError", msg)
    } else {
        rpc_error(format!("RPCError: Error caught from RPC call:\n{msg}"))
    }
}

/// Writes `packet` and reads packets until its `Return` or `Exception`. An error here is a
/// broken channel or protocol (the reason as text).
fn round_trip(conn: &mut Conn, packet: &[u8]) -> std::result::Result<Answer, String> {
    conn.writer
        .write_all(packet)
        .map_err(|e| format!("write: {e}"))?;
    let eof = |e: io::Error| match e.kind() {
        io::ErrorKind::UnexpectedEof => "the server closed the connection".to_string(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            "no answer within the call timeout".to_string()
        }
        _ => format!("read: {e}"),
    };
    loop {
        let mut len = [0u8; 8];
        conn.reader.read_exact(&mut len).map_err(eof)?;
        let n = u64::from_le_bytes(len);
        if n == 0 {
            continue;
        }
        if !(4..=MAX_PACKET).contains(&n) {
            return Err(format!("answer of {n} bytes (not a TVM RPC server?)"));
        }
        // The body grows as it arrives: a length is never trusted for an allocation.
        let mut body = Vec::with_capacity(n.min(1 << 20) as usize);
        let got = (&mut conn.reader)
            .take(n)
            .read_to_end(&mut body)
            .map_err(eof)?;
        if got as u64 != n {
            return Err("the server closed the connection in the middle of an answer".into());
        }
        let mut r = Reader::new(&body);
        let code = r.i32("packet code").map_err(|e| e.message.clone())?;
        match Code::from_i32(code) {
            Ok(Code::Return) => {
                return r
                    .values()
                    .map(Answer::Return)
                    .map_err(|e| e.message.clone())
            }
            Ok(Code::Exception) => {
                let values = r.values().map_err(|e| e.message.clone())?;
                let msg = match values.into_iter().next() {
                    Some(WireValue::Str(s)) => s,
                    other => format!("(an exception without a message: {other:?})"),
                };
                return Ok(Answer::Exception(msg));
            }
            Ok(Code::CopyAck) => {
                let n = r.remaining() as u64;
                return Ok(Answer::CopyAck(
                    r.take(n, "copy data")
                        .map_err(|e| e.message.clone())?
                        .to_vec(),
                ));
            }
            Ok(Code::Shutdown) => return Err("the server shut the session down".into()),
            // A request from the server (a callback into this side): tvmrt's client serves
            // none, so the peers would be out of step.
            _ => return Err(format!("unexpected packet code {code} from the server")),
        }
    }
}
