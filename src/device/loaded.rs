//! A driver opened on first use, with its devices (OpenCL's platform, Vulkan's instance): what
//! back ends that find all their devices at once share. Nothing touches the driver before it
//! is needed; once looked for, the same driver (or the same error: no library, no driver, no
//! device) is returned every time, and the device count can be read with one atomic load (host
//! launchers call `__tvm_set_device` before every launch).

use std::sync::atomic::{AtomicUsize, Ordering};

use once_cell::sync::OnceCell;

use super::device_type_name;
use crate::error::{Error, Result};

/// A loaded driver's devices, in tvmrt's id order.
pub trait Devices {
    /// What the back end keeps of a device.
    type Device;
    /// The devices; a device's id is its index.
    fn devices(&self) -> &[Self::Device];
}

/// A driver `T`, loaded on first use.
pub struct LoadedDriver<T> {
    cell: OnceCell<std::result::Result<T, Error>>,
    /// How many devices were found (0 until they have been looked for, or when none were).
    count: AtomicUsize,
}

impl<T: Devices> LoadedDriver<T> {
    /// Not loaded yet.
    pub const fn new() -> Self {
        LoadedDriver {
            cell: OnceCell::new(),
            count: AtomicUsize::new(0),
        }
    }

    /// The driver, loaded by `load` on the first call; what that call gave every time after.
    pub fn get_or_load(&self, load: impl FnOnce() -> Result<T>) -> Result<&T> {
        self.cell
            .get_or_init(|| {
                let found = load();
                if let Ok(t) = &found {
                    self.count.store(t.devices().len(), Ordering::Release);
                }
                found
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The driver if it has been loaded already, without loading it.
    pub fn get(&self) -> Option<&T> {
        self.cell.get().and_then(|c| c.as_ref().ok())
    }

    /// The number of devices when they have been found already, without looking for them.
    pub fn known_device_count(&self) -> Option<usize> {
        match self.count.load(Ordering::Acquire) {
            0 => None,
            n => Some(n),
        }
    }
}

impl<T: Devices> Default for LoadedDriver<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Device `id` of `devices`, or an error naming how many there are, for the back end of
/// `device_type` that messages call `name` ("OpenCL").
pub fn device_by_id<'a, D>(
    devices: &'a [D],
    id: i32,
    device_type: u32,
    name: &str,
) -> Result<&'a D> {
    usize::try_from(id)
        .ok()
        .and_then(|i| devices.get(i))
        .ok_or_else(|| {
            let n = devices.len();
            let key = device_type_name(device_type);
            Error::value(format!(
                "{name} device {id} does not exist: this machine has {n} {name} device{} \
                 ({key}:0{})",
                if n == 1 { "" } else { "s" },
                if n > 1 {
                    format!(" to {key}:{}", n - 1)
                } else {
                    String::new()
                }
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Two(Vec<&'static str>);

    impl Devices for Two {
        type Device = &'static str;
        fn devices(&self) -> &[&'static str] {
            &self.0
        }
    }

    #[test]
    fn loads_once_and_counts_devices() {
        let d: LoadedDriver<Two> = LoadedDriver::new();
        assert!(d.get().is_none());
        assert_eq!(d.known_device_count(), None);
        let t = d.get_or_load(|| Ok(Two(vec!["a", "b"]))).unwrap();
        assert_eq!(t.devices(), ["a", "b"]);
        let again = d.get_or_load(|| panic!("loaded twice")).unwrap();
        assert!(std::ptr::eq(t, again));
        assert_eq!(d.known_device_count(), Some(2));
        assert!(d.get().is_some());

        let failed: LoadedDriver<Two> = LoadedDriver::new();
        let e = failed
            .get_or_load(|| Err(Error::value("no driver")))
            .unwrap_err();
        assert_eq!(e.message, "no driver");
        let e = failed.get_or_load(|| Ok(Two(vec![]))).unwrap_err();
        assert_eq!(e.message, "no driver", "the first answer stays");
        assert_eq!(failed.known_device_count(), None);
        assert!(failed.get().is_none());
    }

    #[test]
    fn device_ids_name_the_range() {
        let msg = |n: usize, id| {
            let ds = vec![0u8; n];
            device_by_id(&ds, id, 7, "Vulkan")
                .unwrap_err()
                .message
                .clone()
        };
        assert_eq!(device_by_id(&[5u8, 6], 1, 4, "OpenCL").unwrap(), &6);
        assert_eq!(
            msg(2, 2),
            "Vulkan device 2 does not exist: this machine has 2 Vulkan devices (vulkan:0 to \
             vulkan:1)"
        );
        assert_eq!(
            msg(1, -1),
            "Vulkan device -1 does not exist: this machine has 1 Vulkan device (vulkan:0)"
        );
        assert_eq!(
            msg(0, 0),
            "Vulkan device 0 does not exist: this machine has 0 Vulkan devices (vulkan:0)"
        );
    }
}
