//! The per-CPU zone: `ncpus` blocks of dense 8-byte slots and the bitmap that hands them out.

use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::bitmap::Bitmap;
use crate::{arch, Counter, Error, ZoneLayout, ZoneMemory};

/// Who owns a zone's memory, so that dropping the zone gives it back.
enum Backing {
    /// Memory the caller vouched for in [`Zone::from_raw_parts`].
    Borrowed,
    /// A [`ZoneMemory`], released for reuse on drop.
    Static(NonNull<AtomicRelease>),
    /// Heap blocks and bitmap from [`Zone::with_capacity`].
    #[cfg(feature = "alloc")]
    Heap {
        blocks: NonNull<u8>,
        layout: alloc::alloc::Layout,
        bitmap: NonNull<[u64]>,
    },
}

/// The release flag of a `ZoneMemory`, type-erased over its size.
type AtomicRelease = core::sync::atomic::AtomicBool;

/// A per-CPU zone: the memory behind every counter allocated from it.
///
/// Each counter is one 8-byte slot in every CPU's block, at the same offset in each, so the
/// memory per counter is exactly 8 bytes per CPU. Slots are handed out by a bitmap under a
/// `spin::Mutex`; allocation and free are rare, the add path never touches the zone.
pub struct Zone<'m> {
    layout: ZoneLayout,
    slots: spin::Mutex<Bitmap>,
    backing: Backing,
    _memory: PhantomData<&'m mut [u64]>,
}

// SAFETY: the blocks are shared by design (each CPU writes only its own slot through the arch
// primitive, others read it atomically); the bitmap is behind a mutex; `Backing` is only used
// on drop, which has `&mut self`.
unsafe impl Sync for Zone<'_> {}
// SAFETY: as above; nothing in a zone is tied to the thread that made it.
unsafe impl Send for Zone<'_> {}

impl<'m> Zone<'m> {
    /// A zone on memory the caller provides: per-CPU blocks described by `layout`, and
    /// `bitmap` for the slot allocator (one bit per slot: at least `layout.capacity()` bits).
    ///
    /// The counter areas are not cleared here: every slot is cleared on every CPU when it is
    /// allocated. Every rule of [`ZoneLayout::validate`] is checked first.
    ///
    /// # Safety
    /// For every CPU `i`, the bytes `layout.base + i * layout.stride + layout.offset` to
    /// `+ layout.len` must be valid for reads and writes for `'m`, and nothing but this zone
    /// and the counters from it may access them while the zone lives.
    pub unsafe fn from_raw_parts(layout: ZoneLayout, bitmap: &'m mut [u64]) -> Result<Self, Error> {
        layout.validate()?;
        let needed = layout.capacity();
        let has = bitmap.len().saturating_mul(64);
        if has < needed {
            return Err(Error::BitmapTooSmall { needed, has });
        }
        // SAFETY: the bitmap words are borrowed mutably for 'm, and only the zone uses them.
        let bits = unsafe { Bitmap::new(NonNull::from(bitmap).cast(), needed) };
        Ok(Zone {
            layout,
            slots: spin::Mutex::new(bits),
            backing: Backing::Borrowed,
            _memory: PhantomData,
        })
    }

    /// A zone on static memory: `NCPUS` CPUs, `WORDS * 64` counters.
    ///
    /// Fails with [`Error::MemoryInUse`] while another zone owns `memory`, and with
    /// [`Error::NoCpus`] if `NCPUS` is zero.
    pub fn new<const NCPUS: usize, const WORDS: usize>(
        memory: &'m ZoneMemory<NCPUS, WORDS>,
    ) -> Result<Self, Error> {
        if WORDS == 0 {
            return Err(Error::BadAreaLength { len: 0 });
        }
        let stride = WORDS * 64 * 8;
        let layout = ZoneLayout::dense(memory.blocks.get() as usize, stride, NCPUS);
        layout.validate()?;
        if !memory.take() {
            return Err(Error::MemoryInUse);
        }
        // SAFETY: `take` made this zone the memory's only owner until drop releases it; the
        // blocks and bitmap live for 'm and are exactly the size the layout says.
        let mut zone = unsafe { Self::from_raw_parts(layout, &mut *memory.bitmap.get())? };
        zone.backing = Backing::Static(NonNull::from(&memory.taken));
        Ok(zone)
    }

    /// The zone's layout (where each CPU's block is).
    pub fn layout(&self) -> &ZoneLayout {
        &self.layout
    }

    /// Number of possible CPUs.
    pub fn ncpus(&self) -> usize {
        self.layout.ncpus
    }

    /// Number of counters the zone can hold at once.
    pub fn capacity(&self) -> usize {
        self.layout.capacity()
    }

    /// Number of slots in use now.
    pub fn in_use(&self) -> usize {
        self.slots.lock().count_used()
    }

    /// The value CPU `cpu`'s per-CPU register must hold before that CPU adds to a counter.
    pub fn cpu_base(&self, cpu: usize) -> Result<usize, Error> {
        self.layout.cpu_base(cpu)
    }

