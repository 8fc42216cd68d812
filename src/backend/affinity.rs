//! Which CPUs the parallel pool's threads run on: TVM's `runtime.config_threadpool` (big or
//! little cores of a big.LITTLE chip, a thread count, or a list of CPUs) as TVM 0.19 – 0.27
//! define it (`src/runtime/threading_backend.cc`, `ThreadGroup::Impl`; `thread_pool.cc`).
//!
//! Facts mirrored from TVM:
//! - the CPUs are ordered by their `cpuinfo_max_freq` (sysfs), fastest first, ties by id; the
//!   "big" cores are those of the highest frequency, the "little" ones those of the lowest
//!   (none when every core has the same frequency); a third frequency makes everything that is
//!   not little big;
//! - modes: `kBig` (1), `kLittle` (-1), `kSpecifyOneCorePerThread` (-2: worker `i` on the
//!   `i`-th listed CPU), `kSpecifyThreadShareAllCore` (-3: every thread on all listed CPUs);
//! - the thread count is the mode's core count (or the list's length), replaced by `nthreads`
//!   when that is not 0, and never more than the pool was sized for;
//! - the launching thread runs task 0 ("worker 0"), so worker `i` (1-based) takes the `i`-th
//!   core of the order (from the slow end for `kLittle`), and the launching (configuring)
//!   thread may run on all the chosen cores;
//! - with `TVM_BIND_THREADS` set to anything but `1`, no affinity is set;
//! - with more pool threads than cores, big/little modes set no affinity; the list modes give
//!   every thread the whole list.
//!
//! - as TVM's pool does when it starts, the workers are bound to the big cores, worker `i` to
//!   the `i`-th, before any `config_threadpool` (`kBig`, nothing changed for the launching
//!   thread here: on a chip of one kind of core it may run on them all anyway).
//!
//! Where tvmrt differs: only the CPUs this process may run on (`sched_getaffinity`) are
//! considered; `kLittle` on a chip whose cores all run at one frequency means all cores (TVM
//! would use zero threads); a mode TVM does not define (other than 0, which changes no
//! affinity) or a CPU outside the allowed set is an error.

use std::collections::BTreeSet;

use crate::error::{Error, Result};

/// TVM's `ThreadGroup::AffinityMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AffinityMode {
    /// The thread count changes; affinities do not (TVM's `default:` branch, mode 0).
    Unchanged,
    /// The fastest cores (`kBig`, 1).
    Big,
    /// The slowest cores (`kLittle`, -1).
    Little,
    /// One listed CPU per thread (`kSpecifyOneCorePerThread`, -2).
    OneCorePerThread,
    /// Every thread on all listed CPUs (`kSpecifyThreadShareAllCore`, -3).
    ShareAllCores,
}

impl AffinityMode {
    /// The mode of TVM's integer code.
    pub fn from_code(code: i64) -> Result<AffinityMode> {
        Ok(match code {
            0 => AffinityMode::Unchanged,
            1 => AffinityMode::Big,
            -1 => AffinityMode::Little,
            -2 => AffinityMode::OneCorePerThread,
            -3 => AffinityMode::ShareAllCores,
            other => {
                return Err(Error::value(format!(
                    "config_threadpool: unknown affinity mode {other} (1: big cores, -1: little \
                     cores, -2: one listed CPU per thread, -3: all threads on the listed CPUs, \
                     0: leave affinity alone)"
                )))
            }
        })
    }

    fn needs_cpus(self) -> bool {
        matches!(
            self,
            AffinityMode::OneCorePerThread | AffinityMode::ShareAllCores
        )
    }
}

/// The CPUs, fastest first, with how many are big and how many little.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// CPU ids by descending maximum frequency, ties by id.
    pub sorted: Vec<usize>,
    pub big_count: usize,
    pub little_count: usize,
}

