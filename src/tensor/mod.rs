//! Tensors: tvm-ffi's `ffi.Tensor` object (type index 70), the classic `NDArray`.
//!
//! The object is the 24-byte header followed by a `DLTensor` (tvm-ffi `TensorObj` derives from
//! `Object` and `DLTensor`, `container/tensor.h`), so compiled kernels read a tensor argument of
//! index 70 by stepping over the header, and the classic `TVMArrayHandle` is that `DLTensor*`
//! (object address + 24). After the public `DLTensor` the object owns the shape and strides it
//! points to and whatever keeps the data alive:
//! - a 64-byte-aligned, zero-filled block tvmrt allocated ([`Tensor::empty`]),
//! - a DLPack managed tensor whose deleter runs exactly once when the tensor dies
//!   ([`Tensor::from_dlpack`], [`Tensor::from_dlpack_versioned`]),
//! - or the tensor it views ([`Tensor::view`], [`Tensor::create_unsafe_view`]).
//!
//! Like tvm-ffi, every tensor with `ndim > 0` carries explicit (compact unless viewed) strides;
//! TVM's kernels accept compact strides as well as none.
//!
//! Read-only data (DLPack 1.x `DLPACK_FLAG_BITMASK_READ_ONLY`): tvm-ffi drops the flag;
//! tvmrt keeps it. A read-only tensor refuses every write made through tvmrt
//! (`copy_from_bytes`, `copy_from` into it, and the classic `TVMArrayCopyFromBytes`,
//! `TVMArrayCopyFromTo` and `TVMDeviceCopyDataFromTo` into it), its views stay read-only, a versioned export keeps the flag, and a legacy export (which cannot
//! carry it) is refused, as NumPy refuses it. A kernel call cannot be checked: TVM's calling
//! convention does not say which arguments a kernel writes.

pub mod builtins;
pub mod copy;
pub mod dlpack;
pub mod env;
pub mod layout;
mod object;
pub mod serialize;

use std::ffi::c_void;

use crate::abi::{type_index, DLDataType, DLDevice, DLTensor};
use crate::error::{Error, Result};
use crate::object::{new_object, ObjectHeader, ObjectRef};
use crate::value::{Any, AnyView};

use self::layout::{check_dtype, check_ndim, check_shape, data_size};
use crate::device::{self, DeviceBlock};

/// `DLPACK_FLAG_BITMASK_READ_ONLY`.
pub const FLAG_READ_ONLY: u64 = 1;

pub use object::{check_dltensor_writable, TensorObj};
pub(crate) use object::{read_only_registry, DataOwner, Meta};

/// A tensor: a strong reference to a type-index-70 object (tvmrt's or another tvm-ffi
/// library's).
#[derive(Clone)]
pub struct Tensor(ObjectRef);

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor(shape={:?}, dtype={}, device={})",
            self.shape(),
            layout::dtype_label(self.dtype()),
            layout::device_name(self.device())
        )
    }
}

/// The checks of a new compact tensor's dtype, rank and shape.
fn check_compact(shape: &[i64], dtype: DLDataType) -> Result<()> {
    check_dtype(dtype)?;
    check_ndim(shape.len() as i64)?;
    check_shape(shape).map(drop)
}

impl Tensor {
    pub(crate) fn from_payload(obj: TensorObj) -> Tensor {
        let read_only = obj.flags & FLAG_READ_ONLY != 0;
        let t = Tensor(new_object(obj));
        if read_only {
            read_only_registry::insert(t.dltensor());
        }
        t
    }

    /// Allocates a compact tensor on `device` (any device type with a back end). On the CPU
    /// the data is 64-byte aligned and zero-filled.
    pub fn empty(shape: &[i64], dtype: DLDataType, device: DLDevice) -> Result<Tensor> {
        Tensor::empty_scoped(shape, dtype, device, None)
    }

