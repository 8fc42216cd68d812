//! `tvm.contrib.random.*` against Apache TVM 0.27 (fixtures of tests/fixtures/random, made by
//! its generate.py): seeded calls give TVM's tensors bit for bit, a TVM-compiled model calling
//! `uniform` through `call_dps_packed` gives TVM's output, unseeded draws have the right range
//! and spread, and bad arguments are refused with a message.

mod module_support;

use module_support::{dl_dtype, fixtures, load_vm, read_npy, HostTensor};
use tvmrt::abi::DLDataType;
use tvmrt::function::{registry, Function};
use tvmrt::value::Any;

const F32: (u8, u8) = (2, 32);

fn func(name: &str) -> Function {
    registry::get(&format!("tvm.contrib.random.{name}")).unwrap_or_else(|| panic!("{name}"))
}

fn dt((code, bits): (u8, u8)) -> DLDataType {
    dl_dtype(code, bits, 1)
}

/// Calls `name(scalars..., out)` on a new zeroed tensor and returns it.
fn fill(name: &str, scalars: &[Any], dtype: (u8, u8), shape: &[i64]) -> HostTensor {
    let out = HostTensor::new(dt(dtype), shape, &[]);
    let mut args = scalars.to_vec();
    args.push(out.object_arg());
    func(name).call_values(&args).unwrap();
    out
}

fn error(name: &str, args: &[Any]) -> String {
    let e = func(name).call_values(args).unwrap_err();
    format!("{}: {}", e.kind, e.message)
}

#[test]
fn seeded_calls_give_tvms_tensors_bit_for_bit() {
    let dir = fixtures().join("random");
    let list = std::fs::read_to_string(dir.join("seeded.txt")).unwrap();
    let mut cases = 0;
    for line in list.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [file, name, s1, s2, a, b, dims] = f[..] else {
            panic!("bad line {line}")
        };
        let shape: Vec<i64> = dims.split('x').map(|d| d.parse().unwrap()).collect();
        let scalars = [
            Any::from(s1.parse::<i64>().unwrap()),
            Any::from(s2.parse::<i64>().unwrap()),
            Any::from(a.parse::<f64>().unwrap()),
            Any::from(b.parse::<f64>().unwrap()),
        ];
        let want = read_npy(&dir.join(file));
        assert_eq!(want.shape, shape);
        // Stateless: the same pair gives the same tensor on every call.
        for _ in 0..2 {
            let got = fill(name, &scalars, F32, &shape);
            assert!(
                got.bytes() == want.data,
                "{line}: differs from TVM's tensor"
            );
        }
        cases += 1;
    }
    assert_eq!(cases, 4);
}

#[test]
fn a_tvm_model_calling_uniform_gives_tvms_output() {
    let dir = fixtures().join("random");
    let (_exec, vm) = load_vm("random/model.so", 2);
    let x = read_npy(&dir.join("model.in.npy"));
    let want = read_npy(&dir.join("model.out.npy"));
    let input = HostTensor::new(dt(F32), &x.shape, &x.data);
    let main = vm.get_function("main", false).unwrap().unwrap();
    for _ in 0..2 {
        let y = main.call_values(&[input.object_arg()]).unwrap();
        let t = tvmrt::tensor::Tensor::from_any_view(&y.view(), "main").unwrap();
        assert_eq!(t.to_vec().unwrap(), want.data);
    }
}

#[test]
fn unseeded_uniform_and_normal_have_the_right_spread() {
    let n = 100_000;
    for scalars in [
        vec![Any::from(-3.0f64), Any::from(5i64)],
        vec![
            Any::from(0i64),
            Any::from(0i64),
            Any::from(-3.0f64),
            Any::from(5.0f64),
        ],
    ] {
        let u = fill("uniform", &scalars, F32, &[n]).f32s();
        assert!(u.iter().all(|&v| (-3.0..5.0).contains(&v)));
        let mean = u.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        assert!((mean - 1.0).abs() < 0.05, "mean {mean}");
        let again = fill("uniform", &scalars, F32, &[n]).f32s();
        assert_ne!(u, again, "seed (0, 0) draws from the thread's generator");
    }
    let z = fill("normal", &[Any::from(2.0f64), Any::from(0.5f64)], F32, &[n]).f32s();
    let mean = z.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
    let var = z.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
    assert!((mean - 2.0).abs() < 0.01, "mean {mean}");
    assert!((var.sqrt() - 0.5).abs() < 0.01, "std {}", var.sqrt());
}

