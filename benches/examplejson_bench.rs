//! ExampleJSON throughput: one subgraph of four elementwise nodes on 16M-element float32 tensors
//! (`cargo bench --bench examplejson_bench`), against two references measured in the same run:
//!
//! - bandwidth: one loop that reads the same four inputs and writes the same output
//!   (`out = ((a + b) - c) * d`, hand-fused): the bytes the subgraph must move, at the speed the
//!   machine moves them; a plain `copy_from_slice` of one tensor is printed alongside;
//! - the guide's design (TVM BYOC guide, `ExampleJsonModule::GetFunction` / `Run`): copy every
//!   input into a per-node buffer, run each node over whole tensors into its own buffer, copy the
//!   last one out.
//!
//! GB/s counts the bytes a call must move: four inputs read and one output written (5 x 64 MiB),
//! the same figure for all three. Environment: `EXAMPLEJSON_BENCH_ELEMENTS` (default 16M),
//! `EXAMPLEJSON_BENCH_REPEATS` (default 7), `EXAMPLEJSON_BENCH_CLOCK` (`wall`, the default, or
//! `cpu`: thread CPU time, for a machine busy with other work); the implementations
//! take turns in every repeat; the median and the best of the repeats are shown.

use std::hint::black_box;
use std::time::Instant;

