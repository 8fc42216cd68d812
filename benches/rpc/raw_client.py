"""A raw TVM RPC client over one socket: Python's standard library only (struct + socket).

TVM 0.22-0.27's wire format written out (apache/tvm src/runtime/rpc/minrpc/rpc_reference.h and
rpc_endpoint.cc; tvmrt's src/rpc/wire.rs): every packet is a little-endian u64 length, then an
i32 code, then its body; values are a count and, for each, a tvm-ffi type index and payload.
It speaks to any server of that protocol (tvmrt rpc-server, TVM's own), so a benchmark's share
of the time is the server's, and it runs where neither TVM nor numpy is installed
(benches/rpc/bench.py, benches/gpu/rpc_cuda.py).
"""

import socket
import struct
from dataclasses import dataclass, field

RPC_MAGIC = 0xFF271
PROTOCOL_VERSION = b"0.8.0"

# RPCCode
SHUTDOWN, INIT_SERVER, CALL_FUNC, RETURN, EXCEPTION = 1, 2, 3, 4, 5
COPY_FROM_REMOTE, COPY_TO_REMOTE, COPY_ACK, GET_GLOBAL_FUNC, FREE_HANDLE = 6, 7, 8, 9, 10
DEV_GET_ATTR, DEV_FREE_DATA, DEV_STREAM_SYNC, COPY_AMONG_REMOTE = 12, 14, 15, 16
DEV_ALLOC_DATA_WITH_SCOPE = 17

# tvm-ffi type indices
T_NONE, T_INT, T_BOOL, T_FLOAT, T_OPAQUE, T_DTYPE, T_DEVICE, T_TENSOR_PTR = 0, 1, 2, 3, 4, 5, 6, 7
T_RAW_STR, T_BYTE_ARRAY, T_SMALL_STR, T_SMALL_BYTES = 8, 9, 11, 12
T_STATIC_OBJECT, T_STR, T_BYTES, T_FUNCTION, T_MODULE = 64, 65, 66, 68, 73

# DLDeviceType
CPU, CUDA = 1, 2
# DeviceAttrKind
ATTR_EXIST, ATTR_COMPUTE_VERSION, ATTR_DEVICE_NAME = 0, 4, 5

# (type code, bits) of the dtypes by name: DLDataTypeCode int 0, uint 1, float 2, bool 6
DTYPES = {
    "int8": (0, 8), "int16": (0, 16), "int32": (0, 32), "int64": (0, 64),
    "uint8": (1, 8), "uint16": (1, 16), "uint32": (1, 32), "uint64": (1, 64),
    "float16": (2, 16), "float32": (2, 32), "float64": (2, 64), "bool": (6, 8),
}


class RemoteError(Exception):
    """The server answered with an Exception packet; the message is the server's."""


@dataclass
class Tensor:
    """A remote DLTensor in its wire form: the server's data address, not the data."""

    data: int
    device: tuple  # (device type, device id)
    dtype: str
    shape: tuple
    byte_offset: int = 0

    @property
    def nbytes(self):
        n = DTYPES[self.dtype][1] // 8
        for d in self.shape:
            n *= d
        return n

    def wire(self):
        code, bits = DTYPES[self.dtype]
        return (
            struct.pack("<QIii", self.data, self.device[0], self.device[1], len(self.shape))
            + struct.pack("<BBH", code, bits, 1)
            + struct.pack(f"<{len(self.shape)}q", *self.shape)
            + struct.pack("<Q", self.byte_offset)
        )


@dataclass
class Handle:
    """A handle the server gave out: kind is T_FUNCTION, T_MODULE or T_OPAQUE."""

    kind: int
    value: int


@dataclass
class Float:
    """A float argument (Python floats are sent as such too; this names one explicitly)."""

    value: float


@dataclass
class Returned:
    """A call's result: the type index the server named and the value (a Handle for objects)."""

    type_index: int
    value: object = None
    extra: list = field(default_factory=list)


