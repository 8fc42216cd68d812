//! `ffi.reflection.AccessStep` and `ffi.reflection.AccessPath` (tvm-ffi's
//! `reflection/access_path.h`): a path from a root value to a part of it, as a chain of steps
//! (attribute, array item, map item, or the `missing` form of each). Laid out as tvm-ffi's C++
//! classes (step: `int32 kind` at 24, `Any key` at 32; path: `Optional parent` at 24, then
//! `Optional step` and `int32 depth`, each a pointer further: 32 and 40 on 64-bit targets, 28
//! and 32 on 32-bit ones), with the same reflected fields, methods and repr.

use std::ffi::c_void;

use crate::abi::{type_index as ti, TVMFFIAny, TVMFFIByteArray};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::array::new_array;
use crate::object::containers::key::any_equal;
use crate::object::type_registry::{self, field_flag, TVMFFIFieldInfo, TVMFFIMethodInfo};
use crate::object::ObjectRef;
use crate::value::{Any, AnyView};

use super::fields::{self, Storage};

/// `AccessKind` values.
pub mod kind {
    pub const ATTR: i32 = 0;
    pub const ARRAY_ITEM: i32 = 1;
    pub const MAP_ITEM: i32 = 2;
    pub const ATTR_MISSING: i32 = 3;
    pub const ARRAY_ITEM_MISSING: i32 = 4;
    pub const MAP_ITEM_MISSING: i32 = 5;
}

const STEP_KEY: &str = "ffi.reflection.AccessStep";
const PATH_KEY: &str = "ffi.reflection.AccessPath";
/// `kTVMFFISEqHashKindConstTreeNode`.
const CONST_TREE_NODE: i32 = 4;

/// Bytes of an object reference.
const PTR: usize = std::mem::size_of::<*const c_void>();
/// `AccessStepObj::kind` and `::key`.
const STEP_KIND_AT: usize = 24;
const STEP_KEY_AT: usize = 32;
/// `AccessPathObj::parent`, `::step` and `::depth`.
const PATH_PARENT_AT: usize = 24;
const PATH_STEP_AT: usize = PATH_PARENT_AT + PTR;
const PATH_DEPTH_AT: usize = PATH_STEP_AT + PTR;
/// `sizeof(AccessStepObj)`: the header, `kind`, and `key` (an 8-aligned `Any`).
const STEP_SIZE: usize = STEP_KEY_AT + 16;
/// `sizeof(AccessPathObj)`: the header, two references, the `int32_t` depth, rounded to the
/// header's 8-byte alignment (48 bytes, 40 with 4-byte pointers).
const PATH_SIZE: usize = (PATH_DEPTH_AT + 4).next_multiple_of(8);

/// Reads the `int32_t` at `addr` (getter of the `kind` and `depth` fields).
unsafe extern "C" fn get_i32(field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
    // SAFETY: tvm-ffi calls getters with the field's address and a writable result slot.
    unsafe { *result = Any::from(i64::from(*field.cast::<i32>())).into_raw() };
    0
}

/// Read-only: the setter refuses (tvm-ffi registers `def_ro` fields).
unsafe extern "C" fn set_read_only(_field: *mut c_void, _value: *const TVMFFIAny) -> i32 {
    crate::raised::set_raised(Error::attribute(
        "this field of an access path is read-only",
    ));
    -1
}

fn at(obj: &ObjectRef, offset: usize) -> *mut c_void {
    // SAFETY: offsets inside the 48-byte objects this module makes.
    unsafe { obj.as_ptr().cast::<u8>().add(offset) }.cast()
}

fn type_index(key: &str) -> Result<i32> {
    type_registry::key_to_index(key)
}

/// A new step.
pub fn new_step(k: i32, key: Any) -> Result<ObjectRef> {
    let obj = super::library_types::alloc(type_index(STEP_KEY)?, STEP_SIZE)?;
    // SAFETY: fresh zeroed fields of a step.
    unsafe {
        *at(&obj, STEP_KIND_AT).cast::<i32>() = k;
        fields::write_stored(Storage::Any, at(&obj, STEP_KEY_AT), key)?;
    }
    Ok(obj)
}

/// A new path node.
fn new_path(parent: Option<&ObjectRef>, step: Option<ObjectRef>, depth: i32) -> Result<ObjectRef> {
    let obj = super::library_types::alloc(type_index(PATH_KEY)?, PATH_SIZE)?;
    let opt = |o: Option<ObjectRef>| o.map(Any::from_object).unwrap_or_default();
    // SAFETY: fresh zeroed fields of a path.
    unsafe {
        fields::write_stored(
            Storage::Object,
            at(&obj, PATH_PARENT_AT),
            opt(parent.cloned()),
        )?;
        fields::write_stored(Storage::Object, at(&obj, PATH_STEP_AT), opt(step))?;
        *at(&obj, PATH_DEPTH_AT).cast::<i32>() = depth;
    }
    Ok(obj)
}

