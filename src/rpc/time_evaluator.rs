//! `runtime.RPCTimeEvaluator` and `cache_flush_cpu_non_first_arg`: how TVM's clients time a
//! function on the board (TVM `src/runtime/rpc/rpc_module.cc`, `src/runtime/timer.cc`).
//!
//! The evaluator returns a function that runs the target once to warm up, then `repeat`
//! measurements (each after `f_preproc`), growing `number` until one lasts `min_repeat_ms`,
//! and answers the seconds per call of each as packed `f64` bytes. As in TVM, `number` keeps
//! its growth from one call of the evaluator to the next.

use parking_lot::Mutex;

use crate::abi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType};
use crate::error::{Error, Result};
use crate::function::{registry, Function};
use crate::module::Module;
use crate::profiling::{Hooks, Timing};
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

fn int_arg(args: &[AnyView<'_>], i: usize, what: &str) -> Result<i64> {
    args.get(i)
        .ok_or_else(|| Error::type_error(format!("runtime.RPCTimeEvaluator: missing {what}")))?
        .expect_i64(what)
}

fn count(v: i64, what: &str) -> Result<usize> {
    usize::try_from(v).map_err(|_| {
        Error::value(format!(
            "runtime.RPCTimeEvaluator: {what} must not be negative, got {v}"
        ))
    })
}

/// `runtime.RPCTimeEvaluator(mod or None, name, device_type, device_id, number, repeat,
/// min_repeat_ms, limit_zero_time_iterations, cooldown_interval_ms, repeats_to_cooldown,
/// cache_flush_bytes, f_preproc_name)`.
fn time_evaluator(args: &[AnyView<'_>]) -> Result<Any> {
    if args.len() != 12 {
        return Err(Error::type_error(format!(
            "runtime.RPCTimeEvaluator expects 12 arguments, got {}",
            args.len()
        )));
    }
    if let Some(m) = args[0]
        .as_object()
        .and_then(|o| Module::from_object(o).ok())
    {
        // A module of an RPC session: timed on its server (TVM's `GetTimeEvaluator`).
        if let Some(rv) = super::client::remote_time_evaluator(&m, args) {
            return rv;
        }
    }
    let name = args[1].expect_str("name")?.to_string();
    let f = if args[0].is_none() {
        registry::get(&name)
            .ok_or_else(|| Error::value(format!("Cannot find {name} in the global function")))?
    } else {
        let m = Module::from_view(&args[0], "mod")?;
        m.get_function(&name, true)?
            .ok_or_else(|| Error::value(format!("Cannot find {name}` in the global registry")))?
    };
    let device = DLDevice {
        device_type: DLDeviceType(
            u32::try_from(int_arg(args, 2, "device_type")?)
                .map_err(|_| Error::value("runtime.RPCTimeEvaluator: negative device type"))?,
        ),
        device_id: i32::try_from(int_arg(args, 3, "device_id")?)
            .map_err(|_| Error::value("runtime.RPCTimeEvaluator: device id out of range"))?,
    };
    crate::device::api_of(device)?;
    let number = count(int_arg(args, 4, "number")?, "number")?;
    let timing = Timing {
        number,
        repeat: count(int_arg(args, 5, "repeat")?, "repeat")?,
        min_repeat_ms: count(int_arg(args, 6, "min_repeat_ms")?, "min_repeat_ms")? as u64,
        limit_zero_time_iterations: count(int_arg(args, 7, "limit")?, "limit")?,
        cooldown_interval_ms: count(int_arg(args, 8, "cooldown")?, "cooldown")? as u64,
        repeats_to_cooldown: count(int_arg(args, 9, "repeats_to_cooldown")?, "repeats")?,
    };
    let flush_bytes = count(int_arg(args, 10, "cache_flush_bytes")?, "cache_flush_bytes")?;
    let preproc_name = args[11].expect_str("f_preproc")?;
    let preproc = if preproc_name.is_empty() {
        None
    } else {
        Some(registry::get(preproc_name).ok_or_else(|| {
            Error::value(format!("Cannot find {preproc_name} in the global function"))
        })?)
    };
    let number = Mutex::new(number);
    let evaluator = move |call_args: &[AnyView<'_>]| -> Result<Any> {
        let i32_type = DLDataType {
            code: DLDataTypeCode(0),
            bits: 32,
            lanes: 1,
        };
        let flush = if flush_bytes > 0 {
            let n = (flush_bytes / 4) as i64;
            Some((
                Tensor::empty(&[n], i32_type, device)?,
                Tensor::empty(&[n], i32_type, device)?,
            ))
        } else {
            None
        };
        let hooks = Hooks {
            before_repeat: Box::new(|| match &preproc {
                Some(p) => p.call(call_args).map(drop),
                None => Ok(()),
            }),
            before_run: Box::new(|| match &flush {
                Some((a, b)) => a.copy_from(b),
                None => Ok(()),
            }),
        };
        let mut number = number.lock();
        let times =
            timing.measure_with(device, &mut number, hooks, || f.call(call_args).map(drop))?;
        let bytes: Vec<u8> = times.iter().flat_map(|t| t.to_le_bytes()).collect();
        Ok(Any::bytes(&bytes))
    };
    Ok(Any::from_object(Function::from_fn(evaluator).into_object()))
}

/// Evicts `len` bytes from `addr` from the CPU's caches (TVM's `CPUCacheFlushImpl`).
fn flush_cache(addr: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let line = 64;
        let start = addr as usize & !(line - 1);
        for p in (start..addr as usize + len).step_by(line) {
            // SAFETY: `p` lies in the cache line of a byte of the tensor's live host memory;
            // clflush only evicts, never reads or writes data.
            unsafe { std::arch::x86_64::_mm_clflush(p as *const u8) };
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let ctr: u64;
        // SAFETY: reading CTR_EL0 (cache type) is allowed at EL0 on Linux.
        unsafe { std::arch::asm!("mrs {}, ctr_el0", out(reg) ctr) };
        let line = 4usize << ((ctr >> 16) & 15);
        let start = addr as usize & !(line - 1);
        for p in (start..addr as usize + len).step_by(line) {
            // SAFETY: as above: a cache maintenance operation on live memory.
            unsafe { std::arch::asm!("dc civac, {}", in(reg) p) };
        }
        // SAFETY: a barrier.
        unsafe { std::arch::asm!("dmb ishst") };
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = (addr, len);
}

/// `cache_flush_cpu_non_first_arg(args...)`: flushes every tensor argument after the first.
fn cache_flush_non_first(args: &[AnyView<'_>]) -> Result<Any> {
    for (i, a) in args.iter().enumerate().skip(1) {
        let p = a
            .as_dltensor()
            .filter(|p| !p.is_null())
            .ok_or_else(|| a.type_mismatch(&format!("cache flush argument {i}"), "a tensor"))?;
        // SAFETY: a non-null tensor argument is a live DLTensor for the call.
        let t = unsafe { &*p };
        if !crate::device::is_host_accessible(t.device) || t.data.is_null() {
            continue;
        }
        // SAFETY: the tensor's shape is readable for `ndim` entries.
        let shape = unsafe { crate::tensor::layout::dl_shape(t, "cache flush argument")? };
        let nbytes = crate::tensor::layout::shape_bytes(shape, t.dtype)?;
        let start = t.data.cast::<u8>().wrapping_add(t.byte_offset as usize);
        flush_cache(start.cast_const(), nbytes);
    }
    Ok(Any::none())
}

/// The time evaluator's globals.
pub fn builtins() -> Vec<(&'static str, Function)> {
    vec![
        (
            "runtime.RPCTimeEvaluator",
            Function::from_fn(time_evaluator),
        ),
        (
            "cache_flush_cpu_non_first_arg",
            Function::from_fn(cache_flush_non_first),
        ),
    ]
}
