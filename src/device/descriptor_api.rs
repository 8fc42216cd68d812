//! The [`DeviceApi`] of back ends whose tensor `data` is a buffer descriptor rather than a
//! device address (TVM's OpenCL and Vulkan runtimes): what their `DeviceAPI`s share, written
//! once. A back end implements [`BufferBackEnd`] (its driver's calls: find a device, allocate
//! and free a buffer, copy, wait) and serves [`BufferDeviceApi`] over it.
//!
//! As in TVM: the current device is per thread (`__tvm_set_device`) and kernels launch on it;
//! each device has one in-order stream and no others (`create_stream` gives null, and syncing a
//! non-null stream is refused); copies to and from the host have finished when they return,
//! device-to-device copies are queued; workspaces come from a pool that keeps freed buffers
//! for reuse (TVM's pooled allocator). The sides of a copy are looked up in the back end's
//! [`Registry`] of live descriptors and range-checked before the driver sees them.

use std::cell::Cell;
use std::ffi::c_void;
use std::marker::PhantomData;

use super::api::{check_device_type, CopyDirection, DataRef, DeviceApi, DeviceAttr, StreamHandle};
use super::descriptor::{Recorded, Registry};
use super::loaded::{device_by_id, Devices};
use super::pool::WorkspacePool;
use super::{device_name, MAX_DEVICE_TYPE};
use crate::abi::{DLDataType, DLDevice};
use crate::error::{Error, Result};
use crate::value::Any;

thread_local! {
    /// The calling thread's current device of each device type these back ends serve (TVM's
    /// `OpenCLThreadEntry::device`, `VulkanThreadEntry::device`): 0 until set.
    static CURRENT: [Cell<i32>; MAX_DEVICE_TYPE] =
        const { [const { Cell::new(0) }; MAX_DEVICE_TYPE] };
}

/// One side of a copy on the device: the buffer, and the byte offset into it.
#[derive(Clone, Copy, Debug)]
pub struct BufferSide<B> {
    /// What the registry records of the buffer (checked: live, on the tensor's device, holding
    /// the copied range).
    pub buffer: B,
    /// Bytes from the buffer's start to the first byte copied.
    pub offset: usize,
}

/// A back end whose data pointers are buffer descriptors: its driver's calls, which
/// [`BufferDeviceApi`] wraps in the checks and plumbing all such back ends share.
pub trait BufferBackEnd: 'static {
    /// The DLPack device type it serves.
    const DEVICE_TYPE: u32;
    /// Its name in messages ("OpenCL").
    const NAME: &'static str;
    /// Why a stream other than the default one is refused (`stream_sync`).
    const NO_STREAMS: &'static str;

    /// The loaded driver with its devices.
    type Driver: Devices + 'static;
    /// What tensors' `data` points at.
    type Descriptor;
    /// What the registry records of a live descriptor.
    type Buffer: Recorded;

    /// The loaded driver, loading it on first use; an error says what is missing.
    fn driver() -> Result<&'static Self::Driver>;
    /// How many devices there are, when the driver is loaded already (`None` before).
    fn known_device_count() -> Option<usize>;
    /// An attribute of `dev` other than [`DeviceAttr::Exist`].
    fn attr(driver: &Self::Driver, dev: DLDevice, attr: DeviceAttr) -> Result<Any>;
    /// The registry of live descriptors.
    fn live() -> &'static Registry<Self::Descriptor, Self::Buffer>;

    /// A new buffer of `nbytes` on device `device_id`, registered; its descriptor.
    fn alloc(device_id: i32, nbytes: usize) -> Result<*mut Self::Descriptor>;
    /// Unregisters and releases a buffer from [`BufferBackEnd::alloc`]; refuses a pointer
    /// that is not a live descriptor.
    ///
    /// # Safety
    /// Nothing uses the buffer afterwards.
    unsafe fn free(desc: *mut Self::Descriptor) -> Result<()>;

    /// Queues a copy of `nbytes` between two buffers (on one device, or refused).
    ///
    /// # Safety
    /// Both ranges are inside their buffers (checked by the caller).
    unsafe fn copy_on_device(
        driver: &Self::Driver,
        src: BufferSide<Self::Buffer>,
        dst: BufferSide<Self::Buffer>,
        nbytes: usize,
    ) -> Result<()>;

    /// Copies `nbytes` of a buffer to host memory; done when it returns.
    ///
    /// # Safety
    /// The range is inside the buffer (checked); `host` holds `nbytes` writable bytes.
    unsafe fn read(
        driver: &Self::Driver,
        src: BufferSide<Self::Buffer>,
        host: *mut u8,
        nbytes: usize,
    ) -> Result<()>;

    /// Copies `nbytes` of host memory into a buffer; done when it returns.
    ///
    /// # Safety
    /// The range is inside the buffer (checked); `host` holds `nbytes` readable bytes.
    unsafe fn write(
        driver: &Self::Driver,
        dst: BufferSide<Self::Buffer>,
        host: *const u8,
        nbytes: usize,
    ) -> Result<()>;

    /// Waits until the work queued on device `id` has finished.
    fn sync(driver: &Self::Driver, id: i32) -> Result<()>;
}

