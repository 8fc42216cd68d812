//! Registration with TVM's RPC tracker, as TVM's server does it (`python/tvm/rpc/server.py`,
//! `tracker.py`): `UPDATE_INFO` with `server:<key>` and the address, `PUT` of a fresh match
//! key whenever the server is free (at start and after every session), and, while idle, a
//! `GET_PENDING_MATCHKEYS` every ping period: a match key the tracker no longer holds for a
//! few periods is replaced by a new one. A tracker that goes away is reconnected to, and the
//! server registers again.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::handshake::{recv_json, send_json, tracker_hello};

const SUCCESS: i64 = 0;
const PUT: i64 = 3;
const UPDATE_INFO: i64 = 5;
const GET_PENDING_MATCHKEYS: i64 = 7;
/// TVM's `ping_period` and `unmatch_timeout`.
pub const PING_PERIOD: Duration = Duration::from_secs(2);
const UNMATCH_TIMEOUT: Duration = Duration::from_secs(4);

/// A random match key, `<key>:<float in [0, 1)>` as TVM's `base.random_key` makes.
fn random_key(prefix: &str, taken: &HashSet<String>) -> String {
    loop {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos(),
        );
        let r = (h.finish() >> 11) as f64 / (1u64 << 53) as f64;
        let key = format!("{prefix}:{r}");
        if !taken.contains(&key) {
            return key;
        }
    }
}

/// The server's registration with one tracker.
pub struct Tracker {
    addr: String,
    key: String,
    port: u16,
    custom_addr: Option<String>,
    conn: Option<TcpStream>,
    matchkey: String,
    old_keys: HashSet<String>,
    unmatched_since: Option<Instant>,
    last_ping: Instant,
    last_attempt: Option<Instant>,
}

fn io_err(m: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, m)
}

impl Tracker {
    pub fn new(addr: String, key: String, port: u16, custom_addr: Option<String>) -> Tracker {
        Tracker {
            addr,
            key,
            port,
            custom_addr,
            conn: None,
            matchkey: String::new(),
            old_keys: HashSet::new(),
            unmatched_since: None,
            last_ping: Instant::now(),
            last_attempt: None,
        }
    }

    /// The key a client sent by the tracker presents.
    pub fn matchkey(&self) -> &str {
        &self.matchkey
    }

    /// The tracker connection's descriptor, to close in a session's child.
    pub fn raw_fd(&self) -> Option<i32> {
        use std::os::fd::AsRawFd;
        self.conn.as_ref().map(|c| c.as_raw_fd())
    }

    fn call(&mut self, msg: Value) -> std::io::Result<Value> {
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| io_err("not connected".into()))?;
        send_json(conn, &msg)?;
        recv_json(conn)
    }

    fn expect_success(&mut self, msg: Value) -> std::io::Result<()> {
        let answer = self.call(msg)?;
        if answer.as_i64() != Some(SUCCESS) {
            return Err(io_err(format!("tracker answered {answer}")));
        }
        Ok(())
    }

    /// Offers the server under a fresh match key (it is free for one session).
    pub fn put(&mut self) {
        if self.conn.is_none() {
            return;
        }
        self.old_keys.insert(self.matchkey.clone());
        self.matchkey = random_key(&self.key, &self.old_keys);
        let msg = json!([PUT, self.key, [self.port, self.matchkey], self.custom_addr]);
        if let Err(e) = self.expect_success(msg) {
            self.lost(&e);
        }
        self.unmatched_since = None;
        self.last_ping = Instant::now();
    }

    fn lost(&mut self, e: &std::io::Error) {
        eprintln!("tvmrt rpc-server: tracker {}: {e}; reconnecting", self.addr);
        self.conn = None;
    }

    /// Connects (again) when not connected, at most once per ping period: magic,
    /// `UPDATE_INFO`, then a `PUT`.
    pub fn ensure_connected(&mut self) {
        if self.conn.is_some() {
            return;
        }
        if self.last_attempt.is_some_and(|t| t.elapsed() < PING_PERIOD) {
            return;
        }
        self.last_attempt = Some(Instant::now());
        let attempt = (|| -> std::io::Result<TcpStream> {
            let mut s = TcpStream::connect(&self.addr)?;
            s.set_read_timeout(Some(Duration::from_secs(30)))?;
            tracker_hello(&mut s)?;
            Ok(s)
        })();
        match attempt {
            Ok(s) => {
                self.conn = Some(s);
                let info = json!([UPDATE_INFO, {
                    "key": format!("server:{}", self.key),
                    "addr": [self.custom_addr, self.port],
                }]);
                if let Err(e) = self.expect_success(info) {
                    self.lost(&e);
                    return;
                }
                eprintln!("tvmrt rpc-server: registered with tracker {}", self.addr);
                self.put();
            }
            Err(e) => eprintln!(
                "tvmrt rpc-server: cannot reach tracker {}: {e}; retrying",
                self.addr
            ),
        }
    }

    /// While idle, once a ping period: asks which match keys are pending, and replaces this
    /// server's when the tracker has not held it for `UNMATCH_TIMEOUT` plus a period.
    pub fn keep_alive(&mut self) {
        self.ensure_connected();
        if self.conn.is_none() || self.last_ping.elapsed() < PING_PERIOD {
            return;
        }
        self.last_ping = Instant::now();
        let pending = match self.call(json!([GET_PENDING_MATCHKEYS])) {
            Ok(v) => v,
            Err(e) => return self.lost(&e),
        };
        let held = pending
            .as_array()
            .is_some_and(|a| a.iter().any(|k| k.as_str() == Some(&self.matchkey)));
        if held {
            self.unmatched_since = None;
            return;
        }
        let since = *self.unmatched_since.get_or_insert_with(Instant::now);
        if since.elapsed() > UNMATCH_TIMEOUT + PING_PERIOD {
            eprintln!("tvmrt rpc-server: no incoming connections, regenerate key ...");
            self.put();
        }
    }
}
