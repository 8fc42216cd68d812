//! `ffi.ReprPrint`: the text form of a value, as tvm-ffi's `ReprPrinter` writes it
//! (`src/ffi/extra/dataclass.cc`): `None`, `True`, integers, floats as C++ streams print them
//! (`%g`), dtypes, `cpu:0`, Python-style escaped strings, `b"..."` bytes, arrays as tuples
//! `(1,)`, lists `[...]`, maps `{k: v}`, shapes `Shape(...)`, tensors `float32[2, 3]@cpu:0`,
//! enums `Type.name`, reflected objects `type.key(field=value, ...)` (skipping `ReprOff` fields,
//! a repeated field name printed once), a type's `__ffi_repr__` hook when set; an object met
//! again while printed is `...`. `TVM_FFI_REPR_WITH_ADDR=1` adds `@0x...` addresses.

use std::collections::HashMap;
use std::ffi::CStr;

use crate::abi::{type_index as ti, DLDevice, DLTensor};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::list::seq_items;
use crate::object::containers::map::map_entries;
use crate::object::shape::shape_dims;
use crate::object::type_registry::{self, static_index};
use crate::object::ObjectRef;
use crate::value::{Any, AnyView};

use super::{fields, sentinels};

/// `kTVMFFIFieldFlagBitMaskReprOff`.
pub const REPR_OFF: i64 = 1 << 6;

/// A double as C++'s default stream formatting prints it (`%g`).
pub fn format_double(v: f64) -> String {
    let mut buf = [0u8; 64];
    // SAFETY: the buffer is large enough for any `%g` output and NUL-terminated by snprintf.
    unsafe {
        libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%g".as_ptr(), v);
        CStr::from_ptr(buf.as_ptr().cast())
            .to_string_lossy()
            .into_owned()
    }
}

/// A string quoted and escaped as tvm-ffi's `EscapedStringPy` does.
pub fn escape_str(data: &[u8]) -> String {
    let mut out = String::from("\"");
    let mut i = 0;
    while i < data.len() {
        let c = data[i];
        let d = data.get(i + 1).copied().unwrap_or(0);
        if c == 0x1b && d == b'[' {
            let mut j = i + 2;
            while j < data.len() && (data[j].is_ascii_digit() || data[j] == b';') {
                j += 1;
            }
            if j < data.len() && (data[j] == b'm' || data[j] == b'K') {
                out.push_str("\\x1b[");
                out.push_str(&String::from_utf8_lossy(&data[i + 2..=j]));
                i = j + 1;
                continue;
            }
        }
        match c {
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\r' => out.push_str("\\r"),
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            c if c & 0x80 == 0 => {
                if c < 0x20 || c == 0x7f {
                    out.push_str(&format!("\\x{c:02x}"));
                } else {
                    out.push(c as char);
                }
            }
            _ => {
                let cont = |k: usize| data.get(i + k).is_some_and(|&b| b & 0xC0 == 0x80);
                let b = |k: usize| u32::from(data[i + k] & 0x3F);
                if c & 0xE0 == 0xC0 && cont(1) {
                    out.push_str(&format!("\\u{:04x}", (u32::from(c & 0x1F) << 6) | b(1)));
                    i += 2;
                    continue;
                } else if c & 0xF0 == 0xE0 && i + 2 < data.len() && cont(1) && cont(2) {
                    let cp = (u32::from(c & 0x0F) << 12) | (b(1) << 6) | b(2);
                    out.push_str(&format!("\\u{cp:04x}"));
                    i += 3;
                    continue;
                } else if c & 0xF8 == 0xF0 && i + 3 < data.len() && cont(1) && cont(2) && cont(3) {
                    let cp = (u32::from(c & 0x07) << 18) | (b(1) << 12) | (b(2) << 6) | b(3);
                    out.push_str(&format!("\\U{cp:08x}"));
                    i += 4;
                    continue;
                }
                out.push_str(&format!("\\x{c:02x}"));
            }
        }
        i += 1;
    }
    out.push('"');
    out
}

