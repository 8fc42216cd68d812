//! One object model for both ABIs: reference-counted objects with tvm-ffi's 24-byte header.
//!
//! The header is `{u64 combined_ref_count; i32 type_index; u32 pad; deleter}` (tvm-ffi
//! `c_api.h`, `TVMFFIObject`). The count holds strong references in its low 32 bits and weak ones
//! in its high 32 bits; C++ code compiled against tvm-ffi's headers changes it inline
//! (`object.h`, `Object::IncRef/DecRef`), so [`ObjectRef`] follows the same protocol to the bit.
//! What follows the header is the public cell of each kind (function, string, error, tensor...),
//! read directly by generated code, so every payload type is `#[repr(C)]` with its cell first.

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

impl<T: ObjectPayload> ObjectBox<T> {
    /// Runs the payload's destructor (strong count reached zero).
    ///
    /// # Safety
    /// `ptr` is an `ObjectBox<T>` allocated by [`new_object`] whose payload was not dropped yet.
    unsafe fn drop_payload(ptr: *mut c_void) {
        let obj = ptr.cast::<ObjectBox<T>>();
        // SAFETY: per the contract, the payload is live and dropped exactly once.
        unsafe { ManuallyDrop::drop(&mut (*obj).payload) };
    }

    /// Frees the memory block (weak count reached zero).
    ///
    /// # Safety
    /// `ptr` is an `ObjectBox<T>` allocated by [`new_object`] whose payload was dropped.
    unsafe fn free_block(ptr: *mut c_void) {
        // SAFETY: the block came from `Box::into_raw` in `new_object`; `ManuallyDrop` keeps the
        // (already dropped) payload from being dropped again.
        drop(unsafe { Box::from_raw(ptr.cast::<ObjectBox<T>>()) });
    }
}

/// Marks tvmrt's objects in the header's padding word, with the payload kind's index in the low
/// 16 bits. tvm-ffi zeroes that word and never reads it (`object.h`), so it is ours to use;
/// together with tvmrt's (single, non-generic) deleter it identifies the payload type. Comparing
/// addresses of generic functions would not: Rust guarantees neither distinct nor stable
/// addresses for instantiations.
const KIND_TAG: u32 = 0x7452_0000;
const KIND_TAG_MASK: u32 = 0xFFFF_0000;
const MAX_KINDS: usize = 1024;

/// How to destroy one payload type, and which type it is.
struct KindEntry {
    type_id: TypeId,
    drop_payload: unsafe fn(*mut c_void),
    free_block: unsafe fn(*mut c_void),
}

static KINDS: [OnceCell<KindEntry>; MAX_KINDS] = [const { OnceCell::new() }; MAX_KINDS];
static KIND_COUNT: AtomicUsize = AtomicUsize::new(0);
static KIND_LOCK: Mutex<()> = Mutex::new(());

fn find_kind(type_id: TypeId, count: usize) -> Option<usize> {
    (0..count).find(|&i| KINDS[i].get().is_some_and(|e| e.type_id == type_id))
}

/// The kind index of payload type `T`, registered on first use.
fn kind_index<T: ObjectPayload>() -> usize {
    let type_id = TypeId::of::<T>();
    if let Some(i) = find_kind(type_id, KIND_COUNT.load(Ordering::Acquire)) {
        return i;
    }
    let _guard = KIND_LOCK.lock();
    let count = KIND_COUNT.load(Ordering::Acquire);
    if let Some(i) = find_kind(type_id, count) {
        return i;
    }
    assert!(
        count < MAX_KINDS,
        "more than {MAX_KINDS} object payload types"
    );
    let entry = KindEntry {
        type_id,
        drop_payload: ObjectBox::<T>::drop_payload,
        free_block: ObjectBox::<T>::free_block,
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

/// Allocates an object holding `payload` with one strong reference.
pub fn new_object<T: ObjectPayload>(payload: T) -> ObjectRef {
    let kind = kind_index::<T>() as u32;
    let boxed = Box::new(ObjectBox {
        header: ObjectHeader {
            combined_ref_count: AtomicU64::new(BOTH_ONE),
            type_index: T::type_index(),
            padding: KIND_TAG | kind,
            deleter: Some(object_deleter),
        },
        payload: ManuallyDrop::new(payload),
    });
    let ptr = NonNull::from(Box::leak(boxed)).cast::<ObjectHeader>();
    ObjectRef(ptr)
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
        if self.is::<T>() {
            // SAFETY: `is` proved the block is an `ObjectBox<T>`; the payload lives as long as a
            // strong reference does.
            Some(unsafe { &(*self.0.as_ptr().cast::<ObjectBox<T>>()).payload })
        } else {
            None
        }
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
    fn downcast_checks_type_and_allocator() {
        let drops = Arc::new(AtomicUsize::new(0));
        let a = new_object(Probe(drops));
        assert!(a.downcast_ref::<Probe>().is_some());
        assert!(a.downcast_ref::<string::StrObj>().is_none());
    }
}
