//! tvm-ffi's object-graph serialization (`src/ffi/extra/serialization.cc`) over JSON values
//! ([`super::json`]).
//!
//! The graph form (`ffi.ToJSONGraph`) is `{"root_index": i, "nodes": [...]}` (plus
//! `"metadata"` when given): one node `{"type": key, "data": ...}` per distinct value
//! (strings by content, objects by identity), containers holding node indexes, reflected
//! objects a `{field: value-or-node-index}` map (POD fields inline), enums their index, types
//! with `__data_to_json__`/`__data_from_json__` hooks their own data. Decoding rebuilds the
//! values, sharing what the graph shares; bad graphs are `ValueError`s.

use std::collections::HashMap;

use crate::abi::type_index as ti;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::array::new_array;
use crate::object::containers::list::{new_list, seq_items};
use crate::object::containers::map::{self, map_entries, new_dict, new_map, Entry};
use crate::object::shape::{new_shape, shape_dims};
use crate::object::type_registry::{self, field_flag, static_index};
use crate::object::ObjectRef;
use crate::value::{Any, AnyView};

use super::{fields, json};

// ---------- base64 ----------

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(data: &[u8]) -> String {
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(s: &str) -> Result<Vec<u8>> {
    let bad = || Error::value("Invalid base64 data");
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (k, &c) in chunk.iter().enumerate() {
            let v = B64.iter().position(|&x| x == c).ok_or_else(bad)? as u32;
            n |= v << (18 - 6 * k);
        }
        if chunk.len() < 2 {
            return Err(bad());
        }
        out.push((n >> 16) as u8);
        if chunk.len() > 2 {
            out.push((n >> 8) as u8);
        }
        if chunk.len() > 3 {
            out.push(n as u8);
        }
    }
    Ok(out)
}

// ---------- the object graph ----------

fn jmap(pairs: Vec<(&str, Any)>) -> Any {
    Any::from_object(new_map(
        pairs
            .into_iter()
            .map(|(k, v)| Entry {
                key: Any::string_compact(k),
                value: v,
            })
            .collect(),
    ))
}

fn jarr(items: Vec<Any>) -> Any {
    Any::from_object(new_array(items))
}

/// Identity of a value for node sharing: strings and bytes by content, others by payload.
#[derive(Hash, PartialEq, Eq)]
enum NodeKey {
    Text(i32, Vec<u8>),
    Value(i32, i64, u32),
}

fn node_key(v: &AnyView<'_>) -> NodeKey {
    match v.type_index() {
        ti::SMALL_STR | ti::STR => {
            NodeKey::Text(ti::STR, v.as_byte_slice().unwrap_or(&[]).to_vec())
        }
        ti::SMALL_BYTES | ti::BYTES => {
            NodeKey::Text(ti::BYTES, v.as_byte_slice().unwrap_or(&[]).to_vec())
        }
        // SAFETY: every payload is 8 readable bytes.
        t => NodeKey::Value(t, unsafe { v.raw().payload.v_int64 }, v.raw().small_str_len),
    }
}

fn enum_base(t: i32, key: &str) -> bool {
    type_registry::lookup(key).is_some_and(|e| {
        t >= ti::DYN_OBJECT_BEGIN && type_registry::derived_from(t, e).unwrap_or(false)
    })
}

fn named_field(obj: &ObjectRef, type_key: &str, name: &str) -> Result<Any> {
    let t = type_registry::key_to_index(type_key)?;
    let f = fields::all_fields(fields::type_info(t)?)
        .into_iter()
        .find(|f| fields::field_name(f) == name)
        .ok_or_else(|| Error::attribute(format!("`{type_key}` has no field `{name}`")))?;
    fields::read_field(obj, &f)
}

#[derive(Default)]
struct Writer {
    index: HashMap<NodeKey, i64>,
    nodes: Vec<Any>,
    active: Vec<usize>,
}