    /// Allocates a counter that reads 0.
    ///
    /// Fails with [`Error::ZoneFull`] when every slot is in use; nothing changes then.
    pub fn alloc(&self) -> Result<Counter<'_>, Error> {
        let off = self.alloc_run(1)?;
        // SAFETY: the slot at `off` was just allocated and cleared, and is owned by the counter.
        Ok(unsafe { Counter::from_slot(self, off) })
    }

    /// Allocates `len` adjacent slots, clears them on every CPU and returns the register-
    /// relative offset of the first.
    pub(crate) fn alloc_run(&self, len: usize) -> Result<usize, Error> {
        let capacity = self.capacity();
        let first = self
            .slots
            .lock()
            .alloc_run(len)
            .ok_or(Error::ZoneFull { capacity })?;
        let off = self.layout.slot_offset(first);
        for slot in 0..len {
            for cpu in 0..self.ncpus() {
                // SAFETY: the slot is inside the zone (the bitmap only has `capacity` bits) and
                // newly allocated, so no CPU adds to it; the handle that publishes it to other
                // CPUs carries the happens-before edge for these stores.
                unsafe { arch::store_slot(self.slot_addr(cpu, off + slot * 8), 0) };
            }
        }
        Ok(off)
    }

    /// Returns `len` slots starting at offset `off` to the bitmap.
    pub(crate) fn free_run(&self, off: usize, len: usize) {
        self.slots.lock().free_run(self.layout.slot_index(off), len);
    }

    /// The address of the slot at `off` in CPU `cpu`'s block. `cpu` must be in range.
    #[inline]
    pub(crate) fn slot_addr(&self, cpu: usize, off: usize) -> *mut u64 {
        debug_assert!(cpu < self.ncpus());
        (self.layout.base + cpu * self.layout.stride + off) as *mut u64
    }

    /// The raw value of slot `off` on CPU `cpu`.
    pub(crate) fn slot_value(&self, cpu: usize, off: usize) -> Result<u64, Error> {
        self.layout.cpu_base(cpu)?;
        // SAFETY: `off` belongs to a live allocation (callers hold its handle) and `cpu` was
        // checked, so the address is inside the zone.
        Ok(unsafe { arch::load_slot(self.slot_addr(cpu, off)) })
    }

    /// The sum, wrapping, of slot `off` over every CPU.
    pub(crate) fn sum(&self, off: usize) -> u64 {
        (0..self.ncpus()).fold(0u64, |acc, cpu| {
            // SAFETY: as in `slot_value`; `cpu` is below `ncpus`.
            acc.wrapping_add(unsafe { arch::load_slot(self.slot_addr(cpu, off)) })
        })
    }
}

#[cfg(feature = "alloc")]
impl Zone<'static> {
    /// A zone on heap memory for `ncpus` CPUs and at least `counters` counters.
    ///
    /// Each CPU's block is rounded up to a multiple of 128 bytes, so that no two CPUs share a
    /// cache line; [`capacity`](Zone::capacity) reports the rounded count.
    pub fn with_capacity(ncpus: usize, counters: usize) -> Result<Self, Error> {
        extern crate alloc;
        use alloc::alloc::{alloc_zeroed, Layout};

        if ncpus == 0 {
            return Err(Error::NoCpus);
        }
        if counters == 0 {
            return Err(Error::BadAreaLength { len: 0 });
        }
        let stride = counters
            .checked_mul(8)
            .and_then(|b| b.checked_next_multiple_of(128))
            .ok_or(Error::AddressOverflow)?;
        let total = stride.checked_mul(ncpus).ok_or(Error::AddressOverflow)?;
        let layout = Layout::from_size_align(total, 128).map_err(|_| Error::AddressOverflow)?;
        // SAFETY: `layout` has a non-zero size.
        let blocks = NonNull::new(unsafe { alloc_zeroed(layout) })
            .unwrap_or_else(|| alloc::alloc::handle_alloc_error(layout));
        let words = (stride / 8).div_ceil(64);
        let bitmap: &'static mut [u64] = alloc::boxed::Box::leak(alloc::vec![0u64; words].into());
        let bitmap_ptr = NonNull::from(&mut *bitmap);
        // SAFETY: the blocks and bitmap were just allocated for this zone alone and are freed
        // only when it is dropped.
        let made = unsafe {
            Self::from_raw_parts(
                ZoneLayout::dense(blocks.as_ptr() as usize, stride, ncpus),
                bitmap,
            )
        };
        match made {
            Ok(mut zone) => {
                zone.backing = Backing::Heap {
                    blocks,
                    layout,
                    bitmap: bitmap_ptr,
                };
                Ok(zone)
            }
            Err(e) => {
                // SAFETY: both allocations are unused: the zone was not made.
                unsafe {
                    alloc::alloc::dealloc(blocks.as_ptr(), layout);
                    drop(alloc::boxed::Box::from_raw(bitmap_ptr.as_ptr()));
                }
                Err(e)
            }
        }
    }
}

impl Drop for Zone<'_> {
    fn drop(&mut self) {
        match self.backing {
            Backing::Borrowed => {}
            Backing::Static(flag) => {
                // SAFETY: the flag lives in the `ZoneMemory` borrowed for 'm, still alive here.
                let flag = unsafe { flag.as_ref() };
                flag.store(false, core::sync::atomic::Ordering::Release)
            }
            #[cfg(feature = "alloc")]
            Backing::Heap {
                blocks,
                layout,
                bitmap,
            } => {
                extern crate alloc;
                // SAFETY: both were allocated in `with_capacity` for this zone; no counter
                // outlives the zone (they borrow it), so nothing uses them any more.
                unsafe {
                    alloc::alloc::dealloc(blocks.as_ptr(), layout);
                    drop(alloc::boxed::Box::from_raw(bitmap.as_ptr()));
                }
            }
        }
    }
}

impl core::fmt::Debug for Zone<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Zone")
            .field("layout", &self.layout)
            .field("in_use", &self.in_use())
            .finish()
    }
}
