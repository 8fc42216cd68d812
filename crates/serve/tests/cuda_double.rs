//! The engine on cuda:0 (`tvmrt serve --device cuda`) with the MLC-LLM fixture built for CUDA
//! (tests/fixtures/mlc/model/lib_cuda.so: TVM's CUDA source, compiled by NVRTC at load), through
//! the test double of the driver (tests/cuda_double/fake_cuda.c). The double runs no kernel, so
//! what is checked is the plumbing: the weights, the KV cache, the token ids and the logit
//! processing on the device, every forward launched there (prefill and decode attention
//! kernels included), requests answered with the tokens asked for, the cache's pages back after
//! each request, and no device memory left once the engine stops. benches/gpu/run.sh runs the
//! same model on a real GPU (values and speed).

use std::path::PathBuf;
use std::process::Command;

use tokio::sync::mpsc::unbounded_channel;
use tvmrt_serve::engine::{Engine, EngineConfig, Event, Request};
use tvmrt_serve::sampler::SamplingParams;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the double and points tvmrt at it and at the pinned NVRTC (`.ci/venv.sh cuda`).
fn fake_driver() -> libloading::Library {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve_fake_cuda.so");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let ok = Command::new(cc)
        .args(["-shared", "-fPIC", "-O1", "-pthread", "-o"])
        .arg(&out)
        .arg(root().join("tests/cuda_double/fake_cuda.c"))
        .status()
        .expect("a C compiler (cc)")
        .success();
    assert!(ok, "building the CUDA test double failed");
    let nvrtc = std::fs::read_dir(root().join(".venv/cuda/lib"))
        .expect("the cuda venv: run `.ci/venv.sh cuda`")
        .flatten()
        .map(|e| {
            e.path()
                .join("site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12")
        })
        .find(|p| p.exists())
        .expect("NVRTC in .venv/cuda");
    std::env::set_var("TVMRT_NVRTC_LIBRARY", nvrtc);
    std::env::set_var("TVMRT_CUDA_LIBRARY", &out);
    std::env::set_var("FAKE_CUDA_DEVICES", "1");
    // SAFETY: the double has no initializers and stays loaded (tvmrt opens the same file).
    unsafe { libloading::Library::new(&out) }.unwrap()
}

#[test]
fn the_engine_serves_on_cuda() {
    let fake = fake_driver();
    // SAFETY: the double's functions of these names and signatures.
    let live: libloading::Symbol<unsafe extern "C" fn(i32) -> i32> =
        unsafe { fake.get(b"fake_cuda_live_allocations\0") }.unwrap();
    let launches: libloading::Symbol<unsafe extern "C" fn() -> i32> =
        unsafe { fake.get(b"fake_cuda_launch_count\0") }.unwrap();
    let dir = root().join("tests/fixtures/mlc/model");
    let cuda = tvmrt::device::parse_device("cuda:0").unwrap();
    {
        let engine = Engine::start(
            dir.join("lib_cuda.so"),
            dir.clone(),
            EngineConfig {
                max_num_sequence: 4,
                max_total_sequence_length: 1024,
                prefill_chunk_size: 0,
                max_queue: 8,
                prefix_cache_max_num_recycling_seqs: 0,
                device: cuda,
            },
        )
        .unwrap();
        // SAFETY: plain reads of the double's counters.
        let (before, device_memory) = unsafe { (launches(), live(0)) };
        assert!(
            device_memory > 0,
            "the weights and the KV cache are on the device"
        );
        let pages = engine
            .metrics
            .kv_pages_in_use
            .load(std::sync::atomic::Ordering::Relaxed);
        // Two requests at once (one batch), each with sampling that needs the model's logit
        // processors (a logit bias and a penalty) on the device.
        let mut rxs = Vec::new();
        for (i, prompt) in [vec![287, 300, 76, 70, 78], vec![261, 309, 281]]
            .into_iter()
            .enumerate()
        {
            let (tx, rx) = unbounded_channel();
            engine
                .submit(Request {
                    prompt,
                    params: SamplingParams {
                        temperature: 0.0,
                        max_tokens: Some(6),
                        logit_bias: vec![(5, 1.0 + i as f32)],
                        presence_penalty: 0.5,
                        ..Default::default()
                    },
                    events: tx,
                })
                .unwrap();
            rxs.push(rx);
        }
        for mut rx in rxs {
            let mut tokens = 0;
            loop {
                match rx.blocking_recv().expect("the engine answers") {
                    Event::Delta { .. } => tokens += 1,
                    Event::Prompt { .. } | Event::Finish { .. } => {}
                    Event::Done { .. } => break,
                    Event::Error(e) => panic!("{e}"),
                }
            }
            // The double computes nothing, so the logits are whatever its memory holds: a stop
            // token may come before the sixth.
            assert!(tokens <= 6, "{tokens} tokens for max_tokens 6");
        }
        // SAFETY: as above.
        let ran = unsafe { launches() } - before;
        // A forward launches tens of kernels (embedding, 2 layers of norms, projections, RoPE,
        // cache append and attention, the LM head): the prefill alone is more than 20.
        assert!(ran >= 20, "only {ran} kernel launches");
        let in_use = engine
            .metrics
            .kv_pages_in_use
            .load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(in_use, pages, "the finished requests' pages are back");
    }
    // The engine thread ends on its own once the engine is dropped: wait for it (bounded),
    // dropping the process-wide tensor cache's weights too.
    let mut left = -1;
    for _ in 0..200 {
        tvmrt::llm::tensor_cache::clear();
        // SAFETY: as above.
        left = unsafe { live(0) };
        if left == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(left, 0, "device allocations left after the engine stopped");
}