/// The [`DeviceApi`] of a [`BufferBackEnd`], with its workspace pool.
pub struct BufferDeviceApi<B> {
    workspaces: WorkspacePool,
    _back_end: PhantomData<fn() -> B>,
}

impl<B: BufferBackEnd> BufferDeviceApi<B> {
    /// The API, with an empty workspace pool.
    pub const fn new() -> Self {
        BufferDeviceApi {
            workspaces: WorkspacePool::new(),
            _back_end: PhantomData,
        }
    }

    /// The calling thread's current device id (0 until `__tvm_set_device` says otherwise).
    pub fn current_device(&self) -> i32 {
        CURRENT.with(|c| c[Self::TYPE_INDEX].get())
    }

    /// How many buffers the back end holds now for tensors and storage (data spaces): what a
    /// leak check compares. The workspace pool's buffers, kept for reuse, are not counted.
    pub fn live_buffers(&self) -> usize {
        B::live().len() - self.workspaces.held()
    }

    /// Workspace buffers the pool holds (in use and free).
    pub fn pooled_workspaces(&self) -> usize {
        self.workspaces.held()
    }

    /// The device type as an index of [`CURRENT`], checked when the back end is built.
    const TYPE_INDEX: usize = {
        assert!((B::DEVICE_TYPE as usize) < MAX_DEVICE_TYPE);
        B::DEVICE_TYPE as usize
    };

    #[inline]
    fn check_side(dev: DLDevice) -> Result<()> {
        check_device_type(dev, B::DEVICE_TYPE, B::NAME)
    }

    /// Fails, naming how many devices there are, unless device `id` exists.
    fn check_device(driver: &B::Driver, id: i32) -> Result<()> {
        device_by_id(driver.devices(), id, B::DEVICE_TYPE, B::NAME).map(drop)
    }
}

impl<B: BufferBackEnd> Default for BufferDeviceApi<B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<B: BufferBackEnd> DeviceApi for BufferDeviceApi<B> {
    fn set_device(&self, dev: DLDevice) -> Result<()> {
        Self::check_side(dev)?;
        // Checked now when the devices are known (one load: host launchers call this before
        // every launch); otherwise at the first use of the device.
        if let Some(n) = B::known_device_count() {
            if dev.device_id as usize >= n {
                Self::check_device(B::driver()?, dev.device_id)?;
            }
        }
        CURRENT.with(|c| c[Self::TYPE_INDEX].set(dev.device_id));
        Ok(())
    }

    fn check_exists(&self, dev: DLDevice) -> Result<()> {
        Self::check_side(dev)?;
        Self::check_device(B::driver()?, dev.device_id)
    }

    fn get_attr(&self, dev: DLDevice, attr: DeviceAttr) -> Result<Any> {
        if attr == DeviceAttr::Exist {
            // Asking is not an error: no driver or no such device is 0.
            let n = B::driver().map_or(0, |d| d.devices().len());
            return Ok(Any::from(i64::from((dev.device_id as usize) < n)));
        }
        B::attr(B::driver()?, dev, attr)
    }

    fn alloc_data_space(
        &self,
        dev: DLDevice,
        nbytes: usize,
        _alignment: usize,
        _type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        Self::check_side(dev)?;
        // The driver aligns buffers itself; the descriptor is 64-byte aligned.
        Ok(B::alloc(dev.device_id, nbytes)?.cast())
    }

