//! The server side of TVM's RPC: what lets TVM's client, tracker and MetaSchedule upload,
//! run and time code on a board that runs only tvmrt (TVM `src/runtime/rpc/`).
//!
//! - [`wire`]: the packet format (codes, packed values, the tensor wire form);
//! - [`session`] and [`memory`]: one session's handles and lent memory, and each packet's
//!   answer;
//! - [`server_loop`]: the packet loop over a byte channel;
//! - [`env`], [`link`]: the work directory's file globals and linking of `.tar` uploads;
//! - [`time_evaluator`]: the time evaluator (`runtime.RPCTimeEvaluator`);
//! - [`client`]: the client side (`rpc.Connect` and the session module), for programs on
//!   the host.
//!
//! The listener, the key handshake, the tracker and the proxy live in the `tvmrt rpc-server`
//! tool; `rpc.ServerLoop` serves one already-accepted connection, as TVM's does, for programs
//! (tvm4j's server, TVM's Android app) that run their own.

pub mod client;
pub mod env;
pub mod link;
pub mod memory;
pub mod server_loop;
pub mod session;
pub mod time_evaluator;
pub mod wire;

use std::io::{self, Read, Write};

use crate::error::{Error, Result};
use crate::function::{registry, Function};
use crate::module::Module;
use crate::value::{Any, AnyView};

pub use server_loop::{serve, Ended};
pub use session::Session;

/// Serves `session` on `ch`, running `tvm.rpc.server.start` / `shutdown` around it when
/// registered (as TVM's `ServerLoop`).
pub fn serve_channel<C: Read + Write>(ch: &mut C, mut session: Session) -> Result<Ended> {
    if let Some(f) = registry::get("tvm.rpc.server.start") {
        f.call(&[])?;
    }
    let ended = serve(ch, &mut session);
    if let Some(f) = registry::get("tvm.rpc.server.shutdown") {
        f.call(&[])?;
    }
    ended
}

/// A channel over two packed functions: `fsend(bytes) -> int sent` and
/// `frecv(int size) -> bytes` (tvm4j's and TVM's Android app's `rpc.ServerLoop` callers).
///
/// TVM asks `frecv` only for bytes it needs, and tvm4j's `frecv` blocks until it has all it
/// was asked for (`Utils.recvAll`): so a read never crosses a packet's end, whatever buffer
/// the reader offers. The channel follows the framing (`u64 length`, then the body) to know
/// where that end is.
struct CallbackChannel {
    fsend: Function,
    frecv: Function,
    /// The length prefix read so far, and how many of its bytes.
    head: [u8; 8],
    head_got: usize,
    /// Bytes of the current packet's body not read yet.
    body_left: u64,
}

impl CallbackChannel {
    fn new(fsend: Function, frecv: Function) -> CallbackChannel {
        CallbackChannel {
            fsend,
            frecv,
            head: [0; 8],
            head_got: 0,
            body_left: 0,
        }
    }
}

fn to_io(e: Error) -> io::Error {
    io::Error::other(e.to_string())
}

impl Read for CallbackChannel {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = if self.body_left == 0 {
            buf.len().min(8 - self.head_got)
        } else {
            buf.len()
                .min(usize::try_from(self.body_left).unwrap_or(usize::MAX))
        };
        let buf = &mut buf[..want];
        let rv = self
            .frecv
            .call(&[Any::from(buf.len() as i64).view()])
            .map_err(to_io)?;
        let data = rv
            .view()
            .as_byte_slice()
            .ok_or_else(|| io::Error::other("rpc.ServerLoop: frecv must return bytes"))?
            .to_vec();
        if data.len() > buf.len() {
            return Err(io::Error::other(
                "rpc.ServerLoop: frecv returned too many bytes",
            ));
        }
        buf[..data.len()].copy_from_slice(&data);
        if self.body_left == 0 {
            self.head[self.head_got..self.head_got + data.len()].copy_from_slice(&data);
            self.head_got += data.len();
            if self.head_got == 8 {
                self.body_left = u64::from_le_bytes(self.head);
                self.head_got = 0;
            }
        } else {
            self.body_left -= data.len() as u64;
        }
        Ok(data.len())
    }
}

impl Write for CallbackChannel {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let rv = self.fsend.call(&[Any::bytes(buf).view()]).map_err(to_io)?;
        let n = rv.view().as_i64().unwrap_or(buf.len() as i64);
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= buf.len())
            .ok_or_else(|| io::Error::other("rpc.ServerLoop: fsend returned a bad count"))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `rpc.ServerLoop(sockfd)` or `rpc.ServerLoop(fsend, frecv)`: serves one connection whose
