//! Fuzz target: the ELF check that runs before `dlopen` (`tvmrt::module::elf_check`).
//!
//! Input: the bytes of a library file. Seeds are real TVM-built fixtures, whole, truncated and
//! with bytes cut from the middle. Besides "no crash, no hang, no huge allocation", a refusal
//! must name the file it refused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tvmrt::module::elf_check::check_elf_image;

const NAME: &str = "fuzz-input.so";

fuzz_target!(|data: &[u8]| {
    if let Err(e) = check_elf_image(NAME, data) {
        assert!(e.message.contains(NAME), "refusal without the file name: {}", e.message);
    }
});
