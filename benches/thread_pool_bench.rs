//! Parallel-launch overhead of tvmrt's pool (`cargo bench --bench thread_pool_bench`): an empty
//! launch and join, a launch whose tasks meet at one barrier, a launch after 3 ms idle (the
//! workers have parked), and a one-task launch (run inline). TVM's own pool is compared on real
//! kernels by `benches/run_kernel_bench.sh` (`matmul_parallel`); this bench isolates the pool.

use std::ffi::c_void;
use std::ptr;
use std::thread;
use std::time::{Duration, Instant};

use tvmrt::backend::thread_pool::{
    parallel_barrier, parallel_launch, set_num_threads, ParallelGroupEnv, ParallelLambda,
};

unsafe extern "C" fn empty_task(_: i32, _: *mut ParallelGroupEnv, _: *mut c_void) -> i32 {
    0
}

unsafe extern "C" fn barrier_task(task: i32, penv: *mut ParallelGroupEnv, _: *mut c_void) -> i32 {
    // SAFETY: the pool passes this launch's own env.
    unsafe { parallel_barrier(task, penv) }.map_or(-1, |_| 0)
}

/// Mean wall time of one launch over `iters` launches, sleeping `gap` before each.
fn time_launches(f: ParallelLambda, num_task: i32, iters: u32, gap: Duration) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        if !gap.is_zero() {
            thread::sleep(gap);
        }
        let t = Instant::now();
        // SAFETY: the tasks ignore their closure data.
        unsafe { parallel_launch(f, ptr::null_mut(), num_task) }.expect("launch failed");
        total += t.elapsed();
    }
    total / iters
}

fn main() {
    for threads in [2usize, 4] {
        set_num_threads(threads).expect("set_num_threads");
        time_launches(empty_task, 0, 1000, Duration::ZERO);
        let hot = time_launches(empty_task, 0, 100_000, Duration::ZERO);
        let bar = time_launches(barrier_task, 0, 100_000, Duration::ZERO);
        let cold = time_launches(empty_task, 0, 200, Duration::from_millis(3));
        println!(
            "threads={threads}: empty launch+join {hot:?}, with one barrier {bar:?}, \
             after 3 ms idle (workers parked) {cold:?}"
        );
    }
    let single = time_launches(empty_task, 1, 100_000, Duration::ZERO);
    println!("num_task=1 (inline): {single:?}");
}