    /// [`Tensor::empty`] in memory scope `mem_scope` (`None`, `""` and `"global"` are plain
    /// memory; other scopes only where the back end has them), as TVM's `Tensor::Empty`.
    pub fn empty_scoped(
        shape: &[i64],
        dtype: DLDataType,
        device: DLDevice,
        mem_scope: Option<&str>,
    ) -> Result<Tensor> {
        check_compact(shape, dtype)?;
        let block = DeviceBlock::alloc_tensor(device, shape, dtype, mem_scope)?;
        let data = block.data();
        Ok(Tensor::compact_over(
            data,
            0,
            shape,
            dtype,
            device,
            DataOwner::Block(block),
        ))
    }

    /// A compact, writable tensor over `data` that `owner` keeps alive (shape and dtype
    /// checked by the caller).
    fn compact_over(
        data: *mut c_void,
        byte_offset: u64,
        shape: &[i64],
        dtype: DLDataType,
        device: DLDevice,
        owner: DataOwner,
    ) -> Tensor {
        let meta = Meta {
            data,
            byte_offset,
            device,
            dtype,
            flags: 0,
        };
        Tensor::from_payload(TensorObj::new(meta, shape, None, owner))
    }

    /// A compact tensor over `data` (from `byte_offset`) that `owner` keeps alive: the tensor
    /// holds `owner` until its last reference goes.
    ///
    /// # Safety
    /// `data` is memory of `device` holding at least `byte_offset` plus the shape's bytes, valid
    /// for as long as `owner` lives.
    pub unsafe fn over_shared(
        data: *mut c_void,
        byte_offset: u64,
        shape: &[i64],
        dtype: DLDataType,
        device: DLDevice,
        owner: std::sync::Arc<dyn std::any::Any + Send + Sync>,
    ) -> Result<Tensor> {
        check_compact(shape, dtype)?;
        let owner = DataOwner::Shared(owner);
        Ok(Tensor::compact_over(
            data,
            byte_offset,
            shape,
            dtype,
            device,
            owner,
        ))
    }

    /// A read-only compact tensor over `bytes` (exactly its size, 64-byte aligned), which
    /// `owner` keeps mapped and nothing writes: a constant used where it lies in a library.
    pub(crate) fn over_mapped(
        bytes: &[u8],
        shape: &[i64],
        dtype: DLDataType,
        device: DLDevice,
        owner: crate::mapped::Owner,
    ) -> Result<Tensor> {
        if device.device_type.0 != device::CPU {
            return Err(Error::value(format!(
                "internal: mapped bytes cannot be a tensor on {}",
                device::device_name(device)
            )));
        }
        check_dtype(dtype)?;
        check_ndim(shape.len() as i64)?;
        let nbytes = data_size(check_shape(shape)?, dtype)?;
        if nbytes != bytes.len()
            || !(bytes.as_ptr() as usize).is_multiple_of(device::api::ALLOC_ALIGNMENT)
        {
            return Err(Error::value(format!(
                "internal: {} mapped bytes at {:p} cannot hold a tensor of {nbytes} bytes \
                 aligned to {}",
                bytes.len(),
                bytes.as_ptr(),
                device::api::ALLOC_ALIGNMENT
            )));
        }
        let meta = Meta {
            data: bytes.as_ptr().cast_mut().cast(),
            byte_offset: 0,
            device,
            dtype,
            flags: FLAG_READ_ONLY,
        };
        Ok(Tensor::from_payload(TensorObj::new(
            meta,
            shape,
            None,
            DataOwner::Mapped(owner),
        )))
    }

    /// Wraps an object of type index 70.
    pub fn from_object(obj: ObjectRef) -> Result<Tensor> {
        if obj.type_index() != type_index::TENSOR {
            return Err(Error::type_error(format!(
                "expected ffi.Tensor, got {}",
                crate::value::type_name(obj.type_index())
            )));
        }
        Ok(Tensor(obj))
    }

    /// The tensor object held by a value (type index 70); a bare `DLTensor*` (index 7) owns
    /// nothing and is refused.
    pub fn from_any_view(v: &AnyView<'_>, what: &str) -> Result<Tensor> {
        match v.type_index() {
            type_index::TENSOR => Tensor::from_object(v.expect_object(what)?),
            _ => Err(v.type_mismatch(what, "ffi.Tensor")),
        }
    }

