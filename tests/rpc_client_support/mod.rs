//! Servers and helpers of tests/rpc_client.rs: tvmrt's server in a thread of the test
//! process (with the `rpc.test.*` functions TVM's Python server has), TVM's Python server, fake
//! servers, and a tiny tvm-ffi library for both servers to load.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::IntoRawFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Once};
use std::thread;
use std::time::{Duration, Instant};

use tvmrt::function::registry;
use tvmrt::module::{Module, ModuleKind};
use tvmrt::rpc::client::{self, ConnectOptions};
use tvmrt::{Any, Error, Function, Result};

pub const MAGIC: i32 = 0xff271;

pub fn global(name: &str) -> Function {
    registry::get(name).unwrap_or_else(|| panic!("{name} is not registered"))
}

pub fn call(f: &Function, args: &[Any]) -> Result<Any> {
    f.call_values(args)
}

pub fn get(sess: &Module, name: &str) -> Function {
    sess.get_function(name, false)
        .unwrap()
        .unwrap_or_else(|| panic!("no remote function {name}"))
}

/// Counts the server-side closures dropped (freed by the client's `FreeHandle`).
pub static ADDERS_DROPPED: AtomicUsize = AtomicUsize::new(0);

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
pub fn register_test_functions() {
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
        reg(
            "rpc.test.remote_return_nd",
            Function::from_fn(|a| {
                assert_eq!(a[0].expect_str("name")?, "get_arr");
                let f32 = tvmrt::abi::DLDataType {
                    code: tvmrt::abi::DLDataTypeCode(2),
                    bits: 32,
                    lanes: 1,
                };
                let cpu = tvmrt::abi::DLDevice {
                    device_type: tvmrt::abi::DLDeviceType(1),
                    device_id: 0,
                };
                let nd = tvmrt::tensor::Tensor::empty(&[10], f32, cpu)?;
                nd.copy_from_bytes(&[0u8; 40])?;
                Ok(Any::from_object(
                    Function::from_fn(move |_| Ok(Any::from_object(nd.clone().into_object())))
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

pub fn read_i32(s: &mut TcpStream) -> i32 {
    let mut b = [0u8; 4];
    s.read_exact(&mut b).unwrap();
    i32::from_le_bytes(b)
}

/// The server side of the key handshake: reads the client's magic and key, answers `reply`
/// and the server's key. Returns the client's key.
pub fn accept_handshake(s: &mut TcpStream, reply: i32) -> String {
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
pub fn tvmrt_server() -> (u16, mpsc::Receiver<String>) {
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

pub fn connect(port: u16) -> Module {
    client::connect("127.0.0.1", port, "", &ConnectOptions::default()).unwrap()
}

/// A tvm-ffi library of one function, `addone(x) = x + 1` (`__tvm_ffi_addone`), for both
/// servers to load.
pub fn addone_library() -> Vec<u8> {
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

/// A fake server: accepts one connection and runs `script` on it.
pub fn fake_server(script: impl FnOnce(TcpStream) + Send + 'static) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        script(s);
    });
    port
}

/// Reads one packet; `None` at the end of the stream.
pub fn read_packet(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 8];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; u64::from_le_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

/// `Return` with one None (InitServer's answer).
pub fn return_void() -> Vec<u8> {
    let mut p = 12u64.to_le_bytes().to_vec();
    p.extend_from_slice(&4i32.to_le_bytes()); // Return
    p.extend_from_slice(&1i32.to_le_bytes());
    p.extend_from_slice(&0i32.to_le_bytes()); // None
    p
}

pub fn quick() -> ConnectOptions {
    ConnectOptions {
        connect_timeout: Duration::from_secs(2),
        ..ConnectOptions::default()
    }
}

/// TVM's Python server, stopped (by its process id) when dropped.
pub struct PythonServer {
    child: Child,
    port: u16,
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn python_server() -> PythonServer {
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
    pub fn connect(&self) -> Module {
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
