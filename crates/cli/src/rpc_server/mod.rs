//! `tvmrt rpc-server`: TVM's RPC server on tvmrt, so TVM's client, tracker and MetaSchedule
//! reach a board that runs only this tool.
//!
//! The listening process only listens, registers with the tracker and forks: each session is
//! a child process in its own work directory (as PostgreSQL's postmaster forks a backend), so
//! a kernel that crashes, a library that faults in `dlopen`, a client that resets or sends
//! garbage ends that session alone and the server keeps serving. The listening process never
//! touches the runtime, so forking it is safe (one thread, no runtime state to inherit).

mod handshake;
mod session_child;
mod tracker;
mod wake;

use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use tvmrt::{Error, Result};

use self::session_child::Children;
use self::tracker::{Tracker, PING_PERIOD};
use self::wake::ChildWake;

/// `tvmrt rpc-server` arguments (TVM's `python -m tvm.exec.rpc_server` flags).
#[derive(Parser)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    host: String,
    /// First port to try.
    #[arg(long, default_value_t = 9091)]
    port: u16,
    /// Ports up to (not including) this one are tried when `--port` is taken.
    #[arg(long, default_value_t = 9199)]
    port_end: u16,
    /// The key clients (and the tracker) ask for.
    #[arg(long, default_value = "")]
    key: String,
    /// Register with TVM's RPC tracker at HOST:PORT.
    #[arg(long)]
    tracker: Option<String>,
    /// The address the tracker tells clients (default: what the tracker sees).
    #[arg(long)]
    custom_addr: Option<String>,
    /// Connect out to TVM's RPC proxy at HOST:PORT instead of listening (for a board behind
    /// a NAT).
    #[arg(long)]
    proxy: Option<String>,
    /// Where each session's work directory is made (default: the system's temp dir).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Sessions served at once (TVM's server serves one: measurements need the board alone).
    #[arg(long, default_value_t = 1)]
    max_sessions: usize,
    /// The most bytes one session may hold allocated at once (default: the machine's memory);
    /// a request past it is refused with an error instead of starving the board.
    #[arg(long)]
    memory_limit: Option<usize>,
}

/// The machine's physical memory in bytes.
fn physical_memory() -> usize {
    // SAFETY: sysconf only reads configuration values.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages > 0 && size > 0 {
        (pages as usize).saturating_mul(size as usize)
    } else {
        usize::MAX
    }
}

fn io(e: std::io::Error, what: &str) -> Error {
    Error::runtime(format!("rpc-server: {what}: {e}"))
}

/// Binds the first free port of `[port, port_end)` (TVM's rule).
fn bind(host: &str, port: u16, port_end: u16) -> Result<TcpListener> {
    let end = port_end.max(port.saturating_add(1));
    let mut last = None;
    for p in port..end {
        match TcpListener::bind((host, p)) {
            Ok(l) => return Ok(l),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => last = Some(e),
            Err(e) => return Err(io(e, &format!("binding {host}:{p}"))),
        }
    }
    Err(Error::runtime(format!(
        "rpc-server: cannot bind to any port in [{port}, {end}) on {host}{}",
        last.map(|e| format!(": {e}")).unwrap_or_default()
    )))
}