impl Topology {
    /// From `(cpu id, max frequency)` pairs (TVM's `InitSortedOrder`).
    pub fn from_frequencies(freqs: &[(usize, i64)]) -> Topology {
        let mut order = freqs.to_vec();
        crate::cold_sort::sort_by(&mut order, |a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let (Some(big), Some(little)) = (order.first().map(|p| p.1), order.last().map(|p| p.1))
        else {
            return Topology {
                sorted: Vec::new(),
                big_count: 0,
                little_count: 0,
            };
        };
        let big_count = order.iter().filter(|p| p.1 == big).count();
        let little_count = if big == little {
            0
        } else {
            order.iter().filter(|p| p.1 == little).count()
        };
        // More than two frequencies: everything not little counts as big (as TVM forces it).
        let big_count = if big_count + little_count != order.len() {
            order.len() - little_count
        } else {
            big_count
        };
        Topology {
            sorted: order.into_iter().map(|p| p.0).collect(),
            big_count,
            little_count,
        }
    }

    /// This machine's CPUs that the process may run on, with their maximum frequencies from
    /// `/sys/devices/system/cpu/cpu<N>/cpufreq/cpuinfo_max_freq` (0 where there is none, -1
    /// where it cannot be read as a number, as TVM reads them).
    pub fn detect() -> Topology {
        let freqs: Vec<(usize, i64)> = allowed_cpus()
            .into_iter()
            .map(|cpu| {
                let path = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/cpuinfo_max_freq");
                let freq = match std::fs::read_to_string(path) {
                    Ok(text) => text.trim().parse::<i64>().unwrap_or(-1),
                    Err(_) => 0,
                };
                (cpu, freq)
            })
            .collect();
        Topology::from_frequencies(&freqs)
    }

    /// The big cores, fastest first.
    pub fn big(&self) -> &[usize] {
        &self.sorted[..self.big_count]
    }

    /// The little cores, slowest first; all cores when they all run at one frequency.
    pub fn little(&self) -> Vec<usize> {
        let n = if self.little_count == 0 {
            self.sorted.len()
        } else {
            self.little_count
        };
        self.sorted.iter().rev().take(n).copied().collect()
    }
}

/// What `config_threadpool` decided: the thread count launches use, and the CPUs of each
/// thread (`None`: left as it is).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Threads a launch of `num_task = 0` uses, the launching thread included.
    pub threads: usize,
    /// CPUs of pool worker `i + 1` (worker 0 is the launching thread).
    pub workers: Vec<Option<Vec<usize>>>,
    /// CPUs of the thread that configured the pool (the one that launches).
    pub launcher: Option<Vec<usize>>,
}

/// TVM's `ThreadGroup::Configure` + `SetAffinity` for a pool of `pool_threads` threads (the
/// launching thread included; TVM's `num_workers_`), with `bind` false when `TVM_BIND_THREADS`
/// forbids affinity.
pub fn plan(
    topo: &Topology,
    mode: AffinityMode,
    nthreads: usize,
    cpus: &[usize],
    pool_threads: usize,
    bind: bool,
) -> Result<Plan> {
    let allowed: BTreeSet<usize> = crate::cold_sort::ordered(topo.sorted.iter().copied());
    if mode.needs_cpus() && cpus.is_empty() {
        return Err(Error::value(
            "config_threadpool: this affinity mode needs the list of CPUs to use (argument 2)",
        ));
    }
    if let Some(bad) = cpus.iter().find(|c| !allowed.contains(c)) {
        return Err(Error::value(format!(
            "config_threadpool: CPU {bad} is not one this process may run on ({:?})",
            allowed
        )));
    }
    let little = topo.little();
    let (mode_threads, order): (usize, Vec<usize>) = match mode {
        AffinityMode::Big => (topo.big_count, topo.sorted.clone()),
        AffinityMode::Little => (little.len(), topo.sorted.clone()),
        AffinityMode::OneCorePerThread | AffinityMode::ShareAllCores => (cpus.len(), cpus.to_vec()),
        AffinityMode::Unchanged => (pool_threads, topo.sorted.clone()),
    };
    let threads = if nthreads > 0 { nthreads } else { mode_threads };
    let threads = threads.min(pool_threads).max(1);
    let workers = pool_threads.saturating_sub(1);
    let mut out = Plan {
        threads,
        workers: vec![None; workers],
        launcher: None,
    };
    if !bind || mode == AffinityMode::Unchanged {
        return Ok(out);
    }
    let launcher_cpus = match mode {
        AffinityMode::OneCorePerThread | AffinityMode::ShareAllCores => order.clone(),
        AffinityMode::Little => little.clone(),
        // TVM: the first min(MaxConcurrency, big_count) of the order.
        _ => topo.big()[..topo.big_count.min(pool_threads)].to_vec(),
    };
    if order.len() < pool_threads {
        // More threads than cores: only the list modes set anything, the whole list for all.
        if mode.needs_cpus() {
            out.workers = vec![Some(order.clone()); workers];
            out.launcher = Some(launcher_cpus);
        }
        return Ok(out);
    }
    for (i, w) in out.workers.iter_mut().enumerate() {
        *w = Some(match mode {
            AffinityMode::ShareAllCores => order.clone(),
            AffinityMode::Little => vec![order[order.len() - (i + 1) - 1]],
            _ => vec![order[i + 1]],
        });
    }
    out.launcher = Some(launcher_cpus);
    Ok(out)
}

