//! `tvm.contrib.random.*`: the random tensor fillers of TVM's runtime
//! (`src/runtime/extra/contrib/random/`), which models call through `call_dps_packed` (TVM's
//! TFLite frontend lowers `RandomUniform` and `RandomStandardNormal` to them) and tuning uses:
//!
//! - `uniform(low, high, out)` / `uniform(seed, seed2, low, high, out)`: float32 in
//!   `[low, high)`;
//! - `normal(loc, scale, out)` / `normal(seed, seed2, loc, scale, out)`: float32 from
//!   `Normal(loc, scale²)`;
//! - `randint(low, high, out)`: 8-, 16- and 32-bit integers in `[low, high)` (clamped to the
//!   dtype's range);
//! - `random_fill(out)` and `random_fill_for_measure(out)`: values in `[1, 10)` written as the
//!   float of the dtype's width (8 bits: the value truncated to a byte).
//!
//! The generator is a 32-bit Mersenne Twister per thread, and the samples are drawn the way
//! TVM's C++ draws them (libstdc++'s `uniform_real_distribution` and `normal_distribution`), so a
//! seeded call (`seed` or `seed2` nonzero: stateless, every call re-seeds from the pair, as
//! TensorFlow's seeded ops are) gives the same tensor as TVM's runtime, bit for bit. Unseeded
//! calls draw from the thread's generator, seeded once from the clock and the thread.

use std::cell::RefCell;

use super::elements::TensorArg;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::value::{Any, AnyView};

/// MT19937, the 32-bit Mersenne Twister (Matsumoto and Nishimura, 1998; `std::mt19937`).
pub struct Mt19937 {
    state: [u32; 624],
    next: usize,
}

impl Mt19937 {
    const N: usize = 624;
    const M: usize = 397;

