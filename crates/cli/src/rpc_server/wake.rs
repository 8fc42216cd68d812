//! Waking the listener the moment a session ends: a `SIGCHLD` handler writes a byte to a pipe
//! the listener polls with its socket (the self-pipe trick), so it neither sleeps past a
//! session's end nor spins while a session runs.

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

/// The pipe's write end, for the handler (-1: none).
static WRITE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_sigchld(_: libc::c_int) {
    let fd = WRITE_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        let b = 1u8;
        // SAFETY: write(2) is async-signal-safe; the pipe is non-blocking, so a full pipe
        // (already woken) drops the byte instead of blocking.
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    }
}

/// The listener's end of the pipe.
pub struct ChildWake {
    read: i32,
    write: i32,
}

impl ChildWake {
    /// Makes the pipe and installs the handler.
    pub fn install() -> std::io::Result<ChildWake> {
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 fills the two descriptors; sigaction installs a handler that only
        // calls write(2) on the non-blocking pipe.
        unsafe {
            if libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            WRITE_FD.store(fds[1], Ordering::Relaxed);
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigchld as *const () as usize;
            sa.sa_flags = libc::SA_RESTART | libc::SA_NOCLDSTOP;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(libc::SIGCHLD, &sa, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(ChildWake {
            read: fds[0],
            write: fds[1],
        })
    }

    /// Its descriptors, for a session child to close.
    pub fn fds(&self) -> [i32; 2] {
        [self.read, self.write]
    }

    /// Empties the pipe.
    fn drain(&self) {
        let mut buf = [0u8; 64];
        // SAFETY: reads into a local buffer from our non-blocking pipe until it is empty.
        while unsafe { libc::read(self.read, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
    }

    /// Waits until a session ends, `listener` (when given) is readable, or `timeout` passes;
    /// returns whether the listener is readable.
    pub fn wait(&self, listener: Option<i32>, timeout: Duration) -> bool {
        let mut p = [
            libc::pollfd {
                fd: self.read,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: listener.unwrap_or(-1),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: two valid pollfd entries for the call (a negative fd is ignored by poll).
        let n = unsafe { libc::poll(p.as_mut_ptr(), 2, ms) };
        if n > 0 && p[0].revents != 0 {
            self.drain();
        }
        n > 0 && p[1].revents & libc::POLLIN != 0
    }
}

/// In a session child: the listener's handler and pipe are not its own.
pub fn forget_in_child() {
    WRITE_FD.store(-1, Ordering::Relaxed);
    // SAFETY: restores the default disposition of SIGCHLD.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) };
}
