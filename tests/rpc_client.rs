//! tvmrt's RPC client (`rpc.Connect` and the session module) against two servers: tvmrt's own
//! (`rpc.ServerLoop` in a thread of this process, behind a key handshake done here as
//! `tvmrt rpc-server` does it) and TVM's (`python -m tvm.exec.rpc_server` from the pinned
//! `rpc` venv, apache-tvm 0.27). The same calls run on both: TVM's server registers the
//! `rpc.test.*` functions (python/tvm/rpc/testing.py), this process registers the same names
//! for its own server. Then what only a fake server can show: a dropped connection, a server
//! that never answers, a refused key, and a call past its timeout, each a clear error in
//! bounded time.

#![cfg(feature = "rpc")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::IntoRawFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Once};
use std::thread;
use std::time::{Duration, Instant};

use tvmrt::abi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType};
use tvmrt::function::registry;
use tvmrt::module::{Module, ModuleKind};
use tvmrt::rpc::client::{self, ConnectOptions, RemoteObject};
use tvmrt::{Any, Error, Function, Result};

const MAGIC: i32 = 0xff271;

fn global(name: &str) -> Function {
    registry::get(name).unwrap_or_else(|| panic!("{name} is not registered"))
}

fn call(f: &Function, args: &[Any]) -> Result<Any> {
    f.call_values(args)
}

fn get(sess: &Module, name: &str) -> Function {
    sess.get_function(name, false)
        .unwrap()
        .unwrap_or_else(|| panic!("no remote function {name}"))
}

/// Counts the server-side closures dropped (freed by the client's `FreeHandle`).
static ADDERS_DROPPED: AtomicUsize = AtomicUsize::new(0);

struct DropCount;
impl Drop for DropCount {
    fn drop(&mut self) {
        ADDERS_DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

/// A module kind for tvmrt's server to hand out: `addone` (and its kind).
struct TestModule(i64);
impl ModuleKind for TestModule {
    fn kind(&self) -> &str {
        "rpc_test"
    }
    fn get_function(&self, this: &Module, name: &str) -> Result<Option<Function>> {
        let k = self.0;
        let _keep = this.clone();
        Ok(match name {
            "addone" => Some(Function::from_fn(move |a| {
                let _ = &_keep;
                Ok(Any::from(a[0].expect_i64("x")? + k))
            })),
            _ => None,
        })
    }
}

/// The `rpc.test.*` functions TVM's Python server has (python/tvm/rpc/testing.py), for
/// tvmrt's server in this process, and a few more only tvmrt's server is asked for.
fn register_test_functions() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let reg = |name: &str, f: Function| registry::register(name, f, true).unwrap();
        reg(
            "rpc.test.addone",
            Function::from_fn(|a| {
                let v = &a[0];
                Ok(match v.type_index() {
                    tvmrt::abi::type_index::FLOAT => Any::from(v.as_f64().unwrap_or(0.0) + 1.0),
                    _ => Any::from(v.expect_i64("x")? + 1),
                })
            }),
        );
        reg(
            "rpc.test.strcat",
            Function::from_fn(|a| {
                Ok(Any::from(format!(
                    "{}:{}",
                    a[0].expect_str("name")?,
                    a[1].expect_i64("x")?
                )))
            }),
        );
        reg(
            "rpc.test.runtime_str_concat",
            Function::from_fn(|a| {
                Ok(Any::from(format!(
                    "{}{}",
                    a[0].expect_str("x")?,
                    a[1].expect_str("y")?
                )))
            }),
        );
        reg(
            "rpc.test.except",
            Function::from_fn(|a| Err(Error::value(a[0].expect_str("name")?.to_string()))),
        );
        reg(
            "rpc.test.add_to_lhs",
            Function::from_fn(|a| {
                let x = a[0].expect_i64("x")?;
                let count = DropCount;
                Ok(Any::from_object(
                    Function::from_fn(move |b| {
                        let _ = &count;
                        Ok(Any::from(x + b[0].expect_i64("y")?))
                    })
                    .into_object(),
                ))
            }),
        );
        // tvmrt's server only: every value back as it came, and handles.
        reg(
            "test.rpc.echo",
            Function::from_fn(|a| Ok(a[0].to_owned_any())),
        );
        reg(
            "test.rpc.apply",
            Function::from_fn(|a| a[0].expect_function("f")?.call(&a[1..])),
        );
        reg(
            "test.rpc.module",
            Function::from_fn(|a| {
                let m = Module::new(TestModule(a[0].expect_i64("k")?));
                Ok(Any::from_object(m.into_object()))
            }),
        );
        reg(
            "test.rpc.module_kind",
            Function::from_fn(|a| Ok(Any::from(Module::from_view(&a[0], "m")?.kind()))),
        );
        reg(
            "test.rpc.array",
            Function::from_fn(|_| {
                let items = vec![Any::from(1i64), Any::from(2i64)];
                Ok(Any::from_object(
                    tvmrt::object::containers::array::new_array(items),
                ))
            }),
        );
        reg(
            "test.rpc.type_index",
            Function::from_fn(|a| Ok(Any::from(a[0].type_index() as i64))),
        );
        reg(
            "test.rpc.sleep_ms",
            Function::from_fn(|a| {
                thread::sleep(Duration::from_millis(a[0].expect_i64("ms")? as u64));
                Ok(Any::none())
            }),
        );
    });
}

