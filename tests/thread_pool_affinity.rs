//! `runtime.config_threadpool` (TVM's affinity modes and thread count) on this machine's real
//! threads: the CPU sets of the pool's workers and of the configuring thread read back with
//! `sched_getaffinity`, the thread count launches then use, and bad configurations. One test
//! (its own process): the pool is process-wide and the checks run in order.

use std::ffi::c_void;
use std::sync::atomic::{AtomicI64, Ordering};

use tvmrt::backend::affinity::{allowed_cpus, cpus_of};
use tvmrt::backend::thread_pool::{self, ParallelGroupEnv};
use tvmrt::value::Any;
use tvmrt::Function;

fn global(name: &str) -> Function {
    tvmrt::function::registry::get(name).unwrap_or_else(|| panic!("no global {name}"))
}

/// The CPUs kernel thread `tid` may run on (0: the calling thread).
fn affinity_of(tid: i32) -> Vec<usize> {
    // SAFETY: a zeroed bit set the kernel fills.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the size matches `set`.
    let rc =
        unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    assert_eq!(rc, 0, "sched_getaffinity({tid})");
    cpus_of(&set)
}

fn strings(cpus: &[usize]) -> Any {
    let items: Vec<Any> = cpus.iter().map(|c| Any::from(c.to_string())).collect();
    global("ffi.Array").call_values(&items).unwrap()
}

fn config(mode: i64, nthreads: i64, cpus: Option<&[usize]>) -> tvmrt::Result<Any> {
    let mut args = vec![Any::from(mode), Any::from(nthreads)];
    if let Some(c) = cpus {
        args.push(strings(c));
    }
    global("runtime.config_threadpool").call_values(&args)
}

fn num_threads() -> i64 {
    global("runtime.NumThreads")
        .call_values(&[])
        .unwrap()
        .view()
        .as_i64()
        .unwrap()
}

static SEEN_NUM_TASK: AtomicI64 = AtomicI64::new(-1);

unsafe extern "C" fn record_num_task(_: i32, penv: *mut ParallelGroupEnv, _: *mut c_void) -> i32 {
    // SAFETY: the pool passes its live environment.
    SEEN_NUM_TASK.store(unsafe { (*penv).num_task } as i64, Ordering::SeqCst);
    0
}

fn launch_width() -> i64 {
    // SAFETY: the task only writes an atomic.
    unsafe { thread_pool::parallel_launch(record_num_task, std::ptr::null_mut(), 0) }.unwrap();
    SEEN_NUM_TASK.load(Ordering::SeqCst)
}

#[test]
fn config_threadpool_pins_threads_as_tvm_does() {
    // A two-thread pool (the launching thread and one worker), whatever the machine.
    std::env::set_var("TVM_NUM_THREADS", "2");
    std::env::remove_var("TVM_BIND_THREADS");
    let allowed = allowed_cpus();
    let first = allowed[0];
    let last = *allowed.last().unwrap();
    assert_eq!(num_threads(), 2);
    // At start, as TVM's pool: worker 1 on the second big core (the launching thread keeps
    // the first), the launching thread left alone.
    let topo = tvmrt::backend::affinity::Topology::detect();
    let workers = thread_pool::worker_thread_ids();
    assert_eq!(workers.len(), 1);
    assert!(workers[0] > 0);
    if topo.sorted.len() >= 2 {
        assert_eq!(affinity_of(workers[0]), [topo.sorted[1]]);
    } else {
        assert_eq!(affinity_of(workers[0]), allowed);
    }
    assert_eq!(affinity_of(0), allowed);

    // kSpecifyOneCorePerThread: worker 1 on the second listed CPU; the caller (which runs task
    // 0) on every listed one.
    config(-2, 0, Some(&[last, first])).unwrap();
    let mut both = vec![first, last];
    both.dedup();
    if allowed.len() >= 2 {
        assert_eq!(affinity_of(workers[0]), [first]);
    } else {
        // One CPU and two threads: TVM gives every thread the whole list.
        assert_eq!(affinity_of(workers[0]), both);
    }
    assert_eq!(affinity_of(0), both);
    assert_eq!(num_threads(), 2);
    assert_eq!(launch_width(), 2);

    // kSpecifyThreadShareAllCore on one CPU: every thread there, and one thread used.
    config(-3, 0, Some(&[last])).unwrap();
    assert_eq!(affinity_of(workers[0]), [last]);
    assert_eq!(affinity_of(0), [last]);
    assert_eq!(num_threads(), 1);
    assert_eq!(launch_width(), 1);

    // kBig with an explicit count: the sorted order's second core for worker 1 (this machine's
    // cores all run at one frequency, or report none: all are big, in id order).
    config(1, 2, None).unwrap();
    assert_eq!(num_threads(), 2);
    assert_eq!(launch_width(), 2);
    if topo.sorted.len() >= 2 {
        assert_eq!(affinity_of(workers[0]), [topo.sorted[1]]);
        assert_eq!(affinity_of(0), topo.big()[..topo.big_count.min(2)].to_vec());
    }
    // kLittle: the slow end of the order.
    config(-1, 0, None).unwrap();
    if topo.sorted.len() >= 2 {
        let n = topo.sorted.len();
        assert_eq!(affinity_of(workers[0]), [topo.sorted[n - 2]]);
    }

    // Mode 0 changes the count only; ints are accepted as CPU ids too.
    config(0, 1, None).unwrap();
    assert_eq!(num_threads(), 1);
    let ints = global("ffi.Array")
        .call_values(&[Any::from(first as i64)])
        .unwrap();
    global("runtime.config_threadpool")
        .call_values(&[Any::from(-3i64), Any::from(0i64), ints])
        .unwrap();
    assert_eq!(affinity_of(workers[0]), [first]);

    // Bad configurations: errors naming what is wrong, nothing changed.
    let err = |r: tvmrt::Result<Any>| match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.message.clone(),
    };
    assert!(err(config(5, 0, None)).contains("unknown affinity mode 5"));
    assert!(err(config(1, -1, None)).contains("thread count must be >= 0"));
    assert!(err(config(-2, 0, None)).contains("needs the list of CPUs"));
    assert!(err(config(-3, 0, Some(&[100_000]))).contains("CPU 100000 is not one"));
    let bad = global("ffi.Array").call_values(&[Any::from("x1")]).unwrap();
    let e = global("runtime.config_threadpool")
        .call_values(&[Any::from(-3i64), Any::from(0i64), bad])
        .err()
        .unwrap();
    assert!(e.message.contains("'x1' is not a number"), "{}", e.message);
    assert_eq!(affinity_of(workers[0]), [first]);

    // set_current_thread_affinity (TVM's disco helper) pins the calling thread.
    let shape = global("ffi.Shape")
        .call_values(&[Any::from(last as i64)])
        .unwrap();
    global("tvm.runtime.threading.set_current_thread_affinity")
        .call_values(&[shape])
        .unwrap();
    assert_eq!(affinity_of(0), [last]);

    // Back to every CPU, and launches still run.
    config(-3, 2, Some(&allowed)).unwrap();
    assert_eq!(affinity_of(workers[0]), allowed);
    assert_eq!(affinity_of(0), allowed);
    assert_eq!(launch_width(), 2);

    // TVM_BIND_THREADS other than 1: the count changes, affinities do not.
    std::env::set_var("TVM_BIND_THREADS", "0");
    config(-3, 0, Some(&[last])).unwrap();
    assert_eq!(num_threads(), 1);
    assert_eq!(affinity_of(workers[0]), allowed);
    assert_eq!(affinity_of(0), allowed);
}
