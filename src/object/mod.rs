//! One object model for both ABIs: reference-counted objects with tvm-ffi's 24-byte header.
//!
//! The header is `{u64 combined_ref_count; i32 type_index; u32 pad; deleter}` (tvm-ffi
//! `c_api.h`, `TVMFFIObject`). The count holds strong references in its low 32 bits and weak ones
//! in its high 32 bits; C++ code compiled against tvm-ffi's headers changes it inline
//! (`object.h`, `Object::IncRef/DecRef`), so [`ObjectRef`] follows the same protocol to the bit.
//! What follows the header is the public cell of each kind (function, string, error, tensor...),
//! read directly by generated code, so every payload type is `#[repr(C)]` with its cell first.
//!
//! An object whose C++ class is polymorphic (tvm-ffi's `ModuleObj`) starts with a vtable
//! pointer 8 bytes before its header (Itanium C++ ABI: the class's own vptr first, then its
//! non-polymorphic `Object` base): [`new_object_with_vptr`] allocates that layout. The handle
//! is the header's address either way.

pub mod big_int;
pub mod containers;
pub mod error_obj;
pub mod shape;
pub mod string;
pub mod type_registry;

use std::any::TypeId;
use std::ffi::c_void;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};

use once_cell::sync::OnceCell;
use parking_lot::Mutex;

use crate::abi::{deleter_flag, ObjectDeleter};

/// One strong reference in `combined_ref_count`.
const STRONG_ONE: u64 = 1;
/// One weak reference in `combined_ref_count`.
const WEAK_ONE: u64 = 1 << 32;
/// A new object: one strong and one weak reference (the weak one is released with the last
/// strong one, as tvm-ffi does).
const BOTH_ONE: u64 = STRONG_ONE | WEAK_ONE;
const STRONG_MASK: u64 = (1 << 32) - 1;

/// The 24-byte object header (`TVMFFIObject`).
#[repr(C)]
pub struct ObjectHeader {
    pub combined_ref_count: AtomicU64,
    pub type_index: i32,
    pub padding: u32,
    pub deleter: Option<ObjectDeleter>,
}

const _: () = assert!(std::mem::size_of::<ObjectHeader>() == 24);

/// Memory block of an object allocated by tvmrt: the header, then the payload (cell first).
#[repr(C)]
pub struct ObjectBox<T> {
    pub header: ObjectHeader,
    pub payload: ManuallyDrop<T>,
}

/// Memory block of an object whose C++ class has a vtable: the vtable pointer, the header, then
/// the payload. The header is 8-byte aligned, so it starts 8 bytes in on 32- and 64-bit targets
/// alike, where C++ puts the `Object` base of a polymorphic class.
#[repr(C)]
pub struct VptrBox<T> {
    pub vptr: *const c_void,
    pub header: ObjectHeader,
    pub payload: ManuallyDrop<T>,
}

/// Distance from an object's start to its header in a [`VptrBox`].
pub const VPTR_HEADER_OFFSET: usize = std::mem::offset_of!(VptrBox<()>, header);
const _: () = assert!(VPTR_HEADER_OFFSET == 8);

/// A payload type that tvmrt allocates as an object.
///
/// # Safety
/// `TYPE_INDEX` must be the tvm-ffi type index whose public cell layout is a prefix of `Self`
/// (for types with a public cell), and `Self` must be safe to share across threads.
pub unsafe trait ObjectPayload: Sized + 'static {
    /// The tvm-ffi type index objects of this payload carry.
    const TYPE_INDEX: i32;

    /// The type index of new objects of this payload: [`Self::TYPE_INDEX`], unless the type is
    /// registered at run time under its own key (a dynamic index from the type table, which
    /// must stay the same for the life of the process).
    fn type_index() -> i32 {
        Self::TYPE_INDEX
    }
}

