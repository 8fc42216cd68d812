//! tvm-ffi's containers with its object layouts (C++ code compiled against its headers reads
//! them inline): `ffi.Array`, `ffi.List`, `ffi.Map`, `ffi.Dict`, and their global functions.

pub mod array;
pub mod globals;
pub mod key;
pub mod list;
pub mod map;
