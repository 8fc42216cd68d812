//! The `examplejson` module kind: loading from text, a file and bytes, calling subgraphs on
//! DLTensors and tensor objects, save/load round trips, every error, and concurrent calls.

mod examplejson_common;

use examplejson_common::{examples, guide_case, run_guide, Host, GUIDE_TEXT};
use tvmrt::contrib::examplejson::ExampleJsonModule;
use tvmrt::function::registry;
use tvmrt::module::{load_from_file, Module};
use tvmrt::value::Any;
use tvmrt::Function;

fn create(text: &str) -> tvmrt::Result<Module> {
    let f = registry::get_required("module.examplejson_module_create")?;
    let out = f.call_values(&[Any::from(text)])?;
    Module::from_view(&out.view(), "result")
}

fn subgraph(m: &Module, name: &str) -> Function {
    m.get_function(name, false)
        .unwrap()
        .unwrap_or_else(|| panic!("no function {name}"))
}

#[test]
fn guide_subgraph_from_the_graph_file() {
    let path = examples().join("subgraph_0.examplejson");
    let path = path.to_str().unwrap();
    // By format name, as TVMModLoadFromFile(path, "examplejson"), and by extension.
    for format in ["examplejson", ""] {
        let m = load_from_file(path, format).unwrap();
        assert_eq!(m.kind(), "examplejson");
        let (got, want) = run_guide(&subgraph(&m, "subgraph_0"), 1);
        assert_eq!(got, want);
        assert!(m.get_function("subgraph_1", true).unwrap().is_none());
        assert!(m.implements_function("subgraph_0", false));
        assert_eq!(
            m.downcast::<ExampleJsonModule>().unwrap().text(),
            GUIDE_TEXT
        );
    }
}

#[test]
fn guide_subgraph_from_text_and_real_values() {
    let m = create(GUIDE_TEXT).unwrap();
    let (got, want) = run_guide(&subgraph(&m, "subgraph_0"), 2);
    assert_eq!(got, want);
    // A spot check written out: (1 + 2 - 3.5) * -2 = 1.
    let mut ins: Vec<Host<f32>> = [1.0f32, 2.0, 3.5, -2.0]
        .iter()
        .map(|&v| Host::new(&[10, 10], vec![v; 100]))
        .collect();
    let mut out = Host::<f32>::zeros(&[10, 10]);
    let mut args: Vec<Any> = ins.iter_mut().map(Host::arg).collect();
    args.push(out.arg());
    let ret = subgraph(&m, "subgraph_0").call_values(&args).unwrap();
    assert!(out.values().iter().all(|&v| v == 1.0));
    // Like the guide's module, the call returns the result as a tensor (ffi.Tensor, index 70)
    // of the output's shape and dtype holding its values, in memory of its own.
    assert_eq!(ret.view().type_index(), tvmrt::abi::type_index::TENSOR);
    let dl = ret.view().as_dltensor().unwrap();
    // SAFETY: a live tensor object of 100 float32 values (checked just below).
    let (shape, values) = unsafe {
        assert_eq!((*dl).dtype, tvmrt::dtype::dtypes::FLOAT32);
        (
            std::slice::from_raw_parts((*dl).shape, (*dl).ndim as usize).to_vec(),
            std::slice::from_raw_parts((*dl).data.cast::<f32>(), 100).to_vec(),
        )
    };
    assert_eq!(shape, [10, 10]);
    assert_eq!(values, out.values());
    assert_ne!(
        unsafe { (*dl).data.cast::<f32>() }.cast_const(),
        out.values().as_ptr()
    );
}

/// The result's data pointer and values (float32).
fn result_values(ret: &Any, n: usize) -> (*const f32, Vec<f32>) {
    let dl = ret.view().as_dltensor().unwrap();
    // SAFETY: a live float32 tensor of `n` elements (the subgraph's declared output).
    unsafe {
        assert_eq!((*dl).dtype, tvmrt::dtype::dtypes::FLOAT32);
        let data = (*dl).data.cast::<f32>().cast_const();
        (data, std::slice::from_raw_parts(data, n).to_vec())
    }
}