/// How one memory layout (a box type) holds a payload `T`: where the payload and the block
/// start relative to the header.
trait BoxLayout<T: ObjectPayload>: Sized + 'static {
    /// Bytes from the block's start to the header.
    const HEADER_AT: usize;
    /// Bytes from the header to the payload.
    const PAYLOAD_FROM_HEADER: usize;

    /// Runs the payload's destructor (strong count reached zero).
    ///
    /// # Safety
    /// `header` is the header of a `Self` block allocated by [`allocate`] whose payload was not
    /// dropped yet.
    unsafe fn drop_payload(header: *mut c_void) {
        let payload = header
            .cast::<u8>()
            .wrapping_add(Self::PAYLOAD_FROM_HEADER)
            .cast::<ManuallyDrop<T>>();
        // SAFETY: per the contract, the payload is live and dropped exactly once.
        unsafe { ManuallyDrop::drop(&mut *payload) };
    }

    /// Frees the memory block (weak count reached zero).
    ///
    /// # Safety
    /// `header` is the header of a `Self` block allocated by [`allocate`] whose payload was
    /// dropped.
    unsafe fn free_block(header: *mut c_void) {
        let block = header
            .cast::<u8>()
            .wrapping_sub(Self::HEADER_AT)
            .cast::<Self>();
        // SAFETY: the block came from `Box::into_raw` in `allocate`; `ManuallyDrop` keeps the
        // (already dropped) payload from being dropped again.
        drop(unsafe { Box::from_raw(block) });
    }
}

impl<T: ObjectPayload> BoxLayout<T> for ObjectBox<T> {
    const HEADER_AT: usize = std::mem::offset_of!(ObjectBox<T>, header);
    const PAYLOAD_FROM_HEADER: usize =
        std::mem::offset_of!(ObjectBox<T>, payload) - Self::HEADER_AT;
}

impl<T: ObjectPayload> BoxLayout<T> for VptrBox<T> {
    const HEADER_AT: usize = std::mem::offset_of!(VptrBox<T>, header);
    const PAYLOAD_FROM_HEADER: usize = std::mem::offset_of!(VptrBox<T>, payload) - Self::HEADER_AT;
}

/// Marks tvmrt's objects in the header's padding word, with the payload kind's index in the low
/// 16 bits. tvm-ffi zeroes that word and never reads it (`object.h`), so it is ours to use;
/// together with tvmrt's (single, non-generic) deleter it identifies the payload type. Comparing
/// addresses of generic functions would not: Rust guarantees neither distinct nor stable
/// addresses for instantiations.
const KIND_TAG: u32 = 0x7452_0000;
const KIND_TAG_MASK: u32 = 0xFFFF_0000;
const MAX_KINDS: usize = 1024;

/// How to destroy one payload type in one layout, which type it is, and where it lies.
struct KindEntry {
    type_id: TypeId,
    layout_id: TypeId,
    payload_from_header: usize,
    drop_payload: unsafe fn(*mut c_void),
    free_block: unsafe fn(*mut c_void),
}

static KINDS: [OnceCell<KindEntry>; MAX_KINDS] = [const { OnceCell::new() }; MAX_KINDS];
static KIND_COUNT: AtomicUsize = AtomicUsize::new(0);
static KIND_LOCK: Mutex<()> = Mutex::new(());

fn find_kind(layout_id: TypeId, count: usize) -> Option<usize> {
    (0..count).find(|&i| KINDS[i].get().is_some_and(|e| e.layout_id == layout_id))
}

/// The kind index of payload type `T` in layout `B`, registered on first use.
fn kind_index<T: ObjectPayload, B: BoxLayout<T>>() -> usize {
    let layout_id = TypeId::of::<B>();
    if let Some(i) = find_kind(layout_id, KIND_COUNT.load(Ordering::Acquire)) {
        return i;
    }
    let _guard = KIND_LOCK.lock();
    let count = KIND_COUNT.load(Ordering::Acquire);
    if let Some(i) = find_kind(layout_id, count) {
        return i;
    }
    assert!(
        count < MAX_KINDS,
        "more than {MAX_KINDS} object payload types"
    );
    let entry = KindEntry {
        type_id: TypeId::of::<T>(),
        layout_id,
        payload_from_header: B::PAYLOAD_FROM_HEADER,
        drop_payload: B::drop_payload,
        free_block: B::free_block,
    };
    if KINDS[count].set(entry).is_err() {
        unreachable!("kind slots are claimed under KIND_LOCK");
    }
    KIND_COUNT.store(count + 1, Ordering::Release);
    count
}

