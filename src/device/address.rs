//! A hasher for maps keyed by a descriptor's address (the back ends' live-buffer registries):
//! the address is already unique and 64-byte aligned, so one multiply spreads it. Those
//! registries are looked up for every buffer of every kernel launch, where SipHash cost more
//! than the rest of tvmrt's launch path.

/// Hashes a `usize` address with one multiply.
#[derive(Default)]
pub struct AddressHasher(u64);

impl std::hash::Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, v: usize) {
        // Drop the alignment bits, spread the rest over the high bits hashbrown uses.
        self.0 = ((v as u64) >> 6).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The `BuildHasher` of [`AddressHasher`], for `HashMap<usize, _, BuildAddressHasher>`.
pub type BuildAddressHasher = std::hash::BuildHasherDefault<AddressHasher>;