/// Bytes as `b"..."` with non-printable bytes as `\xNN`.
pub fn format_bytes(data: &[u8]) -> String {
    let mut out = String::from("b\"");
    for &c in data {
        if (32..127).contains(&c) && c != b'"' && c != b'\\' {
            out.push(c as char);
        } else {
            out.push_str(&format!("\\x{c:02x}"));
        }
    }
    out.push('"');
    out
}

/// A device as tvm-ffi prints it (`cuda:0`; unknown types as `unknown:N`).
fn device_str(d: DLDevice) -> String {
    format!(
        "{}:{}",
        crate::device::device_type_name(d.device_type.0),
        d.device_id
    )
}

fn dtype_str(d: crate::abi::DLDataType) -> String {
    crate::dtype::dtype_to_string(d).unwrap_or_else(|_| "unknown".to_string())
}

enum State {
    InProgress,
    Done(String),
}

/// One repr in progress.
struct Printer {
    state: HashMap<usize, State>,
    show_addr: bool,
    depth: usize,
}

fn addr(o: &ObjectRef) -> String {
    format!("0x{:x}", o.as_ptr() as usize)
}

impl Printer {
    fn new() -> Printer {
        Printer {
            state: HashMap::new(),
            show_addr: std::env::var("TVM_FFI_REPR_WITH_ADDR").is_ok_and(|v| v == "1"),
            depth: 0,
        }
    }

    fn repr(&mut self, v: &AnyView<'_>) -> Result<String> {
        let t = v.type_index();
        // SAFETY (payload reads): the payload is of the kind `t` says.
        let p = v.raw().payload;
        match t {
            ti::NONE => return Ok("None".into()),
            ti::BOOL => {
                return Ok(if unsafe { p.v_int64 } != 0 {
                    "True"
                } else {
                    "False"
                }
                .into())
            }
            ti::INT => return Ok(unsafe { p.v_int64 }.to_string()),
            ti::FLOAT => return Ok(format_double(unsafe { p.v_float64 })),
            ti::DATA_TYPE => return Ok(dtype_str(unsafe { p.v_dtype })),
            ti::DEVICE => return Ok(device_str(unsafe { p.v_device })),
            ti::SMALL_STR | ti::STR | ti::RAW_STR => {
                return Ok(escape_str(v.as_byte_slice().unwrap_or(&[])))
            }
            ti::SMALL_BYTES | ti::BYTES | ti::BYTE_ARRAY_PTR => {
                return Ok(format_bytes(v.as_byte_slice().unwrap_or(&[])))
            }
            // A big integer prints as its decimal value (tvm-ffi's `operator<<`).
            crate::object::type_registry::static_index::BIG_INT => {
                if let Some(words) = crate::object::big_int::integer_words(v) {
                    return Ok(crate::object::big_int::words_to_decimal(&words));
                }
            }
            _ => {}
        }
        if t < ti::STATIC_OBJECT_BEGIN {
            return Ok(crate::value::type_name(t).to_string());
        }
        let Some(obj) = v.as_object() else {
            return Ok("None".into());
        };
        let key = obj.as_ptr() as usize;
        match self.state.get(&key) {
            Some(State::Done(s)) => return Ok(s.clone()),
            Some(State::InProgress) => {
                return Ok(if self.show_addr {
                    format!("...@{}", addr(&obj))
                } else {
                    "...".into()
                })
            }
            None => {}
        }
        if obj.as_ptr() == sentinels::missing().as_ptr() {
            return Ok("<MISSING>".into());
        }
        if obj.as_ptr() == sentinels::kwargs().as_ptr() {
            return Ok("<KWARGS>".into());
        }
        if t == ti::TENSOR {
            // SAFETY: a tensor object has its `DLTensor` after the header.
            let dl = unsafe { &*obj.cell_ptr().cast::<DLTensor>() };
            let dims: Vec<String> = (0..dl.ndim.max(0) as usize)
                // SAFETY: `ndim` extents.
                .map(|i| unsafe { *dl.shape.add(i) }.to_string())
                .collect();
            let mut s = format!(
                "{}[{}]@{}",
                dtype_str(dl.dtype),
                dims.join(", "),
                device_str(dl.device)
            );
            if self.show_addr {
                s += &format!("@{}", addr(&obj));
            }
            return Ok(s);
        }
        if t == ti::SHAPE {
            let dims: Vec<String> = shape_dims(&obj)
                .unwrap_or(&[])
                .iter()
                .map(|d| d.to_string())
                .collect();
            return Ok(format!("Shape({})", dims.join(", ")));
        }
        if self.depth >= 1 << 12 {
            return Err(Error::value("ReprPrint: maximum depth exceeded"));
        }
        self.depth += 1;
        self.state.insert(key, State::InProgress);
        let r = self.repr_object(&obj, t);
        self.depth -= 1;
        let mut s = match r {
            Ok(s) => s,
            Err(e) => {
                self.state.remove(&key);
                return Err(e);
            }
        };
        let container = matches!(
            t,
            ti::ARRAY | ti::MAP | static_index::LIST | static_index::DICT
        );
        if self.show_addr && container {
            s += &format!("@{}", addr(&obj));
        }
        self.state.insert(key, State::Done(s.clone()));
        Ok(s)
    }