impl Writer {
    fn node(&mut self, v: &AnyView<'_>) -> Result<i64> {
        let key = node_key(v);
        if let Some(&i) = self.index.get(&key) {
            return Ok(i);
        }
        let t = v.type_index();
        // SAFETY (payload reads): the payload is of the kind `t` says.
        let p = v.raw().payload;
        let (type_key, data): (String, Any) = match t {
            ti::NONE => ("None".into(), Any::none()),
            ti::BOOL => ("bool".into(), Any::from(unsafe { p.v_int64 } != 0)),
            ti::INT => ("int".into(), Any::from(unsafe { p.v_int64 })),
            ti::FLOAT => ("float".into(), Any::from(unsafe { p.v_float64 })),
            ti::DATA_TYPE => (
                "DataType".into(),
                Any::string_compact(&crate::dtype::dtype_to_string(unsafe { p.v_dtype })?),
            ),
            ti::DEVICE => {
                let d = unsafe { p.v_device };
                (
                    "Device".into(),
                    jarr(vec![
                        Any::from(i64::from(d.device_type.0)),
                        Any::from(i64::from(d.device_id)),
                    ]),
                )
            }
            ti::SMALL_STR | ti::STR => (
                "ffi.String".into(),
                Any::string_compact(v.as_str().unwrap_or_default()),
            ),
            ti::SMALL_BYTES | ti::BYTES => (
                "ffi.Bytes".into(),
                Any::string_compact(&base64_encode(v.as_byte_slice().unwrap_or(&[]))),
            ),
            _ if t < ti::STATIC_OBJECT_BEGIN => {
                return Err(Error::runtime(format!(
                    "Cannot serialize type `{}`",
                    crate::value::type_name(t)
                )))
            }
            _ => {
                let obj = v.as_object().ok_or_else(|| Error::runtime("null object"))?;
                let info = fields::type_info(t)?;
                (fields::type_key(info), self.object_data(&obj, t)?)
            }
        };
        let i = self.nodes.len() as i64;
        let node = if t == ti::NONE {
            // tvm-ffi writes None as a node with a type and no data.
            jmap(vec![("type", Any::string_compact(&type_key))])
        } else {
            jmap(vec![
                ("type", Any::string_compact(&type_key)),
                ("data", data),
            ])
        };
        self.nodes.push(node);
        self.index.insert(key, i);
        Ok(i)
    }

    fn seq(&mut self, items: &[Any]) -> Result<Any> {
        let idx = items
            .iter()
            .map(|x| self.node(&x.view()).map(Any::from))
            .collect::<Result<Vec<_>>>()?;
        Ok(jarr(idx))
    }

    fn object_data(&mut self, obj: &ObjectRef, t: i32) -> Result<Any> {
        let key = obj.as_ptr() as usize;
        match t {
            ti::ARRAY => return self.seq(&seq_items(obj).unwrap_or_default()),
            ti::SHAPE => {
                let dims = shape_dims(obj)
                    .unwrap_or(&[])
                    .iter()
                    .map(|&d| Any::from(d))
                    .collect();
                return Ok(jarr(dims));
            }
            static_index::LIST | ti::MAP | static_index::DICT => {
                if self.active.contains(&key) {
                    let what = if t == static_index::LIST {
                        "List"
                    } else {
                        "Dict"
                    };
                    return Err(Error::value(format!(
                        "Cycle detected during serialization: a {what} contains itself"
                    )));
                }
                self.active.push(key);
                let r = if t == static_index::LIST {
                    self.seq(&seq_items(obj).unwrap_or_default())
                } else {
                    let entries = map_entries(obj).unwrap_or_else(|| Ok(Vec::new()))?;
                    let mut idx = Vec::with_capacity(entries.len() * 2);
                    for e in &entries {
                        idx.push(Any::from(self.node(&e.key.view())?));
                        idx.push(Any::from(self.node(&e.value.view())?));
                    }
                    Ok(jarr(idx))
                };
                self.active.retain(|&k| k != key);
                return r;
            }
            _ => {}
        }
        if enum_base(t, "ffi.IntEnum") {
            return named_field(obj, "ffi.Enum", "_int_index");
        }
        if enum_base(t, "ffi.Enum") {
            return named_field(obj, "ffi.Enum", "_str_index");
        }
        if let Some(hook) =
            fields::type_attr("__data_to_json__", t).and_then(|f| f.view().as_function())
        {
            return hook.call(&[Any::from_object(obj.clone()).view()]);
        }
        let info = fields::type_info(t)?;
        let creatable = !info.metadata.is_null()
            // SAFETY: the registry keeps the metadata alive.
            && unsafe { (*info.metadata).creator.is_some() }
            || fields::type_attr("__ffi_new__", t).is_some();
        if !creatable {
            return Err(Error::type_error(format!(
                "Type `{}` does not support ToJSONGraph (no native creator or __ffi_new__ type attr)",
                fields::type_key(info)
            )));
        }
        let mut pairs = Vec::new();
        for f in fields::all_fields(info) {
            let value = fields::read_field(obj, &f)?;
            let data = match f.field_static_type_index {
                ti::NONE => Any::none(),
                ti::BOOL | ti::INT | ti::FLOAT => value,
                ti::DATA_TYPE => Any::string_compact(&crate::dtype::dtype_to_string(
                    value
                        .view()
                        .as_dtype()
                        .ok_or_else(|| Error::type_error("bad dtype field"))?,
                )?),
                _ => Any::from(self.node(&value.view())?),
            };
            pairs.push((fields::field_name(&f), data));
        }
        Ok(Any::from_object(new_map(
            pairs
                .into_iter()
                .map(|(k, v)| Entry {
                    key: Any::string_compact(&k),
                    value: v,
                })
                .collect(),
        )))
    }
}

