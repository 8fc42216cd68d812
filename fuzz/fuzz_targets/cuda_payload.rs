//! Fuzz target: a `cuda` module's payload (`ffi.Module.load_from_bytes.cuda`): the
//! `[fmt][function table][code]` reader and the code readers behind it (PTX text, cubin ELF,
//! fatbin containers with their entry offsets), all of which run without a GPU.
//!
//! Input: a payload. Seeds are the CUDA fixtures' own payloads in each format (TVM's CUDA
//! source, NVRTC's PTX and cubin, an nvfatbin fatbin). Besides "no crash, no hang, no huge
//! allocation": the code is also read as each binary format whatever the payload's fmt says,
//! and a refusal is a message, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tvmrt::device::cuda::image::Image;
use tvmrt::device::cuda::module::CudaModule;
use tvmrt::device::launch::InfoFormat;
use tvmrt::device::payload::DevicePayload;

fuzz_target!(|data: &[u8]| {
    let _ = Image::parse(data);
    if let Ok((payload, _)) = DevicePayload::read(data, InfoFormat::WithExtraTags) {
        let code = payload.code.clone();
        if let Ok(m) = CudaModule::new(payload) {
            let _ = m.describe();
            if let Some(img) = m.image() {
                for sm in [50, 75, 80, 86, 90, 100, 120] {
                    let _ = img.select(sm, "cuda:0");
                }
            }
        }
        let _ = Image::parse(&code);
    }
});
