//! tvmrt's RPC client (`rpc.Connect` and the session module) against two servers: tvmrt's own
//! (`rpc.ServerLoop` in a thread of this process, behind a key handshake done here as
//! `tvmrt rpc-server` does it) and TVM's (`python -m tvm.exec.rpc_server` from the pinned
//! `rpc` venv, apache-tvm 0.27). The same calls run on both: TVM's server registers the
//! `rpc.test.*` functions (python/tvm/rpc/testing.py), this process registers the same names
//! for its own server. Then what only a fake server can show: a dropped connection, a server
//! that never answers, a refused key, and a call past its timeout, each a clear error in
//! bounded time.

mod rpc_client_support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use rpc_client_support::*;
use tvmrt::abi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType};
use tvmrt::module::Module;
use tvmrt::rpc::client::{self, ConnectOptions, RemoteObject, RemoteTensor};
use tvmrt::tensor::Tensor;
use tvmrt::{Any, Function};

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

    let index = call(
        &global("rpc.SessTableIndex"),
        std::slice::from_ref(&sess_any),
    )
    .unwrap();
    assert!(index.view().as_i64().unwrap() >= 0);

    // Remote tensors: TVM's compiled add(A, B, C) (tests/fixtures/add_dyn.so) on the server's
    // CPU, inputs copied there, the result copied back.
    let lib = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/add_dyn.so"
    ));
    call(
        &upload,
        &[Any::from("add_dyn.so"), Any::bytes(&lib.unwrap())],
    )
    .unwrap();
    let m = call(&load, &[sess_any, Any::from("add_dyn.so")]).unwrap();
    let add = get(&Module::from_view(&m.view(), "module").unwrap(), "add");
    let f32 = DLDataType {
        code: DLDataTypeCode(2),
        bits: 32,
        lanes: 1,
    };
    let cpu = DLDevice {
        device_type: DLDeviceType(1),
        device_id: 0,
    };
    let a = RemoteTensor::empty(sess, &[1024], f32, cpu).unwrap();
    let c = RemoteTensor::empty(sess, &[1024], f32, cpu).unwrap();
    let data: Vec<u8> = (0..1024).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let ra = RemoteTensor::from_object(&a).unwrap();
    ra.copy_from_bytes(&data).unwrap();
    assert_eq!(ra.to_bytes().unwrap(), data, "{who}");
    let e = ra.copy_from_bytes(&data[..8]).unwrap_err();
    assert!(e.message.contains("4096 bytes, given 8"), "{e}");
    let (a, c) = (Any::from_object(a), Any::from_object(c));
    call(&add, &[a.clone(), a.clone(), c.clone()]).unwrap();
    let got = RemoteTensor::from_object(&c.view().as_object().unwrap())
        .unwrap()
        .to_bytes()
        .unwrap();
    let want: Vec<u8> = (0..1024)
        .flat_map(|i| (2.0 * i as f32).to_le_bytes())
        .collect();
    assert_eq!(got, want, "{who}");
    // runtime.RPCTimeEvaluator on the remote module: the server's evaluator, a remote
    // function whose result is `repeat` times (f64, seconds) as bytes.
    let args = [
        m.clone(),
        Any::from("add"),
        Any::from(1i64),
        Any::from(0i64),
    ]
    .into_iter()
    .chain([5i64, 3, 0, 100, 0, 1, 0].map(Any::from))
    .chain([Any::from("")])
    .collect::<Vec<_>>();
    let ev = call(&global("runtime.RPCTimeEvaluator"), &args).unwrap();
    let ev = ev.view().as_function().expect("a remote evaluator");
    let times = call(&ev, &[a.clone(), a.clone(), c.clone()]).unwrap();
    let times = times.view().as_byte_slice().unwrap().to_vec();
    assert_eq!(times.len(), 3 * 8, "{who}");
    for t in times.chunks(8) {
        let t = f64::from_le_bytes(t.try_into().unwrap());
        assert!(t > 0.0 && t < 1.0, "{who}: {t}");
    }
    // A shape the kernel refuses: the server's error, and the session goes on.
    let short = Any::from_object(RemoteTensor::empty(sess, &[8], f32, cpu).unwrap());
    let e = call(&add, &[a.clone(), a.clone(), short]).unwrap_err();
    assert_eq!(e.kind, "RPCError", "{who}: {e}");
    // A local tensor is refused before anything is sent.
    let local = Tensor::empty(&[4], f32, cpu).unwrap();
    let e = call(&add, &[Any::from_object(local.into_object()), a.clone(), c]).unwrap_err();
    assert!(e.message.contains("local tensor"), "{e}");
    // A tensor returned by a remote function: zeros(10) on the session's masked CPU, held by
    // the server until dropped.
    let get_arr = call(
        &get(sess, "rpc.test.remote_return_nd"),
        &[Any::from("get_arr")],
    )
    .unwrap();
    let nd = call(&get_arr.view().as_function().unwrap(), &[]).unwrap();
    let nd = Tensor::from_any_view(&nd.view(), "result").expect("a tensor");
    assert_eq!((nd.shape(), nd.dtype()), (&[10i64][..], f32));
    assert_eq!(nd.device(), masked_cpu(sess), "{who}");
    assert_eq!(nd.to_vec().unwrap(), vec![0u8; 40], "{who}");
    masked_device_tensors(sess, &add, who);
    assert_eq!(
        call(&addone, &[Any::from(1i64)]).unwrap().view().as_i64(),
        Some(2)
    );
}

