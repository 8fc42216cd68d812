//! Parameter dictionaries in TVM's `save_param_dict` format (`runtime::SaveParams`): the magic
//! `0xF7E58D4F05049CB7`, a reserved `u64`, the names (a `u64` count, then each name as a `u64`
//! length and its bytes), a `u64` tensor count equal to the name count, and the tensors in
//! TVM's tensor save format ([`crate::tensor::serialize`]). A bool is saved as TVM 0.19 saves
//! it, `uint1` with one byte per element, and held as `kDLBool`
//! ([`crate::dtype::classic_bool`]).

use crate::dtype::classic_bool::{from_classic, to_classic};
use crate::error::{Error, Result};
use crate::module::blob::{Reader, Writer};
use crate::tensor::serialize::{read_tensor_as, write_tensor_as};
use crate::tensor::Tensor;

/// Magic of a parameter list (`kTVMNDArrayListMagic`).
pub const PARAMS_MAGIC: u64 = 0xF7E5_8D4F_0504_9CB7;

/// Named tensors, in the order they were saved.
pub type Params = Vec<(String, Tensor)>;

fn bad(what: impl std::fmt::Display) -> Error {
    Error::value(format!("invalid parameters blob: {what}"))
}

/// Reads one tensor per name; `count` (read before or after the names, depending on the
/// format) must equal the number of names.
pub(crate) fn read_named_tensors(
    r: &mut Reader<'_>,
    count: u64,
    names: Vec<String>,
) -> Result<Params> {
    if count != names.len() as u64 {
        return Err(bad(format_args!(
            "{} names but {count} tensors",
            names.len()
        )));
    }
    names
        .into_iter()
        .map(|name| {
            let t = read_tensor_as(r, from_classic)
                .map_err(|e| bad(format_args!("tensor `{name}`: {}", e.message)))?;
            Ok((name, t))
        })
        .collect()
}

/// Reads a `u64` count.
pub(crate) fn read_count(r: &mut Reader<'_>, what: &str) -> Result<u64> {
    r.read_u64()
        .map_err(|e| bad(format_args!("{what}: {}", e.message)))
}

/// Reads a names vector: a `u64` count, then each name.
pub(crate) fn read_names(r: &mut Reader<'_>) -> Result<Vec<String>> {
    let names = r
        .read_string_vec()
        .map_err(|e| bad(format_args!("names: {}", e.message)))?;
    Ok(names.into_iter().map(str::to_string).collect())
}

/// Decodes a whole params blob; trailing bytes are an error.
pub fn load_params(bytes: &[u8]) -> Result<Params> {
    let mut r = Reader::new(bytes);
    let magic = r
        .read_u64()
        .map_err(|e| bad(format_args!("header: {}", e.message)))?;
    if magic != PARAMS_MAGIC {
        return Err(bad(format_args!(
            "bad magic {magic:#018x} (expected {PARAMS_MAGIC:#018x})"
        )));
    }
    r.read_u64()
        .map_err(|e| bad(format_args!("reserved field: {}", e.message)))?;
    let names = read_names(&mut r)?;
    let count = read_count(&mut r, "tensor count")?;
    let params = read_named_tensors(&mut r, count, names)?;
    if !r.is_at_end() {
        return Err(bad(format_args!(
            "{} trailing bytes after the last tensor",
            r.remaining()
        )));
    }
    Ok(params)
}

/// Writes the names and the tensors (count, then each) as the factory payload holds them.
pub(crate) fn write_named_tensors(w: &mut Writer, params: &Params) -> Result<()> {
    let names: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
    w.write_u64(params.len() as u64);
    w.write_string_vec(&names);
    for (_, t) in params {
        write_tensor_as(w, t, to_classic)?;
    }
    Ok(())
}

/// Encodes a params blob as `save_param_dict` does.
pub fn save_params(params: &Params) -> Result<Vec<u8>> {
    let mut w = Writer::new();
    w.write_u64(PARAMS_MAGIC);
    w.write_u64(0);
    let names: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
    w.write_string_vec(&names);
    w.write_u64(params.len() as u64);
    for (_, t) in params {
        write_tensor_as(&mut w, t, to_classic)?;
    }
    Ok(w.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::dtypes;
    use crate::tensor::layout::cpu;

    fn tensor(values: &[f32]) -> Tensor {
        let t = Tensor::empty(&[values.len() as i64], dtypes::FLOAT32, cpu()).unwrap();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        t.copy_from_bytes(&bytes).unwrap();
        t
    }

    #[test]
    fn save_then_load_round_trips() {
        let params = vec![
            ("w".to_string(), tensor(&[1.0, 2.0])),
            ("b".to_string(), tensor(&[-3.5])),
        ];
        let blob = save_params(&params).unwrap();
        assert_eq!(&blob[..8], &PARAMS_MAGIC.to_le_bytes());
        let back = load_params(&blob).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].0, "w");
        assert_eq!(back[1].1.to_vec().unwrap(), (-3.5f32).to_le_bytes());
    }

    #[test]
    fn bool_is_saved_as_tvm_0_19_uint1() {
        let t = Tensor::empty(&[5], dtypes::BOOL, cpu()).unwrap();
        t.copy_from_bytes(&[1, 0, 0, 1, 1]).unwrap();
        let blob = save_params(&vec![("m".to_string(), t)]).unwrap();
        // names: magic, reserved, count, "m"; count; then the tensor header: magic, reserved,
        // device (8 bytes), ndim, dtype.
        let dtype_at = 8 + 8 + 8 + (8 + 1) + 8 + 8 + 8 + 8 + 4;
        assert_eq!(
            &blob[dtype_at..dtype_at + 4],
            &[1, 1, 1, 0],
            "uint1, one lane"
        );
        // One byte per element follows the shape: (bits + 7) / 8 per element, as TVM 0.19.
        let size_at = dtype_at + 4 + 8;
        assert_eq!(&blob[size_at..size_at + 8], &5u64.to_le_bytes());
        assert_eq!(&blob[size_at + 8..], &[1, 0, 0, 1, 1]);
        let back = load_params(&blob).unwrap();
        assert_eq!(back[0].1.dtype(), dtypes::BOOL);
        assert_eq!(back[0].1.to_vec().unwrap(), [1, 0, 0, 1, 1]);
    }

    #[test]
    fn bad_magic_and_truncation_are_refused() {
        let blob = save_params(&vec![("w".to_string(), tensor(&[1.0]))]).unwrap();
        let mut bad = blob.clone();
        bad[3] ^= 0xff;
        assert!(load_params(&bad).unwrap_err().message.contains("bad magic"));
        for cut in [4, 12, 20, blob.len() - 1] {
            let e = load_params(&blob[..cut]).unwrap_err();
            assert!(
                e.message.starts_with("invalid parameters blob"),
                "{}",
                e.message
            );
        }
        let mut extra = blob.clone();
        extra.push(0);
        assert!(load_params(&extra)
            .unwrap_err()
            .message
            .contains("trailing"));
    }
}