/// The kind entry of a tvmrt object, or `None` for objects made by others.
fn kind_of(header: &ObjectHeader) -> Option<&'static KindEntry> {
    let ours = header.deleter.map(|d| d as usize) == Some(object_deleter as ObjectDeleter as usize);
    if !ours || header.padding & KIND_TAG_MASK != KIND_TAG {
        return None;
    }
    KINDS.get((header.padding & !KIND_TAG_MASK) as usize)?.get()
}

/// The deleter of every object tvmrt allocates (tvm-ffi's deleter protocol: the strong flag
/// destroys the payload, the weak flag frees the block). One non-generic function, so its
/// address identifies tvmrt's objects.
///
/// # Safety
/// Called by the reference-count protocol only, with `ptr` a tvmrt object.
pub unsafe extern "C" fn object_deleter(ptr: *mut c_void, flags: i32) {
    crate::unwind_guard::run_or("object deleter", (), || {
        // SAFETY: per the contract.
        unsafe { run_deleter(ptr, flags) };
        Ok(())
    })
}

/// Destroys a tvmrt object per tvm-ffi's deleter flags: the strong flag drops the payload, the
/// weak flag frees the block (what [`object_deleter`] runs).
///
/// # Safety
/// `ptr` is a tvmrt object whose count just reached zero for the flags given.
pub unsafe fn run_deleter(ptr: *mut c_void, flags: i32) {
    // SAFETY: the header is live until the block is freed below.
    let Some(kind) = kind_of(unsafe { &*ptr.cast::<ObjectHeader>() }) else {
        return;
    };
    if flags & deleter_flag::STRONG != 0 {
        // SAFETY: the strong count reached zero: the payload is dropped exactly once.
        unsafe { (kind.drop_payload)(ptr) };
    }
    if flags & deleter_flag::WEAK != 0 {
        // SAFETY: the weak count reached zero after the payload was dropped.
        unsafe { (kind.free_block)(ptr) };
    }
}

/// A fresh header for payload `T` in layout `B`: one strong and one weak reference.
fn new_header<T: ObjectPayload, B: BoxLayout<T>>() -> ObjectHeader {
    ObjectHeader {
        combined_ref_count: AtomicU64::new(BOTH_ONE),
        type_index: T::type_index(),
        padding: KIND_TAG | kind_index::<T, B>() as u32,
        deleter: Some(object_deleter),
    }
}

/// Allocates an object holding `payload` with one strong reference.
pub fn new_object<T: ObjectPayload>(payload: T) -> ObjectRef {
    let boxed = Box::new(ObjectBox {
        header: new_header::<T, ObjectBox<T>>(),
        payload: ManuallyDrop::new(payload),
    });
    let block = Box::into_raw(boxed);
    // SAFETY: `block` is a live allocation; the projection keeps the whole block's provenance
    // (the payload is reached from the header pointer later).
    ObjectRef(unsafe { NonNull::new_unchecked(std::ptr::addr_of_mut!((*block).header)) })
}

/// Allocates an object holding `payload` laid out as a polymorphic C++ object: `vptr` 8 bytes
/// before the header (see [`VptrBox`]). The handle is the header, as for every object.
pub fn new_object_with_vptr<T: ObjectPayload>(vptr: *const c_void, payload: T) -> ObjectRef {
    let boxed = Box::new(VptrBox {
        vptr,
        header: new_header::<T, VptrBox<T>>(),
        payload: ManuallyDrop::new(payload),
    });
    let block = Box::into_raw(boxed);
    // SAFETY: as in `new_object`; the vptr before the header is part of the same block.
    ObjectRef(unsafe { NonNull::new_unchecked(std::ptr::addr_of_mut!((*block).header)) })
}

/// A strong reference to any object with a tvm-ffi header, ours or another library's.
pub struct ObjectRef(NonNull<ObjectHeader>);