    unsafe fn free_data_space(&self, _dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        // SAFETY: per the trait's contract; `free` refuses anything but a live descriptor.
        unsafe { B::free(ptr.cast()) }
    }

    unsafe fn copy_bytes(
        &self,
        from: DataRef,
        to: DataRef,
        nbytes: usize,
        _type_hint: DLDataType,
        _stream: StreamHandle,
    ) -> Result<()> {
        if nbytes == 0 {
            return Ok(());
        }
        let driver = B::driver()?;
        let live = B::live();
        let side = |r: &DataRef, what| -> Result<BufferSide<B::Buffer>> {
            Ok(BufferSide {
                buffer: live.copy_side(r, nbytes, what)?,
                offset: r.offset,
            })
        };
        match CopyDirection::of(&from, &to, B::DEVICE_TYPE) {
            Some(CopyDirection::OnDevice) => {
                let (src, dst) = (side(&from, "copy source")?, side(&to, "copy destination")?);
                // SAFETY: both ranges checked.
                unsafe { B::copy_on_device(driver, src, dst, nbytes) }
            }
            Some(CopyDirection::ToHost) => {
                let src = side(&from, "copy source")?;
                // SAFETY: the range was checked; the host side holds `nbytes` writable bytes
                // (trait contract).
                unsafe { B::read(driver, src, to.host_address(), nbytes) }
            }
            Some(CopyDirection::FromHost) => {
                let dst = side(&to, "copy destination")?;
                // SAFETY: the range was checked; the host side holds `nbytes` readable bytes
                // (trait contract).
                unsafe { B::write(driver, dst, from.host_address(), nbytes) }
            }
            None => Err(Error::value(format!(
                "{n} copies go between {n} and the CPU: cannot copy from {} to {}",
                device_name(from.device),
                device_name(to.device),
                n = B::NAME,
            ))),
        }
    }

    fn stream_sync(&self, dev: DLDevice, stream: StreamHandle) -> Result<()> {
        Self::check_side(dev)?;
        if !stream.is_null() {
            return Err(Error::value(B::NO_STREAMS));
        }
        B::sync(B::driver()?, dev.device_id)
    }

    fn alloc_workspace(
        &self,
        dev: DLDevice,
        nbytes: usize,
        type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        Self::check_side(dev)?;
        self.workspaces.alloc(self, dev, nbytes, type_hint)
    }