def recvall(s, n):
    """Exactly n bytes from the socket, received in place (a bytearray, not copied again)."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = s.recv_into(view[got:], n - got)
        if k == 0:
            raise OSError("the server closed the connection")
        got += k
    return buf


def packet(code, body):
    """One packet: its length, its code, its body."""
    return struct.pack("<Qi", 4 + len(body), code) + body


def read_packet(s):
    """The next packet's code and body (the body received in place: large copies are not
    copied again on the client)."""
    n, code = struct.unpack("<Qi", recvall(s, 12))
    if n < 4:
        raise ValueError(f"a packet of {n} bytes cannot hold its code")
    return code, recvall(s, n - 4)


def raw_string(text):
    b = text.encode()
    return struct.pack("<iQ", T_RAW_STR, len(b)) + b


def encode(values):
    """A packed sequence of Python values (int, bool, float, str, bytes, None, Tensor, Handle,
    (device type, id) pairs)."""
    out = [struct.pack("<i", len(values))]
    for v in values:
        if v is None:
            out.append(struct.pack("<i", T_NONE))
        elif isinstance(v, bool):
            out.append(struct.pack("<iq", T_BOOL, int(v)))
        elif isinstance(v, int):
            out.append(struct.pack("<iq", T_INT, v))
        elif isinstance(v, (float, Float)):
            out.append(struct.pack("<id", T_FLOAT, float(getattr(v, "value", v))))
        elif isinstance(v, str):
            out.append(raw_string(v))
        elif isinstance(v, (bytes, bytearray, memoryview)):
            out.append(struct.pack("<iQ", T_BYTE_ARRAY, len(v)) + bytes(v))
        elif isinstance(v, Tensor):
            out.append(struct.pack("<i", T_TENSOR_PTR) + v.wire())
        elif isinstance(v, Handle):
            out.append(struct.pack("<iQ", v.kind, v.value))
        elif isinstance(v, tuple) and len(v) == 2:
            out.append(struct.pack("<iIi", T_DEVICE, v[0], v[1]))
        else:
            raise TypeError(f"cannot send {v!r}")
    return b"".join(out)


class _Reader:
    def __init__(self, body):
        self.body, self.pos = body, 0

    def take(self, fmt):
        vals = struct.unpack_from(fmt, self.body, self.pos)
        self.pos += struct.calcsize(fmt)
        return vals if len(vals) > 1 else vals[0]

    def blob(self):
        n = self.take("<Q")
        b = self.body[self.pos:self.pos + n]
        self.pos += n
        return b

    def value(self):
        t = self.take("<i")
        if t == T_NONE:
            return None
        if t in (T_INT, T_BOOL):
            v = self.take("<q")
            return bool(v) if t == T_BOOL else v
        if t == T_FLOAT:
            return self.take("<d")
        if t in (T_OPAQUE, T_FUNCTION, T_MODULE):
            return Handle(t, self.take("<Q"))
        if t == T_DEVICE:
            return self.take("<Ii")
        if t == T_RAW_STR:
            return self.blob().decode()
        if t == T_BYTE_ARRAY:
            return self.blob()
        if t == T_TENSOR_PTR:
            data, dtype_, did, ndim = self.take("<QIii")
            code, bits, _lanes = self.take("<BBH")
            shape = tuple(self.take("<q") for _ in range(ndim))
            name = next(k for k, v in DTYPES.items() if v == (code, bits))
            return Tensor(data, (dtype_, did), name, shape, self.take("<Q"))
        if t in (T_SMALL_STR, T_SMALL_BYTES) or t >= T_STATIC_OBJECT:
            inner = self.take("<I")
            b = self.blob() if inner in (T_STR, T_BYTES) else self.take("<Q")
            return b.decode() if inner == T_STR else b
        raise ValueError(f"unknown type index {t} in the server's answer")

    def values(self):
        return [self.value() for _ in range(self.take("<i"))]


class Session:
    """One RPC session: the key handshake and InitServer done on construction."""

    def __init__(self, host="127.0.0.1", port=9090, key="client:", timeout=None):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        k = key.encode()
        self.sock.sendall(struct.pack("<ii", RPC_MAGIC, len(k)) + k)
        magic = struct.unpack("<i", recvall(self.sock, 4))[0]
        if magic != RPC_MAGIC:
            # TVM's servers answer RPC_MAGIC + 1 for a key mismatch, + 2 for a bad magic
            raise RemoteError(f"handshake refused (the server answered 0x{magic:x})")
        (kl,) = struct.unpack("<i", recvall(self.sock, 4))
        self.server_key = recvall(self.sock, kl).decode()
        body = struct.pack("<Q", len(PROTOCOL_VERSION)) + PROTOCOL_VERSION + encode([])
        self.request(INIT_SERVER, body)

    def request(self, code, body):
        """Sends one packet and returns the answer's (code, body); an Exception packet raises
        RemoteError with the server's message."""
        self.sock.sendall(packet(code, body))
        return self.answer()

    def answer(self):
        rcode, rbody = read_packet(self.sock)
        if rcode == EXCEPTION:
            vals = _Reader(rbody).values()
            raise RemoteError(vals[0] if vals else "(no message)")
        return rcode, rbody

    def syscall(self, code, *args):
        rcode, body = self.request(code, encode(list(args)))
        assert rcode == RETURN, rcode
        vals = _Reader(body).values()
        return vals[0] if vals else None

    def get_global(self, name):
        """The handle of the server's global function `name`, or None."""
        h = self.syscall(GET_GLOBAL_FUNC, name)
        return None if h is None else Handle(T_FUNCTION, h.value)

    def call(self, func, *args):
        """Calls a function handle; returns a Returned (type index, value)."""
        body = struct.pack("<Q", func.value) + encode(list(args))
        rcode, rbody = self.request(CALL_FUNC, body)
        assert rcode == RETURN, rcode
        vals = _Reader(rbody).values()
        if not vals:
            return Returned(T_NONE)
        tag, rest = vals[0], vals[1:]
        value = rest[0] if rest else None
        if isinstance(value, Handle) and tag in (T_FUNCTION, T_MODULE):
            value = Handle(tag, value.value)
        return Returned(tag, value, rest[1:])

    def call_global(self, name, *args):
        f = self.get_global(name)
        if f is None:
            raise RemoteError(f"the server has no global {name}")
        try:
            return self.call(f, *args)
        finally:
            self.free_handle(f)

    def free_handle(self, h):
        self.syscall(FREE_HANDLE, Handle(T_OPAQUE, h.value))

    def device_attr(self, device, kind):
        return self.syscall(DEV_GET_ATTR, device, kind)

    def empty(self, shape, dtype, device, scope=None):
        """A remote tensor allocated on `device` (DevAllocDataWithScope)."""
        t = Tensor(0, device, dtype, tuple(shape))
        addr = self.syscall(DEV_ALLOC_DATA_WITH_SCOPE, t, scope)
        t.data = addr.value if isinstance(addr, Handle) else addr
        return t

    def free(self, t):
        self.syscall(DEV_FREE_DATA, t.device, Handle(T_OPAQUE, t.data))

    def copy_to(self, t, data):
        """CopyToRemote: the bytes of `data` into remote tensor `t` (sent without a copy)."""
        data = memoryview(data).cast("B")
        head = t.wire() + struct.pack("<Q", len(data))
        self.sock.sendall(struct.pack("<Qi", 4 + len(head) + len(data), COPY_TO_REMOTE) + head)
        self.sock.sendall(data)
        rcode, _ = self.answer()
        assert rcode == RETURN, rcode

    def copy_from(self, t):
        """CopyFromRemote: the bytes of remote tensor `t`."""
        rcode, body = self.request(COPY_FROM_REMOTE, t.wire() + struct.pack("<Q", t.nbytes))
        assert rcode == COPY_ACK, rcode
        return body

    def copy_among(self, src, dst):
        """CopyAmongRemote: remote tensor to remote tensor, on the server."""
        self.syscall(COPY_AMONG_REMOTE, src, dst, Handle(T_OPAQUE, 0))

    def stream_sync(self, device):
        self.syscall(DEV_STREAM_SYNC, device, Handle(T_OPAQUE, 0))

    def close(self):
        try:
            self.sock.sendall(packet(SHUTDOWN, b""))
        finally:
            self.sock.close()
