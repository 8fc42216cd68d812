//! The packet loop driven as TVM's client drives it, over an in-memory channel.

use super::*;
use crate::rpc::memory::tests::{CPU, F32};
use crate::rpc::wire::{split_packets, WireValue, Writer};

fn init() -> Vec<u8> {
    let mut w = Writer::packet(Code::InitServer);
    w.bytes(b"0.8.0").values(&[]);
    w.finish()
}

fn syscall(code: Code, values: &[WireValue]) -> Vec<u8> {
    let mut w = Writer::packet(code);
    w.values(values);
    w.finish()
}

/// Runs `packets` through one session; returns each answer's code and body.
fn run(packets: &[Vec<u8>]) -> (Vec<(i32, Vec<u8>)>, Result<Ended>) {
    let mut pipe = MemoryChannel::new(packets.concat());
    let mut session = Session::new();
    let ended = serve(&mut pipe, &mut session);
    (split_packets(&pipe.output).unwrap(), ended)
}

fn returned(answer: &(i32, Vec<u8>)) -> Vec<WireValue> {
    assert_eq!(answer.0, Code::Return as i32, "{:?}", exception(answer));
    Reader::new(&answer.1).values().unwrap()
}

fn exception(answer: &(i32, Vec<u8>)) -> String {
    match Reader::new(&answer.1).values() {
        Ok(v) => format!("{v:?}"),
        Err(e) => e.to_string(),
    }
}

fn tensor(data: u64, shape: Vec<i64>) -> WireTensor {
    WireTensor {
        data,
        device: CPU,
        dtype: F32,
        shape,
        byte_offset: 0,
    }
}

#[test]
fn allocate_copy_both_ways_and_free() {
    let alloc = syscall(
        Code::DevAllocDataWithScope,
        &[WireValue::Tensor(tensor(0, vec![4])), WireValue::None],
    );
    let mut pipe_packets = vec![init(), alloc];
    let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0]
        .iter()
        .flat_map(|f| f.to_le_bytes())
        .collect();
    let mut session = Session::new();
    let mut pipe = MemoryChannel::new(pipe_packets.concat());
    serve(&mut pipe, &mut session).unwrap();
    let first = run_answers(&pipe.output);
    let WireValue::Opaque(addr) = returned(&first[1])[0] else {
        panic!()
    };
    pipe_packets.clear();
    let mut to = Writer::packet(Code::CopyToRemote);
    to.tensor(&tensor(addr, vec![4])).u64(16).raw(&data);
    let mut from = Writer::packet(Code::CopyFromRemote);
    from.tensor(&tensor(addr, vec![4])).u64(16);
    let mut short = Writer::packet(Code::CopyFromRemote);
    short.tensor(&tensor(addr, vec![5])).u64(20);
    let free = syscall(
        Code::DevFreeData,
        &[WireValue::Device(CPU), WireValue::Opaque(addr)],
    );
    let mut after = Writer::packet(Code::CopyFromRemote);
    after.tensor(&tensor(addr, vec![4])).u64(16);
    let packets = [
        to.finish(),
        from.finish(),
        short.finish(),
        free,
        after.finish(),
    ];
    let mut pipe = MemoryChannel::new(packets.concat());
    assert_eq!(serve(&mut pipe, &mut session).unwrap(), Ended::Closed);
    let a = run_answers(&pipe.output);
    assert_eq!(returned(&a[0]), vec![WireValue::None]);
    assert_eq!(a[1], (Code::CopyAck as i32, data));
    assert_eq!(a[2].0, Code::Exception as i32);
    assert!(
        exception(&a[2]).contains("holds 20 bytes"),
        "{}",
        exception(&a[2])
    );
    assert_eq!(returned(&a[3]), vec![WireValue::None]);
    assert_eq!(a[4].0, Code::Exception as i32, "a freed address is refused");
    assert_eq!(session.held(), (0, 0));
}

fn run_answers(output: &[u8]) -> Vec<(i32, Vec<u8>)> {
    split_packets(output).unwrap()
}