// SAFETY: objects are shared between threads in TVM's model; the reference count is atomic and
// every payload tvmrt allocates is immutable or internally synchronized (`ObjectPayload`).
unsafe impl Send for ObjectRef {}
// SAFETY: as above.
unsafe impl Sync for ObjectRef {}

impl ObjectRef {
    /// Takes over one strong reference held by a raw handle (e.g. an `out` argument).
    ///
    /// # Safety
    /// `ptr` is null or points to a live object header whose strong reference the caller gives up.
    pub unsafe fn from_raw_owned(ptr: *mut c_void) -> Option<ObjectRef> {
        NonNull::new(ptr.cast::<ObjectHeader>()).map(ObjectRef)
    }

    /// Takes a new strong reference to an object borrowed from a raw handle.
    ///
    /// # Safety
    /// `ptr` is null or points to a live object header (kept alive by the caller during the call).
    pub unsafe fn from_raw_borrowed(ptr: *mut c_void) -> Option<ObjectRef> {
        let obj = NonNull::new(ptr.cast::<ObjectHeader>()).map(ObjectRef)?;
        obj.inc_ref();
        Some(obj)
    }

    /// Gives up this reference as a raw handle (the receiver must release it).
    pub fn into_raw(self) -> *mut c_void {
        let ptr = self.0.as_ptr().cast();
        std::mem::forget(self);
        ptr
    }

    /// The raw handle, still owned by `self`.
    pub fn as_ptr(&self) -> *mut c_void {
        self.0.as_ptr().cast()
    }

    fn header(&self) -> &ObjectHeader {
        // SAFETY: a live reference keeps the header alive.
        unsafe { self.0.as_ref() }
    }

    /// The object's tvm-ffi type index.
    pub fn type_index(&self) -> i32 {
        self.header().type_index
    }

    /// The current strong reference count (for tests and diagnostics).
    pub fn strong_count(&self) -> u32 {
        (self.header().combined_ref_count.load(Ordering::Relaxed) & STRONG_MASK) as u32
    }

    /// Whether this is the object's only reference, strong or weak (`Arc::get_mut`'s test):
    /// no one else can reach the object, so its owner may write it in place. The acquire load
    /// orders that write after every other holder's last use, released when it dropped.
    pub fn is_unique(&self) -> bool {
        self.header().combined_ref_count.load(Ordering::Acquire) == BOTH_ONE
    }

    fn inc_ref(&self) {
        self.header()
            .combined_ref_count
            .fetch_add(STRONG_ONE, Ordering::Relaxed);
    }

    /// Whether this object was allocated by tvmrt with payload type `T`.
    pub fn is<T: ObjectPayload>(&self) -> bool {
        let h = self.header();
        h.type_index == T::type_index()
            && kind_of(h).is_some_and(|k| k.type_id == TypeId::of::<T>())
    }

    /// The payload, if this object was allocated by tvmrt with payload type `T`.
    pub fn downcast_ref<T: ObjectPayload>(&self) -> Option<&T> {
        if !self.is::<T>() {
            return None;
        }
        let kind = kind_of(self.header())?;
        let payload = self
            .0
            .as_ptr()
            .cast::<u8>()
            .wrapping_add(kind.payload_from_header);
        // SAFETY: `is` proved the block holds a `T`, which the kind entry places that far after
        // the header; the payload lives as long as a strong reference does.
        Some(unsafe { &*payload.cast::<T>() })
    }

    /// A weak reference to this object (tvm-ffi's `WeakObjectPtr`).
    pub fn downgrade(&self) -> WeakObjectRef {
        self.header()
            .combined_ref_count
            .fetch_add(WEAK_ONE, Ordering::Relaxed);
        WeakObjectRef(self.0)
    }

    /// Address of the public cell that follows the header.
    pub fn cell_ptr(&self) -> *mut u8 {
        // SAFETY: every object has at least its header; the cell starts right after it.
        unsafe {
            self.0
                .as_ptr()
                .cast::<u8>()
                .add(std::mem::size_of::<ObjectHeader>())
        }
    }
}