/// Whether `TVM_BIND_THREADS` allows setting affinity: unset or `1` (TVM reads it with
/// `atoi`); anything else leaves every thread's affinity alone.
pub fn binding_allowed() -> bool {
    match std::env::var("TVM_BIND_THREADS") {
        Err(_) => true,
        Ok(v) => v.trim().parse::<i64>().ok() == Some(1),
    }
}

/// The CPUs this process may run on, ascending: the calling thread's set the first time it is
/// asked (before the pool pins anything), the same afterwards.
pub fn allowed_cpus() -> Vec<usize> {
    static ALLOWED: once_cell::sync::Lazy<Vec<usize>> =
        once_cell::sync::Lazy::new(current_thread_cpus);
    ALLOWED.clone()
}

/// The CPUs the calling thread may run on now.
fn current_thread_cpus() -> Vec<usize> {
    // SAFETY: `set` is a plain bit set, zeroed, filled by the kernel for this process.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the size matches `set`; pid 0 is the calling thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        return (0..n).collect();
    }
    cpus_of(&set)
}

/// The CPU ids in `set`.
pub fn cpus_of(set: &libc::cpu_set_t) -> Vec<usize> {
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `i` is below CPU_SETSIZE, the set's capacity.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, set) })
        .collect()
}

/// Pins `thread` to `cpus` (`pthread_setaffinity_np`).
pub fn set_thread_affinity(thread: libc::pthread_t, cpus: &[usize]) -> Result<()> {
    // SAFETY: a zeroed bit set, filled below within its capacity.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c >= libc::CPU_SETSIZE as usize {
            return Err(Error::value(format!("CPU {c} is out of range")));
        }
        // SAFETY: `c` is below CPU_SETSIZE.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `thread` is a live thread of this process (the caller's contract for pool
    // workers, or pthread_self); the size matches `set`.
    let rc = unsafe {
        libc::pthread_setaffinity_np(thread, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(Error::runtime(format!(
            "setting the affinity of a thread to CPUs {cpus:?} failed: {}",
            std::io::Error::from_raw_os_error(rc)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 big cores (ids 4, 5) and 4 little ones (0-3), TVM's own example.
    fn big_little() -> Topology {
        let freqs = [
            (0, 1_400_000),
            (1, 1_400_000),
            (2, 1_400_000),
            (3, 1_400_000),
            (4, 2_000_000),
            (5, 2_000_000),
        ];
        Topology::from_frequencies(&freqs)
    }

    #[test]
    fn topology_orders_by_frequency_like_tvm() {
        let t = big_little();
        assert_eq!(t.sorted, [4, 5, 0, 1, 2, 3]);
        assert_eq!((t.big_count, t.little_count), (2, 4));
        assert_eq!(t.big(), [4, 5]);
        assert_eq!(t.little(), [3, 2, 1, 0]);
        // One frequency (or none readable): all big, and "little" means all of them.
        let flat = Topology::from_frequencies(&[(0, 0), (1, 0)]);
        assert_eq!((flat.big_count, flat.little_count), (2, 0));
        assert_eq!(flat.little(), [1, 0]);
        // Three frequencies: what is not little is big.
        let three = Topology::from_frequencies(&[(0, 1), (1, 2), (2, 3), (3, 3)]);
        assert_eq!(three.sorted, [2, 3, 1, 0]);
        assert_eq!((three.big_count, three.little_count), (3, 1));
    }

    #[test]
    fn big_and_little_modes_pin_one_core_per_worker() {
        let t = big_little();
        // A 6-thread pool on the big cores: 2 threads; worker 1 on the second big core (the
        // launcher, worker 0, keeps the first), the launcher on both big cores.
        let p = plan(&t, AffinityMode::Big, 0, &[], 6, true).unwrap();
        assert_eq!(p.threads, 2);
        assert_eq!(p.workers[0], Some(vec![5]));
        assert_eq!(p.workers[1], Some(vec![0]));
        assert_eq!(p.launcher, Some(vec![4, 5]));
        // Little cores, from the slow end: 4 threads.
        let p = plan(&t, AffinityMode::Little, 0, &[], 6, true).unwrap();
        assert_eq!(p.threads, 4);
        assert_eq!(p.workers[0], Some(vec![2]));
        assert_eq!(p.workers[1], Some(vec![1]));
        assert_eq!(p.launcher, Some(vec![3, 2, 1, 0]));
        // An explicit count wins, capped by the pool's size.
        assert_eq!(
            plan(&t, AffinityMode::Little, 3, &[], 6, true)
                .unwrap()
                .threads,
            3
        );
        assert_eq!(
            plan(&t, AffinityMode::Big, 9, &[], 6, true)
                .unwrap()
                .threads,
            6
        );
    }

    #[test]
    fn list_modes_use_the_given_cpus() {
        let t = big_little();
        let p = plan(&t, AffinityMode::OneCorePerThread, 0, &[3, 1, 4], 3, true).unwrap();
        assert_eq!(p.threads, 3);
        assert_eq!(p.workers, [Some(vec![1]), Some(vec![4])]);
        assert_eq!(p.launcher, Some(vec![3, 1, 4]));
        let p = plan(&t, AffinityMode::ShareAllCores, 2, &[0, 2], 2, true).unwrap();
        assert_eq!(p.threads, 2);
        assert_eq!(p.workers, [Some(vec![0, 2])]);
        // Fewer CPUs than pool threads: every thread gets the whole list.
        let p = plan(&t, AffinityMode::OneCorePerThread, 0, &[1], 4, true).unwrap();
        assert_eq!(p.threads, 1);
        assert_eq!(p.workers, vec![Some(vec![1]); 3]);
        assert_eq!(p.launcher, Some(vec![1]));
    }

    #[test]
    fn no_affinity_when_unbound_or_oversubscribed() {
        let t = big_little();
        let p = plan(&t, AffinityMode::Big, 0, &[], 6, false).unwrap();
        assert_eq!((p.threads, p.launcher.clone()), (2, None));
        assert!(p.workers.iter().all(Option::is_none));
        let p = plan(&t, AffinityMode::Big, 0, &[], 8, true).unwrap();
        assert!(p.workers.iter().all(Option::is_none));
        let p = plan(&t, AffinityMode::Unchanged, 3, &[], 6, true).unwrap();
        assert_eq!(p.threads, 3);
        assert!(p.workers.iter().all(Option::is_none) && p.launcher.is_none());
    }

    #[test]
    fn bad_configurations_are_errors() {
        let t = big_little();
        let e = plan(&t, AffinityMode::OneCorePerThread, 0, &[], 4, true).unwrap_err();
        assert!(
            e.message.contains("needs the list of CPUs"),
            "{}",
            e.message
        );
        let e = plan(&t, AffinityMode::ShareAllCores, 0, &[7], 4, true).unwrap_err();
        assert!(e.message.contains("CPU 7 is not one"), "{}", e.message);
        let e = AffinityMode::from_code(5).unwrap_err();
        assert!(
            e.message.contains("unknown affinity mode 5"),
            "{}",
            e.message
        );
        assert_eq!(AffinityMode::from_code(-1).unwrap(), AffinityMode::Little);
    }
}