/// The root path.
pub fn root() -> Result<ObjectRef> {
    new_path(None, None, 0)
}

fn depth(p: &ObjectRef) -> i32 {
    // SAFETY: `p` is a path object.
    unsafe { *at(p, PATH_DEPTH_AT).cast::<i32>() }
}

fn read_obj(p: &ObjectRef, offset: usize) -> Option<ObjectRef> {
    // SAFETY: `p` has an object pointer field at `offset`.
    unsafe { fields::read_stored(Storage::Object, at(p, offset)) }
        .view()
        .as_object()
}

fn step_parts(s: &ObjectRef) -> (i32, Any) {
    // SAFETY: `s` is a step object.
    unsafe {
        (
            *at(s, STEP_KIND_AT).cast::<i32>(),
            fields::read_stored(Storage::Any, at(s, STEP_KEY_AT)),
        )
    }
}

/// `p` extended by `step`.
pub fn extend(p: &ObjectRef, step: ObjectRef) -> Result<ObjectRef> {
    new_path(Some(p), Some(step), depth(p) + 1)
}

fn steps_equal(a: &ObjectRef, b: &ObjectRef) -> bool {
    let ((ka, xa), (kb, xb)) = (step_parts(a), step_parts(b));
    ka == kb && any_equal(&xa.view(), &xb.view())
}

fn path_equal(a: &ObjectRef, b: &ObjectRef) -> bool {
    if depth(a) != depth(b) {
        return false;
    }
    let (mut a, mut b) = (a.clone(), b.clone());
    loop {
        if a.as_ptr() == b.as_ptr() {
            return true;
        }
        let (Some(pa), Some(pb)) = (read_obj(&a, PATH_PARENT_AT), read_obj(&b, PATH_PARENT_AT))
        else {
            return read_obj(&a, PATH_PARENT_AT).is_none()
                && read_obj(&b, PATH_PARENT_AT).is_none();
        };
        match (read_obj(&a, PATH_STEP_AT), read_obj(&b, PATH_STEP_AT)) {
            (Some(sa), Some(sb)) if steps_equal(&sa, &sb) => {}
            _ => return false,
        }
        a = pa;
        b = pb;
    }
}

/// The steps from the root to `p`.
pub fn to_steps(p: &ObjectRef) -> Vec<Any> {
    let mut out = Vec::new();
    let mut cur = p.clone();
    while let Some(parent) = read_obj(&cur, PATH_PARENT_AT) {
        if let Some(s) = read_obj(&cur, PATH_STEP_AT) {
            out.push(Any::from_object(s));
        }
        cur = parent;
    }
    out.reverse();
    out
}

fn is_prefix_of(p: &ObjectRef, other: &ObjectRef) -> bool {
    if depth(p) > depth(other) {
        return false;
    }
    let mut cur = other.clone();
    while depth(&cur) > depth(p) {
        match read_obj(&cur, PATH_PARENT_AT) {
            Some(parent) => cur = parent,
            None => return false,
        }
    }
    path_equal(p, &cur)
}

fn step_repr(s: &ObjectRef, fn_repr: &Function) -> Result<String> {
    let (k, key) = step_parts(s);
    let repr = |v: &Any| -> Result<String> {
        Ok(fn_repr
            .call(&[v.view()])?
            .view()
            .as_str()
            .unwrap_or_default()
            .to_string())
    };
    let int = || key.view().as_i64().unwrap_or_default();
    Ok(match k {
        kind::ATTR => format!(".{}", key.view().as_str().unwrap_or_default()),
        kind::ARRAY_ITEM => format!("[{}]", int()),
        kind::MAP_ITEM => format!("[{}]", repr(&key)?),
        kind::ARRAY_ITEM_MISSING => format!("[<missing:{}>]", int()),
        _ => format!("[<missing:{}>]", repr(&key)?),
    })
}

