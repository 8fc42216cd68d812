//! Fuzz target: the `.npy` reader of the `tvmrt` tool (`crates/cli/src/npyio.rs`, compiled in
//! here since it belongs to the binary, not the library).
//!
//! The reader takes a path, so each input is written to a file in a per-process directory
//! (on tmpfs when `/dev/shm` exists). A file that reads back must survive a write and a second
//! read unchanged, and its data must match its shape and dtype.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../crates/cli/src/npyio.rs"]
mod npyio;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let d = base.join(format!("tvmrt-fuzz-npy-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("creating the scratch directory");
        d
    })
}

fuzz_target!(|data: &[u8]| {
    let input = dir().join("in.npy");
    std::fs::write(&input, data).expect("writing the input file");
    let Ok(array) = npyio::read_npy(input.to_str().unwrap()) else {
        return;
    };
    let numel: u64 = array.shape.iter().map(|&d| d as u64).product();
    let elem = (array.dtype.bits as u64 * array.dtype.lanes as u64).div_ceil(8);
    assert_eq!(array.data.len() as u64, numel * elem, "data size vs shape");
    let output = dir().join("out.npy");
    npyio::write_npy(&output, &array).expect("an array that was read can be written");
    let again = npyio::read_npy(output.to_str().unwrap()).expect("what was written reads back");
    assert_eq!(again, array, "write + read changed the array");
});
