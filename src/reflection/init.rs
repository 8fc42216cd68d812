//! The reflection-generated `__ffi_init__` (tvm-ffi's `ffi._RegisterFFIInit`): a constructor
//! that creates an empty object of the type and binds its arguments to the init fields, either
//! all positional, or positional then the kwargs marker ([`super::sentinels::kwargs`]) then
//! name/value pairs; unset fields take their defaults; a missing required field, an unknown or
//! repeated keyword, or too many positional arguments is a `TypeError`.

use std::ffi::c_void;

use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::type_registry::{self, field_flag, TVMFFIFieldInfo};
use crate::object::ObjectRef;
use crate::value::{Any, AnyView};

use super::fields::{self, INIT_OFF, KW_ONLY};
use super::sentinels;

/// What the constructor of one type needs, computed once.
struct InitPlan {
    type_index: i32,
    key: String,
    fields: Vec<TVMFFIFieldInfo>,
    /// Fields that take an argument, in order.
    init: Vec<usize>,
    /// Positional ones: required first, then those with defaults.
    positional: Vec<usize>,
}

// SAFETY: the field records point only at registry-owned data that is never freed or changed
// (names, default values, setters), so the plan may be shared between threads.
unsafe impl Send for InitPlan {}
// SAFETY: as above.
unsafe impl Sync for InitPlan {}

impl InitPlan {
    fn new(type_index: i32) -> Result<InitPlan> {
        let info = fields::type_info(type_index)?;
        let all = fields::all_fields(info);
        let init: Vec<usize> = (0..all.len())
            .filter(|&i| all[i].flags & INIT_OFF == 0)
            .collect();
        let mut positional: Vec<usize> = init
            .iter()
            .copied()
            .filter(|&i| all[i].flags & KW_ONLY == 0)
            .collect();
        crate::cold_sort::sort_by_key(&mut positional, |&i| {
            all[i].flags & field_flag::HAS_DEFAULT != 0
        });
        Ok(InitPlan {
            type_index,
            key: fields::type_key(info),
            fields: all,
            init,
            positional,
        })
    }

    fn name(&self, i: usize) -> String {
        fields::field_name(&self.fields[i])
    }

    fn construct(&self, args: &[AnyView<'_>]) -> Result<Any> {
        let info = fields::type_info(self.type_index)?;
        let obj = fields::create_empty(info)?;
        self.bind(&obj, args)?;
        Ok(Any::from_object(obj))
    }

    /// The address of field `i` inside `obj`.
    fn addr(&self, obj: &ObjectRef, i: usize) -> *mut c_void {
        // SAFETY: the field offset comes from the type's own record and `obj` is of the type.
        unsafe {
            obj.as_ptr()
                .cast::<u8>()
                .add(self.fields[i].offset as usize)
        }
        .cast()
    }

    /// Names the type and field in a setter's error, the setter's message indented below (as
    /// tvm-ffi's `AppendNestedErrorMessage` writes it).
    fn context(&self, i: usize, what: &str, r: Result<()>) -> Result<()> {
        r.map_err(|e| {
            let nested = e.message.replace('\n', "\n  ");
            let msg = format!(
                "{}.__ffi_init__() {what} '{}':\n  {nested}",
                self.key,
                self.name(i)
            );
            Error::new(e.kind.clone(), msg)
        })
    }

    /// Sets field `i` of `obj` to `value`.
    fn set(&self, obj: &ObjectRef, i: usize, value: AnyView<'_>) -> Result<()> {
        // SAFETY: `addr` is field `i` of an object of the plan's type.
        let r = unsafe { fields::call_setter(&self.fields[i], self.addr(obj, i), value) };
        self.context(i, "field", r)
    }

    /// Sets field `i` of `obj` to its default.
    fn set_default(&self, obj: &ObjectRef, i: usize) -> Result<()> {
        // SAFETY: as in `set`.
        let r = unsafe { fields::set_default(&self.fields[i], self.addr(obj, i)) };
        self.context(i, "default for field", r)
    }

    fn bind(&self, obj: &ObjectRef, args: &[AnyView<'_>]) -> Result<()> {
        let marker = sentinels::kwargs();
        let mut set = vec![false; self.fields.len()];
        let kwargs_pos = args
            .iter()
            .position(|a| a.as_object().is_some_and(|o| o.as_ptr() == marker.as_ptr()));
        let n_pos = kwargs_pos.unwrap_or(args.len());
        if n_pos > self.positional.len() {
            return Err(Error::type_error(format!(
                "{}.__ffi_init__() takes at most {} positional argument(s), but {n_pos} were given",
                self.key,
                self.positional.len()
            )));
        }
        for (k, a) in args[..n_pos].iter().enumerate() {
            let i = self.positional[k];
            self.set(obj, i, *a)?;
            set[i] = true;
        }
        if let Some(kp) = kwargs_pos {
            let rest = &args[kp + 1..];
            if !rest.len().is_multiple_of(2) {
                return Err(Error::type_error(format!(
                    "{}.__ffi_init__() KWARGS requires an even number of key-value arguments",
                    self.key
                )));
            }
            for pair in rest.chunks(2) {
                let key = pair[0].expect_str("keyword")?;
                let i = self
                    .init
                    .iter()
                    .copied()
                    .find(|&i| self.name(i) == key)
                    .ok_or_else(|| {
                        Error::type_error(format!(
                            "{}.__ffi_init__() got an unexpected keyword argument '{key}'",
                            self.key
                        ))
                    })?;
                if set[i] {
                    return Err(Error::type_error(format!(
                        "{}.__ffi_init__() got multiple values for argument '{key}'",
                        self.key
                    )));
                }
                self.set(obj, i, pair[1])?;
                set[i] = true;
            }
        }
        for (i, f) in self.fields.iter().enumerate() {
            if set[i] {
                continue;
            }
            if f.flags & field_flag::HAS_DEFAULT != 0 {
                self.set_default(obj, i)?;
            } else if f.flags & INIT_OFF == 0 {
                let kw = if f.flags & KW_ONLY != 0 {
                    " keyword-only"
                } else {
                    ""
                };
                return Err(Error::type_error(format!(
                    "{}.__ffi_init__() missing required{kw} argument: '{}'",
                    self.key,
                    self.name(i)
                )));
            }
        }
        Ok(())
    }
}

/// The generated constructor of a type (`MakeInit`).
pub fn make_init(type_index: i32) -> Result<Function> {
    let plan = InitPlan::new(type_index)?;
    Ok(Function::from_fn(move |args| plan.construct(args)))
}

/// Sets the type's `__ffi_init__` to the generated constructor (`ffi._RegisterFFIInit`).
pub fn register_ffi_init(type_index: i32) -> Result<()> {
    let f = Any::from(make_init(type_index)?);
    type_registry::register_attr(type_index, "__ffi_init__", f.view())
}
