//! TVM's RPC wire format (tvm-ffi encoding, TVM 0.21-0.27; protocol version "0.8.0").
//!
//! Facts from apache/tvm `src/runtime/rpc/minrpc/rpc_reference.h` and `rpc_endpoint.cc`, all
//! little-endian:
//! - a packet is `u64 nbytes` then `nbytes` of body; the body starts with an `i32` [`Code`];
//! - a packed sequence is `i32 count`, then per value an `i32` type index and its payload:
//!   ints, bools and floats as 8 bytes; pointers and handles as `u64`; a dtype as 4 bytes plus
//!   4 of padding; a device as two `i32`; strings and byte arrays as `u64 len` + bytes; a
//!   `DLTensor*` in its wire form ([`WireTensor`]); objects (index >= 64 and the small
//!   string/bytes) as a second `u32` index: a string, bytes, or a remote object handle.
//!
//! Decoding never trusts a length: every read is checked against what the packet holds.

use crate::abi::{type_index as ti, DLDataType, DLDataTypeCode, DLDevice, DLDeviceType};
use crate::error::{Error, Result};

/// The protocol version TVM 0.8 to 0.27 send in `InitServer`.
pub const PROTOCOL_VERSION: &str = "0.8.0";
/// The handshake magic (`RPC_MAGIC`); `+1` duplicate key, `+2` key mismatch.
pub const RPC_MAGIC: i32 = 0xff271;
/// The tracker's handshake magic.
pub const TRACKER_MAGIC: i32 = 0x2f271;
/// The type index TVM gives `runtime.RPCObjectRef` (`kTVMFFIDynObjectBegin - 13`).
pub const RPC_OBJECT_REF: i32 = ti::DYN_OBJECT_BEGIN - 13;
/// The most dimensions a tensor on the wire may have.
pub const MAX_NDIM: i32 = 64;

/// `RPCCode`: what a packet asks or answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Code {
    None = 0,
    Shutdown = 1,
    InitServer = 2,
    CallFunc = 3,
    Return = 4,
    Exception = 5,
    CopyFromRemote = 6,
    CopyToRemote = 7,
    CopyAck = 8,
    GetGlobalFunc = 9,
    FreeHandle = 10,
    DevSetDevice = 11,
    DevGetAttr = 12,
    DevAllocData = 13,
    DevFreeData = 14,
    DevStreamSync = 15,
    CopyAmongRemote = 16,
    DevAllocDataWithScope = 17,
    DevCreateStream = 18,
    DevFreeStream = 19,
    DevSetStream = 20,
    DevGetCurrentStream = 21,
}

impl Code {
    /// The code of a packet, or an error naming the unknown number.
    pub fn from_i32(v: i32) -> Result<Code> {
        use Code::*;
        const ALL: [Code; 22] = [
            None,
            Shutdown,
            InitServer,
            CallFunc,
            Return,
            Exception,
            CopyFromRemote,
            CopyToRemote,
            CopyAck,
            GetGlobalFunc,
            FreeHandle,
            DevSetDevice,
            DevGetAttr,
            DevAllocData,
            DevFreeData,
            DevStreamSync,
            CopyAmongRemote,
            DevAllocDataWithScope,
            DevCreateStream,
            DevFreeStream,
            DevSetStream,
            DevGetCurrentStream,
        ];
        usize::try_from(v)
            .ok()
            .and_then(|i| ALL.get(i).copied())
            .ok_or_else(|| Error::value(format!("RPC: unknown packet code {v}")))
    }
}

/// A `DLTensor` as it crosses the wire: the remote data address, not the data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireTensor {
    pub data: u64,
    pub device: DLDevice,
    pub dtype: DLDataType,
    pub shape: Vec<i64>,
    pub byte_offset: u64,
}

/// One value of a packed sequence.
#[derive(Clone, Debug, PartialEq)]
pub enum WireValue {
    None,
    Int(i64),
    Bool(bool),
    Float(f64),
    /// An opaque pointer or handle.
    Opaque(u64),
    DType(DLDataType),
    Device(DLDevice),
    /// A string (raw C string, `ffi.String` or small string on the wire).
    Str(String),
    /// Bytes (a byte array, `ffi.Bytes` or small bytes), with the type index they came as.
    Bytes(Vec<u8>),
    Tensor(WireTensor),
    /// A function handle the peer got from us.
    Function(u64),
    /// A module handle the peer got from us.
    Module(u64),
    /// Any other object handle (`runtime.RPCObjectRef`).
    Object(u64),
}