#[test]
fn a_result_is_written_again_only_once_nobody_holds_it() {
    let m = create("sg\ninput 0 4\ninput 1 4\nadd 2 inputs: 0 1 shape: 4\n").unwrap();
    let f = subgraph(&m, "sg");
    let call = |a: f32| {
        let mut ins = [
            Host::new(&[4], vec![a; 4]),
            Host::new(&[4], vec![1.0f32; 4]),
        ];
        let mut out = Host::<f32>::zeros(&[4]);
        let mut args: Vec<Any> = ins.iter_mut().map(Host::arg).collect();
        args.push(out.arg());
        let ret = f.call_values(&args).unwrap();
        assert_eq!(out.values(), &[a + 1.0; 4]);
        ret
    };
    // A result still held is never written: the next call makes a new one.
    let first = call(1.0);
    let second = call(2.0);
    let (first_data, first_values) = result_values(&first, 4);
    let (second_data, second_values) = result_values(&second, 4);
    assert_ne!(first_data, second_data);
    assert_eq!(first_values, [2.0; 4]);
    assert_eq!(second_values, [3.0; 4]);
    // The function keeps its last result: one reference more than the caller's (and the one
    // counted here) for the second, none for the first.
    let references = |ret: &Any| ret.view().as_object().unwrap().strong_count();
    assert_eq!((references(&first), references(&second)), (2, 3));
    // Once dropped, the function's last result is written again in place.
    drop(first);
    drop(second);
    let third = call(5.0);
    assert_eq!(result_values(&third, 4), (second_data, vec![6.0; 4]));
    // Held again (a clone counts): the next call leaves it as it was.
    let held = third.clone();
    drop(third);
    let fourth = call(7.0);
    assert_eq!(result_values(&held, 4), (second_data, vec![6.0; 4]));
    assert_eq!(result_values(&fourth, 4).1, [8.0; 4]);
    assert_ne!(result_values(&fourth, 4).0, second_data);
}

#[test]
fn tensor_objects_are_accepted() {
    use tvmrt::abi::{DLDevice, DLDeviceType};
    use tvmrt::tensor::Tensor;
    let m = create("sg\ninput 0 3\ninput 1 3\nmaximum 2 inputs: 0 1 shape: 3\n").unwrap();
    let dev = DLDevice {
        device_type: DLDeviceType::CPU,
        device_id: 0,
    };
    let f32t = tvmrt::dtype::dtypes::FLOAT32;
    let ts: Vec<Tensor> = (0..3)
        .map(|_| Tensor::empty(&[3], f32t, dev).unwrap())
        .collect();
    let fill = |t: &Tensor, v: [f32; 3]| {
        let any = Any::from_object(t.object().clone());
        let dl = any.view().as_dltensor().unwrap();
        // SAFETY: a fresh compact float32 tensor of 3 elements.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), (*dl).data.cast::<f32>(), 3) };
    };
    fill(&ts[0], [1.0, -5.0, 3.0]);
    fill(&ts[1], [0.5, 2.0, 7.0]);
    let args: Vec<Any> = ts
        .iter()
        .map(|t| Any::from_object(t.object().clone()))
        .collect();
    subgraph(&m, "sg").call_values(&args).unwrap();
    let dl = args[2].view().as_dltensor().unwrap();
    // SAFETY: the output tensor holds 3 float32 values.
    let got = unsafe { std::slice::from_raw_parts((*dl).data.cast::<f32>(), 3) };
    assert_eq!(got, &[1.0, 2.0, 7.0]);
}

#[test]
fn several_subgraphs_in_one_module_with_all_dtypes_and_broadcasting() {
    let text = "\
f64_chain
  input 0 2 3
  input 1 3
  div 2 inputs: 0 1 shape: 2 3
  relu 3 inputs: 2 shape: 2 3
i32_minmax
  input 0 4
  input 1 4
  minimum 2 inputs: 0 1 shape: 4
  sub 3 inputs: 2 1 shape: 4
i64_mul
  input 0 2 2
  input 1 1
  mul 2 inputs: 0 1 shape: 2 2
  add 3 inputs: 2 0 shape: 2 2
";
    let m = create(text).unwrap();
    let names = m
        .downcast::<ExampleJsonModule>()
        .unwrap()
        .graph()
        .subgraph_names();
    assert_eq!(names, vec!["f64_chain", "i32_minmax", "i64_mul"]);

    let mut a = Host::<f64>::new(&[2, 3], vec![1.0, -4.0, 9.0, 2.0, 8.0, -3.0]);
    let mut b = Host::<f64>::new(&[3], vec![2.0, 4.0, 3.0]);
    let mut o = Host::<f64>::zeros(&[2, 3]);
    subgraph(&m, "f64_chain")
        .call_values(&[a.arg(), b.arg(), o.arg()])
        .unwrap();
    assert_eq!(o.values(), &[0.5, 0.0, 3.0, 1.0, 2.0, 0.0]);

    let mut a = Host::<i32>::new(&[4], vec![5, -7, 3, i32::MIN]);
    let mut b = Host::<i32>::new(&[4], vec![2, 1, 3, 1]);
    let mut o = Host::<i32>::zeros(&[4]);
    subgraph(&m, "i32_minmax")
        .call_values(&[a.arg(), b.arg(), o.arg()])
        .unwrap();
    // min(a, b) - b; i32::MIN - 1 wraps.
    assert_eq!(o.values(), &[0, -8, 0, i32::MAX]);

    let mut a = Host::<i64>::new(&[2, 2], vec![1, 2, 3, 1 << 40]);
    let mut b = Host::<i64>::new(&[1], vec![3]);
    let mut o = Host::<i64>::zeros(&[2, 2]);
    subgraph(&m, "i64_mul")
        .call_values(&[a.arg(), b.arg(), o.arg()])
        .unwrap();
    assert_eq!(o.values(), &[4, 8, 12, 4 << 40]);
}

