//! The calling thread's current stream per device (`TVMFFIEnvSetStream` / `TVMFFIEnvGetStream`,
//! tvm-ffi `src/ffi/extra/env_context.cc`): thread-local, null when never set. It stores any
//! device's stream (it is a context for kernels, not a device API); back ends whose streams are
//! real read it to decide where to queue work, and TVM's default `DeviceAPI::SetStream` writes
//! it.

use std::cell::RefCell;
use std::collections::HashMap;

use super::api::StreamHandle;
use crate::error::{Error, Result};

thread_local! {
    static STREAMS: RefCell<HashMap<(i32, i32), usize>> = RefCell::new(HashMap::new());
}

fn check_device_key(device_type: i32, device_id: i32) -> Result<()> {
    if device_type < 0 || device_id < 0 {
        return Err(Error::value(format!(
            "invalid device (device_type={device_type}, device_id={device_id}): both must be >= 0"
        )));
    }
    Ok(())
}

/// Sets this thread's stream for a device, returning the previous one (null if none).
pub fn set_current(device_type: i32, device_id: i32, stream: StreamHandle) -> Result<StreamHandle> {
    check_device_key(device_type, device_id)?;
    let old = STREAMS.with(|s| {
        let mut s = s.borrow_mut();
        if stream.is_null() {
            s.remove(&(device_type, device_id))
        } else {
            s.insert((device_type, device_id), stream as usize)
        }
    });
    Ok(old.unwrap_or(0) as StreamHandle)
}

/// This thread's stream for a device (null when never set).
pub fn current(device_type: i32, device_id: i32) -> StreamHandle {
    STREAMS.with(|s| {
        s.borrow()
            .get(&(device_type, device_id))
            .copied()
            .unwrap_or(0) as StreamHandle
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_table_is_per_thread() {
        let s = 0x1234usize as StreamHandle;
        assert!(current(2, 0).is_null());
        assert!(set_current(2, 0, s).unwrap().is_null());
        assert_eq!(current(2, 0), s);
        std::thread::spawn(|| assert!(current(2, 0).is_null()))
            .join()
            .unwrap();
        assert_eq!(set_current(2, 0, std::ptr::null_mut()).unwrap(), s);
        assert!(current(2, 0).is_null());
        assert!(set_current(-1, 0, s).is_err());
    }
}