/// A bounds-checked reader over one packet's body.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        let n = usize::try_from(n).ok().filter(|&n| n <= self.remaining());
        let Some(n) = n else {
            return Err(Error::value(format!(
                "RPC: truncated packet reading {what} ({} bytes left)",
                self.remaining()
            )));
        };
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_le_bytes(self.array(what)?))
    }

    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub fn i64(&mut self, what: &str) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array(what)?))
    }

    pub fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    pub fn device(&mut self) -> Result<DLDevice> {
        let device_type = self.u32("device type")?;
        let device_id = self.i32("device id")?;
        Ok(DLDevice {
            device_type: DLDeviceType(device_type),
            device_id,
        })
    }

    pub fn dtype(&mut self) -> Result<DLDataType> {
        let [code, bits, l0, l1] = self.array::<4>("dtype")?;
        Ok(DLDataType {
            code: DLDataTypeCode(code),
            bits,
            lanes: u16::from_le_bytes([l0, l1]),
        })
    }

    /// A `u64` length and that many bytes.
    pub fn bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let len = self.u64(what)?;
        self.take(len, what)
    }

    pub fn string(&mut self, what: &str) -> Result<String> {
        let b = self.bytes(what)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| Error::value(format!("RPC: {what} is not valid UTF-8")))
    }

    /// A tensor in its wire form.
    pub fn tensor(&mut self) -> Result<WireTensor> {
        let data = self.u64("tensor data")?;
        let device = self.device()?;
        let ndim = self.i32("tensor ndim")?;
        if !(0..=MAX_NDIM).contains(&ndim) {
            return Err(Error::value(format!(
                "RPC: tensor ndim {ndim} out of range 0..={MAX_NDIM}"
            )));
        }
        let dtype = self.dtype()?;
        let mut shape = Vec::with_capacity(ndim as usize);
        for _ in 0..ndim {
            shape.push(self.i64("tensor shape")?);
        }
        let byte_offset = self.u64("tensor byte_offset")?;
        Ok(WireTensor {
            data,
            device,
            dtype,
            shape,
            byte_offset,
        })
    }

    /// An object's second type index and payload (`ReadFFIAny`).
    fn object(&mut self) -> Result<WireValue> {
        let index = self.u32("object type index")? as i32;
        match index {
            ti::STR => Ok(WireValue::Str(self.string("string")?)),
            ti::BYTES => Ok(WireValue::Bytes(self.bytes("bytes")?.to_vec())),
            RPC_OBJECT_REF => Ok(WireValue::Object(self.u64("object handle")?)),
            other => Err(Error::value(format!(
                "RPC: object of type index {other} cannot cross the connection"
            ))),
        }
    }

    /// A packed sequence.
    pub fn values(&mut self) -> Result<Vec<WireValue>> {
        let n = self.i32("argument count")?;
        // Each value takes at least its 4-byte type index: a count the packet cannot hold is
        // refused before anything is sized by it.
        if n < 0 || n as usize > self.remaining() / 4 {
            return Err(Error::value(format!(
                "RPC: argument count {n} does not fit the packet"
            )));
        }
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            out.push(self.value()?);
        }
        Ok(out)
    }

    fn value(&mut self) -> Result<WireValue> {
        let index = self.i32("type index")?;
        Ok(match index {
            ti::NONE => WireValue::None,
            ti::INT => WireValue::Int(self.i64("int")?),
            ti::BOOL => WireValue::Bool(self.i64("bool")? != 0),
            ti::FLOAT => WireValue::Float(f64::from_bits(self.u64("float")?)),
            ti::OPAQUE_PTR => WireValue::Opaque(self.u64("handle")?),
            ti::DATA_TYPE => {
                let d = self.dtype()?;
                self.i32("dtype padding")?;
                WireValue::DType(d)
            }
            ti::DEVICE => WireValue::Device(self.device()?),
            ti::FUNCTION => WireValue::Function(self.u64("function handle")?),
            ti::MODULE => WireValue::Module(self.u64("module handle")?),
            ti::RAW_STR => WireValue::Str(self.string("string")?),
            ti::BYTE_ARRAY_PTR => WireValue::Bytes(self.bytes("byte array")?.to_vec()),
            ti::DL_TENSOR_PTR => WireValue::Tensor(self.tensor()?),
            ti::SMALL_STR | ti::SMALL_BYTES => self.object()?,
            i if i >= ti::STATIC_OBJECT_BEGIN => self.object()?,
            other => {
                return Err(Error::value(format!(
                    "RPC: unknown argument type index {other}"
                )))
            }
        })
    }
}