use tvmrt::abi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLTensor};
use tvmrt::contrib::examplejson::ExampleJsonModule;
use tvmrt::value::Any;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A clock: thread CPU time (immune to being descheduled on a busy machine, still counting
/// memory stalls) or wall time.
#[derive(Clone, Copy)]
struct Clock {
    cpu: bool,
}

impl Clock {
    fn now(self) -> f64 {
        if !self.cpu {
            return START.with(|s| s.elapsed().as_secs_f64());
        }
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec to write.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    }
}

thread_local! {
    static START: Instant = Instant::now();
}

fn tensor(data: &mut [f32], shape: &mut [i64; 1]) -> DLTensor {
    DLTensor {
        data: data.as_mut_ptr().cast(),
        device: DLDevice {
            device_type: DLDeviceType::CPU,
            device_id: 0,
        },
        ndim: 1,
        dtype: DLDataType {
            code: DLDataTypeCode::FLOAT,
            bits: 32,
            lanes: 1,
        },
        shape: shape.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

/// The guide's runtime design in Rust: copy in, one buffer per node, copy out.
struct CopyInCopyOut {
    entries: Vec<Vec<f32>>,
}

impl CopyInCopyOut {
    fn new(n: usize) -> Self {
        // Nodes 0-3 are inputs, 4-7 the four ops (data_entry_ of the guide).
        CopyInCopyOut {
            entries: (0..8).map(|_| vec![0.0f32; n]).collect(),
        }
    }

    fn binary(&mut self, a: usize, b: usize, out: usize, op: fn(f32, f32) -> f32) {
        let mut o = std::mem::take(&mut self.entries[out]);
        for ((o, &x), &y) in o.iter_mut().zip(&self.entries[a]).zip(&self.entries[b]) {
            *o = op(x, y);
        }
        self.entries[out] = o;
    }

    fn run(&mut self, inputs: [&[f32]; 4], output: &mut [f32]) {
        for (k, x) in inputs.iter().enumerate() {
            self.entries[k].copy_from_slice(x);
        }
        self.binary(0, 1, 4, |x, y| x + y);
        self.binary(4, 2, 5, |x, y| x - y);
        self.binary(5, 3, 6, |x, y| x * y);
        let mut o = std::mem::take(&mut self.entries[7]);
        for (o, &x) in o.iter_mut().zip(&self.entries[6]) {
            *o = if x > 0.0 { x } else { 0.0 };
        }
        self.entries[7] = o;
        output.copy_from_slice(&self.entries[7]);
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is expected.
    let n = env_usize("EXAMPLEJSON_BENCH_ELEMENTS", 16 << 20);
    let repeats = env_usize("EXAMPLEJSON_BENCH_REPEATS", 7).max(1);
    let text = format!(
        "bench\ninput 0 {n}\ninput 1 {n}\ninput 2 {n}\ninput 3 {n}\n\
         add 4 inputs: 0 1 shape: {n}\nsub 5 inputs: 4 2 shape: {n}\n\
         mul 6 inputs: 5 3 shape: {n}\nrelu 7 inputs: 6 shape: {n}\n"
    );
    let module = ExampleJsonModule::new(&text).unwrap().into_module();
    let f = module.get_function("bench", false).unwrap().unwrap();

    let mut inputs: Vec<Vec<f32>> = (0..4)
        .map(|k| {
            (0..n)
                .map(|i| ((i * 7 + k * 13) % 97) as f32 / 8.0 - 6.0)
                .collect()
        })
        .collect();
    let mut out = vec![0.0f32; n];
    let mut shape = [n as i64];
    let mut tensors: Vec<DLTensor> = inputs.iter_mut().map(|x| tensor(x, &mut shape)).collect();
    tensors.push(tensor(&mut out, &mut shape));
    let args: Vec<Any> = tensors
        .iter_mut()
        .map(|t| Any::dltensor_ptr(t as *mut DLTensor))
        .collect();

    let moved = 5.0 * n as f64 * 4.0;
    let gbs = |s: f64| moved / s / 1e9;

    let mut reference = vec![0.0f32; n];
    let mut copy_dst = vec![0.0f32; n];
    let mut guide = CopyInCopyOut::new(n);
    let mut guide_out = vec![0.0f32; n];
    // The implementations take turns within every repeat, so a busy machine slows all alike.
    // The clock: EXAMPLEJSON_BENCH_CLOCK=wall (default) or cpu (thread CPU time).
    let clock = Clock {
        cpu: std::env::var("EXAMPLEJSON_BENCH_CLOCK").is_ok_and(|v| v == "cpu"),
    };
    let mut samples: [Vec<f64>; 4] = Default::default();
    for r in 0..=repeats {
        let t = clock.now();
        f.call_values(&args).unwrap();
        let tvmrt_s = clock.now() - t;

        let t = clock.now();
        let (a, b, c, d) = (&inputs[0], &inputs[1], &inputs[2], &inputs[3]);
        for ((((o, &a), &b), &c), &d) in reference.iter_mut().zip(a).zip(b).zip(c).zip(d) {
            let x = (a + b - c) * d;
            *o = if x > 0.0 { x } else { 0.0 };
        }
        black_box(&mut reference);
        let bw_s = clock.now() - t;

        let t = clock.now();
        copy_dst.copy_from_slice(&inputs[0]);
        black_box(&mut copy_dst);
        let copy_s = clock.now() - t;

        let t = clock.now();
        guide.run(
            [&inputs[0], &inputs[1], &inputs[2], &inputs[3]],
            &mut guide_out,
        );
        black_box(&mut guide_out);
        let guide_s = clock.now() - t;
        // Repeat 0 warms up (page faults, scratch allocation) and is not counted.
        if r > 0 {
            for (v, x) in samples.iter_mut().zip([tvmrt_s, bw_s, copy_s, guide_s]) {
                v.push(x);
            }
        }
    }
    // SAFETY: `out` is not otherwise borrowed while `tensors` points into it here.
    let result: Vec<f32> =
        unsafe { std::slice::from_raw_parts(tensors[4].data.cast::<f32>(), n).to_vec() };
    assert_eq!(result, reference, "tvmrt and the reference disagree");
    assert_eq!(guide_out, reference, "the guide design disagrees");
    let stats = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0])
    };
    let (tvmrt_med, tvmrt_best) = stats(&mut samples[0]);
    let (bw_med, bw_best) = stats(&mut samples[1]);
    let (cp_med, _) = stats(&mut samples[2]);
    let (g_med, g_best) = stats(&mut samples[3]);
    let copy_gbs = 2.0 * n as f64 * 4.0 / cp_med / 1e9;

    println!(
        "ExampleJSON subgraph: 4 nodes (add, sub, mul, relu), {n} float32 elements, {:.0} MiB \
         moved per call, {repeats} repeats, {} time",
        moved / (1 << 20) as f64,
        if clock.cpu { "thread CPU" } else { "wall" }
    );
    println!("| implementation | median ms | best ms | GB/s (median) | % of bandwidth ref |");
    println!("|---|---|---|---|---|");
    let row = |name: &str, med: f64, best: f64| {
        println!(
            "| {name} | {:.1} | {:.1} | {:.2} | {:.0}% |",
            med * 1e3,
            best * 1e3,
            gbs(med),
            100.0 * bw_med / med
        );
    };
    row("bandwidth reference (hand-fused loop)", bw_med, bw_best);
    row("tvmrt ExampleJSON (Function::call)", tvmrt_med, tvmrt_best);
    row("guide design (copy-in/copy-out)", g_med, g_best);
    println!("plain copy of one tensor (read + write): {copy_gbs:.2} GB/s");
    println!(
        "tvmrt / bandwidth reference: {:.0}%; tvmrt speed-up over the guide design: {:.2}x",
        100.0 * bw_med / tvmrt_med,
        g_med / tvmrt_med
    );
}
