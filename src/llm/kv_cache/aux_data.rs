//! The auxiliary int32 arrays the attention kernels read (page tables, position maps, length
//! information), staged on the host and copied to the cache's device in one transfer per
//! forward, as TVM's `CachedPagedKVCacheAuxDataManager` does (`attn_utils.h`).
//!
//! The copies go through [`crate::llm::transfer`].

use std::cell::RefCell;

use crate::abi::DLDevice;
use crate::dtype::dtypes;
use crate::error::Result;
use crate::llm::transfer::upload_i32;
use crate::tensor::Tensor;

/// Arrays start on 16-byte boundaries inside the merged buffer (TVM's alignment).
const ALIGN_ELEMS: usize = 4;

/// Where one array lies in the merged buffer.
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    offset: usize,
    len: usize,
}

impl Segment {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the array is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Views kept from earlier forwards: a decode step asks for the same arrays at the same
/// places every time, and reusing their tensor objects saves allocating them again.
const KEPT_VIEWS: usize = 64;

/// A merged staging buffer on the host and its copy on the device.
pub struct AuxBuffer {
    device: DLDevice,
    host: Vec<i32>,
    on_device: Tensor,
    /// (offset, shape, view) of views handed out over `on_device`.
    views: RefCell<Vec<(usize, Vec<i64>, Tensor)>>,
}

impl AuxBuffer {
    /// A buffer for up to `capacity` elements (it grows if a batch needs more).
    pub fn new(device: DLDevice, capacity: usize) -> Result<AuxBuffer> {
        Ok(AuxBuffer {
            device,
            host: Vec::with_capacity(capacity),
            on_device: Tensor::empty(&[capacity.max(ALIGN_ELEMS) as i64], dtypes::INT32, device)?,
            views: RefCell::new(Vec::new()),
        })
    }

    /// Starts staging a new set of arrays.
    pub fn reset(&mut self) {
        self.host.clear();
    }

    /// Stages the concatenation of `parts` as one array.
    pub fn push(&mut self, parts: &[&[i32]]) -> Segment {
        let offset = self.host.len();
        for p in parts {
            self.host.extend_from_slice(p);
        }
        let len = self.host.len() - offset;
        let padded = self.host.len().div_ceil(ALIGN_ELEMS) * ALIGN_ELEMS;
        self.host.resize(padded, 0);
        Segment { offset, len }
    }

    /// Copies what was staged to the device (one transfer).
    pub fn commit(&mut self) -> Result<()> {
        let n = self.host.len();
        if n > self.on_device.numel() as usize {
            let capacity = n.next_power_of_two();
            self.on_device = Tensor::empty(&[capacity as i64], dtypes::INT32, self.device)?;
            self.views.get_mut().clear();
        }
        if n == 0 {
            return Ok(());
        }
        let dst = self.on_device.view(&[n as i64], dtypes::INT32, 0)?;
        upload_i32(&dst, &self.host)
    }

    /// The device view of a committed array, in `shape` (whose product is its length).
    pub fn view(&self, seg: Segment, shape: &[i64]) -> Result<Tensor> {
        let n: i64 = shape.iter().product();
        if n != seg.len as i64 {
            return Err(crate::error::Error::runtime(format!(
                "internal: view of shape {shape:?} over an array of {} elements",
                seg.len
            )));
        }
        let mut views = self.views.borrow_mut();
        if let Some((_, _, v)) = views
            .iter()
            .find(|(o, s, _)| *o == seg.offset && s == shape)
        {
            return Ok(v.clone());
        }
        let v = self
            .on_device
            .view(shape, dtypes::INT32, (seg.offset * 4) as u64)?;
        if views.len() == KEPT_VIEWS {
            views.clear();
        }
        views.push((seg.offset, shape.to_vec(), v.clone()));
        Ok(v)
    }

    /// Bytes the device buffer holds.
    pub fn device_bytes(&self) -> usize {
        self.on_device.nbytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::layout::cpu;

    fn values(t: &Tensor) -> Vec<i32> {
        t.to_vec()
            .unwrap()
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn staged_arrays_arrive_aligned_and_the_buffer_grows() {
        let mut b = AuxBuffer::new(cpu(), 4).unwrap();
        b.reset();
        let a = b.push(&[&[1, 2, 3]]);
        let c = b.push(&[&[4, 5], &[6, 7, 8]]);
        b.commit().unwrap();
        assert_eq!(values(&b.view(a, &[3]).unwrap()), vec![1, 2, 3]);
        let v = b.view(c, &[2, 2]);
        assert!(v.is_err(), "shape must match the length");
        let v = b.view(c, &[5]).unwrap();
        assert_eq!(values(&v), vec![4, 5, 6, 7, 8]);
        assert_eq!(v.data_ptr() as usize % 16, 0);
        assert!(b.device_bytes() >= 12 * 4);
        // The same array at the same place is the same view; new contents show through.
        b.reset();
        let a2 = b.push(&[&[7, 8, 9]]);
        b.commit().unwrap();
        let again = b.view(a2, &[3]).unwrap();
        assert_eq!(
            again.object().as_ptr(),
            b.view(a, &[3]).unwrap().object().as_ptr()
        );
        assert_eq!(values(&again), vec![7, 8, 9]);
    }
}