/// The session's index in the client's table (`rpc.SessTableIndex`).
fn session_index(sess: &Module) -> u32 {
    call(
        &global("rpc.SessTableIndex"),
        &[Any::from_object(sess.object().clone())],
    )
    .unwrap()
    .view()
    .as_i64()
    .unwrap() as u32
}

/// The session's CPU as TVM's client names it: `kDLCPU + 128 * (index + 1)`.
fn masked_cpu(sess: &Module) -> DLDevice {
    DLDevice {
        device_type: DLDeviceType(1 + 128 * (session_index(sess) + 1)),
        device_id: 0,
    }
}

/// Tensors on the session's masked CPU, through the tensor API as C's `TVMArray*` and tvm4j
/// use it: allocated there, filled, passed to TVM's compiled `add`, copied between remote
/// tensors and back, a view's offset kept; and what is refused: a forged data pointer, a
/// session that is not open, a copy to another device.
fn masked_device_tensors(sess: &Module, add: &Function, who: &str) {
    let f32 = DLDataType {
        code: DLDataTypeCode(2),
        bits: 32,
        lanes: 1,
    };
    let dev = masked_cpu(sess);
    assert_eq!(
        tvmrt::device::device_name(dev),
        format!("remote[{}]-cpu:0", dev.device_type.0 / 128 - 1)
    );
    let a = Tensor::empty(&[1024], f32, dev).unwrap();
    let b = Tensor::empty(&[1024], f32, dev).unwrap();
    let c = Tensor::empty(&[1024], f32, dev).unwrap();
    let data: Vec<u8> = (0..1024)
        .flat_map(|i| (i as f32 * 0.5).to_le_bytes())
        .collect();
    a.copy_from_bytes(&data).unwrap();
    assert_eq!(a.to_vec().unwrap(), data, "{who}");
    // Remote to remote (CopyAmongRemote), then the kernel on the server: c = a + b.
    b.copy_from(&a).unwrap();
    let args = [&a, &b, &c].map(|t| Any::from_object(t.object().clone()));
    call(add, &args).unwrap();
    let want: Vec<u8> = (0..1024).flat_map(|i| (i as f32).to_le_bytes()).collect();
    assert_eq!(c.to_vec().unwrap(), want, "{who}");
    // Remote to a local CPU tensor, and a view 64 floats in (its offset goes to the server).
    let host = c.copy_to(tvmrt::device::cpu(), None).unwrap();
    assert_eq!(host.to_vec().unwrap(), want, "{who}");
    let tail = c.view(&[16], f32, 64 * 4).unwrap();
    assert_eq!(tail.to_vec().unwrap(), want[256..320], "{who}");
    // A tensor on the masked device whose data is no remote allocation: refused, nothing sent.
    let forged = unsafe {
        Tensor::over_shared(
            0x1000 as *mut std::ffi::c_void,
            0,
            &[1024],
            f32,
            dev,
            std::sync::Arc::new(()),
        )
    }
    .unwrap();
    let e = call(
        add,
        &[
            Any::from_object(forged.object().clone()),
            args[1].clone(),
            args[2].clone(),
        ],
    )
    .unwrap_err();
    assert!(
        e.message.contains("not the data of a remote tensor"),
        "{who}: {e}"
    );
    assert!(forged.to_vec().is_err());
    // A session index nobody opened.
    let closed = DLDevice {
        device_type: DLDeviceType(1 + 128 * 100),
        device_id: 0,
    };
    let e = Tensor::empty(&[4], f32, closed).unwrap_err();
    assert!(e.message.contains("no RPC session 99"), "{e}");
    // Stream sync and an attribute of the remote CPU.
    let api = tvmrt::device::api_of(dev).unwrap();
    api.stream_sync(dev, std::ptr::null_mut()).unwrap();
    let exists = api.get_attr(dev, tvmrt::device::DeviceAttr::Exist).unwrap();
    assert_eq!(exists.view().as_i64(), Some(1), "{who}");
    // The session goes on.
    assert_eq!(c.to_vec().unwrap(), want, "{who}");
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
    let index = session_index(&sess);
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
    assert!(
        e.message.contains("handshake") && e.message.contains("no answer in time"),
        "{e}"
    );

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
    assert!(
        e.message.contains("broke") && e.message.contains("timeout"),
        "{e}"
    );
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