/// Builds one outgoing packet; [`Writer::finish`] puts the length in front.
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// A packet with code `code`.
    pub fn packet(code: Code) -> Writer {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&0u64.to_le_bytes());
        buf.extend_from_slice(&(code as i32).to_le_bytes());
        Writer { buf }
    }

    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }

    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u64(b.len() as u64).raw(b)
    }

    pub fn device(&mut self, d: DLDevice) -> &mut Self {
        self.u32(d.device_type.0).i32(d.device_id)
    }

    pub fn dtype(&mut self, d: DLDataType) -> &mut Self {
        self.raw(&[d.code.0, d.bits]).raw(&d.lanes.to_le_bytes())
    }

    pub fn tensor(&mut self, t: &WireTensor) -> &mut Self {
        self.u64(t.data).device(t.device).i32(t.shape.len() as i32);
        self.dtype(t.dtype);
        for &d in &t.shape {
            self.i64(d);
        }
        self.u64(t.byte_offset)
    }

    /// A packed sequence.
    pub fn values(&mut self, values: &[WireValue]) -> &mut Self {
        self.i32(values.len() as i32);
        for v in values {
            self.value(v);
        }
        self
    }

    fn value(&mut self, v: &WireValue) {
        match v {
            WireValue::None => {
                self.i32(ti::NONE);
            }
            WireValue::Int(i) => {
                self.i32(ti::INT).i64(*i);
            }
            WireValue::Bool(b) => {
                self.i32(ti::BOOL).i64(*b as i64);
            }
            WireValue::Float(f) => {
                self.i32(ti::FLOAT).u64(f.to_bits());
            }
            WireValue::Opaque(h) => {
                self.i32(ti::OPAQUE_PTR).u64(*h);
            }
            WireValue::DType(d) => {
                self.i32(ti::DATA_TYPE).dtype(*d).i32(0);
            }
            WireValue::Device(d) => {
                self.i32(ti::DEVICE).device(*d);
            }
            WireValue::Str(s) => {
                self.i32(ti::RAW_STR).bytes(s.as_bytes());
            }
            WireValue::Bytes(b) => {
                self.i32(ti::BYTE_ARRAY_PTR).bytes(b);
            }
            WireValue::Tensor(t) => {
                self.i32(ti::DL_TENSOR_PTR).tensor(t);
            }
            WireValue::Function(h) => {
                self.i32(ti::FUNCTION).u64(*h);
            }
            WireValue::Module(h) => {
                self.i32(ti::MODULE).u64(*h);
            }
            WireValue::Object(h) => {
                self.i32(RPC_OBJECT_REF).u32(RPC_OBJECT_REF as u32).u64(*h);
            }
        }
    }

    /// The packet's bytes, its length filled in.
    pub fn finish(mut self) -> Vec<u8> {
        let n = (self.buf.len() - 8) as u64;
        self.buf[..8].copy_from_slice(&n.to_le_bytes());
        self.buf
    }
}

/// A `Return` packet with `values`.
pub fn return_packet(values: &[WireValue]) -> Vec<u8> {
    let mut w = Writer::packet(Code::Return);
    w.values(values);
    w.finish()
}

/// An `Exception` packet carrying `message` (TVM's clients raise it as `RPCError`, or as
/// `RPCSessionTimeoutError` when it starts with that name).
pub fn exception_packet(message: &str) -> Vec<u8> {
    let mut w = Writer::packet(Code::Exception);
    w.values(&[WireValue::Str(message.to_string())]);
    w.finish()
}

/// Splits a stream of whole packets into each one's code and the rest of its body.
pub fn split_packets(stream: &[u8]) -> Result<Vec<(i32, Vec<u8>)>> {
    let mut r = Reader::new(stream);
    let mut out = Vec::new();
    while r.remaining() > 0 {
        let n = r.u64("packet length")?;
        let mut body = Reader::new(r.take(n, "packet")?);
        let code = body.i32("packet code")?;
        out.push((code, body.take(body.remaining() as u64, "body")?.to_vec()));
    }
    Ok(out)
}

/// What a client of TVM <= 0.20 is told: its argument encoding is not this protocol's.
pub const CLASSIC_CLIENT: &str = "RPC: this is tvmrt's RPC server, which speaks the protocol of \
    TVM 0.21 and later (tvm-ffi's argument encoding); the client is TVM 0.20 or older, whose \
    encoding differs under the same version string 0.8.0: connect with apache-tvm 0.21 or later";

/// Whether a packet is a `GetGlobalFunc` as TVM <= 0.20 sends it. Its first call names the
/// function with the classic type code 11 (`kTVMStr`), all codes before the values; tvm-ffi's
/// clients send the name as a raw string (index 8), and index 11 (a small string) never
/// appears there. Checked before anything else reads the packet.
pub fn is_classic_lookup(code: i32, body: &[u8]) -> bool {
    let mut r = Reader::new(body);
    code == Code::GetGlobalFunc as i32
        && r.i32("count").is_ok_and(|n| n == 1)
        && r.i32("type").is_ok_and(|t| t == ti::SMALL_STR)
}