#[test]
fn globals_are_found_called_and_freed() {
    let get = syscall(
        Code::GetGlobalFunc,
        &[WireValue::Str("runtime.RuntimeEnabled".into())],
    );
    let missing = syscall(Code::GetGlobalFunc, &[WireValue::Str("no.such".into())]);
    let mut session = Session::new();
    let mut pipe = MemoryChannel::new([init(), get, missing].concat());
    serve(&mut pipe, &mut session).unwrap();
    let a = run_answers(&pipe.output);
    assert_eq!(returned(&a[0]), vec![WireValue::None]);
    let WireValue::Opaque(h) = returned(&a[1])[0] else {
        panic!()
    };
    assert_eq!(returned(&a[2]), vec![WireValue::None]);
    let mut call = Writer::packet(Code::CallFunc);
    call.u64(h).values(&[WireValue::Str("cpu".into())]);
    let mut bad_call = Writer::packet(Code::CallFunc);
    bad_call.u64(h ^ 2).values(&[]);
    let mut raising = Writer::packet(Code::CallFunc);
    raising.u64(h).values(&[WireValue::Str("abacus".into())]);
    let free = syscall(Code::FreeHandle, &[WireValue::Opaque(h)]);
    let mut pipe =
        MemoryChannel::new([call.finish(), bad_call.finish(), raising.finish(), free].concat());
    serve(&mut pipe, &mut session).unwrap();
    let a = run_answers(&pipe.output);
    // TVM's return encoding: the type index, then the value.
    assert_eq!(
        returned(&a[0]),
        vec![WireValue::Int(2), WireValue::Bool(true)]
    );
    assert!(
        exception(&a[1]).contains("unknown handle"),
        "{}",
        exception(&a[1])
    );
    assert!(exception(&a[2]).contains("abacus"), "{}", exception(&a[2]));
    assert_eq!(returned(&a[3]), vec![WireValue::None]);
    assert_eq!(session.held(), (0, 0));
}

#[test]
fn requests_before_init_and_wrong_versions_are_refused() {
    let get = syscall(Code::GetGlobalFunc, &[WireValue::Str("x".into())]);
    let mut old = Writer::packet(Code::InitServer);
    old.bytes(b"0.7.0").values(&[]);
    let (a, ended) = run(&[get, old.finish(), init(), init()]);
    assert_eq!(ended.unwrap(), Ended::Closed);
    assert!(exception(&a[0]).contains("not initialized"));
    assert!(exception(&a[1]).contains("0.7.0"));
    assert_eq!(returned(&a[2]), vec![WireValue::None]);
    assert!(exception(&a[3]).contains("already been initialized"));
}

#[test]
fn shutdown_and_broken_streams_end_the_session() {
    let shutdown = Writer::packet(Code::Shutdown).finish();
    let (_, ended) = run(&[init(), shutdown]);
    assert_eq!(ended.unwrap(), Ended::Shutdown);
    // A length no packet has, and a packet cut short.
    let (_, ended) = run(&[u64::MAX.to_le_bytes().to_vec()]);
    assert!(ended.unwrap_err().message.contains("out of range"));
    let mut cut = init();
    cut.truncate(cut.len() - 3);
    let (_, ended) = run(&[cut]);
    assert!(ended.unwrap_err().message.contains("middle of a packet"));
    // A copy whose size disagrees with its packet.
    let mut lying = Writer::packet(Code::CopyToRemote);
    lying.tensor(&tensor(64, vec![4])).u64(1 << 40);
    let (_, ended) = run(&[init(), lying.finish()]);
    assert!(ended.unwrap_err().message.contains("its packet holds"));
}

#[test]
fn a_refused_copy_keeps_the_stream_in_step() {
    let mut bogus = Writer::packet(Code::CopyToRemote);
    bogus.tensor(&tensor(0x1000, vec![2])).u64(8).raw(&[7; 8]);
    let get = syscall(Code::GetGlobalFunc, &[WireValue::Str("no.such".into())]);
    let (a, ended) = run(&[init(), bogus.finish(), get]);
    assert_eq!(ended.unwrap(), Ended::Closed);
    assert!(exception(&a[1]).contains("no memory of this session"));
    assert_eq!(returned(&a[2]), vec![WireValue::None]);
}