    unsafe fn free_workspace(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        self.workspaces.free(dev, ptr)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::abi::DLDeviceType;
    use crate::dtype::dtypes;

    /// A back end whose buffers are host memory, on `ext_dev` (12), with two devices.
    struct Fake;

    /// Not zero-sized: the registry keys descriptors by their boxes' addresses.
    struct Descriptor {
        _mem: usize,
    }

    #[derive(Clone, Copy, Debug)]
    struct FakeBuffer {
        mem: usize,
        device_id: i32,
        nbytes: usize,
    }

    impl Recorded for FakeBuffer {
        fn device_id(&self) -> i32 {
            self.device_id
        }
        fn nbytes(&self) -> usize {
            self.nbytes
        }
    }

    struct TwoDevices;

    impl Devices for TwoDevices {
        type Device = ();
        fn devices(&self) -> &[()] {
            &[(), ()]
        }
    }

    static LIVE: Registry<Descriptor, FakeBuffer> = Registry::new("Fake");
    static SYNCS: AtomicUsize = AtomicUsize::new(0);
    static API: BufferDeviceApi<Fake> = BufferDeviceApi::new();

    impl BufferBackEnd for Fake {
        const DEVICE_TYPE: u32 = 12;
        const NAME: &'static str = "Fake";
        const NO_STREAMS: &'static str = "Fake has no streams";
        type Driver = TwoDevices;
        type Descriptor = Descriptor;
        type Buffer = FakeBuffer;

        fn driver() -> Result<&'static TwoDevices> {
            Ok(&TwoDevices)
        }
        fn known_device_count() -> Option<usize> {
            Some(2)
        }
        fn attr(_: &TwoDevices, _: DLDevice, _: DeviceAttr) -> Result<Any> {
            Ok(Any::from("fake"))
        }
        fn live() -> &'static Registry<Descriptor, FakeBuffer> {
            &LIVE
        }
        fn alloc(device_id: i32, nbytes: usize) -> Result<*mut Descriptor> {
            let mem = Box::into_raw(vec![0u8; nbytes].into_boxed_slice()).cast::<u8>() as usize;
            Ok(LIVE.register(
                Descriptor { _mem: mem },
                FakeBuffer {
                    mem,
                    device_id,
                    nbytes,
                },
            ))
        }
        unsafe fn free(desc: *mut Descriptor) -> Result<()> {
            // SAFETY: per the contract.
            let b = unsafe { LIVE.unregister(desc)? };
            let slice = std::ptr::slice_from_raw_parts_mut(b.mem as *mut u8, b.nbytes);
            // SAFETY: the boxed slice `alloc` made, freed once (unregistered).
            drop(unsafe { Box::from_raw(slice) });
            Ok(())
        }
        unsafe fn copy_on_device(
            _: &TwoDevices,
            src: BufferSide<FakeBuffer>,
            dst: BufferSide<FakeBuffer>,
            nbytes: usize,
        ) -> Result<()> {
            let (s, d) = (src.buffer.mem + src.offset, dst.buffer.mem + dst.offset);
            // SAFETY: both ranges checked inside their buffers.
            unsafe { std::ptr::copy(s as *const u8, d as *mut u8, nbytes) };
            Ok(())
        }
        unsafe fn read(
            _: &TwoDevices,
            src: BufferSide<FakeBuffer>,
            host: *mut u8,
            nbytes: usize,
        ) -> Result<()> {
            let s = (src.buffer.mem + src.offset) as *const u8;
            // SAFETY: the range is checked; `host` holds `nbytes` (the contract).
            unsafe { std::ptr::copy_nonoverlapping(s, host, nbytes) };
            Ok(())
        }
        unsafe fn write(
            _: &TwoDevices,
            dst: BufferSide<FakeBuffer>,
            host: *const u8,
            nbytes: usize,
        ) -> Result<()> {
            let d = (dst.buffer.mem + dst.offset) as *mut u8;
            // SAFETY: as `read`, the other way.
            unsafe { std::ptr::copy_nonoverlapping(host, d, nbytes) };
            Ok(())
        }
        fn sync(_: &TwoDevices, _: i32) -> Result<()> {
            SYNCS.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    fn fake(id: i32) -> DLDevice {
        DLDevice {
            device_type: DLDeviceType(12),
            device_id: id,
        }
    }

    fn side(data: *mut c_void, offset: usize, device: DLDevice) -> DataRef {
        DataRef {
            data,
            offset,
            device,
        }
    }

    #[test]
    fn current_device_is_per_thread_and_checked() {
        assert_eq!(API.current_device(), 0);
        API.set_device(fake(1)).unwrap();
        assert_eq!(API.current_device(), 1);
        std::thread::spawn(|| assert_eq!(API.current_device(), 0))
            .join()
            .unwrap();
        let e = API.set_device(fake(2)).unwrap_err();
        assert_eq!(
            e.message,
            "Fake device 2 does not exist: this machine has 2 Fake devices (ext_dev:0 to ext_dev:1)"
        );
        let e = API.set_device(crate::device::cpu()).unwrap_err();
        assert_eq!(e.message, "expected a Fake device, got cpu:0");
        assert_eq!(API.current_device(), 1);
        assert!(API.check_exists(fake(1)).is_ok());
        assert!(API.check_exists(fake(-1)).is_err());
        let exists = |id| {
            API.get_attr(fake(id), DeviceAttr::Exist)
                .unwrap()
                .view()
                .as_i64()
        };
        assert_eq!(exists(1), Some(1));
        assert_eq!(exists(2), Some(0));
        assert_eq!(exists(-1), Some(0));
        let e = API.stream_sync(fake(0), 8 as StreamHandle).unwrap_err();
        assert_eq!(e.message, "Fake has no streams");
        let before = SYNCS.load(Ordering::Relaxed);
        API.stream_sync(fake(0), std::ptr::null_mut()).unwrap();
        assert_eq!(SYNCS.load(Ordering::Relaxed), before + 1);
    }

    #[test]
    fn copies_go_by_direction_with_checked_ranges() {
        let cpu = crate::device::cpu();
        let f32 = dtypes::FLOAT32;
        let a = API.alloc_data_space(fake(0), 16, 64, f32).unwrap();
        let b = API.alloc_data_space(fake(0), 16, 64, f32).unwrap();
        let mut host: Vec<u8> = (0..16).collect();
        let h = host.as_mut_ptr().cast::<c_void>();
        // SAFETY: live buffers of 16 bytes and a 16-byte host vector; ranges inside them.
        unsafe {
            API.copy_bytes(
                side(h, 0, cpu),
                side(a, 0, fake(0)),
                16,
                f32,
                std::ptr::null_mut(),
            )
            .unwrap();
            API.copy_bytes(
                side(a, 4, fake(0)),
                side(b, 8, fake(0)),
                8,
                f32,
                std::ptr::null_mut(),
            )
            .unwrap();
            host.fill(0xff);
            let h = host.as_mut_ptr().cast::<c_void>();
            API.copy_bytes(
                side(b, 8, fake(0)),
                side(h, 2, cpu),
                8,
                f32,
                std::ptr::null_mut(),
            )
            .unwrap();
        }
        assert_eq!(&host[..12], &[255, 255, 4, 5, 6, 7, 8, 9, 10, 11, 255, 255]);
        let h = host.as_mut_ptr().cast::<c_void>();
        let copy = |from, to, n| {
            // SAFETY: every refused copy is refused before any memory is touched.
            unsafe { API.copy_bytes(from, to, n, f32, std::ptr::null_mut()) }
                .unwrap_err()
                .message
                .clone()
        };
        let e = copy(side(a, 9, fake(0)), side(h, 0, cpu), 8);
        assert!(
            e.contains("8 bytes at offset 9 exceed the Fake buffer's 16"),
            "{e}"
        );
        let e = copy(side(h, 0, cpu), side(a, 0, fake(1)), 8);
        assert!(e.contains("the tensor says ext_dev:1"), "{e}");
        let e = copy(side(h, 0, cpu), side(h, 0, fake(0)), 8);
        assert!(e.contains("is not a Fake buffer"), "{e}");
        let opencl = DLDevice {
            device_type: DLDeviceType(4),
            device_id: 0,
        };
        let e = copy(side(a, 0, fake(0)), side(h, 0, opencl), 8);
        assert!(
            e.starts_with("Fake copies go between Fake and the CPU: cannot copy from ext_dev:0"),
            "{e}"
        );
        // Nothing to copy is no copy: no side is looked at.
        // SAFETY: zero bytes.
        unsafe {
            API.copy_bytes(
                side(h, 0, cpu),
                side(h, 0, opencl),
                0,
                f32,
                std::ptr::null_mut(),
            )
        }
        .unwrap();

        // Workspaces are pooled and not counted as live data.
        let live = API.live_buffers();
        let w = API.alloc_workspace(fake(0), 100, f32).unwrap();
        // SAFETY: in use, returned once.
        unsafe { API.free_workspace(fake(0), w).unwrap() };
        assert_eq!(API.alloc_workspace(fake(0), 50, f32).unwrap(), w);
        assert_eq!(API.live_buffers(), live);
        assert_eq!(API.pooled_workspaces(), 1);
        // SAFETY: as above; then the data spaces, each once.
        unsafe {
            API.free_workspace(fake(0), w).unwrap();
            API.free_data_space(fake(0), a).unwrap();
            API.free_data_space(fake(0), b).unwrap();
            API.free_data_space(fake(0), std::ptr::null_mut()).unwrap();
            assert!(API.free_data_space(fake(0), a).is_err());
        }
        assert_eq!(API.live_buffers(), live - 2);
    }

    #[test]
    fn directions_and_articles() {
        let cpu = crate::device::cpu();
        let p = std::ptr::null_mut();
        let dir = |a, b| CopyDirection::of(&side(p, 0, a), &side(p, 0, b), 12);
        assert_eq!(dir(fake(0), fake(1)), Some(CopyDirection::OnDevice));
        assert_eq!(dir(fake(0), cpu), Some(CopyDirection::ToHost));
        assert_eq!(dir(cpu, fake(0)), Some(CopyDirection::FromHost));
        assert_eq!(dir(cpu, cpu), None);
        assert_eq!(side(8 as *mut c_void, 3, cpu).host_address() as usize, 11);
        assert_eq!(
            check_device_type(cpu, 4, "OpenCL").unwrap_err().message,
            "expected an OpenCL device, got cpu:0"
        );
        assert!(check_device_type(cpu, 1, "cpu").is_ok());
    }
}
