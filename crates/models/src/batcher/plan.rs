//! When to run and how much: the dynamic batcher's decision over the queue, as Triton's
//! dynamic batcher makes it.

use super::BatcherConfig;

/// What a free instance does with the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Runs the first `n` queued requests as one batch now.
    Take(usize),
    /// Waits (for more requests) until this [`crate::request::now_ns`] time at the latest.
    WaitUntil(u64),
}

/// Decides over a non-empty queue, given as each request's rows and arrival time (oldest
/// first), at time `now`; `flush` (draining) runs whatever fits without waiting.
///
/// The front requests are taken while their rows fit in `max_batch_size`. They run now when
/// they reach the largest preferred batch size (else `max_batch_size`), when the next request
/// does not fit, when a preferred size can be formed from them (the longest such prefix), or
/// when the oldest has waited `max_queue_delay`; otherwise the instance waits for more until
/// that delay is up. A model without batching, or without `dynamic_batching`, runs one request
/// at a time.
pub fn plan(
    queue: impl Iterator<Item = (i64, u64)>,
    config: &BatcherConfig,
    now: u64,
    flush: bool,
) -> Plan {
    if !config.dynamic || config.max_batch_size <= 0 {
        return Plan::Take(1);
    }
    let max = config.max_batch_size;
    let largest_preferred = config
        .preferred_batch_sizes
        .iter()
        .copied()
        .filter(|&p| p <= max)
        .max()
        .unwrap_or(max);
    let (mut n, mut rows, mut oldest) = (0usize, 0i64, None);
    let mut preferred_prefix = None;
    let mut next_does_not_fit = false;
    for (r, arrived) in queue {
        if n > 0 && rows + r > max {
            next_does_not_fit = true;
            break;
        }
        oldest.get_or_insert(arrived);
        n += 1;
        rows += r;
        if config.preferred_batch_sizes.contains(&rows) {
            preferred_prefix = Some(n);
        }
        if rows >= largest_preferred {
            return Plan::Take(preferred_prefix.unwrap_or(n));
        }
    }
    let Some(oldest) = oldest else {
        return Plan::Take(1);
    };
    let deadline = oldest.saturating_add(config.max_queue_delay.as_nanos() as u64);
    if next_does_not_fit || flush || now >= deadline {
        return Plan::Take(n);
    }
    match preferred_prefix {
        Some(p) => Plan::Take(p),
        None => Plan::WaitUntil(deadline),
    }
}

/// Lone runs in a row, each after waiting out the whole queue delay, after which a lone
/// request stops waiting.
pub const LONE_RUNS_TO_SKIP: u32 = 8;

/// While waits are skipped, one request in this many waits out the delay again, to see
/// whether company has come.
pub const PROBE_EVERY: u32 = 16;

/// Whether waiting for company is worth it, learnt from the runs so far.
///
/// `max_queue_delay_microseconds` is the longest a request may wait for others to join it (as
/// Triton documents it), and a server with one client at a time waits it out on every request
/// for a batch that never forms. After [`LONE_RUNS_TO_SKIP`] runs in a row of one request each
/// after waiting, a lone request runs at once; one in [`PROBE_EVERY`] waits again, and any run
/// of two or more requests (company has come: requests queue while an instance runs) brings
/// the wait back at once. Under concurrency the batcher is Triton's; alone, a request pays no
/// delay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdleWait {
    /// Runs of one request in a row after waiting (saturating).
    lone_runs: u32,
    /// Requests that skipped the wait since the wait was last kept.
    skipped: u32,
}

impl IdleWait {
    /// Whether the next plan skips the wait (runs what is queued now, as a flush).
    pub fn skips_wait(&self) -> bool {
        self.lone_runs >= LONE_RUNS_TO_SKIP && self.skipped + 1 < PROBE_EVERY
    }

