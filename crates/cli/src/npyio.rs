//! `.npy` files to and from host arrays, through the `npyz` crate.
//!
//! A [`HostArray`] holds native-endian, C-order bytes and a DLPack dtype, which is what a tvmrt
//! tensor is filled from and read back as. `npyz` parses and writes the format (header, byte
//! order); this file only maps numpy's type strings to DLPack dtypes.

use std::io::BufWriter;

use npyz::{DType, Order, TypeChar, WriterBuilder};
use tvmrt::abi::DLDataType;
use tvmrt::dtype::{dtype, dtype_to_string};
use tvmrt::{Error, Result};

/// The element types `.npy` files may hold here.
pub const SUPPORTED: &str = "bool, int8/16/32/64, uint8/16/32/64, float16/32/64";

/// An array in host memory: native-endian, C-order bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct HostArray {
    /// The element type.
    pub dtype: DLDataType,
    /// The shape.
    pub shape: Vec<i64>,
    /// `product(shape) * element size` bytes.
    pub data: Vec<u8>,
}

/// The element types, one per supported dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Elem {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    F32,
    F64,
}

/// Runs `$body` with `$t` bound to the Rust type of `$elem`.
macro_rules! with_elem {
    ($elem:expr, $t:ident => $body:expr) => {
        with_elem!(@arms $elem, $t, $body;
            Bool bool, I8 i8, I16 i16, I32 i32, I64 i64, U8 u8, U16 u16, U32 u32, U64 u64,
            F16 half::f16, F32 f32, F64 f64)
    };
    (@arms $elem:expr, $t:ident, $body:expr; $($variant:ident $ty:ty),*) => {
        match $elem {
            $(Elem::$variant => {
                type $t = $ty;
                $body
            })*
        }
    };
}

/// A Rust element type: its native bytes and its value as `f64` (for summaries).
trait Element: Sized + Copy {
    const SIZE: usize;
    fn put(self, out: &mut Vec<u8>);
    fn get(bytes: &[u8]) -> Self;
    fn to_f64(self) -> f64;
}

macro_rules! numeric_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_ne_bytes());
            }
            fn get(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(bytes);
                <$t>::from_ne_bytes(b)
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    )*};
}
numeric_element!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

impl Element for bool {
    const SIZE: usize = 1;
    fn put(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }
    fn get(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
    fn to_f64(self) -> f64 {
        f64::from(u8::from(self))
    }
}

impl Element for half::f16 {
    const SIZE: usize = 2;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_ne_bytes());
    }
    fn get(bytes: &[u8]) -> Self {
        half::f16::from_ne_bytes([bytes[0], bytes[1]])
    }
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
}

/// Every element type with its DLPack `(code, bits)` (one lane) and its numpy type character
/// and size in bytes.
const ELEMS: [(Elem, u8, u8, TypeChar, u64); 12] = [
    (Elem::Bool, 6, 8, TypeChar::Bool, 1),
    (Elem::I8, 0, 8, TypeChar::Int, 1),
    (Elem::I16, 0, 16, TypeChar::Int, 2),
    (Elem::I32, 0, 32, TypeChar::Int, 4),
    (Elem::I64, 0, 64, TypeChar::Int, 8),
    (Elem::U8, 1, 8, TypeChar::Uint, 1),
    (Elem::U16, 1, 16, TypeChar::Uint, 2),
    (Elem::U32, 1, 32, TypeChar::Uint, 4),
    (Elem::U64, 1, 64, TypeChar::Uint, 8),
    (Elem::F16, 2, 16, TypeChar::Float, 2),
    (Elem::F32, 2, 32, TypeChar::Float, 4),
    (Elem::F64, 2, 64, TypeChar::Float, 8),
];

fn elem_of_dtype(t: DLDataType) -> Option<Elem> {
    if t.lanes != 1 {
        return None;
    }
    ELEMS
        .iter()
        .find(|e| (e.1, e.2) == (t.code.0, t.bits))
        .map(|e| e.0)
}

fn elem_dtype(e: Elem) -> DLDataType {
    let (_, code, bits, _, _) = ELEMS
        .iter()
        .find(|row| row.0 == e)
        .copied()
        .expect("ELEMS lists every Elem");
    dtype(code, bits, 1)
}

/// `float32`, or a description of a dtype tvmrt cannot name.
pub fn dtype_name(t: DLDataType) -> String {
    dtype_to_string(t).unwrap_or_else(|_| {
        format!(
            "dtype(code={}, bits={}, lanes={})",
            t.code.0, t.bits, t.lanes
        )
    })
}

fn elem_of_npy(dt: &DType) -> Option<Elem> {
    let DType::Plain(ts) = dt else { return None };
    ELEMS
        .iter()
        .find(|e| (e.3, e.4) == (ts.type_char(), ts.size_field()))
        .map(|e| e.0)
}

/// Most opening brackets accepted in a `.npy` header (see `read_npy`).
const MAX_HEADER_BRACKETS: usize = 8;

