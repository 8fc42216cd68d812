//! The engine on cuda:0 (`tvmrt serve --device cuda`) with the MLC-LLM fixture built for CUDA
//! (tests/fixtures/mlc/model/lib_cuda.so: TVM's CUDA source, compiled by NVRTC at load), through
//! the test double of the driver (tests/cuda_double/fake_cuda.c). The double runs no kernel, so
//! what is checked is the plumbing: the weights, the KV cache, the token ids and the logit
//! processing on the device, every forward launched there (prefill and decode attention
//! kernels included), requests answered with the tokens asked for, the cache's pages back after
//! each request, and no device memory left once the engine stops. benches/gpu/run.sh runs the
//! same model on a real GPU (values and speed).

use std::ffi::c_void;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

use serde_json::json;
use tokio::sync::mpsc::unbounded_channel;
use tvmrt_serve::engine::{Engine, EngineConfig, Event, Request};
use tvmrt_serve::sampler::SamplingParams;
use tvmrt_serve::structured::Constraint;

/// The tests share the double's counters and allocations: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The double, built once, and tvmrt pointed at it and at the pinned NVRTC (`.ci/venv.sh cuda`).
fn fake_driver() -> &'static libloading::Library {
    static DRIVER: std::sync::OnceLock<libloading::Library> = std::sync::OnceLock::new();
    DRIVER.get_or_init(build_fake_driver)
}