/// key handshake the caller has done; closes a socket it was given when the session ends.
fn server_loop(args: &[AnyView<'_>]) -> Result<Any> {
    let first = args
        .first()
        .ok_or_else(|| Error::type_error("rpc.ServerLoop expects a socket or (fsend, frecv)"))?;
    let ended = if let Some(fd) = first.as_i64() {
        let fd = i32::try_from(fd)
            .ok()
            .filter(|&fd| fd >= 0)
            .ok_or_else(|| Error::value(format!("rpc.ServerLoop: bad socket {fd}")))?;
        // SAFETY: the caller hands over the connected socket `fd`, as TVM's `ServerLoop`
        // takes it; it is closed when `file` drops.
        let mut file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        serve_channel(&mut file, Session::new())
    } else {
        let fsend = first.expect_function("fsend")?;
        let frecv = args
            .get(1)
            .ok_or_else(|| Error::type_error("rpc.ServerLoop: missing frecv"))?
            .expect_function("frecv")?;
        serve_channel(&mut CallbackChannel::new(fsend, frecv), Session::new())
    };
    ended.map(|_| Any::none())
}

/// `tvm.rpc.server.ModuleGetFunction(module, name, query_imports)`: the function, or `None`.
fn module_get_function(args: &[AnyView<'_>]) -> Result<Any> {
    let what = "tvm.rpc.server.ModuleGetFunction";
    let m = Module::from_view(
        args.first()
            .ok_or_else(|| Error::type_error(format!("{what}: missing the module")))?,
        "module",
    )?;
    let name = args
        .get(1)
        .ok_or_else(|| Error::type_error(format!("{what}: missing the name")))?
        .expect_str("name")?;
    let query_imports = args.get(2).and_then(|v| v.as_bool()).unwrap_or(true);
    Ok(match m.get_function(name, query_imports)? {
        Some(f) => Any::from_object(f.into_object()),
        None => Any::none(),
    })
}

/// `tvm.rpc.server.ImportModule(parent, child)`.
fn import_module(args: &[AnyView<'_>]) -> Result<Any> {
    let what = "tvm.rpc.server.ImportModule";
    let get = |i: usize, name: &str| {
        Module::from_view(
            args.get(i)
                .ok_or_else(|| Error::type_error(format!("{what}: missing the {name}")))?,
            name,
        )
    };
    get(0, "parent")?.import(&get(1, "child")?)?;
    Ok(Any::none())
}

/// The RPC server's globals.
pub fn builtins() -> Vec<(&'static str, Function)> {
    let mut v = vec![
        ("rpc.ServerLoop", Function::from_fn(server_loop)),
        (
            "tvm.rpc.server.ModuleGetFunction",
            Function::from_fn(module_get_function),
        ),
        (
            "tvm.rpc.server.ImportModule",
            Function::from_fn(import_module),
        ),
    ];
    v.extend(env::builtins());
    v.extend(time_evaluator::builtins());
    v.extend(client::builtins());
    v
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parking_lot::Mutex;

    use super::wire::{split_packets, Code, Reader, WireValue, Writer};
    use super::*;

    /// `rpc.ServerLoop(fsend, frecv)` as tvm4j's server processor calls it: the packets come
    /// from `frecv` in pieces no larger than asked, never asked beyond what was sent; the
    /// answers go to `fsend`.
    #[test]
    fn server_loop_over_send_and_receive_functions() {
        let mut init = Writer::packet(Code::InitServer);
        init.bytes(b"0.8.0").values(&[]);
        let mut get = Writer::packet(Code::GetGlobalFunc);
        get.values(&[WireValue::Str("rpc.ServerLoop".into())]);
        let shutdown = Writer::packet(Code::Shutdown).finish();
        let input = Arc::new(Mutex::new([init.finish(), get.finish(), shutdown].concat()));
        let output = Arc::new(Mutex::new(Vec::new()));
        let out = output.clone();
        let fsend = Function::from_fn(move |a| {
            let b = a[0].as_byte_slice().expect("bytes").to_vec();
            out.lock().extend_from_slice(&b);
            Ok(Any::from(b.len() as i64))
        });
        let frecv = Function::from_fn(move |a| {
            let want = a[0].expect_i64("size")? as usize;
            let mut inp = input.lock();
            // tvm4j's frecv blocks until it has every byte asked for: a server asking for
            // more than the client sent would wait for ever.
            if want > inp.len() {
                return Err(Error::value(format!(
                    "asked for {want} bytes, {} were sent",
                    inp.len()
                )));
            }
            // Hand out at most 5 bytes at a time: reads must put packets together.
            let n = want.min(5).min(inp.len());
            let chunk: Vec<u8> = inp.drain(..n).collect();
            Ok(Any::bytes(&chunk))
        });
        let server_loop = registry::get("rpc.ServerLoop").expect("registered");
        let f = Any::from_object(fsend.into_object());
        let r = Any::from_object(frecv.into_object());
        server_loop.call(&[f.view(), r.view()]).unwrap();
        let answers = split_packets(&output.lock()).unwrap();
        let codes: Vec<i32> = answers.iter().map(|a| a.0).collect();
        assert_eq!(codes, vec![Code::Return as i32; 2]);
        let last = Reader::new(&answers[1].1).values().unwrap();
        assert!(
            matches!(last[..], [WireValue::Opaque(h)] if h != 0),
            "{last:?}"
        );
    }
}
