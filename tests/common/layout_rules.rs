//! The zone layout's documented rules, written apart from the product (in `u128`, where no
//! sum can overflow) as the oracle of the property tests (`tests/config_fuzz.rs`) and the
//! fuzz target `zone_layout` (`fuzz/`), which includes this file by path.

use pcpu_counter::{Error, ZoneLayout};

/// `ZoneLayout::validate`'s rules, in their documented order: the first one `l` breaks.
pub fn validate(l: &ZoneLayout) -> Result<(), Error> {
    if l.ncpus == 0 {
        return Err(Error::NoCpus);
    }
    if !l.stride.is_multiple_of(8) {
        return Err(Error::StrideNotMultipleOf8 { stride: l.stride });
    }
    if l.len == 0 || !l.len.is_multiple_of(8) {
        return Err(Error::BadAreaLength { len: l.len });
    }
    if !l.base.is_multiple_of(8) {
        return Err(Error::Misaligned { addr: l.base });
    }
    if !l.offset.is_multiple_of(8) {
        return Err(Error::Misaligned { addr: l.offset });
    }
    let needed = l.offset as u128 + l.len as u128;
    if needed > usize::MAX as u128 {
        return Err(Error::AddressOverflow);
    }
    if needed > l.stride as u128 {
        return Err(Error::StrideTooSmall {
            stride: l.stride,
            needed: needed as usize,
        });
    }
    let end = l.base as u128 + (l.ncpus as u128 - 1) * l.stride as u128 + needed;
    if end > usize::MAX as u128 {
        return Err(Error::AddressOverflow);
    }
    Ok(())
}

/// The sizes `Zone::on_heap(ncpus, counters, header)` must choose: `(stride, len, total)`
/// (each CPU's block, its counter part, all blocks), or the error it must return before it
/// allocates anything.
pub fn heap(ncpus: usize, counters: usize, header: usize) -> Result<(usize, usize, usize), Error> {
    if ncpus == 0 {
        return Err(Error::NoCpus);
    }
    if counters == 0 {
        return Err(Error::BadAreaLength { len: 0 });
    }
    let round = |b: u128| b.div_ceil(128) * 128;
    let len = round(counters as u128 * 8);
    let stride = round(len + header as u128);
    let total = stride.saturating_mul(ncpus as u128);
    if len > usize::MAX as u128 || stride > usize::MAX as u128 || total > isize::MAX as u128 - 127 {
        return Err(Error::AddressOverflow);
    }
    Ok((stride as usize, len as usize, total as usize))
}