fn build_fake_driver() -> libloading::Library {
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

fn engine_on_cuda(max_num_sequence: usize) -> Engine {
    Engine::start(
        root().join("tests/fixtures/mlc/model/lib_cuda.so"),
        root().join("tests/fixtures/mlc/model"),
        EngineConfig {
            max_num_sequence,
            max_total_sequence_length: 1024,
            prefill_chunk_size: 0,
            max_queue: 8,
            prefix_cache_max_num_recycling_seqs: 0,
            device: tvmrt::device::parse_device("cuda:0").unwrap(),
        },
    )
    .unwrap()
}

#[test]
fn the_engine_serves_on_cuda() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let fake = fake_driver();
    // SAFETY: the double's functions of these names and signatures.
    let live: libloading::Symbol<unsafe extern "C" fn(i32) -> i32> =
        unsafe { fake.get(b"fake_cuda_live_allocations\0") }.unwrap();
    let launches: libloading::Symbol<unsafe extern "C" fn() -> i32> =
        unsafe { fake.get(b"fake_cuda_launch_count\0") }.unwrap();
    {
        let engine = engine_on_cuda(4);
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

/// The host's version of the library's `apply_bitmask_inplace_kernel`, from its CUDA source in
/// lib_cuda.so: parameters `(bitmask, logits, seq_ids, num_seq, vocab_size)`; thread `i` of the
/// grid covers token `i % vocab_size` of row `seq_ids[i / vocab_size]`, which it sets to the
/// lowest float where the row's bit is clear.
unsafe extern "C" fn host_apply_bitmask(
    params: *mut *mut c_void,
    grid: *const u32,
    block: *const u32,
) {
    // SAFETY: the double passes the launch's five parameters (each a pointer to its value) and
    // its grid and block; the pointers are the double's host-memory "device" allocations, which
    // the kernel's own indexing stays inside.
    unsafe {
        let p = std::slice::from_raw_parts(params, 5);
        let bitmask = *(p[0] as *const *const i32);
        let logits = *(p[1] as *const *mut f32);
        let seq_ids = *(p[2] as *const *const i32);
        let (num_seq, vocab) = (*(p[3] as *const i32) as i64, *(p[4] as *const i32) as i64);
        let threads = *grid as i64 * *block as i64;
        let words = (vocab + 31) / 32;
        for i in 0..threads.min(num_seq * vocab) {
            let (row, v) = (*seq_ids.add((i / vocab) as usize) as i64, i % vocab);
            if (*bitmask.add((row * words + v / 32) as usize) >> (v % 32)) & 1 == 0 {
                *logits.add((row * vocab + v) as usize) = f32::MIN;
            }
        }
    }
}

/// Structured output on cuda:0: the grammars' masks go to the device and the library's kernel
/// applies them there, to the rows of the constrained sequences only. The double computes no
/// forward, so the logits are whatever its memory holds: the answers validate only if every
/// mask reached its own row.
#[test]
fn grammar_masks_are_applied_on_the_device() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let fake = fake_driver();
    type KernelImpl = unsafe extern "C" fn(*mut *mut c_void, *const u32, *const u32);
    // SAFETY: the double's functions of these names and signatures.
    let set_kernel: libloading::Symbol<unsafe extern "C" fn(*const i8, Option<KernelImpl>)> =
        unsafe { fake.get(b"fake_cuda_set_kernel\0") }.unwrap();
    let launches: libloading::Symbol<unsafe extern "C" fn() -> i32> =
        unsafe { fake.get(b"fake_cuda_launch_count\0") }.unwrap();
    let kernel = c"apply_bitmask_inplace_kernel";
    // SAFETY: a NUL-terminated name and a function of the double's kernel signature.
    unsafe { set_kernel(kernel.as_ptr(), Some(host_apply_bitmask)) };
    let engine = engine_on_cuda(8);
    let schema = json!({"type": "object", "properties": {
        "pet": {"enum": ["cat", "dog"]}, "age": {"type": "integer", "minimum": 0, "maximum": 9}},
        "required": ["pet", "age"], "additionalProperties": false});
    // Three constrained sequences (two grammars) and a free one, decoded together.
    let constraints = [
        Some(Constraint::JsonSchema {
            schema: schema.clone(),
            compact: true,
        }),
        Some(Constraint::Regex("[a-c]{5}".into())),
        None,
        Some(Constraint::JsonSchema {
            schema,
            compact: true,
        }),
    ];
    // SAFETY: a plain read of the double's counter.
    let before = unsafe { launches() };
    let mut rxs = Vec::new();
    for (k, constraint) in constraints.iter().enumerate() {
        let (tx, rx) = unbounded_channel();
        engine
            .submit(Request {
                prompt: vec![287 + k as i32, 300, 76, 70],
                params: SamplingParams {
                    temperature: 0.0,
                    max_tokens: Some(24),
                    constraint: constraint.clone(),
                    ..Default::default()
                },
                events: tx,
            })
            .unwrap();
        rxs.push(rx);
    }
    let mut texts = Vec::new();
    for mut rx in rxs {
        let (mut text, mut reason) = (String::new(), None);
        loop {
            match rx.blocking_recv().expect("the engine answers") {
                Event::Delta { text: t, .. } => text += &t,
                Event::Finish { reason: r, .. } => reason = Some(r.as_str()),
                Event::Done { .. } => break,
                Event::Error(e) => panic!("{e}"),
                Event::Prompt { .. } => {}
            }
        }
        texts.push((text, reason));
    }
    // SAFETY: as above; null removes the host version.
    unsafe { set_kernel(kernel.as_ptr(), None) };
    for k in [0, 3] {
        let (text, reason) = &texts[k];
        let v: serde_json::Value = serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("answer {k} is not JSON ({e}): {text:?}"));
        assert!(matches!(v["pet"].as_str(), Some("cat" | "dog")), "{text}");
        assert!(
            v["age"].as_i64().is_some_and(|a| (0..=9).contains(&a)),
            "{text}"
        );
        assert_eq!(v.as_object().unwrap().len(), 2, "{text}");
        assert_eq!(*reason, Some("stop"), "{text}");
    }
    let (regex, reason) = &texts[1];
    assert!(
        regex.len() == 5 && regex.chars().all(|c| ('a'..='c').contains(&c)),
        "{regex:?}"
    );
    assert_eq!(*reason, Some("stop"));
    // SAFETY: as above.
    assert!(unsafe { launches() } > before);
}