    /// Borrows a classic `TVMArrayHandle` (the `DLTensor*` inside a tensor object) as a new
    /// reference. The object header before the `DLTensor` is checked for the tensor type
    /// index, which catches most stray `DLTensor*`s (not all: one not made by a tensor object
    /// is undefined behaviour, as in TVM).
    ///
    /// # Safety
    /// `handle` is null or the `DLTensor*` of a live tensor object.
    pub unsafe fn from_handle_borrowed(handle: *mut DLTensor, what: &str) -> Result<Tensor> {
        crate::error::non_null(handle, what)?;
        let obj = handle
            .cast::<u8>()
            .wrapping_sub(std::mem::size_of::<ObjectHeader>())
            .cast::<c_void>();
        // SAFETY: per the contract, `obj` is the tensor object's header.
        let index = unsafe { (*obj.cast::<ObjectHeader>()).type_index };
        if index != type_index::TENSOR {
            return Err(Error::type_error(format!(
                "`{what}` is not an array handle made by tvmrt (object type index {index})"
            )));
        }
        // SAFETY: a live tensor object per the contract.
        let obj = unsafe { ObjectRef::from_raw_borrowed(obj) }
            .ok_or_else(|| Error::value(format!("null handle passed as `{what}`")))?;
        Ok(Tensor(obj))
    }

    /// Gives up this reference as a classic `TVMArrayHandle` (release with `TVMArrayFree`).
    pub fn into_handle(self) -> *mut DLTensor {
        self.0
            .into_raw()
            .cast::<u8>()
            .wrapping_add(std::mem::size_of::<ObjectHeader>())
            .cast()
    }

    /// The tensor object.
    pub fn object(&self) -> &ObjectRef {
        &self.0
    }

    /// The tensor object, giving up the wrapper.
    pub fn into_object(self) -> ObjectRef {
        self.0
    }

    /// The `DLTensor*` kernels read (object address + 24), valid while the tensor lives.
    pub fn dltensor(&self) -> *mut DLTensor {
        self.0.cell_ptr().cast()
    }

    /// The `DLTensor` descriptor.
    pub fn dl(&self) -> &DLTensor {
        // SAFETY: every tensor object has a `DLTensor` right after its header, alive while
        // `self` holds a reference.
        unsafe { &*self.dltensor() }
    }

    /// The dims.
    pub fn shape(&self) -> &[i64] {
        let dl = self.dl();
        if dl.ndim <= 0 || dl.shape.is_null() {
            return &[];
        }
        // SAFETY: a tensor object's shape holds `ndim` dims owned by the object.
        unsafe { std::slice::from_raw_parts(dl.shape, dl.ndim as usize) }
    }

    /// The strides in elements (`None` for a 0-d tensor or one without strides).
    pub fn strides(&self) -> Option<&[i64]> {
        let dl = self.dl();
        if dl.ndim <= 0 || dl.strides.is_null() {
            return None;
        }
        // SAFETY: as for `shape`.
        Some(unsafe { std::slice::from_raw_parts(dl.strides, dl.ndim as usize) })
    }

    /// Number of dims.
    pub fn ndim(&self) -> usize {
        self.dl().ndim.max(0) as usize
    }

    /// Element type.
    pub fn dtype(&self) -> DLDataType {
        self.dl().dtype
    }

    /// Device.
    pub fn device(&self) -> DLDevice {
        self.dl().device
    }

    /// Byte offset from `data` to the first element.
    pub fn byte_offset(&self) -> u64 {
        self.dl().byte_offset
    }

    /// Address of the first element (`data + byte_offset`).
    pub fn data_ptr(&self) -> *mut c_void {
        let dl = self.dl();
        dl.data
            .cast::<u8>()
            .wrapping_add(dl.byte_offset as usize)
            .cast()
    }

    /// Element count.
    pub fn numel(&self) -> u64 {
        check_shape(self.shape()).unwrap_or(0)
    }

    /// Bytes the elements occupy when compact.
    pub fn nbytes(&self) -> usize {
        data_size(self.numel(), self.dtype()).unwrap_or(0)
    }

    /// Whether the layout is compact row-major.
    pub fn is_contiguous(&self) -> bool {
        layout::is_contiguous(self.shape(), self.strides())
    }

    /// Whether the data was imported read-only (DLPack 1.x flag), or views such data.
    pub fn is_read_only(&self) -> bool {
        self.flags() & FLAG_READ_ONLY != 0
    }

