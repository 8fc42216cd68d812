//! Sessions as child processes: each forked from the listener with the connected socket,
//! run in its own process group and work directory, reaped when it ends (whatever ended it),
//! and killed when the client's `-timeout` passes, after TVM's `RPCSessionTimeoutError` is
//! sent to the client (as TVM's `_serving` does).

use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tvmrt::{Error, Result};

/// One running session.
pub struct Child {
    pid: libc::pid_t,
    /// The listener's copy of the connection: closed when the session ends, so the client
    /// sees the end even if the child died; used to send the timeout error.
    sock: TcpStream,
    timeout: Option<Duration>,
    started: Instant,
    work_dir: PathBuf,
}

/// The running sessions.
pub struct Children {
    base: PathBuf,
    list: Vec<Child>,
    counter: u64,
    /// Each session's allocation limit in bytes.
    memory_limit: usize,
}

impl Children {
    pub fn new(base: PathBuf, memory_limit: usize) -> Children {
        Children {
            base,
            list: Vec::new(),
            counter: 0,
            memory_limit,
        }
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Forks a session on `sock`; `close_fds` are the listener's own descriptors, closed in
    /// the child.
    pub fn spawn(
        &mut self,
        sock: TcpStream,
        timeout: Option<Duration>,
        close_fds: &[i32],
    ) -> Result<()> {
        self.counter += 1;
        let work_dir = self
            .base
            .join(format!("session-{}-{}", std::process::id(), self.counter));
        std::fs::create_dir_all(&work_dir)
            .map_err(|e| Error::runtime(format!("creating {}: {e}", work_dir.display())))?;
        // SAFETY: the listener is single-threaded and holds no lock, so the child may run
        // anything; the parent only records the pid.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(Error::runtime(format!(
                "fork: {}",
                std::io::Error::last_os_error()
            )));
        }
        if pid == 0 {
            run_child(sock, close_fds, &work_dir, self.memory_limit);
        }
        self.list.push(Child {
            pid,
            sock,
            timeout,
            started: Instant::now(),
            work_dir,
        });
        Ok(())
    }

    /// Reaps the sessions that ended; returns how many.
    pub fn reap(&mut self) -> usize {
        let before = self.list.len();
        self.list.retain(|c| {
            let mut status = 0;
            // SAFETY: `c.pid` is our child; WNOHANG never blocks.
            let r = unsafe { libc::waitpid(c.pid, &mut status, libc::WNOHANG) };
            if r == 0 {
                return true;
            }
            if libc::WIFSIGNALED(status) {
                eprintln!(
                    "tvmrt rpc-server: session {} ended by signal {} (the server goes on)",
                    c.pid,
                    libc::WTERMSIG(status)
                );
            }
            finish(c);
            false
        });
        before - self.list.len()
    }

    /// How long until the next session's timeout, if any has one.
    pub fn next_deadline(&self) -> Option<Duration> {
        self.list
            .iter()
            .filter_map(|c| c.timeout.map(|t| t.saturating_sub(c.started.elapsed())))
            .min()
    }

    /// Ends the sessions whose client's timeout passed, telling the client why.
    pub fn expire(&mut self) {
        self.list.retain(|c| {
            let Some(t) = c.timeout else { return true };
            if c.started.elapsed() < t {
                return true;
            }
            let msg = format!(
                "RPCSessionTimeoutError: Your {}s session has expired, try to increase the \
                 \"session_timeout\" value.",
                t.as_secs_f64()
            );
            use std::io::Write as _;
            let _ = (&c.sock).write_all(&tvmrt::rpc::wire::exception_packet(&msg));
            // SAFETY: signals to our own child's process group, then reaping it.
            unsafe {
                libc::kill(-c.pid, libc::SIGKILL);
                libc::kill(c.pid, libc::SIGKILL);
                let mut status = 0;
                libc::waitpid(c.pid, &mut status, 0);
            }
            eprintln!("tvmrt rpc-server: session {} timed out after {t:?}", c.pid);
            finish(c);
            false
        });
    }
}

fn finish(c: &Child) {
    let _ = c.sock.shutdown(std::net::Shutdown::Both);
    let _ = std::fs::remove_dir_all(&c.work_dir);
}

/// The child: serves the session and exits, never returning.
fn run_child(
    mut sock: TcpStream,
    close_fds: &[i32],
    work_dir: &std::path::Path,
    memory_limit: usize,
) -> ! {
    super::wake::forget_in_child();
    // SAFETY: closing the listener's descriptors, which this process does not use; its own
    // process group, so a timeout kills what the session started (a linker) too.
    unsafe {
        for &fd in close_fds {
            libc::close(fd);
        }
        libc::setpgid(0, 0);
    }
    let _ = std::env::set_current_dir(work_dir);
    tvmrt::rpc::env::set_work_dir(work_dir);
    let _ = sock.set_nodelay(true);
    let session = tvmrt::rpc::Session::with_memory_limit(memory_limit);
    let code = match tvmrt::rpc::serve_channel(&mut sock, session) {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("tvmrt rpc-server: session {}: {e}", std::process::id());
            1
        }
    };
    let _ = sock.as_raw_fd();
    drop(sock);
    // SAFETY: ends the child without running the parent's exit handlers twice.
    unsafe { libc::_exit(code) }
}
