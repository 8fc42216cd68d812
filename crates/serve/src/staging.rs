//! The arguments of the model's logit kernels (`apply_logit_bias_inplace`,
//! `apply_penalty_inplace`, `softmax_with_temperature`), staged on the host and copied to
//! device buffers that live as long as the model, as MLC's engine keeps its logit processor's
//! buffers: on a device whose pointers take offsets (the CPU, CUDA) one buffer and one
//! transfer for all of them; elsewhere (OpenCL, whose kernels from MLC take no buffer offset)
//! one buffer per argument.
//!
//! Allocating a fresh device tensor per argument cost a GPU one driver allocation and one
//! (synchronizing) free each, per sampled token; on the H200 machine that was most of the
//! 78 us the logit-bias step took (BENCHMARKS.md, `tvmrt serve` on a GPU).

use tvmrt::abi::{DLDataType, DLDevice};
use tvmrt::dtype::dtypes;
use tvmrt::tensor::Tensor;
use tvmrt::Result;

/// Every array starts on a 64-byte boundary (16 words), the alignment TVM gives tensors.
const ALIGN_WORDS: usize = 16;

/// Where one staged array lies: its place among the arrays, its words in the host area.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Staged {
    index: usize,
    offset: usize,
    len: usize,
    dtype: DLDataType,
}

/// A host staging area of 32-bit words and the device buffers it is copied into.
pub struct Staging {
    device: DLDevice,
    /// Whether all arrays share one buffer (views at offsets into it).
    merged: bool,
    host: Vec<u32>,
    staged: Vec<Staged>,
    /// One buffer (merged), else one per array, by index; each only grows.
    buffers: Vec<Tensor>,
}

impl Staging {
    /// An empty staging area for `device` (buffers are allocated at the first commit).
    pub fn new(device: DLDevice) -> Result<Staging> {
        Ok(Staging {
            device,
            merged: tvmrt::device::api_of(device)?.pointer_arithmetic(),
            host: Vec::new(),
            staged: Vec::new(),
            buffers: Vec::new(),
        })
    }

    /// Forgets what was staged before.
    pub fn reset(&mut self) {
        self.host.clear();
        self.staged.clear();
    }

    fn push(&mut self, words: impl Iterator<Item = u32>, dtype: DLDataType) -> Staged {
        let offset = self.host.len();
        self.host.extend(words);
        let len = self.host.len() - offset;
        let padded = self.host.len().div_ceil(ALIGN_WORDS) * ALIGN_WORDS;
        self.host.resize(padded, 0);
        let staged = Staged {
            index: self.staged.len(),
            offset,
            len,
            dtype,
        };
        self.staged.push(staged);
        staged
    }

    /// Stages an int32 array.
    pub fn push_i32(&mut self, values: &[i32]) -> Staged {
        self.push(values.iter().map(|&v| v as u32), dtypes::INT32)
    }

    /// Stages a float32 array (its bits, unchanged).
    pub fn push_f32(&mut self, values: impl IntoIterator<Item = f32>) -> Staged {
        self.push(values.into_iter().map(f32::to_bits), dtypes::FLOAT32)
    }

    /// Copies everything staged to the device (one transfer where merged), growing a buffer
    /// (to a power of two) when it is too small.
    pub fn commit(&mut self) -> Result<()> {
        let spans: Vec<(usize, usize)> = if self.merged {
            vec![(0, self.host.len())]
        } else {
            let end = |s: &Staged| s.offset + s.len.div_ceil(ALIGN_WORDS) * ALIGN_WORDS;
            self.staged.iter().map(|s| (s.offset, end(s))).collect()
        };
        for (slot, (start, end)) in spans.into_iter().enumerate() {
            let n = end - start;
            if n == 0 {
                continue;
            }
            if self
                .buffers
                .get(slot)
                .is_none_or(|t| (t.numel() as usize) < n)
            {
                let t = Tensor::empty(&[n.next_power_of_two() as i64], dtypes::INT32, self.device)?;
                if slot < self.buffers.len() {
                    self.buffers[slot] = t;
                } else {
                    self.buffers.push(t);
                }
            }
            let bytes: Vec<u8> = self.host[start..end]
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect();
            self.buffers[slot]
                .view(&[n as i64], dtypes::INT32, 0)?
                .copy_from_bytes(&bytes)?;
        }
        Ok(())
    }

    /// The device tensor of a committed array, in `shape` (whose product is its length).
    pub fn tensor(&self, staged: Staged, shape: &[i64]) -> Result<Tensor> {
        let numel: i64 = shape.iter().product();
        let (slot, offset) = match self.merged {
            true => (0, staged.offset),
            false => (staged.index, 0),
        };
        match self.buffers.get(slot) {
            Some(t) if numel == staged.len as i64 && staged.len > 0 => {
                t.view(shape, staged.dtype, (offset * 4) as u64)
            }
            _ => tvmrt::bail_value!(
                "internal: a staged array of {} values viewed as {shape:?}, or before its commit",
                staged.len
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tvmrt::tensor::layout::cpu;

    #[test]
    fn arrays_arrive_aligned_in_one_buffer_that_grows() {
        let mut s = Staging::new(cpu()).unwrap();
        let a = s.push_i32(&[1, -2, 3]);
        let b = s.push_f32([0.5, -1.25]);
        s.commit().unwrap();
        let ta = s.tensor(a, &[3]).unwrap();
        let tb = s.tensor(b, &[1, 2]).unwrap();
        assert_eq!(ta.dtype(), dtypes::INT32);
        assert_eq!(tb.dtype(), dtypes::FLOAT32);
        assert_eq!(tb.data_ptr() as usize - ta.data_ptr() as usize, 64);
        assert_eq!(crate::model::read_f32(&tb).unwrap(), vec![0.5, -1.25]);
        let ints: Vec<i32> = ta
            .to_vec()
            .unwrap()
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(ints, vec![1, -2, 3]);
        // A later, bigger set replaces the buffer; the old views keep the old one alive.
        s.reset();
        let c = s.push_f32((0..100).map(|i| i as f32));
        s.commit().unwrap();
        let tc = s.tensor(c, &[100]).unwrap();
        assert_eq!(crate::model::read_f32(&tc).unwrap()[99], 99.0);
        assert_eq!(
            ta.to_vec().unwrap().len(),
            12,
            "the old view still reads its buffer"
        );
        assert!(s.tensor(c, &[99]).is_err(), "a shape of the wrong length");
    }
}
