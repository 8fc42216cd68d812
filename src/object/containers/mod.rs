//! tvm-ffi's containers with its object layouts (C++ code compiled against its headers reads
//! them inline): `ffi.Array`, ...

pub mod array;
