//! Closures (`relax.vm.Closure`): a VM function of one executable, or a closure with
//! arguments bound at the end; they hold no reference to a VM.

use std::sync::Weak;

use crate::abi::type_index;
use crate::object::{new_object, ObjectPayload, ObjectRef};
use crate::value::Any;

use super::Shared;
use crate::vm::exec::Executable;

/// A closure: a VM function of one executable, or a closure with arguments bound at the end.
pub struct ClosureObj {
    pub(super) func_name: String,
    pub(super) imp: ClosureImpl,
}

pub(super) enum ClosureImpl {
    VmFunc {
        exec: Weak<Executable>,
        index: usize,
    },
    Bound {
        inner: ObjectRef,
        last_args: Shared<Vec<Any>>,
        /// `save_function(..., include_return=false)`: the call returns None.
        discard_result: bool,
    },
}

// SAFETY: no public cell (TVM's `VMClosureObj` is not read by generated code); tvmrt gives
// closures the generic object index (64) as the type is private to the VM.
unsafe impl ObjectPayload for ClosureObj {
    const TYPE_INDEX: i32 = type_index::OBJECT;
}

/// The closure payload of `obj`, if it is one.
pub fn closure_obj(obj: &ObjectRef) -> Option<&ClosureObj> {
    obj.downcast_ref::<ClosureObj>()
}

/// `vm.builtin.make_closure`: `inner` with `last_args` appended to every call.
pub fn new_bound_closure(inner: ObjectRef, last_args: Vec<Any>) -> ObjectRef {
    let func_name = closure_obj(&inner)
        .map(|c| c.func_name.clone())
        .unwrap_or_default();
    new_object(ClosureObj {
        func_name,
        imp: ClosureImpl::Bound {
            inner,
            last_args: Shared(last_args),
            discard_result: false,
        },
    })
}