    /// Records a run of `requests` requests, planned with `skipped_wait`.
    pub fn ran(&mut self, requests: usize, skipped_wait: bool) {
        if requests > 1 {
            *self = IdleWait::default();
        } else if skipped_wait {
            self.skipped += 1;
        } else {
            self.lone_runs = self.lone_runs.saturating_add(1);
            self.skipped = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn config(max: i64, delay_ns: u64, preferred: &[i64]) -> BatcherConfig {
        BatcherConfig {
            max_batch_size: max,
            dynamic: true,
            max_queue_delay: Duration::from_nanos(delay_ns),
            preferred_batch_sizes: preferred.to_vec(),
            max_queue_size: 100,
            instances: 1,
            queue_timeout: None,
        }
    }

    fn decide(rows: &[i64], c: &BatcherConfig, now: u64, flush: bool) -> Plan {
        // Every request arrived at time 1000 + its index.
        plan(
            rows.iter().enumerate().map(|(k, &r)| (r, 1000 + k as u64)),
            c,
            now,
            flush,
        )
    }

    #[test]
    fn waits_for_a_full_batch_until_the_delay_is_up() {
        let c = config(8, 500, &[]);
        assert_eq!(decide(&[1, 1, 1], &c, 1200, false), Plan::WaitUntil(1500));
        assert_eq!(decide(&[1, 1, 1], &c, 1500, false), Plan::Take(3));
        assert_eq!(decide(&[1, 1, 1], &c, 1200, true), Plan::Take(3));
        assert_eq!(decide(&[4, 4, 1], &c, 1200, false), Plan::Take(2));
        assert_eq!(decide(&[4, 3, 2], &c, 1200, false), Plan::Take(2));
        assert_eq!(decide(&[8], &c, 1000, false), Plan::Take(1));
        // No delay: what is queued runs at once.
        assert_eq!(
            decide(&[1, 1], &config(8, 0, &[]), 1001, false),
            Plan::Take(2)
        );
    }

    #[test]
    fn preferred_sizes_run_as_soon_as_they_form() {
        let c = config(8, 500, &[2, 4]);
        assert_eq!(decide(&[1], &c, 1100, false), Plan::WaitUntil(1500));
        assert_eq!(decide(&[1, 1], &c, 1100, false), Plan::Take(2));
        assert_eq!(decide(&[1, 1, 1], &c, 1100, false), Plan::Take(2));
        assert_eq!(decide(&[1, 1, 1, 1, 1], &c, 1100, false), Plan::Take(4));
        assert_eq!(decide(&[3, 3], &c, 1100, false), Plan::Take(2));
        assert_eq!(decide(&[1, 1, 1], &c, 1600, false), Plan::Take(3));
    }

    #[test]
    fn without_dynamic_batching_one_request_at_a_time() {
        let mut c = config(8, 500, &[]);
        c.dynamic = false;
        assert_eq!(decide(&[1, 1, 1], &c, 1000, false), Plan::Take(1));
        let c = config(0, 500, &[]);
        assert_eq!(decide(&[1, 1, 1], &c, 1000, false), Plan::Take(1));
    }

    #[test]
    fn a_lone_request_stops_waiting_until_company_comes() {
        let mut w = IdleWait::default();
        for _ in 0..LONE_RUNS_TO_SKIP {
            assert!(!w.skips_wait());
            w.ran(1, false);
        }
        // Alone: PROBE_EVERY - 1 requests skip the wait, then one waits again.
        for round in 0..3 {
            for _ in 0..PROBE_EVERY - 1 {
                assert!(w.skips_wait(), "round {round}");
                w.ran(1, true);
            }
            assert!(!w.skips_wait(), "round {round}: the probe waits");
            w.ran(1, false);
        }
        // Company: a run of two brings the wait back for LONE_RUNS_TO_SKIP runs.
        w.ran(2, true);
        assert_eq!(w, IdleWait::default());
        assert!(!w.skips_wait());
        // A probe that formed a batch also brings it back.
        let mut w = IdleWait::default();
        (0..LONE_RUNS_TO_SKIP).for_each(|_| w.ran(1, false));
        w.ran(3, false);
        assert!(!w.skips_wait());
    }
}