#[test]
fn save_and_load_round_trip_through_every_loader() {
    let m = create(GUIDE_TEXT).unwrap();
    let saved = registry::get_required("ffi.ModuleSaveToBytes")
        .unwrap()
        .call_values(&[Any::from(m.clone())])
        .unwrap();
    let bytes = saved.view().as_byte_slice().unwrap().to_vec();
    assert_eq!(bytes, m.save_to_bytes().unwrap());
    assert_eq!(&bytes[..8], &(GUIDE_TEXT.len() as u64).to_le_bytes());
    assert_eq!(&bytes[8..], GUIDE_TEXT.as_bytes());

    // tvm-ffi loader: exactly the saved bytes.
    let back = registry::get_required("ffi.Module.load_from_bytes.examplejson")
        .unwrap()
        .call_values(&[Any::bytes(&bytes)])
        .unwrap();
    let back = Module::from_view(&back.view(), "back").unwrap();
    assert_eq!(back.kind(), "examplejson");
    assert_eq!(back.save_to_bytes().unwrap(), bytes);
    let (got, want) = run_guide(&subgraph(&back, "subgraph_0"), 3);
    assert_eq!(got, want);

    // Classic loader: the payload followed by other modules' bytes; reports what it read.
    let mut stream = bytes.clone();
    stream.extend_from_slice(b"\x05\0\0\0\0\0\0\0other");
    let mut consumed: i64 = -1;
    let out = registry::get_required("runtime.module.loadbinary_examplejson")
        .unwrap()
        .call_values(&[
            Any::bytes(&stream),
            Any::opaque_ptr((&mut consumed as *mut i64).cast()),
        ])
        .unwrap();
    assert_eq!(consumed, bytes.len() as i64);
    let classic = Module::from_view(&out.view(), "classic").unwrap();
    let (got, want) = run_guide(&subgraph(&classic, "subgraph_0"), 4);
    assert_eq!(got, want);
}

fn err_of(r: tvmrt::Result<Module>) -> tvmrt::Error {
    match r {
        Ok(m) => panic!("expected an error, got {m:?}"),
        Err(e) => e,
    }
}