    /// The DLPack flags tvmrt keeps for this tensor. Looked up by descriptor address rather
    /// than by downcasting the payload, so it holds for any tensor object and does not depend
    /// on comparing deleter addresses.
    fn flags(&self) -> u64 {
        if read_only_registry::contains(self.dltensor()) {
            FLAG_READ_ONLY
        } else {
            0
        }
    }

    fn check_writable(&self, what: &str) -> Result<()> {
        if self.is_read_only() {
            return Err(Error::value(format!(
                "{what}: the tensor is read-only (imported with DLPACK_FLAG_BITMASK_READ_ONLY)"
            )));
        }
        Ok(())
    }

    /// The bytes of a compact tensor in host memory (the CPU).
    ///
    /// # Safety
    /// Nothing writes the tensor's data (another clone, a kernel, a DLPack consumer) while the
    /// slice is alive.
    pub unsafe fn as_bytes(&self) -> Result<&[u8]> {
        device::require_host(self.device(), "as_bytes")?;
        if !self.is_contiguous() {
            return Err(Error::value(
                "as_bytes: the tensor is not contiguous; use copy_to_bytes",
            ));
        }
        let n = self.nbytes();
        if n == 0 {
            return Ok(&[]);
        }
        // SAFETY: a compact CPU tensor's `n` bytes start at `data_ptr` and live as long as the
        // object; no concurrent writes per the contract.
        Ok(unsafe { std::slice::from_raw_parts(self.data_ptr().cast::<u8>(), n) })
    }

    /// Copies `bytes` (compact row-major, exactly `nbytes()` long) into the tensor.
    pub fn copy_from_bytes(&self, bytes: &[u8]) -> Result<()> {
        self.check_writable("copy_from_bytes")?;
        // SAFETY: the descriptor of a live tensor describes its own memory.
        unsafe { copy::copy_from_bytes(self.dl(), bytes) }
    }

    /// Copies the tensor into `out` (compact row-major, exactly `nbytes()` long).
    pub fn copy_to_bytes(&self, out: &mut [u8]) -> Result<()> {
        // SAFETY: the descriptor of a live tensor describes its own memory.
        unsafe { copy::copy_to_bytes(self.dl(), out) }
    }