fn read_i32(s: &mut TcpStream) -> i32 {
    let mut b = [0u8; 4];
    s.read_exact(&mut b).unwrap();
    i32::from_le_bytes(b)
}

/// The server side of the key handshake: reads the client's magic and key, answers `reply`
/// and the server's key. Returns the client's key.
fn accept_handshake(s: &mut TcpStream, reply: i32) -> String {
    assert_eq!(read_i32(s), MAGIC);
    let n = read_i32(s);
    let mut key = vec![0u8; n as usize];
    s.read_exact(&mut key).unwrap();
    let mut out = reply.to_le_bytes().to_vec();
    let skey = b"server:tvmrt-test";
    out.extend_from_slice(&(skey.len() as i32).to_le_bytes());
    out.extend_from_slice(skey);
    s.write_all(&out).unwrap();
    String::from_utf8(key).unwrap()
}

/// tvmrt's server for one connection: the handshake, then `rpc.ServerLoop(fd)` in a thread.
/// The receiver gets the client's key and then the loop's end.
fn tvmrt_server() -> (u16, mpsc::Receiver<String>) {
    register_test_functions();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let key = accept_handshake(&mut s, MAGIC);
        tx.send(key).unwrap();
        let fd = Any::from(s.into_raw_fd() as i64);
        let ended = global("rpc.ServerLoop").call(&[fd.view()]);
        tx.send(format!("ended: {ended:?}")).unwrap();
    });
    (port, rx)
}

fn connect(port: u16) -> Module {
    client::connect("127.0.0.1", port, "", &ConnectOptions::default()).unwrap()
}

/// A tvm-ffi library of one function, `addone(x) = x + 1` (`__tvm_ffi_addone`), for both
/// servers to load.
fn addone_library() -> Vec<u8> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("rpc_client");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("addone.c");
    let lib = dir.join("addone.so");
    std::fs::write(
        &src,
        "#include <stdint.h>\n\
         typedef struct { int32_t type_index; uint32_t pad; int64_t v; } Any;\n\
         int __tvm_ffi_addone(void* self, const Any* args, int32_t n, Any* result) {\n\
           result->type_index = 1; result->pad = 0; result->v = args[0].v + 1; return 0;\n\
         }\n",
    )
    .unwrap();
    let ok = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .unwrap();
    assert!(ok.success(), "cc failed");
    std::fs::read(&lib).unwrap()
}