    /// The generator `std::mt19937(seed)` is.
    pub fn new(seed: u32) -> Mt19937 {
        let mut state = [0u32; Self::N];
        state[0] = seed;
        for i in 1..Self::N {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 {
            state,
            next: Self::N,
        }
    }

    fn twist(&mut self) {
        for i in 0..Self::N {
            let y = (self.state[i] & 0x8000_0000) | (self.state[(i + 1) % Self::N] & 0x7fff_ffff);
            let mut v = self.state[(i + Self::M) % Self::N] ^ (y >> 1);
            if y & 1 != 0 {
                v ^= 0x9908_b0df;
            }
            self.state[i] = v;
        }
        self.next = 0;
    }

    /// The next 32-bit output.
    pub fn next_u32(&mut self) -> u32 {
        if self.next >= Self::N {
            self.twist();
        }
        let mut y = self.state[self.next];
        self.next += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// A float in `[0, 1)` as libstdc++'s `generate_canonical<float, 24>` makes it from one
    /// output: the output rounded to float, divided by 2^32, kept below 1.
    pub fn canonical_f32(&mut self) -> f32 {
        let r = self.next_u32() as f32 / 4_294_967_296.0f32;
        if r >= 1.0 {
            ONE_BELOW_F32
        } else {
            r
        }
    }

    /// A double in `[0, 1)` as `generate_canonical<double, 53>` makes it from two outputs.
    pub fn canonical_f64(&mut self) -> f64 {
        let lo = self.next_u32() as f64;
        let hi = self.next_u32() as f64;
        let r = (lo + hi * 4_294_967_296.0) / 18_446_744_073_709_551_616.0;
        if r >= 1.0 {
            1.0f64 - f64::EPSILON / 2.0
        } else {
            r
        }
    }
}

/// `nextafter(1.0f, 0.0f)`: the largest float below one.
const ONE_BELOW_F32: f32 = 0.999_999_94;

/// The seed TVM derives from a seeded op's pair (`CombineSeeds` in TVM's `random.cc`): both
/// mixed with SplitMix64's finalizer, combined, folded to 32 bits.
pub fn combine_seeds(seed: i64, seed2: i64) -> u32 {
    fn mix(mut v: u64) -> u64 {
        v = v.wrapping_add(0x9e37_79b9_7f4a_7c15);
        v = (v ^ (v >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        v = (v ^ (v >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        v ^ (v >> 31)
    }
    let (a, b) = (seed as u64, seed2 as u64);
    let combined = mix(a)
        ^ mix(b)
            .wrapping_add(0x9e37_79b9_7f4a_7c15)
            .wrapping_add(a << 6)
            .wrapping_add(a >> 2);
    ((combined >> 32) ^ combined) as u32
}

thread_local! {
    static THREAD_ENGINE: RefCell<Mt19937> = RefCell::new(Mt19937::new(thread_seed()));
}

/// A seed for a thread's generator: the clock's nanoseconds mixed with the thread's identity,
/// so threads started together draw different numbers.
fn thread_seed() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64);
    let local = 0u8;
    combine_seeds(nanos, &local as *const u8 as i64)
}

/// Runs `f` with the generator a call uses: a fresh one seeded from `(seed, seed2)` when the
/// pair is given and not `(0, 0)`, else the thread's.
fn with_engine<R>(seeds: Option<(i64, i64)>, f: impl FnOnce(&mut Mt19937) -> R) -> R {
    match seeds {
        Some((a, b)) if (a, b) != (0, 0) => f(&mut Mt19937::new(combine_seeds(a, b))),
        _ => THREAD_ENGINE.with(|e| f(&mut e.borrow_mut())),
    }
}

fn float_arg(args: &[AnyView<'_>], i: usize, what: &str, name: &str) -> Result<f64> {
    args[i]
        .as_f64()
        .ok_or_else(|| args[i].type_mismatch(&format!("{what} argument {i} ({name})"), "float"))
}

fn int_arg(args: &[AnyView<'_>], i: usize, name: &str) -> Result<i64> {
    args[i].expect_i64(name)
}

/// The optional seed pair and the two parameters of `uniform` / `normal`, then the output.
struct Sampling<'a> {
    seeds: Option<(i64, i64)>,
    a: f32,
    b: f32,
    out: TensorArg<'a>,
}

impl<'a> Sampling<'a> {
    fn parse(args: &'a [AnyView<'_>], what: &str, names: [&str; 2]) -> Result<Sampling<'a>> {
        let (seeds, first) = match args.len() {
            3 => (None, 0),
            5 => (
                Some((int_arg(args, 0, "seed")?, int_arg(args, 1, "seed2")?)),
                2,
            ),
            n => crate::bail_type!("{what} expects either 3 or 5 arguments, but got {n}"),
        };
        // TVM's engine takes the parameters as float.
        let a = float_arg(args, first, what, names[0])? as f32;
        let b = float_arg(args, first + 1, what, names[1])? as f32;
        let out = TensorArg::of(args, first + 2, what)?;
        let t = out.dl.dtype;
        if (t.code.0, t.bits, t.lanes) != (2, 32, 1) {
            crate::bail_type!(
                "{what}: the output must be float32, got {}",
                out.dtype_name()
            );
        }
        Ok(Sampling { seeds, a, b, out })
    }

    fn fill(&self, mut sample: impl FnMut(&mut Mt19937) -> f32) {
        with_engine(self.seeds, |e| {
            for i in 0..self.out.numel() {
                self.out.write(i, &sample(e).to_le_bytes());
            }
        })
    }
}

fn uniform(args: &[AnyView<'_>]) -> Result<Any> {
    const WHAT: &str = "tvm.contrib.random.uniform";
    let s = Sampling::parse(args, WHAT, ["low", "high"])?;
    let (low, high) = (s.a, s.b);
    if high.partial_cmp(&low) != Some(std::cmp::Ordering::Greater) {
        crate::bail_value!("{WHAT}: high must be bigger than low (low {low}, high {high})");
    }
    s.fill(|e| e.canonical_f32() * (high - low) + low);
    Ok(Any::none())
}

fn normal(args: &[AnyView<'_>]) -> Result<Any> {
    const WHAT: &str = "tvm.contrib.random.normal";
    let s = Sampling::parse(args, WHAT, ["loc", "scale"])?;
    let (loc, scale) = (s.a, s.b);
    if scale.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        crate::bail_value!("{WHAT}: standard deviation must be positive, got {scale}");
    }
    // The Marsaglia polar method, as libstdc++'s normal_distribution<float>: each accepted
    // pair gives two samples, the second kept for the next draw of the same call.
    let mut saved: Option<f32> = None;
    s.fill(|e| {
        let z = saved.take().unwrap_or_else(|| loop {
            let x = 2.0f32 * e.canonical_f32() - 1.0;
            let y = 2.0f32 * e.canonical_f32() - 1.0;
            let r2 = x * x + y * y;
            if r2 <= 1.0 && r2 != 0.0 {
                let mult = (-2.0f32 * r2.ln() / r2).sqrt();
                saved = Some(x * mult);
                break y * mult;
            }
        });
        z * scale + loc
    });
    Ok(Any::none())
}

fn randint(args: &[AnyView<'_>]) -> Result<Any> {
    const WHAT: &str = "tvm.contrib.random.randint";
    if args.len() != 3 {
        crate::bail_type!(
            "{WHAT} expects 3 arguments (low, high, out), got {}",
            args.len()
        );
    }
    let low = int_arg(args, 0, "low")?;
    let high = int_arg(args, 1, "high")?;
    if high <= low {
        crate::bail_value!("{WHAT}: high must be bigger than low (low {low}, high {high})");
    }
    let out = TensorArg::of(args, 2, WHAT)?;
    let t = out.dl.dtype;
    let (min, max) = match (t.code.0, t.bits) {
        (0, 8 | 16 | 32) => (-(1i64 << (t.bits - 1)), (1i64 << (t.bits - 1)) - 1),
        (1, 8 | 16 | 32) => (0, (1i64 << t.bits) - 1),
        _ => crate::bail_type!(
            "{WHAT}: the output must be a 8, 16 or 32-bit integer tensor, got {}",
            out.dtype_name()
        ),
    };
    let (low, high) = (low.max(min), high.min(max + 1));
    if high <= low {
        crate::bail_value!(
            "{WHAT}: [{low}, {high}) holds no {} value",
            out.dtype_name()
        );
    }
    let width = out.elem;
    with_engine(None, |e| {
        for i in 0..out.numel() {
            let v = low + (e.next_u32() as i64) % (high - low);
            out.write(i, &v.to_le_bytes()[..width]);
        }
    });
    Ok(Any::none())
}

/// `random_fill`: values drawn from `[1, 10)` as doubles, stored as TVM stores them: a byte
/// (the value truncated), IEEE half, float or double, by the dtype's width alone.
fn random_fill(args: &[AnyView<'_>], what: &str) -> Result<Any> {
    if args.len() != 1 {
        crate::bail_type!("{what} expects 1 argument (out), got {}", args.len());
    }
    if let Some(p) = args[0].as_dltensor().filter(|p| !p.is_null()) {
        // SAFETY: a non-null tensor argument is a live DLTensor for the call.
        let dl = unsafe { &*p };
        if !crate::device::is_host_accessible(dl.device) {
            // A device tensor (MetaSchedule's inputs on a GPU board): filled on the host and
            // copied over, as TVM does.
            // SAFETY: as above; the shape is readable for `ndim` entries.
            let shape = unsafe { crate::tensor::layout::dl_shape(dl, what)? };
            let host = crate::tensor::Tensor::empty(shape, dl.dtype, crate::device::cpu())?;
            let host_any = Any::from_object(host.object().clone());
            random_fill(&[host_any.view()], what)?;
            // SAFETY: both descriptors are live for the call.
            unsafe { crate::tensor::copy::copy_dltensor(host.dl(), dl)? };
            // The host copy goes when this returns: the device must have read it.
            crate::device::api_of(dl.device)?.stream_sync(dl.device, std::ptr::null_mut())?;
            return Ok(Any::none());
        }
    }
    let out = TensorArg::of(args, 0, what)?;
    if !matches!(out.dl.dtype.bits, 8 | 16 | 32 | 64) {
        return Err(Error::type_error(format!(
            "{what}: unsupported dtype {}",
            out.dtype_name()
        )));
    }
    with_engine(None, |e| {
        for i in 0..out.numel() {
            let v = e.canonical_f64() * 9.0 + 1.0;
            match out.elem {
                1 => out.write(i, &[v as u8]),
                2 => out.write(i, &half::f16::from_f32(v as f32).to_le_bytes()),
                4 => out.write(i, &(v as f32).to_le_bytes()),
                _ => out.write(i, &v.to_le_bytes()),
            }
        }
    });
    Ok(Any::none())
}

/// The random functions, with TVM's names.
pub fn builtins() -> Vec<(&'static str, Function)> {
    vec![
        ("tvm.contrib.random.uniform", Function::from_fn(uniform)),
        ("tvm.contrib.random.normal", Function::from_fn(normal)),
        ("tvm.contrib.random.randint", Function::from_fn(randint)),
        (
            "tvm.contrib.random.random_fill",
            Function::from_fn(|a| random_fill(a, "tvm.contrib.random.random_fill")),
        ),
        (
            "tvm.contrib.random.random_fill_for_measure",
            Function::from_fn(|a| random_fill(a, "tvm.contrib.random.random_fill_for_measure")),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mt19937_matches_the_standard() {
        // C++11 [rand.predef]: the 10000th output of a default-constructed mt19937 (seed 5489).
        let mut e = Mt19937::new(5489);
        let mut last = 0;
        for _ in 0..10000 {
            last = e.next_u32();
        }
        assert_eq!(last, 4_123_659_995);
    }

    #[test]
    fn canonical_floats_stay_below_one() {
        let mut e = Mt19937::new(1);
        for _ in 0..100_000 {
            let f = e.canonical_f32();
            assert!((0.0..1.0).contains(&f));
            let d = e.canonical_f64();
            assert!((0.0..1.0).contains(&d));
        }
        // An output that rounds up to 2^32 as a float stays below one.
        assert_eq!((u32::MAX as f32 / 4_294_967_296.0f32), 1.0);
        assert_eq!(ONE_BELOW_F32.to_bits(), 1.0f32.to_bits() - 1);
    }

    #[test]
    fn seed_pairs_combine_as_tvm_does() {
        // Distinct pairs give distinct seeds; the order matters.
        assert_ne!(combine_seeds(1, 2), combine_seeds(2, 1));
        assert_ne!(combine_seeds(0, 1), combine_seeds(1, 0));
        assert_eq!(combine_seeds(7, 11), combine_seeds(7, 11));
    }
}
