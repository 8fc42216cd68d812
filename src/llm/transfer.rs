//! Host-to-device copies of the small int32 arrays the LLM state hands its kernels (page
//! tables, position maps, slot ids). Every such copy goes through [`upload_i32`], the one
//! place to change when tensors live on devices other than the CPU.

use crate::abi::DLDevice;
use crate::dtype::dtypes;
use crate::error::Result;
use crate::tensor::Tensor;

/// Copies host int32 values into a compact int32 tensor of exactly that many elements.
pub fn upload_i32(dst: &Tensor, src: &[i32]) -> Result<()> {
    dst.copy_from_bytes(i32_bytes(src))
}

/// A new int32 tensor on `device` holding `values`.
pub fn tensor_from_i32(values: &[i32], device: DLDevice) -> Result<Tensor> {
    let t = Tensor::empty(&[values.len() as i64], dtypes::INT32, device)?;
    upload_i32(&t, values)?;
    Ok(t)
}

/// The bytes of `v` (little-endian on every target tvmrt builds for).
fn i32_bytes(v: &[i32]) -> &[u8] {
    // SAFETY: i32 has no padding and every byte pattern is a valid u8; the length covers
    // exactly the slice's memory, borrowed for the same lifetime.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::layout::cpu;

    #[test]
    fn values_arrive_in_order() {
        let t = tensor_from_i32(&[9, -1, 1 << 20], cpu()).unwrap();
        let back: Vec<i32> = t
            .to_vec()
            .unwrap()
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(back, vec![9, -1, 1 << 20]);
        assert_eq!(tensor_from_i32(&[], cpu()).unwrap().numel(), 0);
    }
}
