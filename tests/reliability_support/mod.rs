//! Helpers for the `reliability_*` tests: fixture paths, scratch directories, running a test
//! of the current executable in a child process (with a timeout), resource limits, memory
//! figures from /proc.
#![allow(dead_code)]

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../module_support/mod.rs"]
pub mod module_support;

pub use module_support::fixtures;

/// A scratch directory for this process, named with its pid (under `reliability_tests`).
pub fn scratch(name: &str) -> PathBuf {
    module_support::scratch_in("reliability_tests", name)
}

/// What a child process did.
#[derive(Debug)]
pub struct ChildOutcome {
    /// Exit code, `None` when killed by a signal (or by the timeout).
    pub code: Option<i32>,
    /// The signal that ended it, if any.
    pub signal: Option<i32>,
    /// Whether the timeout killed it.
    pub timed_out: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// How long it ran.
    pub elapsed: Duration,
}

/// A running child: the test `test_name` of this executable, run alone.
pub struct Child {
    child: std::process::Child,
    started: Instant,
    timeout: Duration,
}

/// Starts the (ignored) test `test_name` of the current test executable in a child process
/// with `envs` set; `timeout` bounds it (see [`Child::wait`]).
pub fn spawn_test(test_name: &str, envs: &[(&str, String)], timeout: Duration) -> Child {
    let exe = std::env::current_exe().expect("current test executable");
    let mut cmd = Command::new(exe);
    cmd.args([
        test_name,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("RUST_BACKTRACE", "0")
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    Child {
        child: cmd.spawn().expect("spawning the test executable"),
        started: Instant::now(),
        timeout,
    }
}

/// Runs the `#[ignore]`d test `inner` of this binary in a child process with `env` added, and
/// fails unless it passes within two minutes; returns what it printed.
pub fn in_child(inner: &str, env: &[(&str, String)]) -> ChildOutcome {
    let out = spawn_test(inner, env, Duration::from_secs(120)).wait();
    assert!(!out.timed_out, "{inner} hung");
    assert_eq!(
        out.code,
        Some(0),
        "{inner}:\n{}\n{}",
        out.stdout,
        out.stderr
    );
    out
}

impl Child {
    /// Whether it has ended (or must be killed for running past its timeout).
    pub fn done(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_))) || self.started.elapsed() >= self.timeout
    }

    /// Waits for the child, killing it once it runs past its timeout.
    pub fn wait(mut self) -> ChildOutcome {
        use std::os::unix::process::ExitStatusExt;
        // Drain the pipes on threads so a chatty child cannot block on a full pipe.
        let mut out = self.child.stdout.take().unwrap();
        let mut err = self.child.stderr.take().unwrap();
        let t_out = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        let t_err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let mut timed_out = false;
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("waiting for the child") {
                break st;
            }
            if self.started.elapsed() >= self.timeout {
                timed_out = true;
                let _ = self.child.kill();
                break self.child.wait().expect("reaping the killed child");
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        ChildOutcome {
            code: status.code(),
            signal: status.signal(),
            timed_out,
            stdout: t_out.join().unwrap_or_default(),
            stderr: t_err.join().unwrap_or_default(),
            elapsed: self.started.elapsed(),
        }
    }
}

/// Limits this process's address space to `bytes` (RLIMIT_AS), so a runaway allocation fails
/// instead of exhausting the machine.
pub fn limit_address_space(bytes: u64) {
    let lim = libc::rlimit {
        rlim_cur: bytes as libc::rlim_t,
        rlim_max: bytes as libc::rlim_t,
    };
    // SAFETY: setrlimit reads one struct.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) };
    assert_eq!(rc, 0, "setrlimit(RLIMIT_AS) failed");
}

/// Resident set size of this process in bytes (/proc/self/statm, second field, in pages).
pub fn rss_bytes() -> u64 {
    let text = std::fs::read_to_string("/proc/self/statm").expect("reading /proc/self/statm");
    let pages: u64 = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("statm has a resident field");
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    pages * page
}

/// Whether a file named `file_name` (the last path component) is mapped into this process.
pub fn is_mapped(file_name: &str) -> bool {
    let suffix = format!("/{file_name}");
    std::fs::read_to_string("/proc/self/maps")
        .expect("reading /proc/self/maps")
        .lines()
        .any(|l| l.trim_end().ends_with(&suffix))
}

/// A small deterministic generator (xorshift64*), so every run builds the same mutants.
pub struct Rng(u64);

impl Rng {
    /// A generator from a non-zero seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// The offset of the first occurrence of `needle` in `haystack`.
pub fn find_bytes(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