#[test]
fn randint_covers_the_range_clamped_to_the_dtype() {
    let n = 20_000;
    let ints = |t: &HostTensor, signed: bool, width: usize| -> Vec<i64> {
        t.bytes()
            .chunks_exact(width)
            .map(|c| {
                let mut b = [0u8; 8];
                b[..width].copy_from_slice(c);
                let v = i64::from_le_bytes(b);
                let shift = 64 - 8 * width as u32;
                if signed {
                    (v << shift) >> shift
                } else {
                    v
                }
            })
            .collect()
    };
    let t = fill(
        "randint",
        &[Any::from(-5i64), Any::from(7i64)],
        (0, 32),
        &[n],
    );
    let v = ints(&t, true, 4);
    assert_eq!(
        (*v.iter().min().unwrap(), *v.iter().max().unwrap()),
        (-5, 6)
    );
    // Wider than int8: clamped to [-128, 127].
    let t = fill(
        "randint",
        &[Any::from(-1000i64), Any::from(1000i64)],
        (0, 8),
        &[n],
    );
    let v = ints(&t, true, 1);
    assert_eq!(
        (*v.iter().min().unwrap(), *v.iter().max().unwrap()),
        (-128, 127)
    );
    let t = fill(
        "randint",
        &[Any::from(-10i64), Any::from(3i64)],
        (1, 16),
        &[n],
    );
    let v = ints(&t, false, 2);
    assert_eq!((*v.iter().min().unwrap(), *v.iter().max().unwrap()), (0, 2));
}

#[test]
fn random_fill_writes_values_from_one_to_ten_by_width() {
    let n = 4096;
    let f = fill("random_fill", &[], F32, &[n]).f32s();
    assert!(f.iter().all(|&v| (1.0..10.0).contains(&v)));
    assert!(f.iter().any(|&v| v > 9.0) && f.iter().any(|&v| v < 2.0));
    let bytes = fill("random_fill", &[], (1, 8), &[n]).bytes();
    assert!(bytes.iter().all(|&b| (1..=9).contains(&b)));
    let halves = fill("random_fill_for_measure", &[], (2, 16), &[n]).bytes();
    for c in halves.chunks_exact(2) {
        let v = half::f16::from_le_bytes([c[0], c[1]]).to_f32();
        assert!((1.0..=10.0).contains(&v), "{v}");
    }
    let d = fill("random_fill", &[], (2, 64), &[n]).bytes();
    for c in d.chunks_exact(8) {
        let v = f64::from_le_bytes(c.try_into().unwrap());
        assert!((1.0..10.0).contains(&v), "{v}");
    }
}

#[test]
fn bad_arguments_are_refused_with_a_message() {
    let out = HostTensor::new(dt(F32), &[4], &[]);
    let f64_out = HostTensor::new(dt((2, 64)), &[4], &[]);
    let i64_out = HostTensor::new(dt((0, 64)), &[4], &[]);
    let bits4 = HostTensor::new(dl_dtype(0, 4, 1), &[4], &[]);
    let (lo, hi) = (Any::from(0.0f64), Any::from(1.0f64));
    let cases: Vec<(&str, Vec<Any>, &str)> = vec![
        (
            "uniform",
            vec![lo.clone(), hi.clone()],
            "expects either 3 or 5 arguments, but got 2",
        ),
        (
            "uniform",
            vec![hi.clone(), lo.clone(), out.object_arg()],
            "high must be bigger",
        ),
        (
            "uniform",
            vec![lo.clone(), hi.clone(), f64_out.object_arg()],
            "must be float32",
        ),
        (
            "uniform",
            vec![lo.clone(), hi.clone(), Any::from(3i64)],
            "a tensor",
        ),
        (
            "uniform",
            vec![Any::from("a"), hi.clone(), out.object_arg()],
            "low",
        ),
        (
            "normal",
            vec![lo.clone(), Any::from(0.0f64), out.object_arg()],
            "must be positive",
        ),
        (
            "normal",
            vec![
                Any::from(1.5f64),
                Any::from(0i64),
                lo.clone(),
                hi.clone(),
                out.object_arg(),
            ],
            "seed",
        ),
        (
            "randint",
            vec![Any::from(3i64), Any::from(3i64), out.object_arg()],
            "bigger",
        ),
        (
            "randint",
            vec![Any::from(0i64), Any::from(3i64), out.object_arg()],
            "integer",
        ),
        (
            "randint",
            vec![Any::from(0i64), Any::from(3i64), i64_out.object_arg()],
            "int64",
        ),
        (
            "randint",
            vec![Any::from(500i64), Any::from(900i64), bits4.object_arg()],
            "int4",
        ),
        ("random_fill", vec![], "expects 1 argument"),
        ("random_fill", vec![Any::none()], "a tensor"),
    ];
    for (name, args, want) in cases {
        let msg = error(name, &args);
        assert!(msg.contains(want), "{name}: {msg:?} lacks {want:?}");
    }
    // An int8 output cannot hold any value of [500, 900).
    let i8_out = HostTensor::new(dt((0, 8)), &[4], &[]);
    let msg = error(
        "randint",
        &[Any::from(500i64), Any::from(900i64), i8_out.object_arg()],
    );
    assert!(msg.contains("holds no int8 value"), "{msg}");
}
