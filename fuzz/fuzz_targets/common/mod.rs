//! What the fuzz targets share: the arbitrary sizes they feed the API, and the model of one
//! counter slot that the operation targets check the library against.
#![allow(dead_code)] // Each target uses part of it.

use arbitrary::Arbitrary;

/// A size or offset: small multiples of 8 most often, also unaligned, powers of two, near the
/// top of the address space, or anything.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Size {
    Words(u8),
    Bytes(u16),
    Pow2(u8),
    NearMax(u8),
    Any(usize),
}

impl Size {
    pub fn get(self) -> usize {
        match self {
            Size::Words(w) => usize::from(w) * 8,
            Size::Bytes(b) => usize::from(b),
            Size::Pow2(s) => 1usize.checked_shl(u32::from(s)).unwrap_or(0),
            Size::NearMax(k) => usize::MAX - usize::from(k),
            Size::Any(v) => v,
        }
    }
}

/// A slot as the model sees it: each CPU's raw value and the baseline of the last zero.
#[derive(Clone)]
pub struct Slot {
    pub cpu: Vec<u64>,
    pub baseline: u64,
}

impl Slot {
    pub fn new(ncpus: usize) -> Self {
        Slot {
            cpu: vec![0; ncpus],
            baseline: 0,
        }
    }
    pub fn sum(&self) -> u64 {
        self.cpu.iter().fold(0u64, |a, &v| a.wrapping_add(v))
    }
    pub fn fetch(&self) -> u64 {
        self.sum().wrapping_sub(self.baseline)
    }
    pub fn fetch_and_zero(&mut self) -> u64 {
        let v = self.fetch();
        self.baseline = self.sum();
        v
    }
}
