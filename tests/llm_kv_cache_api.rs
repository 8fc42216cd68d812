//! `vm.builtin.paged_attention_kv_cache_create` and the cache's calls with kernels written in
//! Rust (recording what the cache calls them with): TVM 0.27's argument list and its checks,
//! back ends the cache cannot run refused, the kernels called in TVM's order with TVM's
//! argument counts, and a kernel calling back into its own cache refused rather than hanging.

mod llm_support;

use std::sync::{Arc, Mutex};

use llm_support::{global, shape};
use tvmrt::dtype::dtypes;
use tvmrt::function::Function;
use tvmrt::object::containers::array::new_array;
use tvmrt::tensor::layout::cpu;
use tvmrt::tensor::Tensor;
use tvmrt::value::Any;

type Log = Arc<Mutex<Vec<(String, usize)>>>;

/// A change to the create arguments.
type Edit = Box<dyn FnOnce(&mut Vec<Any>)>;

/// A kernel that records its name and argument count.
fn kernel(log: &Log, name: &str) -> Any {
    let (log, name) = (log.clone(), name.to_string());
    Any::from(Function::from_fn(move |args| {
        log.lock().unwrap().push((name.clone(), args.len()));
        Ok(Any::none())
    }))
}

fn entry(backend: &str, k: Any) -> Any {
    Any::from_object(new_array(vec![Any::from(backend), k]))
}

fn empty() -> Any {
    Any::from_object(new_array(vec![]))
}

/// TVM 0.27's 28 arguments for a 2-layer MHA cache (4 query heads, 2 KV heads of 16) with
/// recording kernels; `edit` may change any of them.
fn create_args(log: &Log, edit: impl FnOnce(&mut Vec<Any>)) -> Vec<Any> {
    let init = Tensor::empty(&[], dtypes::FLOAT32, cpu()).unwrap();
    let mut a = vec![
        shape(&[4, 256, 64, 16, 0]),
        shape(&[0, 2]),
        Any::from(4i64),
        Any::from(2i64),
        Any::from(16i64),
        Any::from(16i64),
        shape(&[0, 0]),
        Any::from(false),
        Any::from(1i64),
        Any::from(1.0),
        Any::from(10000.0),
        Any::none(),
        Any::from(init),
        kernel(log, "transpose_append"),
        Any::none(),
        entry("tirx", kernel(log, "prefill_ragged")),
        entry("tirx", kernel(log, "prefill")),
        entry("tirx", kernel(log, "decode")),
        entry("tirx", kernel(log, "prefill_sliding_window")),
        entry("tirx", kernel(log, "decode_sliding_window")),
        entry("tirx", kernel(log, "tree_paged")),
        entry("tirx", kernel(log, "tree_ragged")),
        empty(),
        Any::from_object(new_array(vec![kernel(log, "merge")])),
        kernel(log, "split_rotary"),
        kernel(log, "copy_single_page"),
        kernel(log, "debug_get_kv"),
        kernel(log, "compact_copy"),
    ];
    edit(&mut a);
    a
}

fn create(args: &[Any]) -> tvmrt::Result<Any> {
    global("vm.builtin.paged_attention_kv_cache_create").call_values(args)
}

fn f32_tensor(shape: &[i64]) -> Tensor {
    Tensor::empty(shape, dtypes::FLOAT32, cpu()).unwrap()
}

#[test]
fn create_checks_its_arguments() {
    let log: Log = Arc::default();
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|a| {
                a.pop();
            }),
            "expects 28 to 29 arguments",
        ),
        (
            Box::new(|a| a[0] = shape(&[4, 256, 64, 0, 0])),
            "page_size (cache_config[3]) must be positive",
        ),
        (
            Box::new(|a| a[0] = shape(&[4, 256, 64])),
            "five legacy fields",
        ),
        (
            Box::new(|a| a[3] = Any::from(3i64)),
            "must be a multiple of num_kv_heads",
        ),
        (
            Box::new(|a| a[6] = shape(&[0])),
            "1 attention kinds given for layers up to 2",
        ),
        (
            Box::new(|a| a[6] = shape(&[0, 7])),
            "unknown attention kind 7",
        ),
        (Box::new(|a| a[7] = Any::from(true)), "NVSHMEM"),
        (Box::new(|a| a[8] = Any::from(5i64)), "unknown RoPE mode 5"),
        (
            Box::new(|a| a[15] = entry("tir", Any::none())),
            "unknown attention back end `tir`",
        ),
        (
            Box::new(|a| {
                a[16] = Any::from_object(new_array(vec![
                    Any::from("flashinfer"),
                    Any::none(),
                    Any::none(),
                ]))
            }),
            "FlashInfer's CUDA kernels, which tvmrt does not provide",
        ),
        (
            Box::new(|a| a[23] = empty()),
            "Merge inplace function is not defined.",
        ),
        (Box::new(|a| a[24] = Any::from(1i64)), "f_split_rotary"),
        (Box::new(|a| a[12] = Any::from(1i64)), "init"),
    ];
    for (edit, want) in cases {
        let e = create(&create_args(&log, edit)).unwrap_err();
        assert!(e.message.contains(want), "{want}: {e}");
    }
    assert!(log.lock().unwrap().is_empty(), "no kernel ran");
    // 29 arguments (TVM's reserved CUDA-graph slot) are accepted.
    create(&create_args(&log, |a| a.push(Any::none()))).unwrap();
}