/// `ffi.ToJSONGraph`: the graph of `v` as a JSON value.
pub fn to_graph(v: &AnyView<'_>, metadata: Option<&AnyView<'_>>) -> Result<Any> {
    let mut w = Writer::default();
    let root = w.node(v)?;
    let mut pairs = vec![
        ("root_index", Any::from(root)),
        ("nodes", jarr(std::mem::take(&mut w.nodes))),
    ];
    if let Some(m) = metadata {
        pairs.push(("metadata", m.to_owned_any()));
    }
    Ok(jmap(pairs))
}

fn invalid(msg: impl std::fmt::Display) -> Error {
    Error::value(format!("Invalid JSON Object Graph: {msg}"))
}

fn get<'a>(entries: &'a [Entry], key: &str) -> Option<&'a Any> {
    entries
        .iter()
        .find(|e| e.key.view().as_str() == Some(key))
        .map(|e| &e.value)
}

fn as_entries(v: &Any) -> Option<Vec<Entry>> {
    v.view()
        .as_object()
        .and_then(|o| map_entries(&o))
        .and_then(|r| r.ok())
}

fn as_items(v: &Any) -> Option<Vec<Any>> {
    v.view().as_object().and_then(|o| seq_items(&o))
}

struct Reader {
    nodes: Vec<Any>,
    decoded: Vec<Option<Any>>,
    /// Nodes being decoded: meeting one again is a cycle, which no valid graph has.
    active: Vec<bool>,
    depth: usize,
}

impl Reader {
    fn node(&mut self, index: i64) -> Result<Any> {
        let i = usize::try_from(index)
            .ok()
            .filter(|&i| i < self.nodes.len())
            .ok_or_else(|| invalid(format!("invalid node index {index}")))?;
        if let Some(v) = &self.decoded[i] {
            return Ok(v.clone());
        }
        if self.active[i] {
            return Err(invalid(format!("node {i} refers to itself")));
        }
        if self.depth > 1 << 10 {
            return Err(invalid("nesting too deep"));
        }
        self.depth += 1;
        self.active[i] = true;
        let node = as_entries(&self.nodes[i]).ok_or_else(|| invalid("a node is not an object"));
        let r = node.and_then(|n| self.decode(&n));
        self.active[i] = false;
        self.depth -= 1;
        let v = r?;
        self.decoded[i] = Some(v.clone());
        Ok(v)
    }

    fn index_list(&mut self, data: Option<&Any>) -> Result<Vec<Any>> {
        let items = data
            .and_then(as_items)
            .ok_or_else(|| invalid("expected an array of node indexes"))?;
        items
            .iter()
            .map(|x| {
                let i = x
                    .view()
                    .as_i64()
                    .filter(|_| x.view().type_index() == ti::INT);
                self.node(i.ok_or_else(|| invalid("node index is not an integer"))?)
            })
            .collect()
    }