    /// The tensor's bytes, compact row-major.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        // An imported tensor may describe far more elements than it stores (zero strides
        // broadcast one element), so the compact size can exceed memory: fail, do not abort.
        let cannot = |what: String| {
            Error::value(format!(
                "to_vec: cannot allocate {what} for a tensor of shape {:?}",
                self.shape()
            ))
        };
        let n = data_size(self.numel(), self.dtype()).map_err(|e| cannot(e.message.clone()))?;
        let mut out = Vec::new();
        out.try_reserve_exact(n)
            .map_err(|_| cannot(format!("{n} bytes")))?;
        out.resize(n, 0u8);
        self.copy_to_bytes(&mut out)?;
        Ok(out)
    }

    /// A new compact tensor on `src`'s device holding a copy of `src`'s elements.
    ///
    /// # Safety
    /// `src` must be a valid DLTensor describing live memory for the duration of the call.
    pub unsafe fn copy_of_dltensor(src: &DLTensor) -> Result<Tensor> {
        // SAFETY: the caller guarantees a valid descriptor.
        let shape = unsafe { layout::dl_shape(src, "copy source")? };
        let copy = Tensor::empty(shape, src.dtype, src.device)?;
        // SAFETY: `src` is live (caller) and `copy` is a fresh tensor of the same shape/dtype.
        unsafe { copy::copy_dltensor(src, copy.dl())? };
        Ok(copy)
    }

    /// A new compact tensor on `device` (in `mem_scope`) holding a copy of this one, finished
    /// when this returns (TVM's `Tensor::CopyTo`).
    pub fn copy_to(&self, device: DLDevice, mem_scope: Option<&str>) -> Result<Tensor> {
        let out = Tensor::empty_scoped(self.shape(), self.dtype(), device, mem_scope)?;
        out.copy_from(self)?;
        let waits_on = if device::is_host_accessible(device) {
            self.device()
        } else {
            device
        };
        if !device::is_host_accessible(waits_on) {
            device::api_of(waits_on)?.stream_sync(waits_on, std::ptr::null_mut())?;
        }
        Ok(out)
    }

    /// This tensor if the host can read it in place, else a copy on the CPU.
    pub fn to_host(&self) -> Result<Tensor> {
        if device::is_host_accessible(self.device()) {
            Ok(self.clone())
        } else {
            self.copy_to(device::cpu(), None)
        }
    }

    /// Copies `src` into this tensor (equal byte sizes; strided sides need equal shapes).
    pub fn copy_from(&self, src: &Tensor) -> Result<()> {
        self.check_writable("copy_from")?;
        // SAFETY: both descriptors describe their objects' live memory.
        unsafe { copy::copy_dltensor(src.dl(), self.dl()) }
    }

    /// A compact view of `shape` and `dtype` starting `byte_offset` bytes into this compact
    /// tensor (TVM's `NDArray::CreateView`). The view must fit inside this tensor's bytes; it
    /// keeps this tensor alive. Where the device allows pointer arithmetic (the CPU) the offset
    /// is folded into the view's data pointer so its `byte_offset` is 0, as kernels built for
    /// offset-free buffers require; elsewhere (OpenCL buffers) the view shares the data pointer
    /// and carries the offset in `byte_offset`, as TVM's views do.
    pub fn view(&self, shape: &[i64], dtype: DLDataType, byte_offset: u64) -> Result<Tensor> {
        check_dtype(dtype)?;
        check_ndim(shape.len() as i64)?;
        if !self.is_contiguous() {
            return Err(Error::value("view: the source tensor is not contiguous"));
        }
        let view_bytes = data_size(check_shape(shape)?, dtype)?;
        let have = self.nbytes() as u128;
        let need = view_bytes as u128 + byte_offset as u128;
        if need > have {
            return Err(Error::value(format!(
                "view: {view_bytes} bytes at offset {byte_offset} do not fit in the source's \
                 {have} bytes"
            )));
        }
        let (data, byte_offset) = if device::api_of(self.device())?.pointer_arithmetic() {
            let data = self
                .data_ptr()
                .cast::<u8>()
                .wrapping_add(byte_offset as usize)
                .cast();
            (data, 0)
        } else {
            (self.dl().data, self.byte_offset() + byte_offset)
        };
        let meta = Meta {
            data,
            byte_offset,
            device: self.device(),
            dtype,
            flags: self.flags(),
        };
        Ok(Tensor::from_payload(TensorObj::new(
            meta,
            shape,
            None,
            DataOwner::Parent(self.0.clone()),
        )))
    }

    /// A tensor described by `prototype` (data, offset, shape, strides, dtype, device, copied
    /// as given) that keeps this tensor alive (`TVMFFITensorCreateUnsafeView`). Null strides
    /// become compact ones.
    ///
    /// # Safety
    /// `prototype.shape`/`strides` are readable for `ndim` entries, and the memory it describes
    /// lies within this tensor's data.
    pub unsafe fn create_unsafe_view(&self, prototype: &DLTensor) -> Result<Tensor> {
        const WHAT: &str = "TVMFFITensorCreateUnsafeView prototype";
        device::api_of(prototype.device).map_err(|e| e.context(WHAT))?;
        if prototype.device != self.device() {
            return Err(Error::value(format!(
                "{WHAT}: the prototype is on {}, the source tensor on {}",
                device::device_name(prototype.device),
                device::device_name(self.device())
            )));
        }
        check_dtype(prototype.dtype)?;
        // SAFETY: per the contract.
        let shape = unsafe { layout::dl_shape(prototype, "prototype")? };
        check_shape(shape)?;
        // SAFETY: per the contract.
        let strides = unsafe { layout::dl_strides(prototype) };
        let meta = Meta {
            data: prototype.data,
            byte_offset: prototype.byte_offset,
            device: prototype.device,
            dtype: prototype.dtype,
            flags: self.flags(),
        };
        Ok(Tensor::from_payload(TensorObj::new(
            meta,
            shape,
            strides,
            DataOwner::Parent(self.0.clone()),
        )))
    }
}

