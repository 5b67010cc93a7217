// SPDX-License-Identifier: BSD-2-Clause
//! Static zone memory for kernels without an allocator.

use crate::atomic::{AtomicBool, Ordering};
use core::cell::UnsafeCell;

/// Room for `NCPUS` CPUs times `WORDS * 64` counters, plus the zone's metadata (a zero
/// baseline per counter, the slot bitmap and its summary levels), in a `static`.
///
/// Each CPU's block is `WORDS * 512` bytes (a multiple of 128, so CPUs never share a cache
/// line) and holds `WORDS * 64` dense 8-byte slots.
///
/// ```
/// use pcpu_counter::{Zone, ZoneMemory};
/// static MEMORY: ZoneMemory<4, 2> = ZoneMemory::new(); // 4 CPUs x 128 counters
/// let zone = Zone::new(&MEMORY).unwrap();
/// assert_eq!((zone.ncpus(), zone.capacity()), (4, 128));
/// assert!(Zone::new(&MEMORY).is_err()); // one zone per memory at a time
/// ```
#[repr(C, align(128))]
pub struct ZoneMemory<const NCPUS: usize, const WORDS: usize> {
    pub(crate) blocks: UnsafeCell<[[[u64; 64]; WORDS]; NCPUS]>,
    pub(crate) baselines: UnsafeCell<[[u64; 64]; WORDS]>,
    /// Room for the slot bitmap (`WORDS` words) and its summary levels, which need fewer than
    /// `WORDS` more (a `const` generic cannot size an array by a formula: at most 1/64 of a
    /// word per counter stays unused).
    pub(crate) bitmap: UnsafeCell<[[u64; 2]; WORDS]>,
    pub(crate) taken: AtomicBool,
}

// SAFETY: the cells are only reached through the one zone that `take` lets own them.
unsafe impl<const NCPUS: usize, const WORDS: usize> Sync for ZoneMemory<NCPUS, WORDS> {}

impl<const NCPUS: usize, const WORDS: usize> ZoneMemory<NCPUS, WORDS> {
    /// Zeroed memory, ready for [`Zone::new`](crate::Zone::new).
    pub const fn new() -> Self {
        ZoneMemory {
            blocks: UnsafeCell::new([[[0; 64]; WORDS]; NCPUS]),
            baselines: UnsafeCell::new([[0; 64]; WORDS]),
            bitmap: UnsafeCell::new([[0; 2]; WORDS]),
            taken: AtomicBool::new(false),
        }
    }

    /// Marks the memory as owned by a zone; false if a zone already owns it.
    pub(crate) fn take(&self) -> bool {
        !self.taken.swap(true, Ordering::Acquire)
    }
}

impl<const NCPUS: usize, const WORDS: usize> Default for ZoneMemory<NCPUS, WORDS> {
    fn default() -> Self {
        Self::new()
    }
}

/// The metadata of a zone hosted in memory the kernel owns (its own per-CPU blocks, the
/// `percpu` crate's area), as a `static`: `WORDS` words, at least
/// [`ZoneLayout::meta_words_for`](crate::ZoneLayout::meta_words_for) of the zone's counters.
/// It replaces a `static mut` array and its `unsafe` borrow: const-constructed, interior-
/// mutable, handed to one zone at a time.
///
/// ```
/// use pcpu_counter::{Zone, ZoneLayout, ZoneMeta};
/// const COUNTERS: usize = 64;
/// static META: ZoneMeta<{ ZoneLayout::meta_words_for(COUNTERS) }> = ZoneMeta::new();
/// # let machine = pcpu_counter::sim::Machine::new(1);
/// # let blocks = Box::leak(vec![0u64; COUNTERS].into_boxed_slice());
/// # let kernel_block = blocks.as_mut_ptr() as usize;
/// let layout = ZoneLayout { base: kernel_block, stride: COUNTERS * 8, offset: 0, len: COUNTERS * 8, ncpus: 1 };
/// // SAFETY: the block's bytes belong to the zone from now on.
/// let zone = unsafe { Zone::hosted(layout, &META) }?;
/// assert_eq!(zone.capacity(), COUNTERS);
/// assert_eq!(unsafe { Zone::hosted(layout, &META) }.err(), Some(pcpu_counter::Error::MemoryInUse));
/// # Ok::<(), pcpu_counter::Error>(())
/// ```
#[repr(C)]
pub struct ZoneMeta<const WORDS: usize> {
    pub(crate) words: UnsafeCell<[u64; WORDS]>,
    pub(crate) taken: AtomicBool,
}

// SAFETY: the words are only reached through the one zone that `take` lets own them.
unsafe impl<const WORDS: usize> Sync for ZoneMeta<WORDS> {}

impl<const WORDS: usize> ZoneMeta<WORDS> {
    /// Zeroed metadata, ready for [`Zone::hosted`](crate::Zone::hosted).
    pub const fn new() -> Self {
        ZoneMeta {
            words: UnsafeCell::new([0; WORDS]),
            taken: AtomicBool::new(false),
        }
    }

    /// Marks the metadata as owned by a zone; false if a zone already owns it.
    pub(crate) fn take(&self) -> bool {
        !self.taken.swap(true, Ordering::Acquire)
    }
}

impl<const WORDS: usize> Default for ZoneMeta<WORDS> {
    fn default() -> Self {
        Self::new()
    }
}
