//! Fuzz target: TVM RPC packets through the server's loop (`tvmrt::rpc::serve`).
//!
//! Input: the bytes a client sends after the key handshake. An `InitServer` packet is put in
//! front so the fuzzed packets reach every handler (allocation, copies both ways, frees,
//! handles, streams, device attributes); calls are refused (a fuzzed call could reach any
//! global with any argument). Besides "no crash", it checks that every answer is a whole,
//! well-formed packet and that the loop's memory follows what was received: a length claims
//! nothing (`MAX_PACKET` bounds a packet, and bodies grow only as bytes arrive).
#![no_main]

use std::io::{self, Read, Write};

use libfuzzer_sys::fuzz_target;
use tvmrt::rpc::wire::{Code, Reader, Writer};
use tvmrt::rpc::{serve, Session};

struct Pipe {
    input: io::Cursor<Vec<u8>>,
    output: Vec<u8>,
}

impl Read for Pipe {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        self.input.read(b)
    }
}

impl Write for Pipe {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.output.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let mut init = Writer::packet(Code::InitServer);
    init.bytes(b"0.8.0").values(&[]);
    let mut input = init.finish();
    input.extend_from_slice(data);
    let mut pipe = Pipe {
        input: io::Cursor::new(input),
        output: Vec::new(),
    };
    let mut session = Session::without_calls();
    let _ = serve(&mut pipe, &mut session);
    // Every answer is a whole packet with a known code.
    let mut r = Reader::new(&pipe.output);
    while r.remaining() > 0 {
        let n = r.u64("len").expect("answer length");
        let body = r.take(n, "answer").expect("whole answer");
        let code = i32::from_le_bytes(body[..4].try_into().expect("code"));
        assert!(
            code == Code::Return as i32
                || code == Code::Exception as i32
                || code == Code::CopyAck as i32,
            "answer code {code}"
        );
    }
});
