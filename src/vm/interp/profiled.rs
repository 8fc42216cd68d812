//! The profiler VM's recording (`vm_profiler_load_executable`'s `profile`, feature
//! `profiling`): the profiled copy of the interpreter's loop calls [`VmState::call_pool_profiled`]
//! for each call instruction.

use crate::abi::type_index;
use crate::error::{Error, Result};
use crate::value::{Any, AnyView};

use super::state::VmState;

impl VmState {
    /// Runs `f` with every call instruction recorded (TVM's `profile`), and returns the report.
    pub(super) fn profiled(
        &self,
        f: impl FnOnce() -> Result<Any>,
    ) -> Result<crate::profiling::Report> {
        use crate::profiling::{Metric, Profiler, Row};
        let config = Row::from([("Executor".to_string(), Metric::Str("VM".into()))]);
        let mut prof = Profiler::new(self.devices.clone(), config);
        prof.start()?;
        *self.profiler.lock() = Some(prof);
        self.profiling
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let ran = f();
        self.profiling
            .store(false, std::sync::atomic::Ordering::Relaxed);
        let mut prof = self
            .profiler
            .lock()
            .take()
            .ok_or_else(|| Error::runtime("profile: the profiler went away"))?;
        prof.stop()?;
        ran?;
        Ok(prof.report())
    }

    /// [`VmState::call_pool`] timed by the running profiler, as TVM's `VirtualMachineProfiler`
    /// times a call instruction: when an argument is a tensor, under the callee's name with
    /// the argument shapes, on the device of the last tensor argument. Out of line, so the
    /// interpreter's own call path stays as it is without a profiler.
    #[cold]
    #[inline(never)]
    pub(super) fn call_pool_profiled(
        &self,
        idx: usize,
        args: &[AnyView<'_>],
        depth: usize,
    ) -> Result<Any> {
        let entered = std::time::Instant::now();
        let mut device = None;
        let mut shapes = Vec::new();
        for a in args.iter().filter(|a| a.type_index() == type_index::TENSOR) {
            // SAFETY: a tensor argument's descriptor is live for the call.
            let Some(t) = a
                .as_dltensor()
                .filter(|p| !p.is_null())
                .map(|p| unsafe { &*p })
            else {
                continue;
            };
            // SAFETY: as above; a tensor object's shape holds `ndim` values.
            let dims = unsafe { crate::tensor::layout::dl_shape(t, "argument") }
                .map(<[i64]>::to_vec)
                .unwrap_or_default();
            device = Some(t.device);
            shapes.push((t.dtype, dims));
        }
        let Some(device) = device else {
            return self.call_pool(idx, args, depth);
        };
        let name = &self.exec.funcs[idx].name;
        // Not held during the call: a VM function called here records its own calls.
        if let Some(p) = self.profiler.lock().as_mut() {
            p.start_call_with_shapes(name, device, Default::default(), Some(shapes))?;
        }
        let ret = self.call_pool(idx, args, depth);
        if let Some(p) = self.profiler.lock().as_mut() {
            let timed = p.stop_call()?;
            p.add_overhead(entered.elapsed().saturating_sub(timed));
        }
        ret
    }
}