pub fn main(a: Args) -> Result<()> {
    let base = match &a.work_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("tvmrt-rpc-server-{}", std::process::id())),
    };
    std::fs::create_dir_all(&base).map_err(|e| io(e, "creating the work dir"))?;
    // Absolute: a session changes into its own directory, where a relative base would name
    // another place.
    let base = std::fs::canonicalize(&base).map_err(|e| io(e, "resolving the work dir"))?;
    if a.max_sessions == 0 {
        return Err(Error::value(
            "rpc-server: --max-sessions must be at least 1",
        ));
    }
    let memory_limit = a.memory_limit.unwrap_or_else(physical_memory);
    if let Some(proxy) = &a.proxy {
        return proxy_loop(proxy, &a.key, Children::new(base, memory_limit));
    }
    let listener = bind(&a.host, a.port, a.port_end)?;
    let port = listener
        .local_addr()
        .map_err(|e| io(e, "local address"))?
        .port();
    println!("listening on {}:{port}", a.host);
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let mut tracker = a
        .tracker
        .clone()
        .map(|t| Tracker::new(t, a.key.clone(), port, a.custom_addr.clone()));
    let mut children = Children::new(base, memory_limit);
    let wake = ChildWake::install().map_err(|e| io(e, "installing the SIGCHLD handler"))?;
    loop {
        let finished = children.reap();
        if let Some(t) = tracker.as_mut() {
            // Free again after each session: offered under a fresh match key.
            for _ in 0..finished {
                t.put();
            }
        }
        children.expire();
        // Until a session ends or times out, or (with room for one) a client comes or the
        // tracker is due a ping; at capacity the listener sleeps, out of the way of the
        // session's measurements.
        let deadline = children.next_deadline();
        if children.len() >= a.max_sessions {
            wake.wait(None, deadline.unwrap_or(PING_PERIOD));
            continue;
        }
        if let Some(t) = tracker.as_mut() {
            t.keep_alive();
        }
        let wait = deadline.map_or(PING_PERIOD, |d| d.min(PING_PERIOD));
        if !wake.wait(Some(listener.as_raw_fd()), wait) {
            continue;
        }
        let (mut sock, peer) = match listener.accept() {
            Ok(c) => c,
            Err(_) => continue,
        };
        let expected = match &tracker {
            Some(t) => t.matchkey().to_string(),
            None => a.key.clone(),
        };
        // A peer that says nothing must not hold the listener.
        let _ = sock.set_read_timeout(Some(Duration::from_secs(10)));
        let client = match handshake::accept(&mut sock, &expected, &a.key) {
            Ok(Some(k)) => k,
            Ok(None) => {
                eprintln!("tvmrt rpc-server: mismatched key or not an RPC client from {peer}");
                continue;
            }
            Err(e) => {
                eprintln!("tvmrt rpc-server: handshake with {peer} failed: {e}");
                continue;
            }
        };
        let _ = sock.set_read_timeout(None);
        let mut skip_fds: Vec<i32> = wake.fds().to_vec();
        skip_fds.push(listener.as_raw_fd());
        skip_fds.extend(tracker.as_ref().and_then(|t| t.raw_fd()));
        match children.spawn(sock, client.timeout, &skip_fds) {
            Ok(()) => eprintln!("tvmrt rpc-server: session from {peer}"),
            Err(e) => eprintln!("tvmrt rpc-server: cannot start a session for {peer}: {e}"),
        }
        if let Some(t) = tracker.as_mut() {
            if children.len() < a.max_sessions {
                t.put();
            }
        }
    }
}

/// Connects out to TVM's proxy (`python -m tvm.exec.rpc_proxy`) as `server:<key>`, serves the
/// session it brings (with the client's options, which the proxy passes on as its key), and
/// connects again; gives up after 5 failed tries 5 s apart, as TVM's server.
fn proxy_loop(addr: &str, key: &str, mut children: Children) -> Result<()> {
    use tvmrt::rpc::wire::RPC_MAGIC;
    let mut failures = 0;
    loop {
        let attempt = (|| -> std::io::Result<(TcpStream, String)> {
            let mut s = TcpStream::connect(addr)?;
            handshake::write_key(&mut s, RPC_MAGIC, &format!("server:{key}"))?;
            let magic = handshake::read_i32(&mut s)?;
            if magic == RPC_MAGIC + 1 {
                return Err(std::io::Error::other(format!(
                    "key server:{key} is already used at the proxy"
                )));
            }
            if magic == RPC_MAGIC + 2 {
                eprintln!("tvmrt rpc-server: the proxy has no client for key {key} yet");
            } else if magic != RPC_MAGIC {
                return Err(std::io::Error::other(format!("{addr} is not an RPC proxy")));
            }
            let remote_key = handshake::read_key(&mut s)?;
            Ok((s, remote_key))
        })();
        match attempt {
            Ok((sock, remote_key)) => {
                failures = 0;
                let options = format!("client: {remote_key}");
                let timeout = handshake::parse_client_key(&options).and_then(|c| c.timeout);
                children.spawn(sock, timeout, &[])?;
                while !children.is_empty() {
                    children.reap();
                    children.expire();
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            Err(e) => {
                failures += 1;
                eprintln!("tvmrt rpc-server: proxy {addr}: {e}; retry in 5 s");
                if failures > 5 {
                    return Err(Error::runtime(format!(
                        "rpc-server: proxy {addr}: maximum retries: {e}"
                    )));
                }
                std::thread::sleep(Duration::from_secs(5));
            }
        }
    }
}