/// What both servers answer the same way: calls with ints, floats, bools and strings, a
/// function returned and called, an unknown function, a remote error (and the session
/// going on after it), bytes both ways, and a library uploaded, loaded and called.
fn exercise_common(sess: &Module, who: &str) {
    assert_eq!(sess.kind(), "rpc");
    let addone = get(sess, "rpc.test.addone");
    assert_eq!(
        call(&addone, &[Any::from(10i64)]).unwrap().view().as_i64(),
        Some(11)
    );
    assert_eq!(
        call(&addone, &[Any::from(1.5)]).unwrap().view().as_f64(),
        Some(2.5)
    );
    assert_eq!(
        call(&addone, &[Any::from(true)]).unwrap().view().as_i64(),
        Some(2)
    );
    let strcat = get(sess, "rpc.test.strcat");
    let s = call(&strcat, &[Any::from("abc"), Any::from(11i64)]).unwrap();
    assert_eq!(s.view().as_str(), Some("abc:11"));
    let concat = get(sess, "rpc.test.runtime_str_concat");
    let long = "x".repeat(1000);
    let s = call(&concat, &[Any::from("é"), Any::from(long.as_str())]).unwrap();
    assert_eq!(s.view().as_str(), Some(format!("é{long}").as_str()));

    let add_to_lhs = get(sess, "rpc.test.add_to_lhs");
    let f = call(&add_to_lhs, &[Any::from(3i64)]).unwrap();
    let f = f.view().as_function().expect("a remote function");
    assert_eq!(
        call(&f, &[Any::from(4i64)]).unwrap().view().as_i64(),
        Some(7)
    );
    drop(f);

    assert!(sess
        .get_function("no.such.function", false)
        .unwrap()
        .is_none());
    let except = get(sess, "rpc.test.except");
    let e = call(&except, &[Any::from("boom-42")]).unwrap_err();
    assert_eq!(e.kind, "RPCError", "{who}: {e}");
    assert!(
        e.message.contains("Error caught from RPC call"),
        "{who}: {e}"
    );
    assert!(e.message.contains("boom-42"), "{who}: {e}");
    // The session goes on after a remote error.
    assert_eq!(
        call(&addone, &[Any::from(41i64)]).unwrap().view().as_i64(),
        Some(42)
    );

    let blob: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
    let upload = get(sess, "tvm.rpc.server.upload");
    call(&upload, &[Any::from("blob.bin"), Any::bytes(&blob)]).unwrap();
    let download = get(sess, "tvm.rpc.server.download");
    let back = call(&download, &[Any::from("blob.bin")]).unwrap();
    assert_eq!(back.view().as_byte_slice(), Some(&blob[..]), "{who}");

    call(
        &upload,
        &[Any::from("addone.so"), Any::bytes(&addone_library())],
    )
    .unwrap();
    let load = global("rpc.LoadRemoteModule");
    let sess_any = Any::from_object(sess.object().clone());
    let m = call(&load, &[sess_any.clone(), Any::from("addone.so")]).unwrap();
    let m = Module::from_view(&m.view(), "module").unwrap();
    assert_eq!(m.kind(), "rpc");
    let f = get(&m, "addone");
    assert_eq!(
        call(&f, &[Any::from(99i64)]).unwrap().view().as_i64(),
        Some(100)
    );
    assert!(m.get_function("nothing_here", false).unwrap().is_none());

    let index = call(&global("rpc.SessTableIndex"), &[sess_any]).unwrap();
    assert!(index.view().as_i64().unwrap() >= 0);
}

