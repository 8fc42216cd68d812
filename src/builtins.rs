//! Global functions tvmrt registers at start-up (installed the first time the registry is
//! touched). Each subsystem contributes its list here, so the registry itself knows no names.

use crate::function::Function;
use crate::value::Any;

/// All built-in global functions, by name.
pub fn all() -> Vec<(&'static str, Function)> {
    let mut v: Vec<(&'static str, Function)> = Vec::new();
    v.extend([
        (
            "ffi.FunctionRemoveGlobal",
            Function::from_fn(|args| {
                let name = args
                    .first()
                    .ok_or_else(|| crate::error::Error::value("expected 1 argument (name)"))?
                    .expect_str("name")?;
                Ok(Any::from(crate::function::registry::remove(name)))
            }),
        ),
        (
            "ffi.FunctionListGlobalNames",
            Function::from_fn(|_| {
                let names = crate::function::registry::list_names().join("\n");
                Ok(Any::from(names))
            }),
        ),
    ]);
    v.extend(crate::function::builtins());
    v.extend(crate::module::builtins());
    v.extend(crate::module::pinned::builtins());
    v.extend(crate::module::cxx::builtins());
    v.extend(crate::contrib::examplejson::module::builtins());
    v.extend(crate::contrib::sort::builtins());
    v.extend(crate::contrib::random::builtins());
    v.extend(crate::contrib::set_ops::builtins());
    v.extend(crate::contrib::shape_ops::builtins());
    v.extend(crate::tensor::builtins::builtins());
    v.extend(crate::device::builtins());
    v.extend(crate::module::system_lib::builtins());
    v.extend(crate::vm::builtins());
    v.extend(crate::graph::builtins());
    v.extend(crate::llm::builtins());
    v.extend(crate::backend::builtins());
    v.extend(crate::profiling::builtins());
    v.extend(crate::reflection::builtins());
    v.extend(crate::reflection::recursive::builtins());
    v.extend(crate::reflection::structural::builtins());
    v.extend(crate::reflection::visit_error::builtins());
    v.extend(crate::reflection::deep_copy::builtins());
    v.extend(crate::reflection::repr::builtins());
    v.extend(crate::reflection::json_graph::builtins());
    v.extend(crate::object::containers::globals::builtins());
    v
}