/// An `Exception` packet as TVM <= 0.20 encodes it (count, type codes, then values; a string
/// is type code 11), so a classic client can read why it is refused.
pub fn classic_exception_packet(message: &str) -> Vec<u8> {
    let mut w = Writer::packet(Code::Exception);
    w.i32(1).i32(11).bytes(message.as_bytes());
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(values: Vec<WireValue>) {
        let mut w = Writer::packet(Code::Return);
        w.values(&values);
        let bytes = w.finish();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        assert_eq!(n, bytes.len() - 8);
        let mut r = Reader::new(&bytes[8..]);
        assert_eq!(r.i32("code").unwrap(), Code::Return as i32);
        assert_eq!(r.values().unwrap(), values);
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn every_value_kind_roundtrips() {
        roundtrip(vec![
            WireValue::None,
            WireValue::Int(-5),
            WireValue::Bool(true),
            WireValue::Float(1.5),
            WireValue::Opaque(0xdead_beef),
            WireValue::DType(DLDataType {
                code: DLDataTypeCode(2),
                bits: 16,
                lanes: 4,
            }),
            WireValue::Device(DLDevice {
                device_type: DLDeviceType(4),
                device_id: 1,
            }),
            WireValue::Str("héllo".into()),
            WireValue::Bytes(vec![0, 1, 2]),
            WireValue::Tensor(WireTensor {
                data: 4096,
                device: DLDevice {
                    device_type: DLDeviceType(1),
                    device_id: 0,
                },
                dtype: DLDataType {
                    code: DLDataTypeCode(0),
                    bits: 32,
                    lanes: 1,
                },
                shape: vec![2, 3],
                byte_offset: 8,
            }),
            WireValue::Function(7),
            WireValue::Module(8),
            WireValue::Object(9),
        ]);
    }

    #[test]
    fn tvm_string_object_and_small_string_decode() {
        // A Python `str` argument TVM's client did not turn into a C string: the index, then
        // the object's own index (65) and its bytes.
        let mut body = Vec::new();
        body.extend_from_slice(&2i32.to_le_bytes());
        for outer in [ti::STR, ti::SMALL_STR] {
            body.extend_from_slice(&outer.to_le_bytes());
            body.extend_from_slice(&(ti::STR as u32).to_le_bytes());
            body.extend_from_slice(&3u64.to_le_bytes());
            body.extend_from_slice(b"abc");
        }
        let v = Reader::new(&body).values().unwrap();
        assert_eq!(
            v,
            vec![WireValue::Str("abc".into()), WireValue::Str("abc".into())]
        );
    }

    #[test]
    fn lengths_beyond_the_packet_are_refused() {
        let mut body = Vec::new();
        body.extend_from_slice(&1i32.to_le_bytes());
        body.extend_from_slice(&ti::RAW_STR.to_le_bytes());
        body.extend_from_slice(&u64::MAX.to_le_bytes());
        let e = Reader::new(&body).values().unwrap_err();
        assert!(e.message.contains("truncated"), "{e}");
        let huge = i32::MAX.to_le_bytes();
        let e = Reader::new(&huge).values().unwrap_err();
        assert!(e.message.contains("does not fit"), "{e}");
        let mut t = Vec::new();
        t.extend_from_slice(&0u64.to_le_bytes());
        t.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
        t.extend_from_slice(&1000i32.to_le_bytes());
        let e = Reader::new(&t).tensor().unwrap_err();
        assert!(e.message.contains("ndim 1000"), "{e}");
    }

    #[test]
    fn a_classic_clients_first_lookup_is_recognised() {
        // TVM 0.20: count, the type codes (11, kTVMStr), then the name.
        let mut classic = Vec::new();
        classic.extend_from_slice(&1i32.to_le_bytes());
        classic.extend_from_slice(&11i32.to_le_bytes());
        classic.extend_from_slice(&3u64.to_le_bytes());
        classic.extend_from_slice(b"abc");
        assert!(is_classic_lookup(Code::GetGlobalFunc as i32, &classic));
        let mut ffi = Writer::packet(Code::GetGlobalFunc);
        ffi.values(&[WireValue::Str("abc".into())]);
        let ffi = ffi.finish();
        assert!(!is_classic_lookup(Code::GetGlobalFunc as i32, &ffi[12..]));
        let p = classic_exception_packet("no");
        assert_eq!(&p[8..12], &(Code::Exception as i32).to_le_bytes());
        assert_eq!(&p[12..20], &[1, 0, 0, 0, 11, 0, 0, 0]);
    }

    #[test]
    fn unknown_codes_and_indexes_are_errors() {
        assert!(Code::from_i32(22).is_err());
        assert!(Code::from_i32(-1).is_err());
        assert_eq!(Code::from_i32(17).unwrap(), Code::DevAllocDataWithScope);
        let mut body = Vec::new();
        body.extend_from_slice(&1i32.to_le_bytes());
        body.extend_from_slice(&40i32.to_le_bytes());
        assert!(Reader::new(&body).values().is_err());
    }
}