    fn decode(&mut self, node: &[Entry]) -> Result<Any> {
        let type_key = get(node, "type")
            .and_then(|t| t.view().as_str().map(str::to_string))
            .ok_or_else(|| invalid("node without a string `type`"))?;
        let t = type_registry::key_to_index(&type_key)?;
        let data = get(node, "data");
        let need = |d: Option<&Any>| d.cloned().ok_or_else(|| invalid("node without `data`"));
        let bad = || invalid(format!("bad data for `{type_key}`"));
        Ok(match t {
            ti::NONE => Any::none(),
            ti::BOOL => Any::from(need(data)?.view().as_bool().ok_or_else(bad)?),
            ti::INT => Any::from(need(data)?.view().as_i64().ok_or_else(bad)?),
            ti::FLOAT => Any::from(need(data)?.view().as_f64().ok_or_else(bad)?),
            ti::DATA_TYPE => {
                let s = need(data)?;
                Any::from(crate::dtype::dtype_from_str(
                    s.view().as_str().ok_or_else(bad)?,
                )?)
            }
            ti::DEVICE => {
                let items = need(data)?;
                let items = as_items(&items).ok_or_else(bad)?;
                if items.len() != 2 {
                    return Err(invalid(format!(
                        "Device data must be an array of [device_type, device_id], got {} element(s)",
                        items.len()
                    )));
                }
                let (a, b) = (
                    items[0].view().as_i64().ok_or_else(bad)?,
                    items[1].view().as_i64().ok_or_else(bad)?,
                );
                Any::from(crate::abi::DLDevice {
                    device_type: crate::abi::DLDeviceType(a as u32),
                    device_id: b as i32,
                })
            }
            ti::STR => Any::string_compact(need(data)?.view().as_str().ok_or_else(bad)?),
            ti::BYTES => Any::bytes_compact(&base64_decode(
                need(data)?.view().as_str().ok_or_else(bad)?,
            )?),
            ti::ARRAY => Any::from_object(new_array(self.index_list(data)?)),
            static_index::LIST => Any::from_object(new_list(self.index_list(data)?)),
            ti::MAP | static_index::DICT => {
                let items = self.index_list(data)?;
                if items.len() % 2 != 0 {
                    return Err(invalid(format!(
                        "Map/Dict data must contain an even number of [key, value] entries, got {}",
                        items.len()
                    )));
                }
                let mut entries = Vec::new();
                for kv in items.chunks(2) {
                    map::set(&mut entries, kv[0].clone(), kv[1].clone());
                }
                Any::from_object(if t == ti::MAP {
                    new_map(entries)
                } else {
                    new_dict(entries)
                })
            }
            ti::SHAPE => {
                let items = need(data)?;
                let dims = as_items(&items)
                    .ok_or_else(bad)?
                    .iter()
                    .map(|x| x.view().as_i64().ok_or_else(bad))
                    .collect::<Result<Vec<i64>>>()?;
                Any::from_object(new_shape(&dims))
            }
            _ => self.decode_object(t, &type_key, need(data)?)?,
        })
    }

    fn decode_object(&mut self, t: i32, type_key: &str, data: Any) -> Result<Any> {
        if enum_base(t, "ffi.Enum") {
            return enum_by_index(t, type_key, &data);
        }
        if let Some(hook) =
            fields::type_attr("__data_from_json__", t).and_then(|f| f.view().as_function())
        {
            return hook.call(&[data.view()]);
        }
        let info = fields::type_info(t)?;
        let obj = fields::create_empty(info)?;
        let entries = as_entries(&data)
            .ok_or_else(|| invalid(format!("object data of `{type_key}` is not an object")))?;
        for f in fields::all_fields(info) {
            let name = fields::field_name(&f);
            // SAFETY (setter calls): the field's own offset inside an object of its type.
            let addr = unsafe { obj.as_ptr().cast::<u8>().add(f.offset as usize) }.cast();
            match get(&entries, &name) {
                Some(raw) => {
                    let value = match f.field_static_type_index {
                        ti::NONE => Any::none(),
                        ti::BOOL | ti::INT | ti::FLOAT => raw.clone(),
                        ti::DATA_TYPE => Any::from(crate::dtype::dtype_from_str(
                            raw.view()
                                .as_str()
                                .ok_or_else(|| invalid("dtype field is not a string"))?,
                        )?),
                        _ => {
                            let i = raw
                                .view()
                                .as_i64()
                                .ok_or_else(|| invalid("field is not a node index"))?;
                            self.node(i)?
                        }
                    };
                    // SAFETY: `addr` is the object this type's fields describe, made above
                    // and not yet shared; the setter checks the value's kind.
                    unsafe { fields::call_setter(&f, addr, value.view())? };
                }
                // SAFETY: as above; the field has a default to write.
                None if f.flags & field_flag::HAS_DEFAULT != 0 => unsafe {
                    fields::set_default(&f, addr)?
                },
                None => {
                    return Err(Error::type_error(format!(
                        "Required field `{name}` not set in type `{type_key}`"
                    )))
                }
            }
        }
        Ok(Any::from_object(obj))
    }
}

