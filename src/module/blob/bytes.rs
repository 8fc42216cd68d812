//! The bytes of a blob: a bounds-checked little-endian [`Reader`], its [`Writer`], and the
//! 8-byte size prefix of the symbol.

use super::{context, SIZE_PREFIX_LEN};
use crate::error::{Error, Result};

/// Bounds-checked little-endian cursor over a byte slice. Every read checks the bytes that
/// remain before using a length, so a corrupt length is an error, never an allocation.
/// Offsets in its errors count from the start of the slice it was made with.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader positioned at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// Whether every byte has been consumed.
    pub fn is_at_end(&self) -> bool {
        self.pos == self.data.len()
    }

    /// The bytes not yet consumed, without consuming them.
    pub fn rest(&self) -> &'a [u8] {
        &self.data[self.pos..]
    }

    /// Consumes exactly `n` bytes.
    pub fn read_raw(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            crate::bail_value!(
                "truncated at byte {}: need {n} bytes, {} remain",
                self.pos,
                self.remaining()
            );
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<()> {
        self.read_raw(n).map(|_| ())
    }

    /// Reads a little-endian `u32`.
    pub fn read_u32(&mut self) -> Result<u32> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.read_raw(4)?);
        Ok(u32::from_le_bytes(b))
    }

    /// Reads a little-endian `u64`.
    pub fn read_u64(&mut self) -> Result<u64> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.read_raw(8)?);
        Ok(u64::from_le_bytes(b))
    }

    /// Reads a `u64` count of items of `item_size` bytes each and checks that that many could
    /// still follow, so callers may allocate by it.
    fn read_count(&mut self, item_size: usize, what: &str) -> Result<usize> {
        let at = self.pos;
        let count = self.read_u64()?;
        let rem = self.remaining();
        if count > (rem / item_size) as u64 {
            crate::bail_value!(
                "{what} {count} at byte {at} needs {} bytes, {rem} remain",
                u128::from(count) * item_size as u128
            );
        }
        // Bounded by `remaining()`, so it fits in usize.
        Ok(count as usize)
    }

    /// Reads a byte string: a `u64` length, then that many bytes.
    pub fn read_bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.read_count(1, "length")?;
        self.read_raw(n)
    }

    /// Reads a string: a `u64` length, then that many bytes of UTF-8.
    pub fn read_string(&mut self) -> Result<&'a str> {
        let at = self.pos;
        let bytes = self.read_bytes()?;
        std::str::from_utf8(bytes).map_err(|e| {
            Error::value(format!(
                "the string at byte {at} is not valid UTF-8 (bad byte at string offset {})",
                e.valid_up_to()
            ))
        })
    }

    /// Reads a vector of `u64`: a `u64` count, then the items.
    pub fn read_u64_vec(&mut self) -> Result<Vec<u64>> {
        let n = self.read_count(8, "count")?;
        (0..n).map(|_| self.read_u64()).collect()
    }

    /// Reads a vector of strings: a `u64` count, then the strings.
    pub fn read_string_vec(&mut self) -> Result<Vec<&'a str>> {
        // Each string needs at least its 8-byte length.
        let n = self.read_count(8, "count")?;
        (0..n).map(|_| self.read_string()).collect()
    }

    /// Fails if any bytes remain.
    pub fn expect_end(&self) -> Result<()> {
        if !self.is_at_end() {
            crate::bail_value!("{} trailing bytes at byte {}", self.remaining(), self.pos);
        }
        Ok(())
    }
}

/// Little-endian writer producing the encodings [`Reader`] reads.
#[derive(Clone, Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The bytes written so far.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf
    }

    /// Appends bytes as they are, with no length.
    pub fn write_raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Appends a little-endian `u32`.
    pub fn write_u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends a little-endian `u64`.
    pub fn write_u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends a byte string: `u64` length, then the bytes.
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        self.write_u64(bytes.len() as u64);
        self.write_raw(bytes);
    }

    /// Appends a string: `u64` length, then its UTF-8 bytes.
    pub fn write_string(&mut self, s: &str) {
        self.write_bytes(s.as_bytes());
    }

    /// Appends a vector of `u64`: count, then the items.
    pub fn write_u64_vec(&mut self, items: &[u64]) {
        self.write_u64(items.len() as u64);
        for &v in items {
            self.write_u64(v);
        }
    }

    /// Appends a vector of strings: count, then the strings.
    pub fn write_string_vec<S: AsRef<str>>(&mut self, items: &[S]) {
        self.write_u64(items.len() as u64);
        for s in items {
            self.write_string(s.as_ref());
        }
    }

    /// The bytes written.
    pub fn into_inner(self) -> Vec<u8> {
        self.buf
    }

    /// The bytes written, preceded by the blob's `u64` size prefix.
    pub fn into_prefixed(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(SIZE_PREFIX_LEN + self.buf.len());
        out.extend_from_slice(&(self.buf.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.buf);
        out
    }
}