#[test]
fn against_tvmrt_server() {
    let (port, rx) = tvmrt_server();
    let sess = connect(port);
    assert_eq!(rx.recv().unwrap(), "client:");
    exercise_common(&sess, "tvmrt");

    // Every argument kind comes back as it went.
    let echo = get(&sess, "test.rpc.echo");
    let dtype = DLDataType {
        code: DLDataTypeCode(2),
        bits: 16,
        lanes: 4,
    };
    let dev = DLDevice {
        device_type: DLDeviceType(2),
        device_id: 1,
    };
    let back = |v: Any| call(&echo, &[v]).unwrap();
    assert_eq!(back(Any::from(-7i64)).view().as_i64(), Some(-7));
    assert_eq!(back(Any::from(0.25)).view().as_f64(), Some(0.25));
    assert_eq!(back(Any::from(false)).view().as_bool(), Some(false));
    assert!(back(Any::none()).view().is_none());
    assert_eq!(back(Any::from("s")).view().as_str(), Some("s"));
    assert_eq!(
        back(Any::bytes(b"\0\x01")).view().as_byte_slice(),
        Some(&b"\0\x01"[..])
    );
    assert_eq!(back(Any::from(dtype)).view().as_dtype(), Some(dtype));
    assert_eq!(back(Any::from(dev)).view().as_device(), Some(dev));
    // A device of this session (TVM's mask) arrives as the remote's own.
    let index = call(
        &global("rpc.SessTableIndex"),
        &[Any::from_object(sess.object().clone())],
    )
    .unwrap()
    .view()
    .as_i64()
    .unwrap() as u32;
    let masked = DLDevice {
        device_type: DLDeviceType(2 + (index + 1) * client::RPC_SESS_MASK),
        device_id: 1,
    };
    assert_eq!(back(Any::from(masked)).view().as_device(), Some(dev));
    let other = DLDevice {
        device_type: DLDeviceType(2 + (index + 7) * client::RPC_SESS_MASK),
        device_id: 1,
    };
    let e = call(&echo, &[Any::from(other)]).unwrap_err();
    assert!(e.message.contains("another RPC session"), "{e}");

    // Remote handles go back as handles: a function, a module, an object.
    let add_to_lhs = get(&sess, "rpc.test.add_to_lhs");
    let dropped = ADDERS_DROPPED.load(Ordering::SeqCst);
    let f = call(&add_to_lhs, &[Any::from(100i64)]).unwrap();
    let apply = get(&sess, "test.rpc.apply");
    let r = call(&apply, &[f.clone(), Any::from(5i64)]).unwrap();
    assert_eq!(r.view().as_i64(), Some(105));
    drop(f);
    // FreeHandle is answered before the drop returns: the server let go of the closure.
    assert_eq!(ADDERS_DROPPED.load(Ordering::SeqCst), dropped + 1);
    let local = Any::from_object(Function::from_fn(|_| Ok(Any::none())).into_object());
    let e = call(&apply, &[local, Any::from(1i64)]).unwrap_err();
    assert!(e.message.contains("cannot be passed"), "{e}");

    let make = get(&sess, "test.rpc.module");
    let parent = call(&make, &[Any::from(10i64)]).unwrap();
    let child = call(&make, &[Any::from(20i64)]).unwrap();
    let kind = get(&sess, "test.rpc.module_kind");
    let k = call(&kind, std::slice::from_ref(&parent)).unwrap();
    assert_eq!(k.view().as_str(), Some("rpc_test"));
    let pm = Module::from_view(&parent.view(), "parent").unwrap();
    assert_eq!(
        call(&get(&pm, "addone"), &[Any::from(1i64)])
            .unwrap()
            .view()
            .as_i64(),
        Some(11)
    );
    call(&global("rpc.ImportRemoteModule"), &[parent.clone(), child]).unwrap();
    let e = call(&kind, &[Any::from_object(sess.object().clone())]).unwrap_err();
    assert!(e.message.contains("session module cannot be passed"), "{e}");

    let arr = call(&get(&sess, "test.rpc.array"), &[]).unwrap();
    assert!(arr
        .view()
        .as_object()
        .unwrap()
        .downcast_ref::<RemoteObject>()
        .is_some());
    let ti = call(
        &get(&sess, "test.rpc.type_index"),
        std::slice::from_ref(&arr),
    )
    .unwrap();
    assert_eq!(
        ti.view().as_i64(),
        Some(tvmrt::abi::type_index::ARRAY as i64)
    );
    drop(arr);

    let e = call(
        &echo,
        &[Any::from_object(
            tvmrt::object::containers::array::new_array(vec![]),
        )],
    )
    .unwrap_err();
    assert!(e.message.contains("cannot pass"), "{e}");

    // The session closes (Shutdown) when its last reference goes.
    drop((sess, echo, add_to_lhs, apply, make, kind, parent, pm));
    let ended = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the server loop ended");
    assert!(ended.starts_with("ended: Ok"), "{ended}");
}