/// A weak reference to any object (tvm-ffi's `WeakObjectPtr`, same counting): it keeps the
/// memory block, not the payload, alive, and gives a strong reference back while one exists.
pub struct WeakObjectRef(NonNull<ObjectHeader>);

// SAFETY: as for `ObjectRef`: the counts are atomic and only the header is read.
unsafe impl Send for WeakObjectRef {}
// SAFETY: as above.
unsafe impl Sync for WeakObjectRef {}

impl WeakObjectRef {
    fn header(&self) -> &ObjectHeader {
        // SAFETY: the weak reference keeps the block, hence the header, alive.
        unsafe { self.0.as_ref() }
    }

    /// A strong reference, unless the last one is gone (tvm-ffi `TryPromoteWeakPtr`: only a
    /// compare-and-swap from a nonzero strong count, so a dying object is never revived).
    pub fn upgrade(&self) -> Option<ObjectRef> {
        let count = &self.header().combined_ref_count;
        let mut old = count.load(Ordering::Relaxed);
        while old & STRONG_MASK != 0 {
            match count.compare_exchange_weak(
                old,
                old + STRONG_ONE,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(ObjectRef(self.0)),
                Err(now) => old = now,
            }
        }
        None
    }

    /// The strong references left (0 once the object is destroyed; may change at any moment).
    pub fn strong_count(&self) -> u32 {
        (self.header().combined_ref_count.load(Ordering::Relaxed) & STRONG_MASK) as u32
    }

    /// The object's handle (it may already be destroyed: compare it, never dereference it).
    pub fn as_ptr(&self) -> *mut c_void {
        self.0.as_ptr().cast()
    }
}

impl Drop for WeakObjectRef {
    fn drop(&mut self) {
        let header = self.0.as_ptr();
        // SAFETY: this weak reference keeps the header alive until it is released here.
        let (count, deleter) = unsafe { (&(*header).combined_ref_count, (*header).deleter) };
        if count.fetch_sub(WEAK_ONE, Ordering::Release) == WEAK_ONE {
            fence(Ordering::Acquire);
            if let Some(d) = deleter {
                // SAFETY: the last weak reference is gone (the strong ones were before it):
                // the block is ours to free, once.
                unsafe { d(header.cast(), deleter_flag::WEAK) };
            }
        }
    }
}

/// Releases one strong reference held by a raw handle, following tvm-ffi's protocol.
///
/// # Safety
/// `ptr` points to a live object header on which the caller holds a strong reference.
pub unsafe fn dec_ref_raw(ptr: *mut c_void) {
    let header = ptr.cast::<ObjectHeader>();
    // SAFETY: the caller holds a strong reference, so the header is live.
    let (count, deleter) = unsafe { (&(*header).combined_ref_count, (*header).deleter) };
    let before = count.fetch_sub(STRONG_ONE, Ordering::Release);
    if before == BOTH_ONE {
        fence(Ordering::Acquire);
        if let Some(d) = deleter {
            // SAFETY: both counts reached zero: the object is ours to destroy, once.
            unsafe { d(ptr, deleter_flag::BOTH) };
        }
    } else if before & STRONG_MASK == STRONG_ONE {
        fence(Ordering::Acquire);
        if let Some(d) = deleter {
            // SAFETY: the strong count reached zero; weak references keep the block alive.
            unsafe { d(ptr, deleter_flag::STRONG) };
        }
        if count.fetch_sub(WEAK_ONE, Ordering::Release) == WEAK_ONE {
            fence(Ordering::Acquire);
            if let Some(d) = deleter {
                // SAFETY: the last weak reference is gone: free the block.
                unsafe { d(ptr, deleter_flag::WEAK) };
            }
        }
    }
}

/// Adds one strong reference through a raw handle.
///
/// # Safety
/// `ptr` points to a live object header.
pub unsafe fn inc_ref_raw(ptr: *mut c_void) {
    // SAFETY: per the contract, the header is live.
    unsafe {
        (*ptr.cast::<ObjectHeader>())
            .combined_ref_count
            .fetch_add(STRONG_ONE, Ordering::Relaxed)
    };
}

