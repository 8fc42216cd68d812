//! The container global functions tvm-ffi registers (`src/ffi/container.cc`): constructors
//! and accessors of `ffi.Array`, `ffi.List`, `ffi.Map` and `ffi.Dict`; also the constructors of
//! `ffi.Shape`, `ffi.String` and `ffi.Bytes` (`tensor.cc`, `function.cc`). A wrong container kind is
//! a `TypeError`, an index out of range an `IndexError`, a missing key a `KeyError`.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::array::new_array;
use super::key::any_equal;
use super::list::{self, new_list, seq_items};
use super::map::{self, map_entries, new_dict, new_map, Entry};
use crate::abi::type_index;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::type_registry::static_index;
use crate::object::ObjectRef;
use crate::value::{Any, AnyView};

fn kind_name(t: i32) -> &'static str {
    match t {
        type_index::ARRAY => "ffi.Array",
        type_index::MAP => "ffi.Map",
        static_index::LIST => "ffi.List",
        static_index::DICT => "ffi.Dict",
        _ => "object",
    }
}

/// Checks the argument count of `name`.
fn want_args(name: &str, args: &[AnyView<'_>], n: usize) -> Result<()> {
    if args.len() != n {
        return Err(Error::type_error(format!(
            "Mismatched number of arguments when calling: `{name}`. Expected {n} but got {}",
            args.len()
        )));
    }
    Ok(())
}

/// Argument `i` of `name` as a container of kind `t`.
fn container(name: &str, args: &[AnyView<'_>], i: usize, t: i32) -> Result<ObjectRef> {
    let a = &args[i];
    match a.as_object() {
        Some(o) if o.type_index() == t => Ok(o),
        _ => Err(Error::type_error(format!(
            "Mismatched type on argument #{i} when calling: `{name}`. Expected `{}` but got `{}`",
            kind_name(t),
            a.type_name()
        ))),
    }
}

fn int_arg(name: &str, args: &[AnyView<'_>], i: usize) -> Result<i64> {
    let a = &args[i];
    match a.type_index() {
        type_index::INT | type_index::BOOL => Ok(a.as_i64().unwrap_or_default()),
        _ => Err(Error::type_error(format!(
            "Mismatched type on argument #{i} when calling: `{name}`. Expected `int` but got `{}`",
            a.type_name()
        ))),
    }
}

/// `index` checked against `len` (`at()` semantics).
fn index_in(index: i64, len: usize, what: &str) -> Result<usize> {
    usize::try_from(index)
        .ok()
        .filter(|&i| i < len)
        .ok_or_else(|| Error::index(format!("indexing `{index}` on {what} of size {len}")))
}

/// `[start, stop)` checked against `len`.
fn range_in(start: i64, stop: i64, len: usize) -> Result<(usize, usize)> {
    match (usize::try_from(start), usize::try_from(stop)) {
        (Ok(a), Ok(b)) if a <= b && b <= len => Ok((a, b)),
        _ => Err(Error::index(format!(
            "range [{start}, {stop}) out of bounds for a list of size {len}"
        ))),
    }
}

fn key_error() -> Error {
    Error::new("KeyError", "key is not in Map")
}

fn seq(o: &ObjectRef) -> Vec<Any> {
    seq_items(o).unwrap_or_default()
}

fn entries(o: &ObjectRef) -> Result<Vec<Entry>> {
    map_entries(o).unwrap_or_else(|| Ok(Vec::new()))
}

/// tvm-ffi's forward iterator over a map's entries: command 0 reads the key, 1 the value, 2
/// moves on and returns whether an entry remains.
fn forward_iter(entries: Vec<Entry>) -> Function {
    let pos = AtomicUsize::new(0);
    Function::from_fn(move |args| {
        want_args("MapForwardIterFunctor", args, 1)?;
        let cmd = int_arg("MapForwardIterFunctor", args, 0)?;
        let i = pos.load(Ordering::Relaxed);
        let at = || {
            entries
                .get(i)
                .ok_or_else(|| Error::index("map iterator is past the end"))
        };
        match cmd {
            0 => Ok(at()?.key.clone()),
            1 => Ok(at()?.value.clone()),
            _ => {
                pos.store(i + 1, Ordering::Relaxed);
                Ok(Any::from(i + 1 < entries.len()))
            }
        }
    })
}

/// The device of the first tensor not on the CPU inside `v` (arrays, lists, map values),
/// depth-first (`ffi.ContainerFindFirstNonCPUDevice`).
fn first_non_cpu_device(v: &AnyView<'_>, depth: usize) -> Option<crate::abi::DLDevice> {
    let obj = v.as_object()?;
    match obj.type_index() {
        type_index::TENSOR => {
            // SAFETY: a tensor object has its `DLTensor` right after the header.
            let device = unsafe { (*obj.cell_ptr().cast::<crate::abi::DLTensor>()).device };
            (device.device_type != crate::abi::DLDeviceType::CPU).then_some(device)
        }
        _ if depth > 1 << 10 => None,
        type_index::ARRAY | static_index::LIST => seq_items(&obj)?
            .iter()
            .find_map(|x| first_non_cpu_device(&x.view(), depth + 1)),
        type_index::MAP | static_index::DICT => map_entries(&obj)?
            .ok()?
            .iter()
            .find_map(|e| first_non_cpu_device(&e.value.view(), depth + 1)),
        _ => None,
    }
}

type Body = fn(&str, &[AnyView<'_>]) -> Result<Any>;

/// Every container global, by name.
pub fn builtins() -> Vec<(&'static str, Function)> {
    let table: Vec<(&'static str, Body)> = vec![
        ("ffi.ContainerFindFirstNonCPUDevice", |n, a| {
            want_args(n, a, 1)?;
            let cpu = crate::abi::DLDevice {
                device_type: crate::abi::DLDeviceType::CPU,
                device_id: 0,
            };
            Ok(Any::from(first_non_cpu_device(&a[0], 0).unwrap_or(cpu)))
        }),
        ("ffi.Shape", |n, a| {
            let dims = a
                .iter()
                .map(|v| match v.type_index() {
                    type_index::INT | type_index::BOOL => Ok(v.as_i64().unwrap_or_default()),
                    _ => Err(Error::value(format!(
                        "`{n}`: Expect shape to take list of int arguments"
                    ))),
                })
                .collect::<Result<Vec<i64>>>()?;
            Ok(Any::from_object(crate::object::shape::new_shape(&dims)))
        }),
        ("ffi.String", |n, a| {
            want_args(n, a, 1)?;
            let s = a[0]
                .as_str()
                .ok_or_else(|| a[0].type_mismatch("argument #0", "str"))?;
            Ok(Any::string_compact(s))
        }),
        ("ffi.Bytes", |n, a| {
            want_args(n, a, 1)?;
            let t = a[0].type_index();
            let b = match t {
                type_index::BYTES | type_index::SMALL_BYTES | type_index::BYTE_ARRAY_PTR => {
                    a[0].as_byte_slice()
                }
                _ => None,
            }
            .ok_or_else(|| a[0].type_mismatch("argument #0", "bytes"))?;
            Ok(Any::bytes_compact(b))
        }),
        ("ffi.Array", |_, a| {
            Ok(Any::from_object(new_array(
                a.iter().map(|v| v.to_owned_any()).collect(),
            )))
        }),
        ("ffi.ArrayGetItem", |n, a| {
            want_args(n, a, 2)?;
            let items = seq(&container(n, a, 0, type_index::ARRAY)?);
            let i = index_in(int_arg(n, a, 1)?, items.len(), "an array")?;
            Ok(items[i].clone())
        }),
        ("ffi.ArraySize", |n, a| {
            want_args(n, a, 1)?;
            Ok(Any::from(
                seq(&container(n, a, 0, type_index::ARRAY)?).len() as i64,
            ))
        }),
        ("ffi.ArrayContains", |n, a| {
            want_args(n, a, 2)?;
            let items = seq(&container(n, a, 0, type_index::ARRAY)?);
            Ok(Any::from(items.iter().any(|v| any_equal(&v.view(), &a[1]))))
        }),
        ("ffi.List", |_, a| {
            Ok(Any::from_object(new_list(
                a.iter().map(|v| v.to_owned_any()).collect(),
            )))
        }),
        ("ffi.ListGetItem", |n, a| {
            want_args(n, a, 2)?;
            let items = seq(&container(n, a, 0, static_index::LIST)?);
            let i = index_in(int_arg(n, a, 1)?, items.len(), "a list")?;
            Ok(items[i].clone())
        }),
        ("ffi.ListSetItem", |n, a| {
            want_args(n, a, 3)?;
            let l = container(n, a, 0, static_index::LIST)?;
            let i = int_arg(n, a, 1)?;
            let v = a[2].to_owned_any();
            list::modify(&l, |items| {
                let i = index_in(i, items.len(), "a list")?;
                items[i] = v;
                Ok(Any::none())
            })
        }),
        ("ffi.ListSize", |n, a| {
            want_args(n, a, 1)?;
            Ok(Any::from(
                seq(&container(n, a, 0, static_index::LIST)?).len() as i64,
            ))
        }),
        ("ffi.ListContains", |n, a| {
            want_args(n, a, 2)?;
            let items = seq(&container(n, a, 0, static_index::LIST)?);
            Ok(Any::from(items.iter().any(|v| any_equal(&v.view(), &a[1]))))
        }),
        ("ffi.ListAppend", |n, a| {
            want_args(n, a, 2)?;
            let l = container(n, a, 0, static_index::LIST)?;
            let v = a[1].to_owned_any();
            list::modify(&l, |items| {
                items.push(v);
                Ok(Any::none())
            })
        }),
        ("ffi.ListInsert", |n, a| {
            want_args(n, a, 3)?;
            let l = container(n, a, 0, static_index::LIST)?;
            let i = int_arg(n, a, 1)?;
            let v = a[2].to_owned_any();
            list::modify(&l, |items| {
                let i = index_in(i, items.len() + 1, "a list")?;
                items.insert(i, v);
                Ok(Any::none())
            })
        }),
        ("ffi.ListPop", |n, a| {
            want_args(n, a, 2)?;
            let l = container(n, a, 0, static_index::LIST)?;
            let i = int_arg(n, a, 1)?;
            list::modify(&l, |items| {
                let i = index_in(i, items.len(), "a list")?;
                Ok(items.remove(i))
            })
        }),
        ("ffi.ListErase", |n, a| {
            want_args(n, a, 2)?;
            let l = container(n, a, 0, static_index::LIST)?;
            let i = int_arg(n, a, 1)?;
            list::modify(&l, |items| {
                let i = index_in(i, items.len(), "a list")?;
                items.remove(i);
                Ok(Any::none())
            })
        }),
        ("ffi.ListEraseRange", |n, a| {
            want_args(n, a, 3)?;
            let l = container(n, a, 0, static_index::LIST)?;
            let (start, stop) = (int_arg(n, a, 1)?, int_arg(n, a, 2)?);
            list::modify(&l, |items| {
                let (s, e) = range_in(start, stop, items.len())?;
                items.drain(s..e);
                Ok(Any::none())
            })
        }),
        ("ffi.ListReplaceSlice", |n, a| {
            want_args(n, a, 4)?;
            let l = container(n, a, 0, static_index::LIST)?;
            let (start, stop) = (int_arg(n, a, 1)?, int_arg(n, a, 2)?);
            // Read the replacement first: it may be the list itself.
            let rep = seq(&container(n, a, 3, static_index::LIST)?);
            list::modify(&l, |items| {
                let (s, e) = range_in(start, stop, items.len())?;
                items.splice(s..e, rep);
                Ok(Any::none())
            })
        }),
        ("ffi.ListReverse", |n, a| {
            want_args(n, a, 1)?;
            list::modify(&container(n, a, 0, static_index::LIST)?, |items| {
                items.reverse();
                Ok(Any::none())
            })
        }),
        ("ffi.ListClear", |n, a| {
            want_args(n, a, 1)?;
            list::modify(&container(n, a, 0, static_index::LIST)?, |items| {
                items.clear();
                Ok(Any::none())
            })
        }),
        ("ffi.ListReserve", |n, a| {
            want_args(n, a, 2)?;
            let l = container(n, a, 0, static_index::LIST)?;
            let cap = int_arg(n, a, 1)?;
            list::modify(&l, |items| {
                if cap < 0 {
                    return Err(Error::value(format!("invalid list capacity {cap}")));
                }
                // More than this process can address is out of memory, as on 64-bit targets.
                let cap = usize::try_from(cap).map_err(|_| {
                    Error::new("MemoryError", format!("list capacity {cap}: too large"))
                })?;
                items
                    .try_reserve(cap.saturating_sub(items.len()))
                    .map_err(|e| Error::new("MemoryError", format!("list capacity {cap}: {e}")))?;
                Ok(Any::none())
            })
        }),
        ("ffi.Map", |_, a| {
            Ok(Any::from_object(new_map(map::entries_from_pairs(a)?)))
        }),
        ("ffi.MapSize", |n, a| {
            want_args(n, a, 1)?;
            Ok(Any::from(
                entries(&container(n, a, 0, type_index::MAP)?)?.len() as i64,
            ))
        }),
        ("ffi.MapGetItem", |n, a| {
            want_args(n, a, 2)?;
            let e = entries(&container(n, a, 0, type_index::MAP)?)?;
            map::lookup(&e, &a[1]).ok_or_else(key_error)
        }),
        ("ffi.MapCount", |n, a| {
            want_args(n, a, 2)?;
            let e = entries(&container(n, a, 0, type_index::MAP)?)?;
            Ok(Any::from(i64::from(map::lookup(&e, &a[1]).is_some())))
        }),
        ("ffi.MapGetItemOrMissing", |n, a| {
            want_args(n, a, 2)?;
            let e = entries(&container(n, a, 0, type_index::MAP)?)?;
            Ok(map::lookup(&e, &a[1])
                .unwrap_or_else(|| Any::from_object(crate::reflection::sentinels::missing())))
        }),
        ("ffi.MapForwardIterFunctor", |n, a| {
            want_args(n, a, 1)?;
            Ok(Any::from(forward_iter(entries(&container(
                n,
                a,
                0,
                type_index::MAP,
            )?)?)))
        }),
        ("ffi.Dict", |_, a| {
            Ok(Any::from_object(new_dict(map::entries_from_pairs(a)?)))
        }),
        ("ffi.DictSize", |n, a| {
            want_args(n, a, 1)?;
            Ok(Any::from(
                entries(&container(n, a, 0, static_index::DICT)?)?.len() as i64,
            ))
        }),
        ("ffi.DictGetItem", |n, a| {
            want_args(n, a, 2)?;
            let e = entries(&container(n, a, 0, static_index::DICT)?)?;
            map::lookup(&e, &a[1]).ok_or_else(key_error)
        }),
        ("ffi.DictCount", |n, a| {
            want_args(n, a, 2)?;
            let e = entries(&container(n, a, 0, static_index::DICT)?)?;
            Ok(Any::from(i64::from(map::lookup(&e, &a[1]).is_some())))
        }),
        ("ffi.DictGetItemOrMissing", |n, a| {
            want_args(n, a, 2)?;
            let e = entries(&container(n, a, 0, static_index::DICT)?)?;
            Ok(map::lookup(&e, &a[1])
                .unwrap_or_else(|| Any::from_object(crate::reflection::sentinels::missing())))
        }),
        ("ffi.DictForwardIterFunctor", |n, a| {
            want_args(n, a, 1)?;
            Ok(Any::from(forward_iter(entries(&container(
                n,
                a,
                0,
                static_index::DICT,
            )?)?)))
        }),
        ("ffi.DictSetItem", |n, a| {
            want_args(n, a, 3)?;
            let d = container(n, a, 0, static_index::DICT)?;
            let (k, v) = (a[1].to_owned_any(), a[2].to_owned_any());
            map::modify_dict(&d, |e| {
                map::set(e, k, v);
                Ok(Any::none())
            })
        }),
        ("ffi.DictErase", |n, a| {
            want_args(n, a, 2)?;
            let d = container(n, a, 0, static_index::DICT)?;
            map::modify_dict(&d, |e| {
                e.retain(|x| !any_equal(&x.key.view(), &a[1]));
                Ok(Any::none())
            })
        }),
        ("ffi.DictClear", |n, a| {
            want_args(n, a, 1)?;
            map::modify_dict(&container(n, a, 0, static_index::DICT)?, |e| {
                e.clear();
                Ok(Any::none())
            })
        }),
    ];
    table
        .into_iter()
        .map(|(name, body)| (name, Function::from_fn(move |args| body(name, args))))
        .collect()
}