    fn repr_object(&mut self, obj: &ObjectRef, t: i32) -> Result<String> {
        if let Some(hook) =
            fields::type_attr("__ffi_repr__", t).and_then(|f| f.view().as_function())
        {
            let cb = Function::from_fn(|args| {
                let v = args
                    .first()
                    .ok_or_else(|| Error::type_error("repr callback expects 1 argument"))?;
                Ok(Any::from(Printer::new().repr(v)?))
            });
            let r = hook.call(&[Any::from_object(obj.clone()).view(), Any::from(cb).view()])?;
            return Ok(r.view().as_str().unwrap_or_default().to_string());
        }
        if let Some(enum_index) = type_registry::lookup("ffi.Enum") {
            if t >= ti::DYN_OBJECT_BEGIN
                && type_registry::derived_from(t, enum_index).unwrap_or(false)
            {
                let info = fields::type_info(t)?;
                let name_field = fields::all_fields(fields::type_info(enum_index)?)
                    .into_iter()
                    .find(|f| fields::field_name(f) == "_str_index");
                let name = match name_field {
                    Some(f) => fields::read_field(obj, &f)?
                        .view()
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    None => String::new(),
                };
                let mut s = format!("{}.{name}", fields::type_key(info));
                if self.show_addr {
                    s += &format!("@{}", addr(obj));
                }
                return Ok(s);
            }
        }
        if let Some(items) = seq_items(obj) {
            let parts = items
                .iter()
                .map(|x| self.repr(&x.view()))
                .collect::<Result<Vec<_>>>()?;
            return Ok(if t == ti::ARRAY {
                let comma = if parts.len() == 1 { "," } else { "" };
                format!("({}{comma})", parts.join(", "))
            } else {
                format!("[{}]", parts.join(", "))
            });
        }
        if let Some(entries) = map_entries(obj) {
            let mut parts = Vec::new();
            for e in entries? {
                parts.push(format!(
                    "{}: {}",
                    self.repr(&e.key.view())?,
                    self.repr(&e.value.view())?
                ));
            }
            return Ok(format!("{{{}}}", parts.join(", ")));
        }
        let info = fields::type_info(t)?;
        let mut header = fields::type_key(info);
        if self.show_addr {
            header += &format!("@{}", addr(obj));
        }
        let mut parts = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for f in fields::all_fields(info)
            .iter()
            .filter(|f| f.flags & REPR_OFF == 0)
        {
            let v = self.repr(&fields::read_field(obj, f)?.view())?;
            let name = fields::field_name(f);
            if seen.insert(name.clone()) {
                parts.push(format!("{name}={v}"));
            }
        }
        Ok(if parts.is_empty() {
            header
        } else {
            format!("{header}({})", parts.join(", "))
        })
    }
}

/// The repr of `v`.
pub fn repr(v: &AnyView<'_>) -> Result<String> {
    Printer::new().repr(v)
}

/// `ffi.ReprPrint`.
pub fn builtins() -> Vec<(&'static str, Function)> {
    vec![(
        "ffi.ReprPrint",
        Function::from_fn(|args| {
            if args.len() != 1 {
                return Err(Error::type_error("`ffi.ReprPrint` expects 1 argument"));
            }
            Ok(Any::from(repr(&args[0])?))
        }),
    )]
}
