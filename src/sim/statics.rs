// SPDX-License-Identifier: BSD-2-Clause
//! A machine whose CPUs hold copies of the per-CPU statics (`crate::statics`) as well as a
//! zone: the kernel's bring-up (the "DPCPU recipe") on the host.
//!
//! CPU `i`'s register must be `block_i - start` (the statics' contract) and also the zone's
//! `base + i * stride`: one register serves both. So the copies of the section are one
//! mapping `C` (CPU `i`'s at `C + i * stride`), the registers `R_i = C - start + i * stride`,
//! and the zone's counter areas a second mapping placed at `R_0` itself (at offset 8 of each
//! block, as every machine's). The area's checks see both ranges: the template's
//! `start..stop` and the zone's `8..8 + len`.

use core::mem::ManuallyDrop;
use core::ptr::NonNull;
use std::boxed::Box;
use std::vec::Vec;

use crate::{statics, AreaShape, Error, Zone, ZoneLayout};

const PAGE: usize = 4096;

/// An anonymous read-write mapping, unmapped on drop.
struct Mapping {
    addr: usize,
    len: usize,
}

impl Mapping {
    /// Maps `len` bytes, at `hint` exactly if given (else fails), anywhere otherwise.
    fn new(len: usize, hint: Option<usize>) -> Result<Self, Error> {
        // SAFETY: an anonymous private mapping touches no existing memory (no MAP_FIXED: a
        // hint the kernel cannot honour gives another address, refused below).
        let p = unsafe {
            libc::mmap(
                hint.unwrap_or(0) as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::OutOfMemory { bytes: len });
        }
        let map = Mapping {
            addr: p as usize,
            len,
        };
        if hint.is_some_and(|h| h != map.addr) {
            return Err(Error::OutOfMemory { bytes: len });
        }
        Ok(map)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping is this value's alone.
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
    }
}

/// A machine's zone with the statics installed over the same registers.
pub(super) struct StaticsZone {
    zone: ManuallyDrop<Zone<'static>>,
    meta: NonNull<[u64]>,
    /// Whether this machine's install is the one in force (then uninstalled on drop).
    installed: bool,
    _copies: Mapping,
    _counters: Mapping,
}

// SAFETY: the zone is `Send` and `Sync`; the mappings and metadata are only freed on drop.
unsafe impl Send for StaticsZone {}
// SAFETY: as above.
unsafe impl Sync for StaticsZone {}

impl StaticsZone {
    /// `ncpus` CPUs with a copy of the statics each and a zone of at least `counters`
    /// counters; installs the statics ([`Error::AlreadyInstalled`] while another machine
    /// holds them).
    pub(super) fn new(ncpus: usize, counters: usize) -> Result<Self, Error> {
        if ncpus == 0 {
            return Err(Error::NoCpus);
        }
        if statics::installed().is_some() {
            return Err(Error::AlreadyInstalled);
        }
        let (start, stop) = statics::template();
        let len = counters
            .checked_mul(8)
            .and_then(|b| b.checked_next_multiple_of(128))
            .filter(|&b| b > 0)
            .ok_or(Error::BadAreaLength { len: 0 })?;
        let stride = (stop - start)
            .max(8 + len)
            .checked_next_multiple_of(128)
            .ok_or(Error::AddressOverflow)?;
        let total = stride.checked_mul(ncpus).ok_or(Error::AddressOverflow)?;
        // The copies start `start % PAGE` into their mapping, so that `R_0` is page aligned.
        // They must lie above the template (`R_0 = C - start` must not wrap): where the
        // host maps below the program (i386 under qemu-i386), ask for 256 MiB above it.
        let mut copies = Mapping::new(total + PAGE, None)?;
        if copies.addr < start {
            let above = (stop | (PAGE - 1)).wrapping_add(1 + (1 << 28));
            copies = Mapping::new(total + PAGE, Some(above))?;
        }
        let block0 = copies.addr + start % PAGE;
        let base = block0.checked_sub(start).ok_or(Error::AddressOverflow)?;
        let counters_map = Mapping::new(total, Some(base))?;
        let layout = ZoneLayout {
            base,
            stride,
            offset: 8,
            len,
            ncpus,
        };
        let meta: Box<[u64]> =
            Vec::from_iter(core::iter::repeat_n(0, layout.meta_words())).into_boxed_slice();
        let meta = NonNull::from(Box::leak(meta));
        // SAFETY: the counter areas are the second mapping's, the metadata just leaked; both
        // outlive the zone (freed after it, on drop).
        let zone = unsafe { Zone::from_raw_parts_own_area(layout, &mut *meta.as_ptr()) };
        let zone = match zone {
            Ok(zone) => zone,
            Err(e) => {
                // SAFETY: leaked above, used by nothing.
                drop(unsafe { Box::from_raw(meta.as_ptr()) });
                return Err(e);
            }
        };
        let mut this = StaticsZone {
            zone: ManuallyDrop::new(zone),
            meta,
            installed: false,
            _copies: copies,
            _counters: counters_map,
        };
        // SAFETY: CPU `i`'s block `base + i * stride + start` is the copies mapping's, which
        // lives until `uninstall` on drop; no CPU is bound yet. The area is the zone's own,
        // boxed, which outlives the install too.
        unsafe { statics::install_in(this.zone.area(), AreaShape::of(&layout))? };
        this.installed = true;
        Ok(this)
    }

    /// The zone.
    pub(super) fn zone(&self) -> &Zone<'static> {
        &self.zone
    }
}

impl Drop for StaticsZone {
    fn drop(&mut self) {
        if self.installed {
            // SAFETY: the machine goes, so no thread holds its CPUs (their holds borrow it).
            unsafe { statics::uninstall() };
        }
        // SAFETY: dropped once, here, before the memory it uses.
        unsafe { ManuallyDrop::drop(&mut self.zone) };
        // SAFETY: leaked in `new`, no longer used by the zone.
        drop(unsafe { Box::from_raw(self.meta.as_ptr()) });
    }
}