impl Tensor {
    /// A view of the same elements (data, shape, strides, offset) under `dtype`, which must
    /// occupy the same bytes; it keeps this tensor alive. What the classic door uses to show a
    /// `kDLBool` tensor as TVM 0.19's `uint1` and back.
    pub fn retyped(&self, dtype: DLDataType) -> Result<Tensor> {
        let mut prototype = *self.dl();
        prototype.dtype = dtype;
        // SAFETY: the prototype is this tensor's own descriptor (its shape and strides live as
        // long as the view's parent, this tensor) with only the dtype changed.
        unsafe { self.create_unsafe_view(&prototype) }
    }

    /// This tensor as the classic generation sees it: a `kDLBool` tensor becomes a `uint1`
    /// view of the same bytes; any other tensor is itself.
    pub fn into_classic(self) -> Result<Tensor> {
        if crate::dtype::classic_bool::is_ffi(self.dtype()) {
            return self.retyped(crate::dtype::classic_bool::CLASSIC);
        }
        Ok(self)
    }

    /// A tensor that came through a classic door: a `uint1` tensor (one byte per element, as
    /// TVM 0.19 stores it) becomes a `kDLBool` view; any other tensor is itself.
    pub fn from_classic(self) -> Result<Tensor> {
        if crate::dtype::classic_bool::is_classic(self.dtype()) {
            return self.retyped(crate::dtype::dtypes::BOOL);
        }
        Ok(self)
    }
}

impl From<Tensor> for Any {
    fn from(t: Tensor) -> Any {
        Any::from_object(t.0)
    }
}

impl<'a> From<&'a Tensor> for AnyView<'a> {
    fn from(t: &'a Tensor) -> AnyView<'a> {
        AnyView::from(&t.0)
    }
}

impl From<Tensor> for ObjectRef {
    fn from(t: Tensor) -> ObjectRef {
        t.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::dtypes;

    #[test]
    fn zero_sized_dims_get_tvm_ffis_strides() {
        let t = Tensor::empty(&[20, 0, 5], dtypes::FLOAT32, layout::cpu()).unwrap();
        assert_eq!(t.strides(), Some(&[0i64, 5, 1][..]));
        assert_eq!(t.nbytes(), 0);
        assert!(t.is_contiguous());
    }

    #[test]
    fn empty_is_aligned_and_zeroed() {
        let t = Tensor::empty(&[3, 5], dtypes::FLOAT32, layout::cpu()).unwrap();
        assert_eq!(t.data_ptr() as usize % 64, 0);
        assert_eq!(t.shape(), &[3, 5]);
        assert_eq!(t.strides(), Some(&[5i64, 1][..]));
        assert_eq!(t.nbytes(), 60);
        assert_eq!(t.to_vec().unwrap(), vec![0u8; 60]);
        assert_eq!(t.object().type_index(), 70);
        assert_eq!(t.dltensor() as usize, t.object().as_ptr() as usize + 24);
    }

    #[test]
    fn scalar_tensor_has_null_shape() {
        let t = Tensor::empty(&[], dtypes::INT64, layout::cpu()).unwrap();
        assert!(t.dl().shape.is_null());
        assert_eq!(t.nbytes(), 8);
        t.copy_from_bytes(&7i64.to_le_bytes()).unwrap();
        assert_eq!(t.to_vec().unwrap(), 7i64.to_le_bytes());
    }

    #[test]
    fn view_keeps_parent_alive_and_folds_offset() {
        let t = Tensor::empty(&[4], dtypes::INT32, layout::cpu()).unwrap();
        let bytes: Vec<u8> = [1i32, 2, 3, 4]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        t.copy_from_bytes(&bytes).unwrap();
        let v = t.view(&[2], dtypes::INT32, 8).unwrap();
        assert_eq!(t.object().strong_count(), 2);
        drop(t);
        assert_eq!(v.byte_offset(), 0);
        assert_eq!(v.to_vec().unwrap(), bytes[8..].to_vec());
        let parent = Tensor::empty(&[4], dtypes::INT32, layout::cpu()).unwrap();
        assert!(parent.view(&[3], dtypes::INT32, 8).is_err());
    }
}