#[test]
fn the_globals_as_tvm4j_and_tvm_call_them() {
    let enabled = call(&global("runtime.RuntimeEnabled"), &[Any::from("rpc")]).unwrap();
    assert_eq!(enabled.view().as_bool(), Some(true));
    let connect = global("rpc.Connect");
    // tvm4j: (url, port, key).
    let (port, rx) = tvmrt_server();
    let sess = call(
        &connect,
        &[
            Any::from("127.0.0.1"),
            Any::from(port as i64),
            Any::from("k1"),
        ],
    )
    .unwrap();
    assert_eq!(rx.recv().unwrap(), "client:k1");
    let sess = Module::from_view(&sess.view(), "sess").unwrap();
    let f = get(&sess, "rpc.test.addone");
    assert_eq!(
        call(&f, &[Any::from(10i64)]).unwrap().view().as_i64(),
        Some(11)
    );
    // CloseRPCConnection ends the session; later calls fail at once.
    call(&get(&sess, "CloseRPCConnection"), &[]).unwrap();
    let e = call(&f, &[Any::from(1i64)]).unwrap_err();
    assert!(e.message.contains("closed"), "{e}");
    assert!(rx
        .recv_timeout(Duration::from_secs(10))
        .unwrap()
        .starts_with("ended: Ok"));
    // TVM: (url, port, key, enable_logging, session constructor...).
    let (port, _rx) = tvmrt_server();
    let args = [
        Any::from("127.0.0.1"),
        Any::from(port as i64),
        Any::from(""),
        Any::from(false),
        Any::from("rpc.LocalSession"),
    ];
    let sess = call(&connect, &args).unwrap();
    let sess = Module::from_view(&sess.view(), "sess").unwrap();
    assert_eq!(
        call(&get(&sess, "rpc.test.addone"), &[Any::from(1i64)])
            .unwrap()
            .view()
            .as_i64(),
        Some(2)
    );
    let e = call(&connect, &[Any::from("127.0.0.1"), Any::from(70000i64)]).unwrap_err();
    assert!(e.message.contains("out of range"), "{e}");
}

/// A fake server: accepts one connection and runs `script` on it.
fn fake_server(script: impl FnOnce(TcpStream) + Send + 'static) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        script(s);
    });
    port
}

/// Reads one packet; `None` at the end of the stream.
fn read_packet(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 8];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; u64::from_le_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

/// `Return` with one None (InitServer's answer).
fn return_void() -> Vec<u8> {
    let mut p = 12u64.to_le_bytes().to_vec();
    p.extend_from_slice(&4i32.to_le_bytes()); // Return
    p.extend_from_slice(&1i32.to_le_bytes());
    p.extend_from_slice(&0i32.to_le_bytes()); // None
    p
}

fn quick() -> ConnectOptions {
    ConnectOptions {
        connect_timeout: Duration::from_secs(2),
        ..ConnectOptions::default()
    }
}

#[test]
fn a_dropped_connection_is_a_clear_error() {
    // The server answers InitServer and the lookup, then closes in the middle of the call.
    let port = fake_server(|mut s| {
        accept_handshake(&mut s, MAGIC);
        read_packet(&mut s).unwrap();
        s.write_all(&return_void()).unwrap();
        read_packet(&mut s).unwrap(); // GetGlobalFunc
        let mut p = 20u64.to_le_bytes().to_vec();
        p.extend_from_slice(&4i32.to_le_bytes());
        p.extend_from_slice(&1i32.to_le_bytes());
        p.extend_from_slice(&4i32.to_le_bytes()); // an opaque handle
        p.extend_from_slice(&0x1234u64.to_le_bytes());
        s.write_all(&p).unwrap();
        read_packet(&mut s).unwrap(); // CallFunc
        s.write_all(&[1, 2, 3]).unwrap(); // part of a length, then gone
    });
    let sess = client::connect("127.0.0.1", port, "", &quick()).unwrap();
    let f = get(&sess, "anything");
    let t = Instant::now();
    let e = call(&f, &[Any::from(1i64)]).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(e.kind, "RPCError");
    assert!(
        e.message.contains("broke") && e.message.contains("closed"),
        "{e}"
    );
    let e = call(&f, &[Any::from(1i64)]).unwrap_err();
    assert!(e.message.contains("is closed"), "{e}");
}

