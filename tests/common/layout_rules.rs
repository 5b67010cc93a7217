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
    // Every CPU's counter area, CPU by CPU in u128 (no loop: the first CPU that breaks a
    // rule is found by division): first the target's hole of addresses no CPU has (x86_64:
    // non-canonical, 4-level paging; riscv64: outside Sv57), then the end of the address
    // space.
    let top = 1u128 << usize::BITS;
    let (a, s, len, n) = (
        l.base as u128 + l.offset as u128,
        l.stride as u128,
        l.len as u128,
        l.ncpus as u128,
    );
    let start = |cpu: u128| a + cpu * s;
    // The first CPU whose area's end (one past its last byte) is above `limit`.
    let first_past = |limit: u128| -> u128 {
        if a + len > limit {
            0
        } else {
            ((limit - a - len) / s + 1).min(n)
        }
    };
    let hole_bits = if usize::BITS < 64 {
        None
    } else if cfg!(target_arch = "x86_64") {
        Some(47)
    } else if cfg!(target_arch = "riscv64") {
        Some(56)
    } else {
        None
    };
    if let Some(bits) = hole_bits {
        let (low, high) = (1u128 << bits, top - (1u128 << bits));
        let cpu = first_past(low);
        if cpu < n && start(cpu) < high {
            return Err(Error::Unaddressable {
                what: "zone",
                cpu: cpu as usize,
                addr: start(cpu).max(low) as usize,
                space: pcpu_counter::AddressSpace::TARGET,
            });
        }
    }
    // A range's end (one past its last byte) must be an address too: below 2^64.
    let cpu = first_past(top - 1);
    if cpu < n {
        return Err(Error::WrapsAround {
            what: "zone",
            cpu: cpu as usize,
            addr: (start(cpu) % top) as usize,
            len: l.len,
        });
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
