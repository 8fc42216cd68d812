//! Mutation tests over real TVM libraries: hundreds of copies of `tests/fixtures/mlp.so` and
//! `imports_merged.so` (built by TVM 0.27) whose embedded blob (`__tvm_ffi__library_bin`) is
//! corrupted: bit flips, length fields set huge, the size prefix shrunk (truncation), import
//! indexes out of range, self and two-module import cycles, garbage over the payload. A
//! library in the classic layout (`__tvm_dev_mblob`, an ExampleJSON module under `_lib`,
//! compiled here) gets the same treatment.
//!
//! Each mutant is loaded through the C API (`TVMModLoadFromFile`) in a child process (this
//! test executable re-run on the ignored test `mutant_child`), under a 2 GiB address-space
//! limit and a 10 s timeout. Every mutant must either load or be refused with a message, and the
//! child must exit normally: no crash, hang, abort or out-of-memory.
//!
//! `TVMRT_MUTANTS_LIMIT=n` runs only the first `n` mutants (for a quick local run).

mod reliability_support;

use std::ffi::{c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::time::Duration;

use reliability_support::*;

/// Environment variable giving the child the mutant to load.
const MUTANT_ENV: &str = "TVMRT_RELIABILITY_MUTANT";
const RESULT_TAG: &str = "MUTANT-RESULT:";
const CHILD_TIMEOUT: Duration = Duration::from_secs(10);
const CHILD_ADDRESS_SPACE: u64 = 2 << 30;

/// A corrupted copy of a fixture: byte patches at offsets from the start of its blob symbol.
struct Mutant {
    name: String,
    fixture: &'static str,
    patches: Vec<(usize, Vec<u8>)>,
}

/// The `u64` fields of a tvm-ffi blob (offsets from the symbol start, size prefix included),
/// found by walking it, and the payload ranges.
struct BlobMap {
    len: usize,
    /// (offset, what) of every length or index field.
    fields: Vec<(usize, String)>,
    indptr: Vec<usize>,
    children: Vec<usize>,
    payloads: Vec<(usize, usize)>,
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn map_ffi_blob(blob: &[u8]) -> BlobMap {
    let mut fields = vec![(0, "size prefix".to_string())];
    let mut at = 8;
    let vec_fields = |what: &str, at: &mut usize, fields: &mut Vec<(usize, String)>| {
        let n = u64_at(blob, *at) as usize;
        fields.push((*at, format!("{what} count")));
        let mut items = Vec::new();
        for i in 0..n {
            let p = *at + 8 + 8 * i;
            fields.push((p, format!("{what}[{i}]")));
            items.push(p);
        }
        *at += 8 + 8 * n;
        items
    };
    let indptr = vec_fields("indptr", &mut at, &mut fields);
    let children = vec_fields("child_indices", &mut at, &mut fields);
    let mut payloads = Vec::new();
    for m in 0..indptr.len() - 1 {
        let klen = u64_at(blob, at) as usize;
        fields.push((at, format!("module {m} key length")));
        let key = &blob[at + 8..at + 8 + klen];
        at += 8 + klen;
        if key != b"_lib" {
            let plen = u64_at(blob, at) as usize;
            fields.push((at, format!("module {m} payload length")));
            payloads.push((at + 8, plen));
            at += 8 + plen;
        }
    }
    assert_eq!(at, blob.len(), "the fixture blob was walked to its end");
    BlobMap {
        len: blob.len(),
        fields,
        indptr,
        children,
        payloads,
    }
}

fn le(v: u64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

fn blob_of(fixture: &str) -> Vec<u8> {
    let name = fixture.trim_end_matches(".so");
    std::fs::read(fixtures().join(format!("{name}.blob.bin"))).unwrap()
}

fn mutants_of(fixture: &'static str, rng: &mut Rng, flips: usize) -> Vec<Mutant> {
    let blob = blob_of(fixture);
    let map = map_ffi_blob(&blob);
    let mut out = Vec::new();
    let mut push = |name: String, patches: Vec<(usize, Vec<u8>)>| {
        out.push(Mutant {
            name: format!("{fixture}: {name}"),
            fixture,
            patches,
        })
    };
    push("unchanged".into(), vec![]);

    // Every length or index field set to huge, off-by-one and small values.
    let body = (map.len - 8) as u64;
    let values = [
        u64::MAX,
        u64::MAX - 7,
        1 << 63,
        1 << 62,
        1 << 40,
        0xFFFF_FFFF,
        body + 1,
        body,
        0,
        1,
        2,
    ];
    for (at, what) in &map.fields {
        for &v in &values {
            if u64_at(&blob, *at) != v {
                push(format!("{what} = {v:#x}"), vec![(*at, le(v))]);
            }
        }
    }
    // Truncation: the size prefix shrunk (the rest of the symbol is then trailing bytes).
    for _ in 0..20 {
        let n = rng.below(map.len - 8) as u64;
        push(format!("size prefix shrunk to {n}"), vec![(0, le(n))]);
    }
    for n in [0u64, 7, 8, 15, 16, 23, 24] {
        push(
            format!("size prefix shrunk to {n} (header)"),
            vec![(0, le(n))],
        );
    }
    // Import indexes out of range, and a module importing itself.
    let modules = (map.indptr.len() - 1) as u64;
    for &c in &map.children {
        for v in [0, modules, modules + 1, 1000, u64::MAX] {
            push(format!("child index = {v}"), vec![(c, le(v))]);
        }
    }
    // A two-module cycle (0 imports 1, 1 imports 0): the tree needs one more child index, so
    // the first payload gives up its last 8 bytes to keep the symbol's size.
    if modules == 2 && map.payloads.len() == 1 {
        let mut w = Vec::new();
        w.extend(le(3));
        w.extend(le(0));
        w.extend(le(1));
        w.extend(le(2));
        w.extend(le(2));
        w.extend(le(1));
        w.extend(le(0));
        let first_key_at = map.children.last().unwrap() + 8;
        let (p_at, p_len) = map.payloads[0];
        w.extend_from_slice(&blob[first_key_at..p_at - 8]);
        w.extend(le(p_len as u64 - 8));
        w.extend_from_slice(&blob[p_at..p_at + p_len - 8]);
        w.extend_from_slice(&blob[p_at + p_len..]);
        let mut patch = le(u64_at(&blob, 0));
        patch.extend_from_slice(&w);
        assert_eq!(patch.len(), blob.len());
        push("two-module import cycle".into(), vec![(0, patch)]);
    }
    // Bit flips: in the tree and keys (the first bytes and the last), and anywhere.
    let header_end = map.payloads.first().map_or(map.len, |p| p.0);
    for i in 0..flips {
        let n_bits = 1 + rng.below(4);
        let mut patches = Vec::new();
        for _ in 0..n_bits {
            let at = match i % 3 {
                0 => rng.below(header_end),
                1 => map.len - 1 - rng.below(12.min(map.len)),
                _ => rng.below(map.len),
            };
            let cur = patches
                .iter()
                .rev()
                .find(|(p, _): &&(usize, Vec<u8>)| *p == at)
                .map_or(blob[at], |(_, b)| b[0]);
            patches.push((at, vec![cur ^ (1 << rng.below(8))]));
        }
        let desc: Vec<String> = patches.iter().map(|(p, _)| p.to_string()).collect();
        push(format!("bit flips at {}", desc.join(",")), patches);
    }
    // Inside payloads: aligned words set huge (the serialized module's own counts and
    // lengths), and runs of garbage.
    for &(p_at, p_len) in &map.payloads {
        for _ in 0..60 {
            let at = p_at + 8 * rng.below(p_len / 8);
            let v = [u64::MAX, 1 << 62, 0xFFFF_FFFF, 1 << 33][rng.below(4)];
            push(format!("payload word at {at} = {v:#x}"), vec![(at, le(v))]);
        }
        for _ in 0..30 {
            let at = p_at + rng.below(p_len);
            let n = (1 + rng.below(64)).min(p_at + p_len - at);
            let junk: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            push(format!("{n} garbage bytes at {at}"), vec![(at, junk)]);
        }
    }
    out
}

fn write_mutant(
    dir: &Path,
    index: usize,
    m: &Mutant,
    cache: &mut Vec<(&'static str, Vec<u8>, usize)>,
) -> PathBuf {
    if !cache.iter().any(|(f, _, _)| *f == m.fixture) {
        let (file, blob) = library_and_blob(m.fixture);
        let at = find_bytes(&file, &blob).expect("the blob's bytes are in the library");
        assert!(
            find_bytes(&file[at + 1..], &blob).is_none(),
            "the blob occurs once in {}",
            m.fixture
        );
        cache.push((m.fixture, file, at));
    }
    let (_, file, at) = cache.iter().find(|(f, _, _)| *f == m.fixture).unwrap();
    let mut bytes = file.clone();
    for (off, patch) in &m.patches {
        bytes[at + off..at + off + patch.len()].copy_from_slice(patch);
    }
    let path = dir.join(format!("mutant_{index:04}.so"));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A library in the classic import-tree layout (`__tvm_dev_mblob`, TVM <= 0.20), built here
/// since no real classic library is among the fixtures: `_lib` importing an ExampleJSON module.
const CLASSIC_LIB: &str = "classic_examplejson.so";

/// The classic blob (size prefix included) and the offsets of its `u64` fields.
fn classic_blob() -> (Vec<u8>, Vec<(usize, String)>) {
    let text = "subgraph_0\n  input 0 4\n  input 1 4\n  add 2 inputs: 0 1 shape: 4\n  \
                relu 3 inputs: 2 shape: 4\n";
    let mut b: Vec<u8> = Vec::new();
    let mut fields = Vec::new();
    let mut u64_field = |b: &mut Vec<u8>, v: u64, what: &str| {
        fields.push((b.len(), what.to_string()));
        b.extend(v.to_le_bytes());
    };
    u64_field(&mut b, 0, "size prefix");
    u64_field(&mut b, 3, "entry count");
    for (key, what) in [("_lib", "entry 0"), ("examplejson", "entry 1")] {
        u64_field(&mut b, key.len() as u64, &format!("{what} key length"));
        b.extend(key.as_bytes());
    }
    u64_field(&mut b, text.len() as u64, "ExampleJSON text length");
    b.extend(text.as_bytes());
    u64_field(&mut b, 12, "entry 2 key length");
    b.extend(b"_import_tree");
    u64_field(&mut b, 3, "row_ptr count");
    for (i, v) in [0u64, 1, 1].into_iter().enumerate() {
        u64_field(&mut b, v, &format!("row_ptr[{i}]"));
    }
    u64_field(&mut b, 1, "child_indices count");
    u64_field(&mut b, 1, "child_indices[0]");
    let body = (b.len() - 8) as u64;
    b[..8].copy_from_slice(&body.to_le_bytes());
    (b, fields)
}

/// The bytes of a library and of the blob inside it.
fn library_and_blob(name: &str) -> (Vec<u8>, Vec<u8>) {
    if name != CLASSIC_LIB {
        return (std::fs::read(fixtures().join(name)).unwrap(), blob_of(name));
    }
    (classic_library().to_vec(), classic_blob().0)
}

/// The classic library's bytes, compiled once per process: the tests running in parallel all
/// wait for that one build (two builds into one path let a test read the file the other's
/// compiler was still writing).
fn classic_library() -> &'static [u8] {
    static LIBRARY: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    LIBRARY.get_or_init(|| {
        let (blob, _) = classic_blob();
        let dir = scratch("classic_lib");
        let src = dir.join("classic_examplejson.c");
        let mut c = String::from(
            "/* A TVM <= 0.20 style library: only the blob and the module context. */\n\
             void* __tvm_module_ctx = 0;\n\
             __attribute__((visibility(\"default\"))) const unsigned char __tvm_dev_mblob[] = {",
        );
        for (i, byte) in blob.iter().enumerate() {
            if i % 16 == 0 {
                c.push_str("\n  ");
            }
            c.push_str(&format!("{byte},"));
        }
        c.push_str("\n};\n");
        std::fs::write(&src, c).unwrap();
        let so = dir.join(CLASSIC_LIB);
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
        let out = std::process::Command::new(cc)
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(&so)
            .arg(&src)
            .output()
            .expect("running the C compiler");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read(&so).unwrap()
    })
}

fn classic_mutants(rng: &mut Rng, flips: usize) -> Vec<Mutant> {
    let (blob, fields) = classic_blob();
    let mut out = Vec::new();
    let mut push = |name: String, patches: Vec<(usize, Vec<u8>)>| {
        out.push(Mutant {
            name: format!("{CLASSIC_LIB}: {name}"),
            fixture: CLASSIC_LIB,
            patches,
        })
    };
    push("unchanged".into(), vec![]);
    let body = (blob.len() - 8) as u64;
    for (at, what) in &fields {
        for v in [u64::MAX, 1 << 62, 0xFFFF_FFFF, body + 1, body, 0, 1, 2, 3] {
            if u64_at(&blob, *at) != v {
                push(format!("{what} = {v:#x}"), vec![(*at, le(v))]);
            }
        }
    }
    for _ in 0..10 {
        let n = rng.below(blob.len() - 8) as u64;
        push(format!("size prefix shrunk to {n}"), vec![(0, le(n))]);
    }
    for i in 0..flips {
        let n_bits = 1 + rng.below(3);
        let mut patches: Vec<(usize, Vec<u8>)> = Vec::new();
        for _ in 0..n_bits {
            let at = rng.below(blob.len());
            let cur = patches
                .iter()
                .rev()
                .find(|(p, _)| *p == at)
                .map_or(blob[at], |(_, b)| b[0]);
            patches.push((at, vec![cur ^ (1 << rng.below(8))]));
        }
        push(format!("bit flips #{i}"), patches);
    }
    out
}

#[test]
fn mutated_blobs_load_or_are_refused() {
    let mut rng = Rng::new(0x7E57_B10B);
    let mut mutants = mutants_of("mlp.so", &mut rng, 240);
    mutants.extend(mutants_of("imports_merged.so", &mut rng, 40));
    mutants.extend(classic_mutants(&mut rng, 80));
    let limit = std::env::var("TVMRT_MUTANTS_LIMIT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(usize::MAX);
    mutants.truncate(limit);
    assert!(
        limit < 300 || mutants.len() >= 300,
        "only {} mutants",
        mutants.len()
    );

    let dir = scratch("mutants");
    let mut cache = Vec::new();
    let paths: Vec<PathBuf> = mutants
        .iter()
        .enumerate()
        .map(|(i, m)| write_mutant(&dir, i, m, &mut cache))
        .collect();

    let results = load_in_children(&paths);
    let (mut loaded, mut refused, mut ran) = (0usize, 0usize, 0usize);
    let mut failures = Vec::new();
    let mut messages = std::collections::BTreeMap::<String, usize>::new();
    let mut slowest = Duration::ZERO;
    for (m, r) in mutants.iter().zip(results) {
        slowest = slowest.max(r.elapsed);
        let line = result_line(&r);
        match (r.timed_out, r.code, line) {
            (false, Some(0), Some(l)) if l.starts_with("loaded") => {
                loaded += 1;
                if l.contains("(ran)") {
                    ran += 1;
                }
            }
            (false, Some(0), Some(msg)) if msg.starts_with("refused: ") && msg.len() > 9 => {
                refused += 1;
                // Group messages by their first words, for the summary.
                let text = &msg[9..];
                let text = text.find(".so`: ").map_or(text, |i| &text[i + 6..]);
                // Numbers vary from mutant to mutant; group by the words around them.
                let mut key = String::new();
                for ch in text.chars() {
                    if ch.is_ascii_digit() {
                        if !key.ends_with('#') {
                            key.push('#');
                        }
                    } else {
                        key.push(ch);
                    }
                }
                let key: String = key.chars().take(75).collect();
                *messages.entry(key).or_default() += 1;
            }
            _ => failures.push(failure(&m.name, &r)),
        }
    }
    println!(
        "{} mutants: {loaded} loaded ({ran} of them ran the model), {refused} refused, {} \
         failed; slowest child {:?}",
        mutants.len(),
        failures.len(),
        slowest
    );
    let mut by_count: Vec<_> = messages.into_iter().collect();
    by_count.sort_by_key(|e| std::cmp::Reverse(e.1));
    for (msg, n) in by_count.iter().take(30) {
        println!("  {n:4} x refused: {msg}");
    }
    assert!(
        failures.is_empty(),
        "{} of {} mutants crashed, hung or failed:\n{}",
        failures.len(),
        mutants.len(),
        failures.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Loads each library in a child process (`mutant_child`), two at a time (the machine has 2
/// cores), and returns their outcomes in order.
fn load_in_children(paths: &[PathBuf]) -> Vec<ChildOutcome> {
    let mut results: Vec<Option<ChildOutcome>> = (0..paths.len()).map(|_| None).collect();
    let mut running: Vec<(usize, Child)> = Vec::new();
    let mut next = 0;
    while next < paths.len() || !running.is_empty() {
        while running.len() < 2 && next < paths.len() {
            let env = [(MUTANT_ENV, paths[next].display().to_string())];
            running.push((next, spawn_test("mutant_child", &env, CHILD_TIMEOUT)));
            next += 1;
        }
        if let Some(pos) = running.iter_mut().position(|(_, c)| c.done()) {
            let (i, c) = running.swap_remove(pos);
            results[i] = Some(c.wait());
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    results.into_iter().map(Option::unwrap).collect()
}

/// What the child reported (`loaded ...` or `refused: ...`), if it got that far.
fn result_line(r: &ChildOutcome) -> Option<&str> {
    r.stdout
        .lines()
        // libtest prints "test mutant_child ... " before the child's own output.
        .find_map(|l| l.find(RESULT_TAG).map(|i| &l[i + RESULT_TAG.len()..]))
        .map(str::trim)
}

/// How a child that did not load or refuse its library ended, for the failure list.
fn failure(name: &str, r: &ChildOutcome) -> String {
    let tail = r
        .stderr
        .lines()
        .rev()
        .take(6)
        .collect::<Vec<_>>()
        .join(" | ");
    format!(
        "{name}: timed_out={} exit={:?} signal={:?} result={:?}\n  stderr: {tail}",
        r.timed_out,
        r.code,
        r.signal,
        result_line(r)
    )
}

/// Every fixture library (the TVM-built ones and the classic one built here).
fn fixture_libraries() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".so"))
        .map(|n| &*Box::leak(n.into_boxed_str()))
        .collect();
    names.sort();
    names.push(CLASSIC_LIB);
    names
}

/// A damaged copy of a whole library file, and whether the damage must be refused.
struct FileMutant {
    name: String,
    bytes: Vec<u8>,
    must_refuse: bool,
}

/// Truncated copies of `file` at several sizes, and copies with bytes cut from the middle of
/// its blob and of its code (everything after shifted). Both shrink the file under its
/// segments or section table, so both must be refused. The same cuts with zeros appended
/// (the file keeps its size, the content after the cut is shifted) must not crash.
fn file_mutants(name: &str, file: &[u8], blob_at: Option<usize>) -> Vec<FileMutant> {
    let mut out = Vec::new();
    let len = file.len();
    for size in [0, 4, 63, 64, 1000, 4096, 20000, len / 2, len - 64, len - 1] {
        if size < len {
            out.push(FileMutant {
                name: format!("{name} truncated to {size} bytes"),
                bytes: file[..size].to_vec(),
                must_refuse: true,
            });
        }
    }
    let mut cut_points = vec![("code", len / 10)];
    if let Some(at) = blob_at {
        cut_points.push(("blob", at + 40));
    }
    for (what, at) in cut_points {
        for k in [1, 8, 16, 64, 4096] {
            let mut bytes = [&file[..at], &file[at + k..]].concat();
            out.push(FileMutant {
                name: format!("{name} with {k} bytes cut from its {what} at {at}"),
                bytes: bytes.clone(),
                must_refuse: true,
            });
            bytes.resize(len, 0);
            out.push(FileMutant {
                name: format!("{name} with {k} bytes cut from its {what} at {at}, zero-padded"),
                bytes,
                must_refuse: false,
            });
        }
    }
    out
}

#[test]
fn truncated_and_cut_libraries_are_refused() {
    let dir = scratch("file_mutants");
    let mut mutants = Vec::new();
    for name in fixture_libraries() {
        let blob_file = fixtures().join(name.replace(".so", ".blob.bin"));
        let (file, blob_at) = if name == CLASSIC_LIB || blob_file.exists() {
            let (file, blob) = library_and_blob(name);
            let at = find_bytes(&file, &blob);
            (file, at)
        } else {
            (std::fs::read(fixtures().join(name)).unwrap(), None)
        };
        mutants.extend(file_mutants(name, &file, blob_at));
    }
    let paths: Vec<PathBuf> = mutants
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let path = dir.join(format!("cut_{i:04}.so"));
            std::fs::write(&path, &m.bytes).unwrap();
            path
        })
        .collect();
    let results = load_in_children(&paths);
    let (mut refused, mut loaded, mut failures) = (0, 0, Vec::new());
    for (m, r) in mutants.iter().zip(&results) {
        let line = result_line(r);
        match (r.timed_out, r.code, line) {
            (false, Some(0), Some(msg)) if msg.starts_with("refused: ") && msg.len() > 9 => {
                refused += 1
            }
            (false, Some(0), Some(l)) if l.starts_with("loaded") && !m.must_refuse => loaded += 1,
            _ => failures.push(failure(&m.name, r)),
        }
    }
    println!(
        "{} damaged library files: {refused} refused, {loaded} loaded, {} failed",
        mutants.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} damaged files crashed, hung, or loaded when they must be refused:\n{}",
        failures.len(),
        mutants.len(),
        failures.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The child side: loads the mutant named by the environment through the C API and reports.
#[test]
#[ignore = "run by mutated_blobs_load_or_are_refused in a child process"]
fn mutant_child() {
    use tvmrt::capi::classic_error::TVMGetLastError;
    use tvmrt::capi::classic_func::TVMFuncFree;
    use tvmrt::capi::module::{TVMModFree, TVMModGetFunction, TVMModLoadFromFile};

    let Ok(path) = std::env::var(MUTANT_ENV) else {
        return; // Run directly with --ignored: nothing to do.
    };
    limit_address_space(CHILD_ADDRESS_SPACE);
    let c_path = CString::new(path).unwrap();
    let format = CString::new("so").unwrap();
    let mut module: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid C strings and out pointer.
    let rc = unsafe { TVMModLoadFromFile(c_path.as_ptr(), format.as_ptr(), &mut module) };
    if rc != 0 {
        // SAFETY: a NUL-terminated string valid until the next call on this thread.
        let msg = unsafe { CStr::from_ptr(TVMGetLastError()) }
            .to_string_lossy()
            .into_owned();
        println!("{RESULT_TAG} refused: {}", msg.replace('\n', " "));
        return;
    }
    for name in [
        "main",
        "vm_load_executable",
        "double_it",
        "no_such_function",
    ] {
        let c_name = CString::new(name).unwrap();
        let mut f: *mut c_void = std::ptr::null_mut();
        // SAFETY: a live module handle, valid strings and out pointer.
        let rc = unsafe { TVMModGetFunction(module, c_name.as_ptr(), 1, &mut f) };
        if rc == 0 && !f.is_null() {
            // SAFETY: a function handle we own.
            assert_eq!(unsafe { TVMFuncFree(f) }, 0);
        }
    }
    // A Relax model that loads is also run once: its (possibly corrupted) constants and
    // bytecode drive allocations and kernel calls.
    // SAFETY: the module handle we own stays live while borrowed.
    let root = unsafe { tvmrt::module::Module::from_handle_borrowed(module, "module") }.unwrap();
    let ran = match run_model(&root) {
        Ok(()) => "ran".to_string(),
        Err(e) => format!("run refused: {}", e.message.replace('\n', " ")),
    };
    drop(root);
    // SAFETY: the module handle we own.
    assert_eq!(unsafe { TVMModFree(module) }, 0);
    println!("{RESULT_TAG} loaded ({ran})");
}

/// Runs `main` of a Relax VM executable on a float32 input of shape (1, 16) (the mlp
/// fixture's), if the module is one.
fn run_model(root: &tvmrt::module::Module) -> tvmrt::Result<()> {
    use tvmrt::value::{Any, AnyView};
    let Some(load) = root.get_function("vm_load_executable", false)? else {
        return Ok(());
    };
    let vm = load.call(&[])?;
    let vm = tvmrt::module::Module::from_view(&vm.view(), "vm")?;
    let init = vm
        .get_function("vm_initialization", false)?
        .ok_or_else(|| tvmrt::Error::value("no vm_initialization"))?;
    init.call(&[
        AnyView::from(1i64),
        AnyView::from(0i64),
        AnyView::from(2i64),
    ])?;
    let main = vm
        .get_function("main", false)?
        .ok_or_else(|| tvmrt::Error::value("no main"))?;
    let x = tvmrt::tensor::Tensor::empty(
        &[1, 16],
        tvmrt::dtype::dtypes::FLOAT32,
        tvmrt::abi::DLDevice {
            device_type: tvmrt::abi::DLDeviceType::CPU,
            device_id: 0,
        },
    )?;
    let x = Any::from_object(x.into_object());
    main.call(&[x.view()])?;
    Ok(())
}