/// The header dict's bytes (after the magic, version and length) as far as the file has
/// them, and the length the file declares for them.
fn header_text(bytes: &[u8]) -> (&[u8], usize) {
    let (len, start): (usize, usize) = match bytes.get(6) {
        Some(1) if bytes.len() >= 10 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        Some(_) if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        _ => return (&[], 0),
    };
    let end = bytes.len().min(start.saturating_add(len));
    (&bytes[start..end], len)
}

/// Reads a `.npy` file.
pub fn read_npy(path: &str) -> Result<HostArray> {
    let bytes =
        std::fs::read(path).map_err(|e| Error::value(format!("cannot read `{path}`: {e}")))?;
    let bad = |why: String| Error::value(format!("`{path}` is not a usable .npy file: {why}"));
    // Two checks before npyz sees the header, both found by fuzzing: npyz allocates the
    // declared header length up front (a version 3 header may claim 4 GiB), and parses the
    // header dict with a backtracking parser whose time grows exponentially with nested
    // brackets (a 120-byte header of `[[[[...` runs for minutes). numpy writes one `{` and one
    // `(` for the plain dtypes read here.
    let (header, declared) = header_text(&bytes);
    if header.len() < declared {
        return Err(bad(format!(
            "its header claims {declared} bytes but only {} follow",
            header.len()
        )));
    }
    let brackets = header
        .iter()
        .filter(|&&b| matches!(b, b'[' | b'(' | b'{'))
        .count();
    if brackets > MAX_HEADER_BRACKETS {
        return Err(bad(format!(
            "its header has {brackets} opening brackets; a header for the supported dtypes \
             has 2"
        )));
    }
    let mut rest: &[u8] = &bytes;
    let header = npyz::NpyHeader::from_reader(&mut rest).map_err(|e| bad(e.to_string()))?;
    let npy_dtype = header.dtype();
    let elem = elem_of_npy(&npy_dtype).ok_or_else(|| {
        let descr = match &npy_dtype {
            DType::Plain(ts) => ts.to_string(),
            other => format!("{other:?}"),
        };
        bad(format!(
            "numpy dtype `{descr}` is not supported (supported: {SUPPORTED})"
        ))
    })?;
    if header.order() == Order::Fortran && header.shape().len() > 1 {
        return Err(bad(
            "it is stored in Fortran order; save a C-ordered array (numpy.ascontiguousarray)"
                .into(),
        ));
    }
    let shape = header
        .shape()
        .iter()
        .map(|&d| i64::try_from(d))
        .collect::<std::result::Result<Vec<i64>, _>>()
        .map_err(|_| bad("a dimension does not fit in int64".into()))?;
    // Checked before decoding, so a header claiming a huge shape cannot make us allocate.
    let count = header
        .shape()
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| bad("the element count overflows".into()))?;
    let size = with_elem!(elem, T => <T as Element>::SIZE) as u64;
    let needed = count
        .checked_mul(size)
        .ok_or_else(|| bad("the size overflows".into()))?;
    if needed != rest.len() as u64 {
        return Err(bad(format!(
            "its header says shape {:?} ({count} elements, {needed} bytes) but the file holds \
             {} data bytes",
            header.shape(),
            rest.len()
        )));
    }
    let file = npyz::NpyFile::with_header(header, rest);
    let mut data = Vec::with_capacity(needed as usize);
    with_elem!(elem, T => {
        let values: Vec<T> = file.into_vec::<T>().map_err(|e| bad(e.to_string()))?;
        for v in values {
            v.put(&mut data);
        }
    });
    Ok(HostArray {
        dtype: elem_dtype(elem),
        shape,
        data,
    })
}

/// Writes `a` as a `.npy` file (little-endian, C order, as numpy writes by default).
pub fn write_npy(path: &std::path::Path, a: &HostArray) -> Result<()> {
    let shown = path.display();
    let elem = elem_of_dtype(a.dtype).ok_or_else(|| {
        Error::type_error(format!(
            "cannot write `{shown}`: dtype {} has no .npy equivalent here (supported: {SUPPORTED})",
            dtype_name(a.dtype)
        ))
    })?;
    let io = |e: std::io::Error| Error::runtime(format!("cannot write `{shown}`: {e}"));
    let file = std::fs::File::create(path).map_err(io)?;
    let shape: Vec<u64> = a.shape.iter().map(|&d| d.max(0) as u64).collect();
    with_elem!(elem, T => {
        let mut w = npyz::WriteOptions::<T>::new()
            .default_dtype()
            .shape(&shape)
            .writer(BufWriter::new(file))
            .begin_nd()
            .map_err(io)?;
        for chunk in a.data.chunks_exact(<T as Element>::SIZE) {
            w.push(&<T as Element>::get(chunk)).map_err(io)?;
        }
        w.finish().map_err(io)?;
    });
    Ok(())
}

/// Summary statistics of an array: element count, min, max, mean and NaN count, with the
/// first few values.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// Elements.
    pub count: usize,
    /// Smallest non-NaN value.
    pub min: f64,
    /// Largest non-NaN value.
    pub max: f64,
    /// Mean of the non-NaN values.
    pub mean: f64,
    /// NaN elements.
    pub nans: usize,
    /// The first values, in order.
    pub head: Vec<f64>,
}