fn self_path(name: &str, args: &[AnyView<'_>], n: usize) -> Result<ObjectRef> {
    if args.len() != n {
        return Err(Error::type_error(format!(
            "`{name}` expects {n} argument(s), got {}",
            args.len()
        )));
    }
    obj_of(&args[0], PATH_KEY, name)
}

fn obj_of(v: &AnyView<'_>, key: &str, name: &str) -> Result<ObjectRef> {
    let t = type_index(key)?;
    v.as_object()
        .filter(|o| o.type_index() == t)
        .ok_or_else(|| v.type_mismatch(name, key))
}

/// tvm-ffi's method metadata: `{"type_schema": "<the function's signature as JSON>"}`, each
/// type given as its schema JSON (`{"type":"int"}`, ...).
fn method_metadata(ret: &str, params: &[&str]) -> String {
    let schema = format!(
        r#"{{"type":"ffi.Function","named_args":{{"return":[{ret}],"params":[{}]}}}}"#,
        params.join(",")
    );
    format!(r#"{{"type_schema":"{}"}}"#, schema.replace('"', "\\\""))
}

const PATH_T: &str = r#"{"type":"ffi.reflection.AccessPath"}"#;

/// The signature metadata of each method, by name.
fn signature(name: &str) -> String {
    let p = PATH_T;
    match name {
        "_root" => method_metadata(p, &[]),
        "_extend" => method_metadata(p, &[p, r#"{"type":"ffi.reflection.AccessStep"}"#]),
        "_attr" | "_attr_missing" => method_metadata(p, &[p, r#"{"type":"ffi.String"}"#]),
        "_array_item" | "_array_item_missing" => method_metadata(p, &[p, r#"{"type":"int"}"#]),
        "_map_item" | "_map_item_missing" => method_metadata(p, &[p, r#"{"type":"Any"}"#]),
        "_to_steps" => method_metadata(
            r#"{"type":"ffi.Array","args":[{"type":"ffi.reflection.AccessStep"}]}"#,
            &[p],
        ),
        _ => method_metadata(r#"{"type":"bool"}"#, &[p, p]),
    }
}

fn register_method(t: i32, name: &'static str, f: Function, is_static: bool) -> Result<()> {
    let f = Any::from(f);
    let bytes = |s: &str| TVMFFIByteArray {
        data: s.as_ptr().cast(),
        size: s.len(),
    };
    let metadata = signature(name);
    let info = TVMFFIMethodInfo {
        name: bytes(name),
        doc: bytes(""),
        metadata: bytes(&metadata),
        flags: if is_static {
            field_flag::IS_STATIC_METHOD
        } else {
            0
        },
        method: *f.raw(),
    };
    // SAFETY: strings alive for the call (the registry copies them) and a live function value
    // (the registry keeps its own reference).
    unsafe { type_registry::register_method(t, &info) }
}

fn register_field(
    t: i32,
    name: &'static str,
    metadata: &'static str,
    offset: i64,
    size: i64,
    index: i32,
) -> Result<()> {
    let bytes = |s: &'static str| TVMFFIByteArray {
        data: s.as_ptr().cast(),
        size: s.len(),
    };
    let getter: type_registry::TVMFFIFieldGetter = if size == 4 {
        get_i32
    } else {
        let g = super::py_class::field_getter(if size == PTR as i64 {
            ti::OBJECT
        } else {
            index
        })?;
        // SAFETY: one of tvmrt's getter functions, as an integer.
        unsafe { std::mem::transmute::<usize, type_registry::TVMFFIFieldGetter>(g as usize) }
    };
    let info = TVMFFIFieldInfo {
        name: bytes(name),
        doc: bytes(""),
        metadata: bytes(metadata),
        flags: 0,
        size,
        alignment: size.min(8),
        offset,
        getter: Some(getter),
        setter: set_read_only as *mut c_void,
        default_value_or_factory: TVMFFIAny::NONE,
        field_static_type_index: index,
    };
    // SAFETY: static strings, no default, a C-function setter.
    unsafe { type_registry::register_field(t, &info) }
}

/// Registers both types' metadata (objects compared by content as trees without free
/// variables: tvm-ffi's `kTVMFFISEqHashKindConstTreeNode`), fields, methods and repr hooks.
pub fn register_all() -> Result<()> {
    let (st, pt) = (type_index(STEP_KEY)?, type_index(PATH_KEY)?);
    for (t, size) in [(st, STEP_SIZE), (pt, PATH_SIZE)] {
        let md = type_registry::TVMFFITypeMetadata {
            doc: TVMFFIByteArray {
                data: std::ptr::null(),
                size: 0,
            },
            creator: None,
            total_size: size as i32,
            structural_eq_hash_kind: CONST_TREE_NODE,
        };
        // SAFETY: an empty doc.
        unsafe { type_registry::register_metadata(t, &md)? };
    }
    let int = r#"{"type_schema":"{\"type\":\"int\"}"}"#;
    register_field(st, "kind", int, STEP_KIND_AT as i64, 4, ti::INT)?;
    register_field(
        st,
        "key",
        r#"{"type_schema":"{\"type\":\"Any\"}"}"#,
        STEP_KEY_AT as i64,
        16,
        -1,
    )?;
    register_field(
        pt,
        "parent",
        r#"{"type_schema":"{\"type\":\"Optional\",\"args\":[{\"type\":\"ffi.Object\"}]}"}"#,
        PATH_PARENT_AT as i64,
        PTR as i64,
        -1,
    )?;
    register_field(
        pt,
        "step",
        r#"{"type_schema":"{\"type\":\"Optional\",\"args\":[{\"type\":\"ffi.reflection.AccessStep\"}]}"}"#,
        PATH_STEP_AT as i64,
        PTR as i64,
        -1,
    )?;
    register_field(pt, "depth", int, PATH_DEPTH_AT as i64, 4, ti::INT)?;
    register_method(
        pt,
        "_root",
        Function::from_fn(|_| Ok(Any::from_object(root()?))),
        true,
    )?;
    register_method(
        pt,
        "_extend",
        Function::from_fn(|a| {
            let p = self_path("_extend", a, 2)?;
            Ok(Any::from_object(extend(
                &p,
                obj_of(&a[1], STEP_KEY, "step")?,
            )?))
        }),
        false,
    )?;
    type Make = fn(&AnyView<'_>) -> Result<(i32, Any)>;
    let makers: [(&'static str, Make); 6] = [
        ("_attr", |v| {
            Ok((kind::ATTR, Any::string_compact(v.expect_str("name")?)))
        }),
        ("_array_item", |v| {
            Ok((kind::ARRAY_ITEM, Any::from(v.expect_i64("index")?)))
        }),
        ("_map_item", |v| Ok((kind::MAP_ITEM, v.to_owned_any()))),
        ("_attr_missing", |v| {
            Ok((
                kind::ATTR_MISSING,
                Any::string_compact(v.expect_str("name")?),
            ))
        }),
        ("_array_item_missing", |v| {
            Ok((kind::ARRAY_ITEM_MISSING, Any::from(v.expect_i64("index")?)))
        }),
        ("_map_item_missing", |v| {
            Ok((kind::MAP_ITEM_MISSING, v.to_owned_any()))
        }),
    ];
    for (name, make) in makers {
        let f = Function::from_fn(move |a| {
            let p = self_path(name, a, 2)?;
            let (k, key) = make(&a[1])?;
            Ok(Any::from_object(extend(&p, new_step(k, key)?)?))
        });
        register_method(pt, name, f, false)?;
    }
    register_method(
        pt,
        "_is_prefix_of",
        Function::from_fn(|a| {
            let p = self_path("_is_prefix_of", a, 2)?;
            Ok(Any::from(is_prefix_of(
                &p,
                &obj_of(&a[1], PATH_KEY, "other")?,
            )))
        }),
        false,
    )?;
    register_method(
        pt,
        "_to_steps",
        Function::from_fn(|a| {
            Ok(Any::from_object(new_array(to_steps(&self_path(
                "_to_steps",
                a,
                1,
            )?))))
        }),
        false,
    )?;
    register_method(
        pt,
        "_path_equal",
        Function::from_fn(|a| {
            let p = self_path("_path_equal", a, 2)?;
            Ok(Any::from(path_equal(
                &p,
                &obj_of(&a[1], PATH_KEY, "other")?,
            )))
        }),
        false,
    )?;
    let step_repr_fn = Function::from_fn(|a| {
        let s = a
            .first()
            .ok_or_else(|| Error::type_error("repr expects the step"))?;
        let s = obj_of(s, STEP_KEY, "self")?;
        let f = a
            .get(1)
            .and_then(|f| f.as_function())
            .ok_or_else(|| Error::type_error("repr expects fn_repr"))?;
        Ok(Any::from(step_repr(&s, &f)?))
    });
    type_registry::register_attr(st, "__ffi_repr__", Any::from(step_repr_fn).view())?;
    let path_repr_fn = Function::from_fn(|a| {
        let p = a
            .first()
            .ok_or_else(|| Error::type_error("repr expects the path"))?;
        let p = obj_of(p, PATH_KEY, "self")?;
        let f = a
            .get(1)
            .and_then(|f| f.as_function())
            .ok_or_else(|| Error::type_error("repr expects fn_repr"))?;
        let mut s = String::from("<root>");
        for step in to_steps(&p) {
            s += &step_repr(
                &step
                    .view()
                    .as_object()
                    .ok_or_else(|| Error::runtime("bad step"))?,
                &f,
            )?;
        }
        Ok(Any::from(s))
    });
    type_registry::register_attr(pt, "__ffi_repr__", Any::from(path_repr_fn).view())
}