#[test]
fn kernels_are_called_in_tvms_order_with_tvms_arguments() {
    let log: Log = Arc::default();
    let cache = create(&create_args(&log, |_| {})).unwrap();
    let call = |name: &str, args: &[Any]| {
        let mut all = vec![cache.clone()];
        all.extend_from_slice(args);
        global(name).call_values(&all)
    };
    call("vm.builtin.kv_state_add_sequence", &[Any::from(0i64)]).unwrap();
    let attn = |n: i64| {
        let qkv = f32_tensor(&[n, 8, 16]);
        let o = f32_tensor(&[n, 4, 16]);
        call(
            "vm.builtin.attention_kv_cache_attention_with_fused_qkv",
            &[
                Any::from(0i64),
                Any::from(0.25),
                Any::from(qkv),
                Any::from(o),
            ],
        )
    };
    // Prefill of a new sequence: split, ragged self attention, append (no cached pages yet).
    call(
        "vm.builtin.kv_state_begin_forward",
        &[shape(&[0]), shape(&[5])],
    )
    .unwrap();
    attn(5).unwrap();
    let names = |log: &Log| -> Vec<(String, usize)> { log.lock().unwrap().drain(..).collect() };
    assert_eq!(
        names(&log),
        vec![
            ("split_rotary".to_string(), 6),
            ("prefill_ragged".to_string(), 14),
            ("transpose_append".to_string(), 4),
        ]
    );
    // Decode: append first, then the decode kernel over the pages.
    call(
        "vm.builtin.kv_state_begin_forward",
        &[shape(&[0]), shape(&[1])],
    )
    .unwrap();
    attn(1).unwrap();
    assert_eq!(
        names(&log),
        vec![
            ("split_rotary".to_string(), 6),
            ("transpose_append".to_string(), 4),
            ("decode".to_string(), 13),
        ]
    );
    // Chunked prefill: ragged, then the paged prefill merged in, then the append.
    call(
        "vm.builtin.kv_state_begin_forward",
        &[shape(&[0]), shape(&[3])],
    )
    .unwrap();
    attn(3).unwrap();
    assert_eq!(
        names(&log),
        vec![
            ("split_rotary".to_string(), 6),
            ("prefill_ragged".to_string(), 14),
            ("prefill".to_string(), 15),
            ("merge".to_string(), 4),
            ("transpose_append".to_string(), 4),
        ]
    );
    // A token tree on top: the ragged tree kernel.
    call(
        "vm.builtin.kv_state_begin_forward",
        &[shape(&[0]), shape(&[3]), shape(&[-1, 0, 0])],
    )
    .unwrap();
    attn(3).unwrap();
    let called: Vec<String> = names(&log).into_iter().map(|(n, _)| n).collect();
    assert!(called.contains(&"tree_ragged".to_string()), "{called:?}");
    // Extended before commit: the paged tree kernel (16 arguments).
    call(
        "vm.builtin.kv_state_begin_forward",
        &[shape(&[0]), shape(&[1]), shape(&[2])],
    )
    .unwrap();
    attn(1).unwrap();
    let called = names(&log);
    assert!(
        called.contains(&("tree_paged".to_string(), 16)),
        "{called:?}"
    );
    // Outputs of the wrong shape are refused before any kernel runs.
    let e = call(
        "vm.builtin.attention_kv_cache_attention_with_fused_qkv",
        &[
            Any::from(0i64),
            Any::from(0.25),
            Any::from(f32_tensor(&[1, 7, 16])),
            Any::from(f32_tensor(&[1, 4, 16])),
        ],
    )
    .unwrap_err();
    assert!(e.message.contains("qkv_data has shape"), "{e}");
    let e = call(
        "vm.builtin.attention_kv_cache_attention_with_fused_qkv",
        &[
            Any::from(5i64),
            Any::from(0.25),
            Any::from(f32_tensor(&[1, 8, 16])),
            Any::from(f32_tensor(&[1, 4, 16])),
        ],
    )
    .unwrap_err();
    assert!(e.message.contains("layer 5 is not in this cache"), "{e}");
    assert!(names(&log).is_empty());
    // CPU models carry one merge kernel: the general merge is refused, as in TVM.
    let e = call(
        "vm.builtin.attention_kv_cache_merge_attn_output_inplace",
        &[
            Any::from(f32_tensor(&[1, 4, 16])),
            Any::from(f32_tensor(&[1, 4])),
            Any::from(f32_tensor(&[1, 4, 16])),
            Any::from(f32_tensor(&[1, 4])),
        ],
    )
    .unwrap_err();
    assert!(e.message.contains("general attention merge"), "{e}");
}