/// How many leading values [`stats`] keeps.
const HEAD: usize = 6;

/// Statistics of `a`, or `None` for a dtype without numeric values here.
pub fn stats(a: &HostArray) -> Option<Stats> {
    let elem = elem_of_dtype(a.dtype)?;
    let values: Vec<f64> = with_elem!(elem, T => a
        .data
        .chunks_exact(<T as Element>::SIZE)
        .map(|c| <T as Element>::get(c).to_f64())
        .collect());
    let mut s = Stats {
        count: values.len(),
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
        mean: 0.0,
        nans: 0,
        head: values.iter().take(HEAD).copied().collect(),
    };
    let mut sum = 0.0;
    for &v in &values {
        if v.is_nan() {
            s.nans += 1;
            continue;
        }
        s.min = s.min.min(v);
        s.max = s.max.max(v);
        sum += v;
    }
    let finite = s.count - s.nans;
    s.mean = if finite > 0 {
        sum / finite as f64
    } else {
        f64::NAN
    };
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_every_dtype() {
        let dir = std::env::temp_dir().join(format!("tvmrt-npyio-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for elem in ELEMS.map(|e| e.0) {
            let size = with_elem!(elem, T => <T as Element>::SIZE);
            let data: Vec<u8> = (0..6 * size)
                .map(|i| {
                    if elem == Elem::Bool {
                        (i % 2) as u8
                    } else {
                        i as u8
                    }
                })
                .collect();
            let a = HostArray {
                dtype: elem_dtype(elem),
                shape: vec![2, 3],
                data,
            };
            let p = dir.join(format!("{elem:?}.npy"));
            write_npy(&p, &a).unwrap();
            assert_eq!(read_npy(p.to_str().unwrap()).unwrap(), a, "{elem:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn summary() {
        let mut data = Vec::new();
        for v in [1.0f32, -2.0, f32::NAN, 4.0] {
            data.extend_from_slice(&v.to_ne_bytes());
        }
        let s = stats(&HostArray {
            dtype: dtype(2, 32, 1),
            shape: vec![4],
            data,
        })
        .unwrap();
        assert_eq!(
            (s.count, s.nans, s.min, s.max, s.mean),
            (4, 1, -2.0, 4.0, 1.0)
        );
    }

    #[test]
    fn bad_files() {
        let dir = std::env::temp_dir().join(format!("tvmrt-npybad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("junk.npy");
        std::fs::write(&p, b"not numpy").unwrap();
        let e = read_npy(p.to_str().unwrap()).unwrap_err();
        assert!(
            e.message.contains("junk.npy` is not a usable .npy file"),
            "{e}"
        );
        // A valid header whose shape claims more data than the file has.
        let a = HostArray {
            dtype: dtype(2, 32, 1),
            shape: vec![4],
            data: vec![0; 16],
        };
        write_npy(&p, &a).unwrap();
        let full = std::fs::read(&p).unwrap();
        std::fs::write(&p, &full[..full.len() - 4]).unwrap();
        let e = read_npy(p.to_str().unwrap()).unwrap_err();
        assert!(
            e.message
                .contains("16 bytes) but the file holds 12 data bytes"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The repository's root (this crate is `crates/cli`).
    fn repo_root() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// npy_read, timeout-4b7ad3e602755f62a181291a088e4dd24d3d8022: a `.npy` header whose dict
    /// holds about 80 unclosed `[` made npyz's header parser (a backtracking grammar) run for
    /// minutes, so `tvmrt run` hung on a 342-byte file. Headers with more than a few brackets are
    /// now refused before npyz sees them.
    #[test]
    fn npy_header_with_nested_brackets_is_refused_quickly() {
        let path = repo_root().join("tests/reliability_support/npy_nested_brackets.npy");
        let t0 = std::time::Instant::now();
        let e = read_npy(path.to_str().unwrap()).unwrap_err();
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(2),
            "took {:?}",
            t0.elapsed()
        );
        assert!(e.message.contains("is not a usable .npy file"), "{e}");
        assert!(e.message.contains("opening brackets"), "{e}");
    }

    /// A normal file of the fixtures still reads (the bracket limit leaves real headers alone).
    #[test]
    fn npy_fixture_still_reads() {
        let path = repo_root().join("tests/fixtures/data/add_dyn.add.n33.dltensor_ptr.in0.npy");
        let a = read_npy(path.to_str().unwrap()).unwrap();
        assert_eq!(a.shape, vec![33]);
        assert_eq!(a.data.len(), 33 * 4);
    }

    /// npy_read, oom-cd6bc1c9976fe85931f3009f58797d706b1ad718: a 39-byte version 3 `.npy` file
    /// whose header length field says 0x937b0076 bytes made npyz allocate 2.4 GB for the header
    /// before reading it. The declared length is now checked against the file first.
    #[test]
    fn npy_header_longer_than_the_file_is_refused() {
        let path = repo_root().join("tests/reliability_support/npy_huge_header_len.npy");
        let e = read_npy(path.to_str().unwrap()).unwrap_err();
        assert!(
            e.message
                .contains("its header claims 2474311798 bytes but only 27 follow"),
            "{e}"
        );
    }
}