#[test]
fn parse_errors_surface_through_the_loaders() {
    let e = err_of(create(
        "subgraph_0\ninput 0 2\nconv2d 1 inputs: 0 shape: 2\n",
    ));
    assert_eq!(e.kind, "ValueError");
    assert_eq!(
        e.message,
        "ExampleJSON line 3: unknown op 'conv2d' (known ops: add, sub, mul, div, maximum, \
         minimum, relu)"
    );
    let e = err_of(create("s\ninput 0 2\nadd 1 inputs: 0 7 shape: 2\n"));
    assert!(e.message.contains("refers to node 7"), "{e}");
    let e = err_of(create(
        "s\ninput 1 2\ninput 1 2\nrelu 2 inputs: 1 shape: 2\n",
    ));
    assert_eq!(
        e.message,
        "ExampleJSON line 3: duplicate node id 1 in subgraph 's'"
    );
    let e = err_of(create(
        "s\ninput 3 2\ninput 2 2\nrelu 4 inputs: 2 shape: 2\n",
    ));
    assert!(e.message.contains("out of order"), "{e}");
    let e = err_of(create("s\ninput 0 100000 100000\n"));
    assert!(e.message.contains("more than 2^31 elements"), "{e}");
    let e = err_of(create("s\ninput 0 2\nadd 1 inputs 0 0 shape: 2\n"));
    assert_eq!(
        e.message,
        "ExampleJSON line 3: expected 'inputs:' after 'add 1'"
    );

    // Loader-specific failures.
    let dir = std::env::temp_dir().join(format!("examplejson-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.examplejson");
    std::fs::write(&bad, "s\ninput 0 2\nfoo 1 inputs: 0 shape: 2\n").unwrap();
    let e = err_of(load_from_file(bad.to_str().unwrap(), "examplejson"));
    assert!(e.message.contains("bad.examplejson"), "{e}");
    assert!(e.message.contains("line 3: unknown op 'foo'"), "{e}");
    let e = err_of(load_from_file("/nonexistent/x.examplejson", "examplejson"));
    assert!(e.message.contains("cannot read ExampleJSON file"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();

    let load = registry::get_required("ffi.Module.load_from_bytes.examplejson").unwrap();
    let e = load
        .call_values(&[Any::bytes(&[0xff, 0xfe, 0x00])])
        .unwrap_err();
    assert!(
        e.message.contains("neither a counted string nor UTF-8"),
        "{e}"
    );
    let classic = registry::get_required("runtime.module.loadbinary_examplejson").unwrap();
    let mut huge = u64::MAX.to_le_bytes().to_vec();
    huge.extend_from_slice(b"abc");
    let e = classic.call_values(&[Any::bytes(&huge)]).unwrap_err();
    assert!(e.message.contains("only 3 bytes follow"), "{e}");
    let e = registry::get_required("module.examplejson_module_create")
        .unwrap()
        .call_values(&[Any::from(5i64)])
        .unwrap_err();
    assert_eq!(e.kind, "TypeError");
}

#[test]
fn call_errors_name_what_was_wrong() {
    let m = create(GUIDE_TEXT).unwrap();
    let f = subgraph(&m, "subgraph_0");
    let (mut ins, _) = guide_case(5);
    let mut out = Host::<f32>::zeros(&[10, 10]);

    // Wrong argument count.
    let few: Vec<Any> = ins.iter_mut().map(Host::arg).collect();
    let e = f.call_values(&few).unwrap_err();
    assert_eq!(
        e.message,
        "ExampleJSON subgraph 'subgraph_0' takes 5 arguments (4 inputs, then the output), got 4"
    );

    // A non-tensor argument.
    let mut args: Vec<Any> = ins.iter_mut().map(Host::arg).collect();
    args.push(Any::from(3i64));
    let e = f.call_values(&args).unwrap_err();
    assert_eq!(e.kind, "TypeError");
    assert!(e.message.contains("argument 4 must be a tensor"), "{e}");

    // Wrong shape.
    let mut small = Host::<f32>::zeros(&[10, 9]);
    let mut args: Vec<Any> = ins.iter_mut().map(Host::arg).collect();
    args.push(small.arg());
    let e = f.call_values(&args).unwrap_err();
    assert!(
        e.message
            .contains("argument 4 has shape [10, 9], expected shape [10, 10]"),
        "{e}"
    );

    // Wrong dtype.
    let mut wrong = Host::<i32>::zeros(&[10, 10]);
    let mut args: Vec<Any> = ins.iter_mut().map(Host::arg).collect();
    args.push(wrong.arg());
    let e = f.call_values(&args).unwrap_err();
    assert_eq!(e.kind, "TypeError");
    assert!(e.message.contains("argument 4 has dtype int32"), "{e}");

    // Wrong device.
    out.dl_mut().device.device_type = tvmrt::abi::DLDeviceType::CUDA;
    let mut args: Vec<Any> = ins.iter_mut().map(Host::arg).collect();
    args.push(out.arg());
    let e = f.call_values(&args).unwrap_err();
    assert!(e.message.contains("argument 4 is on device cuda"), "{e}");
    out.dl_mut().device.device_type = tvmrt::abi::DLDeviceType::CPU;

    // Unsupported dtype for every argument.
    let mut u8s: Vec<Host<f32>> = (0..5).map(|_| Host::zeros(&[10, 10])).collect();
    for h in &mut u8s {
        h.dl_mut().dtype = tvmrt::dtype::dtype(1, 8, 1);
    }
    let args: Vec<Any> = u8s.iter_mut().map(Host::arg).collect();
    let e = f.call_values(&args).unwrap_err();
    assert!(
        e.message.contains("supported are float32, float64, int32"),
        "{e}"
    );

    // Nothing was written to the output by the failed calls.
    assert!(out.values().iter().all(|&v| v == 0.0));
}

#[test]
fn one_function_from_four_threads() {
    let m = create(GUIDE_TEXT).unwrap();
    let f = subgraph(&m, "subgraph_0");
    drop(m);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let f = f.clone();
            s.spawn(move || {
                for round in 0..200 {
                    let (got, want) = run_guide(&f, 100 + t * 1000 + round);
                    assert_eq!(got, want, "thread {t} round {round}");
                }
            });
        }
    });
}

#[test]
fn function_keeps_its_module_alive() {
    let m = create(GUIDE_TEXT).unwrap();
    let f = subgraph(&m, "subgraph_0");
    assert_eq!(m.object().strong_count(), 2);
    drop(m);
    let (got, want) = run_guide(&f, 9);
    assert_eq!(got, want);
}