/// The registered enum singleton of type `t` with index `data` (an int or a name).
fn enum_by_index(t: i32, type_key: &str, data: &Any) -> Result<Any> {
    let missing = || {
        Error::value(format!(
            "Enum `{type_key}` has no instance with index {data:?}"
        ))
    };
    let state = fields::type_attr("__ffi_enum__", t)
        .and_then(|s| s.view().as_object())
        .ok_or_else(missing)?;
    let indexes = named_field(&state, "ffi.EnumState", "indexes")?;
    let entries = as_entries(&indexes).ok_or_else(missing)?;
    map::lookup(&entries, &data.view()).ok_or_else(missing)
}

/// `ffi.FromJSONGraph`: the value a graph (JSON value) describes.
pub fn from_graph(graph: &Any) -> Result<Any> {
    let top = as_entries(graph)
        .ok_or_else(|| Error::value("Invalid JSON Object Graph, expected an object"))?;
    let root = get(&top, "root_index")
        .filter(|v| v.view().type_index() == ti::INT)
        .and_then(|v| v.view().as_i64())
        .ok_or_else(|| {
            Error::value("Invalid JSON Object Graph, expected `root_index` integer field")
        })?;
    let nodes = get(&top, "nodes")
        .and_then(as_items)
        .ok_or_else(|| Error::value("Invalid JSON Object Graph, expected `nodes` array field"))?;
    let n = nodes.len();
    let mut r = Reader {
        nodes,
        decoded: vec![None; n],
        active: vec![false; n],
        depth: 0,
    };
    r.node(root)
}

fn text_arg<'a>(name: &str, args: &'a [AnyView<'a>], i: usize) -> Result<&'a [u8]> {
    let v = args
        .get(i)
        .ok_or_else(|| Error::type_error(format!("`{name}` expects argument #{i}")))?;
    v.expect_str("json text").map(str::as_bytes)
}

/// The `indent` argument of `json.Stringify` (`Optional<int>`: None or absent is compact).
fn indent_arg(args: &[AnyView<'_>], i: usize) -> Result<i64> {
    match args.get(i) {
        None => Ok(0),
        Some(v) if v.is_none() => Ok(0),
        Some(v) => v.expect_i64("indent"),
    }
}

/// The global functions of this module.
pub fn builtins() -> Vec<(&'static str, Function)> {
    fn meta<'a>(args: &'a [AnyView<'a>]) -> Option<&'a AnyView<'a>> {
        args.get(1).filter(|m| !m.is_none())
    }
    vec![
        (
            "ffi.ToJSONGraph",
            Function::from_fn(|args| {
                let v = args
                    .first()
                    .ok_or_else(|| Error::type_error("`ffi.ToJSONGraph` expects a value"))?;
                to_graph(v, meta(args))
            }),
        ),
        (
            "ffi.ToJSONGraphString",
            Function::from_fn(|args| {
                let v = args
                    .first()
                    .ok_or_else(|| Error::type_error("`ffi.ToJSONGraphString` expects a value"))?;
                let g = to_graph(v, meta(args))?;
                Ok(Any::string_compact(&json::stringify(&g.view(), 0)?))
            }),
        ),
        (
            "ffi.FromJSONGraph",
            Function::from_fn(|args| {
                let g = args
                    .first()
                    .ok_or_else(|| Error::type_error("`ffi.FromJSONGraph` expects a value"))?;
                from_graph(&g.to_owned_any())
            }),
        ),
        (
            "ffi.FromJSONGraphString",
            Function::from_fn(|args| {
                from_graph(&json::parse(text_arg("ffi.FromJSONGraphString", args, 0)?)?)
            }),
        ),
        (
            "ffi.json.Parse",
            Function::from_fn(|args| json::parse(text_arg("ffi.json.Parse", args, 0)?)),
        ),
        (
            "ffi.json.Stringify",
            Function::from_fn(|args| {
                let v = args
                    .first()
                    .ok_or_else(|| Error::type_error("`ffi.json.Stringify` expects a value"))?;
                let indent = indent_arg(args, 1)?;
                Ok(Any::string_compact(&json::stringify(v, indent)?))
            }),
        ),
    ]
}