/// Reads from a raw symbol address: the first 8 bytes give the length of what follows.
pub fn blob_len_from_prefix(prefix: [u8; 8]) -> u64 {
    u64::from_le_bytes(prefix)
}

/// The body length from the size prefix, checked to be addressable together with the prefix
/// (a slice may not exceed `isize::MAX` bytes), for callers about to build a slice over a symbol.
pub fn blob_body_len(prefix: [u8; 8]) -> Result<usize> {
    let n = blob_len_from_prefix(prefix);
    let max = isize::MAX as u64 - SIZE_PREFIX_LEN as u64;
    if n > max {
        crate::bail_value!("library blob: size prefix {n} is larger than any addressable blob");
    }
    Ok(n as usize)
}

/// Splits a whole blob (prefix included) into its body. Bytes past the declared length are
/// ignored: they belong to whatever follows the symbol.
pub fn split_size_prefix(blob: &[u8]) -> Result<&[u8]> {
    let mut r = Reader::new(blob);
    let n = r
        .read_u64()
        .map_err(|e| context(e, "library blob: size prefix"))?;
    if n > r.remaining() as u64 {
        crate::bail_value!(
            "library blob: size prefix says {n} bytes follow, but only {} do",
            r.remaining()
        );
    }
    r.read_raw(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::blob::test_support::*;

    #[test]
    fn prefix_is_little_endian_length_of_what_follows() {
        assert_eq!(blob_len_from_prefix([1, 6, 0, 0, 0, 0, 0, 0]), 0x601);
        assert_eq!(blob_len_from_prefix([0, 0, 0, 0, 0, 0, 0, 0x80]), 1 << 63);
        assert_eq!(blob_body_len([1, 6, 0, 0, 0, 0, 0, 0]).unwrap(), 0x601);
        assert_eq!(
            msg(blob_body_len([0xff; 8])),
            "library blob: size prefix 18446744073709551615 is larger than any addressable blob"
        );
        // In TVM's own output the prefix counts the bytes after it.
        let mut head = [0u8; 8];
        head.copy_from_slice(&REAL_FFI_BLOB[..8]);
        assert_eq!(blob_len_from_prefix(head), 1537);
        assert_eq!(REAL_FFI_BLOB.len(), 1537 + SIZE_PREFIX_LEN);

        let data = [2, 0, 0, 0, 0, 0, 0, 0, 7, 8, 9];
        assert_eq!(split_size_prefix(&data).unwrap(), &[7, 8]);
        assert_eq!(
            msg(split_size_prefix(&[3, 0, 0, 0, 0, 0, 0, 0, 7, 8])),
            "library blob: size prefix says 3 bytes follow, but only 2 do"
        );
        assert_eq!(
            msg(split_size_prefix(&[3, 0, 0])),
            "library blob: size prefix: truncated at byte 0: need 8 bytes, 3 remain"
        );
    }

    #[test]
    fn reader_writer() {
        let mut w = Writer::new();
        assert!(w.is_empty());
        w.write_u32(7);
        w.write_u64(u64::MAX);
        w.write_string("héllo");
        w.write_bytes(&[1, 2]);
        w.write_u64_vec(&[3, 4]);
        w.write_string_vec(&["a", "bc"]);
        w.write_raw(&[9]);
        assert_eq!(
            w.len(),
            4 + 8 + (8 + 6) + (8 + 2) + (8 + 16) + (8 + 9 + 10) + 1
        );
        let bytes = w.as_slice().to_vec();
        let mut r = Reader::new(&bytes);
        assert_eq!(r.read_u32().unwrap(), 7);
        assert_eq!(r.read_u64().unwrap(), u64::MAX);
        assert_eq!(r.read_string().unwrap(), "héllo");
        assert_eq!(r.read_bytes().unwrap(), &[1, 2]);
        assert_eq!(r.read_u64_vec().unwrap(), vec![3, 4]);
        assert_eq!(r.read_string_vec().unwrap(), vec!["a", "bc"]);
        assert_eq!(r.position(), 87);
        assert_eq!(r.rest(), &[9]);
        assert_eq!(msg(r.expect_end()), "1 trailing bytes at byte 87");
        r.skip(1).unwrap();
        assert!(r.is_at_end());
        assert_eq!(r.remaining(), 0);
        r.expect_end().unwrap();
        assert_eq!(
            msg(r.read_raw(1)),
            "truncated at byte 88: need 1 bytes, 0 remain"
        );
        assert_eq!(split_size_prefix(&w.into_prefixed()).unwrap(), &bytes[..]);
        // A string vector count that the remaining bytes cannot hold.
        let mut data = vec![0u8; 16];
        data[0] = 5;
        assert_eq!(
            msg(Reader::new(&data).read_string_vec()),
            "count 5 at byte 0 needs 40 bytes, 8 remain"
        );
    }
}
