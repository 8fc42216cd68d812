//! The profiler executors record calls into (TVM's `profiling::Profiler`).

use super::*;

struct Frame {
    name: String,
    device: DLDevice,
    extra: Row,
    shapes: Option<Shapes>,
    start: Instant,
}

/// Records calls between [`Profiler::start`] and [`Profiler::stop`] (TVM's
/// `profiling::Profiler`, with the wall clock as its timer).
pub struct Profiler {
    devices: Vec<DLDevice>,
    configuration: Row,
    running: bool,
    in_flight: Vec<Frame>,
    calls: Vec<(Frame, Duration)>,
    overhead: Duration,
}

impl Profiler {
    /// A profiler of calls on `devices`; `configuration` adds to the number of threads.
    pub fn new(devices: Vec<DLDevice>, configuration: Row) -> Profiler {
        let mut configuration = configuration;
        configuration.insert(
            "Number of threads".into(),
            Metric::Count(crate::backend::thread_pool::num_threads() as i64),
        );
        Profiler {
            devices,
            configuration,
            running: false,
            in_flight: Vec::new(),
            calls: Vec::new(),
            overhead: Duration::ZERO,
        }
    }

    /// Adds time the caller spent recording a call (outside its timer) to the overhead the
    /// report keeps apart.
    pub fn add_overhead(&mut self, d: Duration) {
        self.overhead += d;
    }

    /// Whether calls are being recorded.
    pub fn is_running(&self) -> bool {
        self.running
    }

    /// Starts the whole-run timer of every device.
    pub fn start(&mut self) -> Result<()> {
        self.running = true;
        for d in self.devices.clone() {
            self.start_call("Total", d, Row::new())?;
        }
        Ok(())
    }

    /// Starts timing a call of `name` on `device` with extra metrics (argument shapes, hash).
    pub fn start_call(&mut self, name: &str, device: DLDevice, extra: Row) -> Result<()> {
        self.start_call_with_shapes(name, device, extra, None)
    }

    /// [`Profiler::start_call`] with the tensor arguments' types and shapes, formatted as the
    /// "Argument Shapes" metric only when the report is made.
    pub fn start_call_with_shapes(
        &mut self,
        name: &str,
        device: DLDevice,
        extra: Row,
        shapes: Option<Shapes>,
    ) -> Result<()> {
        sync_device(device)?;
        self.in_flight.push(Frame {
            name: name.to_string(),
            device,
            extra,
            shapes,
            start: Instant::now(),
        });
        Ok(())
    }

    /// Stops the innermost call's timer; returns the time it recorded.
    pub fn stop_call(&mut self) -> Result<Duration> {
        let frame = self
            .in_flight
            .pop()
            .ok_or_else(|| Error::runtime("profiling: stop_call without a call in flight"))?;
        sync_device(frame.device)?;
        let elapsed = frame.start.elapsed();
        self.calls.push((frame, elapsed));
        Ok(elapsed)
    }

    /// Stops the whole-run timers.
    pub fn stop(&mut self) -> Result<()> {
        self.running = false;
        for _ in 0..self.devices.len() {
            self.stop_call()?;
        }
        Ok(())
    }

    /// The report (TVM's `Profiler::Report`): a row per call with its share of the longest
    /// device total.
    pub fn report(&self) -> Report {
        let mut report = Report {
            configuration: self.configuration.clone(),
            overhead: self.overhead,
            ..Report::default()
        };
        let mut overall_us = 0.0f64;
        let n_dev = self.devices.len().min(self.calls.len());
        let (calls, totals) = self.calls.split_at(self.calls.len() - n_dev);
        for (frame, d) in totals {
            let us = d.as_secs_f64() * 1e6;
            overall_us = overall_us.max(us);
            let mut row = Row::new();
            row.insert("Duration (us)".into(), Metric::Duration(us));
            row.insert("Count".into(), Metric::Count(1));
            row.insert("Name".into(), Metric::Str(frame.name.clone()));
            let dev = device_string(frame.device);
            row.insert("Device".into(), Metric::Str(dev.clone()));
            report.device_metrics.insert(dev, row);
        }
        for (frame, d) in calls {
            let us = d.as_secs_f64() * 1e6;
            let mut row = frame.extra.clone();
            if let Some(shapes) = &frame.shapes {
                let text = shape_string(shapes.iter().map(|(t, s)| (*t, s.as_slice())));
                row.insert("Argument Shapes".into(), Metric::Str(text));
            }
            row.insert("Duration (us)".into(), Metric::Duration(us));
            row.insert("Count".into(), Metric::Count(1));
            row.insert("Name".into(), Metric::Str(frame.name.clone()));
            row.insert("Device".into(), Metric::Str(device_string(frame.device)));
            let pct = if overall_us > 0.0 {
                us / overall_us * 100.0
            } else {
                0.0
            };
            row.insert("Percent".into(), Metric::Percent(pct));
            report.calls.push(row);
        }
        report
    }
}
