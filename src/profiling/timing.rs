//! The settings of TVM's time evaluator (`WrapTimeEvaluator`).

use super::*;

/// The settings of TVM's time evaluator (`WrapTimeEvaluator`, the arguments of
/// `run_individual`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// Calls per measurement (grown to reach `min_repeat_ms`).
    pub number: usize,
    /// Measurements.
    pub repeat: usize,
    /// The least a measurement lasts, in milliseconds (0: `number` calls).
    pub min_repeat_ms: u64,
    /// Measurements of zero time after which `number` stops growing.
    pub limit_zero_time_iterations: usize,
    /// A sleep after every `repeats_to_cooldown` measurements, in milliseconds.
    pub cooldown_interval_ms: u64,
    pub repeats_to_cooldown: usize,
}

impl Timing {
    /// TVM's time evaluator: one untimed call, then `repeat` measurements, each the mean
    /// seconds per call over `number` calls, where `number` grows (by the golden ratio, or to
    /// what `min_repeat_ms` needs) until a measurement lasts `min_repeat_ms`, giving up after
    /// `limit_zero_time_iterations` measurements of zero time; a sleep of
    /// `cooldown_interval_ms` after every `repeats_to_cooldown` measurements.
    pub fn measure(&self, device: DLDevice, f: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
        let mut number = self.number;
        self.measure_with(device, &mut number, Hooks::none(), f)
    }

    /// [`Timing::measure`] as TVM's `WrapTimeEvaluator` runs it: `number` is the caller's, so
    /// its growth carries over to the next call of the same evaluator; `hooks.before_repeat`
    /// runs before each measurement's first run (TVM's `f_preproc`), `hooks.before_run` before
    /// each timed run of `number` calls, outside the clock (TVM's cache flush copy).
    pub fn measure_with(
        &self,
        device: DLDevice,
        number: &mut usize,
        mut hooks: Hooks<'_>,
        mut f: impl FnMut() -> Result<()>,
    ) -> Result<Vec<f64>> {
        if *number == 0 || self.repeat == 0 || self.repeats_to_cooldown == 0 {
            return Err(Error::value(format!(
                "time evaluator: number ({}), repeat ({}) and repeats_to_cooldown ({}) must be \
                 positive",
                *number, self.repeat, self.repeats_to_cooldown
            )));
        }
        f()?;
        sync_device(device)?;
        let mut out = Vec::with_capacity(self.repeat);
        for i in 0..self.repeat {
            (hooks.before_repeat)()?;
            let mut duration_ms = 0.0f64;
            let mut zero_times = 0;
            loop {
                if duration_ms > 0.0 {
                    let per_call = duration_ms / *number as f64;
                    let want =
                        (self.min_repeat_ms as f64 / per_call + 1.0).max(*number as f64 * 1.618);
                    *number = (want as usize).max(1);
                }
                (hooks.before_run)()?;
                sync_device(device)?;
                let start = Instant::now();
                for _ in 0..*number {
                    f()?;
                }
                sync_device(device)?;
                let nanos = start.elapsed().as_nanos();
                if nanos == 0 {
                    zero_times += 1;
                }
                duration_ms = nanos as f64 / 1e6;
                if duration_ms >= self.min_repeat_ms as f64
                    || zero_times >= self.limit_zero_time_iterations
                {
                    break;
                }
            }
            out.push(duration_ms / 1e3 / *number as f64);
            if self.cooldown_interval_ms > 0 && i % self.repeats_to_cooldown == 0 {
                std::thread::sleep(Duration::from_millis(self.cooldown_interval_ms));
            }
        }
        Ok(out)
    }
}

/// Work a time evaluator does around its measurements, outside the clock.
pub struct Hooks<'a> {
    /// Before each measurement (TVM's `f_preproc`).
    pub before_repeat: Box<dyn FnMut() -> Result<()> + 'a>,
    /// Before each timed run of `number` calls (TVM's cache flush).
    pub before_run: Box<dyn FnMut() -> Result<()> + 'a>,
}

impl Hooks<'_> {
    /// No extra work.
    pub fn none() -> Hooks<'static> {
        Hooks {
            before_repeat: Box::new(|| Ok(())),
            before_run: Box::new(|| Ok(())),
        }
    }
}