impl Clone for ObjectRef {
    fn clone(&self) -> Self {
        self.inc_ref();
        ObjectRef(self.0)
    }
}

impl Drop for ObjectRef {
    fn drop(&mut self) {
        // SAFETY: `self` owns one strong reference.
        unsafe { dec_ref_raw(self.0.as_ptr().cast()) }
    }
}

/// Identity: the same object.
impl PartialEq for ObjectRef {
    fn eq(&self, other: &ObjectRef) -> bool {
        self.0 == other.0
    }
}
impl Eq for ObjectRef {}

impl std::fmt::Debug for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Object(type_index={}, {:p})",
            self.type_index(),
            self.0.as_ptr()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    struct Probe(Arc<AtomicUsize>);
    impl Drop for Probe {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    // SAFETY: no public cell; `Probe` is thread-safe.
    unsafe impl ObjectPayload for Probe {
        const TYPE_INDEX: i32 = crate::abi::type_index::OBJECT;
    }

    #[test]
    fn payload_dropped_once_when_last_strong_ref_goes() {
        let drops = Arc::new(AtomicUsize::new(0));
        let a = new_object(Probe(drops.clone()));
        let b = a.clone();
        assert_eq!(a.strong_count(), 2);
        drop(a);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        assert_eq!(b.strong_count(), 1);
        drop(b);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn weak_reference_keeps_block_until_released() {
        let drops = Arc::new(AtomicUsize::new(0));
        let a = new_object(Probe(drops.clone()));
        let raw = a.as_ptr();
        // A C++ WeakObjectRef adds one weak count inline.
        // SAFETY: `a` keeps the header alive.
        let count = unsafe { &(*raw.cast::<ObjectHeader>()).combined_ref_count };
        count.fetch_add(WEAK_ONE, Ordering::Relaxed);
        drop(a);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            1,
            "payload dropped with last strong ref"
        );
        assert_eq!(count.load(Ordering::Relaxed), WEAK_ONE);
        // Release the weak reference as tvm-ffi does: the block is freed with the weak flag.
        if count.fetch_sub(WEAK_ONE, Ordering::Release) == WEAK_ONE {
            // SAFETY: the last weak reference is gone.
            unsafe { object_deleter(raw, deleter_flag::WEAK) };
        }
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn vtable_objects_keep_their_vptr_before_the_header() {
        let drops = Arc::new(AtomicUsize::new(0));
        let vptr = std::ptr::addr_of!(KIND_COUNT).cast::<c_void>();
        let a = new_object_with_vptr(vptr, Probe(drops.clone()));
        // SAFETY: the vtable pointer lies `VPTR_HEADER_OFFSET` bytes before the header.
        let got = unsafe {
            *a.as_ptr()
                .cast::<u8>()
                .sub(VPTR_HEADER_OFFSET)
                .cast::<*const c_void>()
        };
        assert_eq!(got, vptr);
        // The same payload type in both layouts: each found where its layout puts it.
        let plain = new_object(Probe(drops.clone()));
        assert!(a.downcast_ref::<Probe>().is_some());
        assert!(plain.downcast_ref::<Probe>().is_some());
        assert!(Arc::ptr_eq(&a.downcast_ref::<Probe>().unwrap().0, &drops));
        drop(plain);
        assert_eq!(drops.load(Ordering::SeqCst), 1);

        // A weak reference: upgrades while a strong one lives, never after.
        let weak = a.downgrade();
        let again = weak.upgrade().expect("alive");
        assert_eq!(again.as_ptr(), a.as_ptr());
        assert_eq!(weak.strong_count(), 2);
        drop(again);
        drop(a);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        assert_eq!(weak.strong_count(), 0);
        assert!(weak.upgrade().is_none());
        // Releasing the last weak reference frees the block (memcheck checks it).
        drop(weak);
    }

    #[test]
    fn downcast_checks_type_and_allocator() {
        let drops = Arc::new(AtomicUsize::new(0));
        let a = new_object(Probe(drops));
        assert!(a.downcast_ref::<Probe>().is_some());
        assert!(a.downcast_ref::<string::StrObj>().is_none());
    }
}