#[test]
fn silent_refusing_and_foreign_servers_fail_in_bounded_time() {
    // Accepts, reads the handshake, never answers: the connect timeout ends the wait.
    let port = fake_server(|mut s| {
        let mut b = [0u8; 64];
        let _ = s.read(&mut b);
        thread::sleep(Duration::from_secs(6));
    });
    let t = Instant::now();
    let e = client::connect("127.0.0.1", port, "", &quick()).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(e.message.contains("handshake"), "{e}");

    let port = fake_server(|mut s| {
        accept_handshake(&mut s, MAGIC + 2);
    });
    let e = client::connect("127.0.0.1", port, "board", &quick()).unwrap_err();
    assert!(e.message.contains("matches key=client:board"), "{e}");

    let port = fake_server(|mut s| {
        s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").unwrap();
    });
    let e = client::connect("127.0.0.1", port, "", &quick()).unwrap_err();
    assert!(e.message.contains("not a TVM RPC server"), "{e}");

    // Nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = client::connect("127.0.0.1", port, "", &quick()).unwrap_err();
    assert!(e.message.contains("connect to"), "{e}");
}

#[test]
fn a_call_past_its_timeout_ends_the_session() {
    let (port, _rx) = tvmrt_server();
    let opts = ConnectOptions {
        call_timeout: Some(Duration::from_millis(300)),
        ..quick()
    };
    let sess = client::connect("127.0.0.1", port, "", &opts).unwrap();
    let sleep = get(&sess, "test.rpc.sleep_ms");
    call(&sleep, &[Any::from(10i64)]).unwrap();
    let t = Instant::now();
    let e = call(&sleep, &[Any::from(3000i64)]).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(e.message.contains("broke"), "{e}");
}

/// TVM's Python server, stopped (by its process id) when dropped.
struct PythonServer {
    child: Child,
    port: u16,
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn python_server() -> PythonServer {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join(".ci/venv.sh"))
        .arg("rpc")
        .output()
        .expect(".ci/venv.sh rpc");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let python = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let base = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(python)
        .args(["-m", "tvm.exec.rpc_server", "--host", "127.0.0.1"])
        .args([
            "--port",
            &base.to_string(),
            "--port-end",
            &(base + 50).to_string(),
        ])
        .current_dir(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python -m tvm.exec.rpc_server");
    let (tx, rx) = mpsc::channel();
    for pipe in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(|l| l.ok()) {
                let _ = tx.send(line);
            }
        });
    }
    let mut server = PythonServer { child, port: 0 };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    while server.port == 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("TVM's server did not start: {seen:?}"));
        if let Some(rest) = line.split("bind to 127.0.0.1:").nth(1) {
            server.port = rest.trim().parse().unwrap();
        }
        seen.push(line);
    }
    server
}

impl PythonServer {
    /// A session; TVM's server prints its port after `bind` and before `listen`, so a
    /// refused connection is retried for a few seconds.
    fn connect(&self) -> Module {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match client::connect("127.0.0.1", self.port, "", &ConnectOptions::default()) {
                Ok(m) => return m,
                Err(e) if e.message.contains("refused") && Instant::now() < deadline => {
                    thread::sleep(Duration::from_millis(100))
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
}

#[test]
fn against_tvm_python_server() {
    let server = python_server();
    let sess = server.connect();
    exercise_common(&sess, "TVM's server");
    let t = Instant::now();
    drop(sess);
    assert!(t.elapsed() < Duration::from_secs(5));
    // A new session after the last one closed (TVM's server serves one at a time).
    let sess = server.connect();
    let f = get(&sess, "rpc.test.addone");
    assert_eq!(
        call(&f, &[Any::from(1i64)]).unwrap().view().as_i64(),
        Some(2)
    );
}
