//! The library's top: every subsystem's global functions, handed to the registry.
//!
//! The registry ([`crate::function::registry`]) sits below every subsystem and names none of
//! them. The first time it is touched it asks for its initial table through one link-time symbol,
//! which this module defines; this is the only place that lists the subsystems. A reference the
//! linker must resolve (rather than a list each module adds itself to from a linker section or a
//! constructor) keeps every subsystem in every kind of link: a C program linking `libtvmrt.a`
//! pulls in this archive member because the registry refers to it, and with it everything it
//! names, whereas a module whose only tie to the program were its own registration would be
//! dropped with its codegen unit (rust-lang/rust#47384; `c_tests/static_globals.c` checks it).
//!
//! A new subsystem adds its `builtins()` line here.

use crate::function::registry::{globals_symbol, Globals};

/// All built-in global functions, by name. The registry calls this once, through the symbol
/// it declares (see `crate::function::registry`), with the types [`Globals`] fixes on both
/// sides.
#[export_name = globals_symbol!()]
fn all() -> Globals {
    let mut v: Globals = Vec::new();
    v.extend(crate::function::builtins());
    v.extend(crate::module::builtins());
    v.extend(crate::module::pinned::builtins());
    v.extend(crate::module::cxx::builtins());
    #[cfg(feature = "contrib")]
    v.extend(crate::contrib::examplejson::module::builtins());
    #[cfg(feature = "contrib")]
    v.extend(crate::contrib::sort::builtins());
    #[cfg(feature = "contrib")]
    v.extend(crate::contrib::random::builtins());
    #[cfg(feature = "contrib")]
    v.extend(crate::contrib::set_ops::builtins());
    #[cfg(feature = "contrib")]
    v.extend(crate::contrib::shape_ops::builtins());
    v.extend(crate::tensor::builtins::builtins());
    v.extend(crate::device::builtins());
    v.extend(crate::module::system_lib::builtins());
    #[cfg(feature = "vm")]
    v.extend(crate::vm::builtins());
    #[cfg(feature = "graph")]
    v.extend(crate::graph::builtins());
    #[cfg(feature = "llm")]
    v.extend(crate::llm::builtins());
    v.extend(crate::backend::builtins());
    #[cfg(feature = "profiling")]
    v.extend(crate::profiling::builtins());
    #[cfg(feature = "reflection")]
    v.extend(crate::reflection::builtins());
    #[cfg(feature = "reflection")]
    v.extend(crate::reflection::recursive::builtins());
    #[cfg(feature = "reflection")]
    v.extend(crate::reflection::structural::builtins());
    #[cfg(feature = "reflection")]
    v.extend(crate::reflection::visit_error::builtins());
    #[cfg(feature = "reflection")]
    v.extend(crate::reflection::deep_copy::builtins());
    #[cfg(feature = "reflection")]
    v.extend(crate::reflection::repr::builtins());
    #[cfg(feature = "reflection")]
    v.extend(crate::reflection::json_graph::builtins());
    v.extend(crate::object::containers::globals::builtins());
    #[cfg(feature = "rpc")]
    v.extend(crate::rpc::builtins());
    v
}