#[test]
fn a_kernel_calling_back_into_its_cache_gets_an_error() {
    let log: Log = Arc::default();
    let slot: Arc<Mutex<Option<tvmrt::object::ObjectRef>>> = Arc::default();
    let inner = slot.clone();
    let reentrant = Any::from(Function::from_fn(move |_| {
        let cache = inner.lock().unwrap().clone().unwrap();
        global("vm.builtin.attention_kv_cache_get_num_available_pages")
            .call_values(&[Any::from_object(cache)])?;
        Ok(Any::none())
    }));
    let cache = create(&create_args(&log, |a| a[24] = reentrant)).unwrap();
    *slot.lock().unwrap() = Some(cache.view().as_object().unwrap());
    let call = |name: &str, args: &[Any]| {
        let mut all = vec![cache.clone()];
        all.extend_from_slice(args);
        global(name).call_values(&all)
    };
    call("vm.builtin.kv_state_add_sequence", &[Any::from(0i64)]).unwrap();
    call(
        "vm.builtin.kv_state_begin_forward",
        &[shape(&[0]), shape(&[2])],
    )
    .unwrap();
    let e = call(
        "vm.builtin.attention_kv_cache_attention_with_fused_qkv",
        &[
            Any::from(0i64),
            Any::from(0.25),
            Any::from(f32_tensor(&[2, 8, 16])),
            Any::from(f32_tensor(&[2, 4, 16])),
        ],
    )
    .unwrap_err();
    assert!(
        e.message
            .contains("re-entrant call into the paged KV cache"),
        "{e}"
    );
    // The cache is still usable.
    let pages = call("vm.builtin.attention_kv_cache_get_num_available_pages", &[]).unwrap();
    assert_eq!(pages.view().as_i64(), Some(16));
    slot.lock().unwrap().take();
}

#[test]
fn clear_disaggregation_checkpoints_and_mla_refusals() {
    let log: Log = Arc::default();
    let cache = create(&create_args(&log, |_| {})).unwrap();
    let call = |name: &str, args: &[Any]| {
        let mut all = vec![cache.clone()];
        all.extend_from_slice(args);
        global(name).call_values(&all)
    };
    let int = |name: &str, args: &[Any]| call(name, args).unwrap().view().as_i64().unwrap();
    let empty = || {
        call("vm.builtin.attention_kv_cache_empty", &[])
            .unwrap()
            .view()
            .as_bool()
            .unwrap()
    };
    assert!(empty());
    let total_pages = int("vm.builtin.attention_kv_cache_get_num_available_pages", &[]);
    assert_eq!(total_pages, 256 / 16 + 1);

    // Receiving 20 tokens for a new sequence: its slots, as [runs, begin, length...].
    call("vm.builtin.kv_state_add_sequence", &[Any::from(0i64)]).unwrap();
    let r = call(
        "vm.builtin.kv_cache_disagg_prepare_recv",
        &[Any::from(0i64), Any::from(20i64)],
    )
    .unwrap();
    let dims = tvmrt::object::shape::shape_dims(&r.view().as_object().unwrap())
        .unwrap()
        .to_vec();
    assert_eq!(dims, vec![1, 0, 20], "pages 0 and 1, contiguous");
    let e = call(
        "vm.builtin.kv_cache_disagg_mark_send",
        &[
            Any::from(0i64),
            Any::from(0i64),
            shape(&[1, 0, 20]),
            Any::from(0i64),
        ],
    )
    .unwrap_err();
    assert!(e.message.contains("NVSHMEM"), "{e}");
    assert!(!empty());
    assert_eq!(
        int(
            "vm.builtin.attention_kv_cache_get_total_sequence_length",
            &[]
        ),
        20
    );

    // MLA calls on an MHA cache.
    let e = call(
        "vm.builtin.attention_kv_cache_append_mla_kv",
        &[Any::from(0i64), Any::from(f32_tensor(&[20, 16]))],
    )
    .unwrap_err();
    assert!(e.message.contains("not an MLA layer"), "{e}");
    let e = call(
        "vm.builtin.attention_kv_cache_debug_get_kv_mla",
        &[
            Any::from(0i64),
            Any::from(0i64),
            Any::from(4i64),
            Any::from(f32_tensor(&[2, 4, 16])),
        ],
    )
    .unwrap_err();
    assert!(e.message.contains("Only MLA"), "{e}");

    // Checkpoints: the metadata round-trips, and a changed layout, a repeated or missing group
    // are refused.
    let meta = call(
        "vm.builtin.attention_kv_cache_get_checkpoint_metadata",
        &[Any::from(0i64)],
    )
    .unwrap();
    let meta = meta.view().as_str().unwrap().to_string();
    assert!(
        meta.starts_with("{\"format_version\":1,\"cache_type\":\"relax.vm.PagedAttentionKVCache\"")
    );
    let e = call(
        "vm.builtin.attention_kv_cache_get_checkpoint_metadata",
        &[Any::from(1i64)],
    )
    .unwrap_err();
    assert!(e.message.contains("only supports sequence id 0"), "{e}");
    let tampered = meta.replace("\"page_size\":16", "\"page_size\":32");
    let e = call(
        "vm.builtin.attention_kv_cache_prepare_import",
        &[Any::from(0i64), Any::from(tampered.as_str())],
    )
    .unwrap_err();
    assert!(e.message.contains("field \"page_size\" mismatch"), "{e}");
    assert_eq!(
        int(
            "vm.builtin.attention_kv_cache_get_total_sequence_length",
            &[]
        ),
        20,
        "a refused import changes nothing"
    );
    let e = call(
        "vm.builtin.attention_kv_cache_prepare_import",
        &[Any::from(0i64), Any::from("{not json")],
    )
    .unwrap_err();
    assert!(e.message.contains("Failed to parse"), "{e}");
    let group = Tensor::empty(&[1, 2, 2, 2, 16, 16], dtypes::FLOAT32, cpu()).unwrap();
    call(
        "vm.builtin.attention_kv_cache_prepare_import",
        &[Any::from(0i64), Any::from(meta.as_str())],
    )
    .unwrap();
    let e = call(
        "vm.builtin.attention_kv_cache_get_sequence_length",
        &[Any::from(0i64)],
    )
    .unwrap_err();
    assert!(
        e.message.contains("until checkpoint import is finished"),
        "{e}"
    );
    let import = |g: i64| {
        call(
            "vm.builtin.attention_kv_cache_import_page_group",
            &[Any::from(0i64), Any::from(g), Any::from(group.clone())],
        )
    };
    import(0).unwrap();
    assert!(import(0)
        .unwrap_err()
        .message
        .contains("was already imported"));
    let e = call(
        "vm.builtin.attention_kv_cache_finish_import",
        &[Any::from(0i64)],
    )
    .unwrap_err();
    assert!(e.message.contains("missing group 1"), "{e}");
    let e = call(
        "vm.builtin.kv_state_begin_forward",
        &[shape(&[0]), shape(&[1])],
    )
    .unwrap_err();
    assert!(
        e.message.contains("before checkpoint import is finished"),
        "{e}"
    );
    import(1).unwrap();
    call(
        "vm.builtin.attention_kv_cache_finish_import",
        &[Any::from(0i64)],
    )
    .unwrap();
    assert_eq!(
        int(
            "vm.builtin.attention_kv_cache_get_sequence_length",
            &[Any::from(0i64)]
        ),
        20
    );

    // Clear: everything free again.
    call("vm.builtin.kv_state_clear", &[]).unwrap();
    assert!(empty());
    assert_eq!(
        int("vm.builtin.attention_kv_cache_get_num_available_pages", &[]),
        total_pages
    );
    let e = call(
        "vm.builtin.kv_state_popn",
        &[Any::from(0i64), Any::from(1i64)],
    )
    .unwrap_err();
    assert!(e.message.contains("cannot be found"), "{e}");
}
