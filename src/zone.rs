// SPDX-License-Identifier: BSD-2-Clause
//! The per-CPU zone: `ncpus` blocks of dense 8-byte slots and the bitmap that hands them out.

use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::area::Area;
use crate::bitmap::Bitmap;
use crate::chunk::{Chunk, ChunkShape, ChunkSource, Chunks, Wait};

pub(crate) mod global;
mod growth;
use crate::memory::{ZoneMemory, ZoneMeta};
use crate::{arch, baseline, platform, Error, ZoneLayout};
use growth::Grown;

/// Whether the CPUs here have a per-CPU register for the add: not in a hosted program
/// without the simulation ([`Error::NoCpuRegister`]), where no zone is made, so that no add
/// can run. (A Linux program's `rseq` zones reach their slots through a mapping of their
/// own, not a register, and do not ask.)
fn cpu_register() -> Result<(), Error> {
    if cfg!(pcpu_no_cpu_register) {
        return Err(Error::NoCpuRegister);
    }
    Ok(())
}

/// Who owns a zone's memory, so that dropping the zone gives it back.
enum Backing {
    /// Memory the caller vouched for in [`Zone::from_raw_parts`].
    Borrowed,
    /// A [`ZoneMemory`], released for reuse on drop.
    Static(NonNull<AtomicRelease>),
    /// Heap blocks and metadata from [`Zone::with_capacity`].
    #[cfg(feature = "alloc")]
    Heap {
        blocks: NonNull<u8>,
        layout: alloc::alloc::Layout,
        meta: NonNull<[u64]>,
    },
}

/// The zone's allocator state, under its lock: the first blocks' bitmap and the chunks.
struct Slots {
    bitmap: Bitmap,
    chunks: Chunks,
}

/// Where a slot lies: in the zone's first blocks (its index there) or in a chunk.
pub(crate) enum Place {
    First(usize),
    Chunk(*mut Chunk, usize),
}

/// The release flag of a `ZoneMemory`, type-erased over its size.
type AtomicRelease = crate::atomic::AtomicBool;

/// The area a zone is carved from.
enum AreaRef<'m> {
    /// An area that outlives the zone: the kernel's, a machine's, or the caller's.
    Shared(&'m Area),
    /// An area of the zone's own: a zone of a Linux program's `rseq` module (whose blocks are
    /// its own mapping, reached through no per-CPU register), and every zone where the
    /// platform gives each zone its own area (the host simulation's machines).
    #[cfg(feature = "alloc")]
    Own(alloc::boxed::Box<Area>),
}

impl AreaRef<'_> {
    #[inline]
    fn get(&self) -> &Area {
        match self {
            AreaRef::Shared(a) => a,
            #[cfg(feature = "alloc")]
            AreaRef::Own(a) => a,
        }
    }
}

/// A per-CPU zone: the memory behind every counter allocated from it.
///
/// Each counter is one 8-byte slot in every CPU's block, at the same offset in each, so the
/// memory per counter is exactly 8 bytes per CPU. A zone is carved from the kernel's one
/// per-CPU [`Area`]: its slots lie at offsets no other zone uses, from the same per-CPU
/// register values. The zone's metadata holds one zero baseline per slot and the slot bitmap
/// with its summary levels (under a `spin::Mutex`): allocating or freeing a counter takes a
/// few word steps whatever the number of live counters; the add path never touches them.
///
/// In a hosted program (Linux, macOS, Windows) without the host simulation the type compiles,
/// so that kernel code builds and documents on the host, but every constructor fails with
/// [`Error::NoCpuRegister`]: an ordinary thread has no per-CPU register for the add.
pub struct Zone<'m> {
    layout: ZoneLayout,
    /// The first of `capacity` baseline words (the metadata's first part).
    baselines: NonNull<u64>,
    slots: spin::Mutex<Slots>,
    /// The chunks' shape and source once [`grow_from`](Zone::grow_from) set them.
    growth: spin::Once<Grown>,
    area: AreaRef<'m>,
    backing: Backing,
    _memory: PhantomData<&'m mut [u64]>,
}

// SAFETY: the blocks are shared by design (each CPU writes only its own slot through the arch
// primitive, others read it atomically); baselines are only accessed atomically (or under the
// baseline lock); the bitmap is behind a mutex; `Backing` is only used on drop, which has
// `&mut self`.
unsafe impl Sync for Zone<'_> {}
// SAFETY: as above; nothing in a zone is tied to the thread that made it.
unsafe impl Send for Zone<'_> {}

impl<'m> Zone<'m> {
    /// A zone on memory the caller provides: per-CPU blocks described by `layout`, carved from
    /// the kernel's area ([`Area::global`]), and `meta` for its metadata: at least
    /// [`ZoneLayout::meta_words`] words. (Where the platform gives every zone an area of its
    /// own, as the host simulation does for each machine, the zone gets one.)
    ///
    /// The counter areas are not cleared here: every slot is cleared on every CPU when it is
    /// allocated. Every rule of [`ZoneLayout::validate`] is checked first, then the area's:
    /// [`Error::AreaMismatch`] if another live zone set other per-CPU register values,
    /// [`Error::ZoneOverlap`] if the counter area overlaps a live zone's.
    ///
    /// # Safety
    /// For every CPU `i`, the bytes `layout.base + i * layout.stride + layout.offset` to
    /// `+ layout.len` must be valid for reads and writes for `'m`, and nothing but this zone
    /// and the counters from it may access them while the zone lives.
    pub unsafe fn from_raw_parts(layout: ZoneLayout, meta: &'m mut [u64]) -> Result<Self, Error> {
        cpu_register()?;
        #[cfg(feature = "alloc")]
        if platform::own_areas() {
            // SAFETY: the caller's contract.
            return unsafe { Self::from_raw_parts_own_area(layout, meta) };
        }
        // SAFETY: the caller's contract.
        unsafe { Self::carve(AreaRef::Shared(Area::global()), layout, meta) }
    }

    /// As [`from_raw_parts`](Zone::from_raw_parts), in an area of the zone's own (see
    /// `AreaRef::Own`).
    ///
    /// # Safety
    /// As [`from_raw_parts`](Zone::from_raw_parts).
    #[cfg(feature = "alloc")]
    pub(crate) unsafe fn from_raw_parts_own_area(
        layout: ZoneLayout,
        meta: &'m mut [u64],
    ) -> Result<Self, Error> {
        // SAFETY: the caller's contract.
        unsafe { Self::carve(AreaRef::Own(alloc::boxed::Box::default()), layout, meta) }
    }

    /// As [`from_raw_parts`](Zone::from_raw_parts), carved from `area`.
    ///
    /// # Safety
    /// As [`from_raw_parts`](Zone::from_raw_parts).
    pub unsafe fn from_raw_parts_in(
        area: &'m Area,
        layout: ZoneLayout,
        meta: &'m mut [u64],
    ) -> Result<Self, Error> {
        cpu_register()?;
        // SAFETY: the caller's contract.
        unsafe { Self::carve(AreaRef::Shared(area), layout, meta) }
    }

    /// # Safety
    /// As [`from_raw_parts`](Zone::from_raw_parts).
    unsafe fn carve(
        area: AreaRef<'m>,
        layout: ZoneLayout,
        meta: &'m mut [u64],
    ) -> Result<Self, Error> {
        layout.validate()?;
        let needed = layout.meta_words();
        if meta.len() < needed {
            return Err(Error::MetaTooSmall {
                needed,
                has: meta.len(),
            });
        }
        let capacity = layout.capacity();
        area.get().carve(&layout)?;
        let (baselines, bitmap) = meta.split_at_mut(capacity);
        // SAFETY: the bitmap words (at least `words_for(capacity)`, as `meta_words` counted)
        // are borrowed mutably for 'm, and only the zone uses them.
        let bits = unsafe { Bitmap::new(NonNull::from(bitmap).cast(), capacity) };
        let baselines: NonNull<u64> = NonNull::from(baselines).cast();
        Ok(Zone {
            layout,
            baselines,
            slots: spin::Mutex::new(Slots {
                bitmap: bits,
                chunks: Chunks::new(),
            }),
            growth: spin::Once::new(),
            area,
            backing: Backing::Borrowed,
            _memory: PhantomData,
        })
    }

    /// A zone on static memory: `NCPUS` CPUs, `WORDS * 64` counters, carved from the kernel's
    /// area (see [`from_raw_parts`](Zone::from_raw_parts)).
    ///
    /// Fails with [`Error::MemoryInUse`] while another zone owns `memory`, and with
    /// [`Error::NoCpus`] if `NCPUS` is zero.
    pub fn new<const NCPUS: usize, const WORDS: usize>(
        memory: &'m ZoneMemory<NCPUS, WORDS>,
    ) -> Result<Self, Error> {
        cpu_register()?;
        if WORDS == 0 {
            return Err(Error::BadAreaLength { len: 0 });
        }
        let stride = WORDS * 64 * 8;
        let layout = ZoneLayout::dense(memory.blocks.get() as usize, stride, NCPUS);
        layout.validate()?;
        if !memory.take() {
            return Err(Error::MemoryInUse);
        }
        // The baselines and the bitmap's room are adjacent (`repr(C)`): one metadata run of
        // `WORDS * 66` words, of which the zone takes `meta_words` (checked below). The pointer
        // comes from the whole struct, not from `baselines.get()`, whose provenance covers that
        // field only (the bitmap past it would be out of its bounds: Miri's Stacked Borrows
        // caught it).
        const { assert!(ZoneLayout::meta_words_for(WORDS * 64) <= WORDS * 66) };
        let meta = core::ptr::from_ref(memory)
            .cast::<u8>()
            .wrapping_add(core::mem::offset_of!(ZoneMemory<NCPUS, WORDS>, baselines))
            .cast::<u64>()
            .cast_mut();
        // SAFETY: `take` made this zone the memory's only owner until drop releases it; the
        // metadata run is `meta_words` <= `WORDS * 66` words (checked at compile time) of
        // the same `repr(C)` struct, all inside its `UnsafeCell`s, and the pointer's provenance
        // is the whole struct.
        let meta = unsafe { core::slice::from_raw_parts_mut(meta, layout.meta_words()) };
        // SAFETY: as above; the blocks live for 'm and are exactly the size the layout says.
        match unsafe { Self::from_raw_parts(layout, meta) } {
            Ok(mut zone) => {
                zone.backing = Backing::Static(NonNull::from(&memory.taken));
                Ok(zone)
            }
            Err(e) => {
                memory.taken.store(false, crate::atomic::Ordering::Release);
                Err(e)
            }
        }
    }

    /// A zone hosted in memory the kernel owns (ranges of its own per-CPU blocks), with its
    /// metadata in a [`ZoneMeta`] `static` instead of a `static mut` array: as
    /// [`from_raw_parts`](Zone::from_raw_parts), and [`Error::MemoryInUse`] while another
    /// zone holds `meta`. Dropping the zone hands `meta` back.
    ///
    /// # Safety
    /// For every CPU `i`, the bytes `layout.base + i * layout.stride + layout.offset` to
    /// `+ layout.len` must be valid for reads and writes for `'m`, and nothing but this zone
    /// and the counters from it may access them while the zone lives.
    pub unsafe fn hosted<const WORDS: usize>(
        layout: ZoneLayout,
        meta: &'m ZoneMeta<WORDS>,
    ) -> Result<Self, Error> {
        cpu_register()?;
        if !meta.take() {
            return Err(Error::MemoryInUse);
        }
        // SAFETY: `take` made this zone the metadata's only owner until drop releases it.
        let words = unsafe { &mut *meta.words.get() };
        // SAFETY: the blocks are the caller's contract; the metadata is the zone's alone.
        match unsafe { Self::from_raw_parts(layout, words) } {
            Ok(mut zone) => {
                zone.backing = Backing::Static(NonNull::from(&meta.taken));
                Ok(zone)
            }
            Err(e) => {
                meta.taken.store(false, crate::atomic::Ordering::Release);
                Err(e)
            }
        }
    }

    /// The zone's layout (where each CPU's block is).
    pub fn layout(&self) -> &ZoneLayout {
        &self.layout
    }

    /// The area the zone is carved from.
    ///
    /// `#[inline]`: every add calls it (for the platform's check, empty in a kernel), and a
    /// non-generic fn without it is not inlined into another crate when that crate builds
    /// incrementally (Cargo's dev default), which would leave a call on the add path.
    #[inline]
    pub fn area(&self) -> &Area {
        self.area.get()
    }

    /// Number of possible CPUs.
    pub fn ncpus(&self) -> usize {
        self.layout.ncpus
    }

    /// Number of counters the zone can hold now: its first blocks' slots and, in a zone that
    /// grows, those of the chunks it has taken. The emptied chunk a zone that grows keeps as
    /// a spare is not counted: [`spare_chunks`](Zone::spare_chunks) says whether there is
    /// one, [`release_spare`](Zone::release_spare) gives it back.
    pub fn capacity(&self) -> usize {
        let chunks = match self.growth.get() {
            Some(_) => self.slots.lock().chunks.count() * ChunkShape::slots_for(&self.layout),
            None => 0,
        };
        self.layout.capacity() + chunks
    }

    /// The longest run of adjacent slots ([`CounterArray`](crate::array::CounterArray)) the zone can
    /// ever hand out: its first blocks' slots, or a chunk's where that is more (a run never
    /// spans two chunks).
    pub fn max_run(&self) -> usize {
        let per_chunk = self
            .growth
            .get()
            .map_or(0, |_| ChunkShape::slots_for(&self.layout));
        self.layout.capacity().max(per_chunk)
    }

    /// Number of slots in use now (counts the allocator keeps, read under its lock at once:
    /// no scan).
    pub fn in_use(&self) -> usize {
        let slots = self.slots.lock();
        slots.bitmap.count_used() + slots.chunks.used()
    }

    /// Lets the zone grow: when every slot is taken, an alloc asks `source` for a chunk of
    /// [`chunk_layout`](Zone::chunk_layout) (`ncpus * stride` bytes for the slots, then the
    /// chunk's metadata, aligned to the power of two at or above `stride`) and carries on in
    /// it. Its counters' offsets are reached through the same per-CPU register values
    /// ([`cpu_base`](Zone::cpu_base)): the add is unchanged. A chunk that empties goes back
    /// to the source (one is kept as a spare: [`spare_chunks`](Zone::spare_chunks),
    /// [`release_spare`](Zone::release_spare)); dropping the zone gives back every chunk.
    /// The source's methods run outside the zone's lock, in the context of the alloc or free
    /// that needs a chunk (see [`ChunkSource`]).
    ///
    /// A chunk the source gives misaligned, or shorter than it was asked for (the length it
    /// returns), is given back at once and the alloc fails with [`Error::Misaligned`] or
    /// [`Error::ShortChunk`]: the zone is unchanged.
    ///
    /// Fails with [`Error::SourceAlreadySet`] for a second source (the chunks taken must go
    /// back to the one they came from), and [`Error::AddressOverflow`] when a chunk's size
    /// does not fit the address space.
    ///
    /// On i386 a counter in a chunk has an offset anywhere in the 4 GiB address space: every
    /// CPU's `%fs` segment must then have a 4 GiB limit (the bring-up check,
    /// [`check_cpu`](Zone::check_cpu), says so when it does not).
    ///
    /// ```
    /// use pcpu_counter::{Error, HeapChunks, sim::Machine};
    /// let machine = Machine::new(2);
    /// let zone = machine.zone();
    /// zone.grow_from(&HeapChunks)?;
    /// let many: Vec<_> = (0..zone.capacity() + 1).map(|_| zone.alloc()).collect::<Result<_, _>>()?;
    /// machine.run_on(1, || many.last().unwrap().add(3));
    /// assert_eq!(many.last().unwrap().fetch(), 3);
    /// assert_eq!(zone.grow_from(&HeapChunks), Err(Error::SourceAlreadySet));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn grow_from<S: ChunkSource>(&self, source: &'static S) -> Result<(), Error> {
        ChunkShape::layout_for(&self.layout)?;
        let shape = Grown::new(source);
        let mut set = false;
        self.growth.call_once(|| {
            set = true;
            shape
        });
        match set {
            true => Ok(()),
            false => Err(Error::SourceAlreadySet),
        }
    }

    /// The size and alignment of the chunks a zone that grows asks its source for (an error
    /// when no chunk of the zone's shape fits the address space): the same as
    /// [`ZoneLayout::chunk_layout_for`] of its CPU count and stride, known before the zone
    /// exists.
    pub fn chunk_layout(&self) -> Result<core::alloc::Layout, Error> {
        ChunkShape::layout_for(&self.layout)
    }

    /// Emptied chunks the zone keeps rather than give back to its source: 0 or 1. A zone that
    /// grows keeps the last chunk that emptied, so that a counter allocated and freed over
    /// and over at a chunk's edge does not take and give back memory each time; it is memory
    /// the source gave, outside [`capacity`](Zone::capacity), until an alloc takes it up again
    /// or [`release_spare`](Zone::release_spare) gives it back.
    pub fn spare_chunks(&self) -> usize {
        match self.growth.get() {
            Some(_) => self.slots.lock().chunks.spares(),
            None => 0,
        }
    }

    /// Gives the spare chunk back to the source, if the zone keeps one: the chunks given back
    /// (0 or 1). Once every counter in the chunks is freed, the source then has every chunk
    /// back (a kernel's leak check, or memory handed back under pressure). The source's
    /// `free_chunk` runs outside the zone's lock, in the caller's context.
    ///
    /// ```
    /// use pcpu_counter::{HeapChunks, sim::Machine};
    /// let machine = Machine::with_capacity(2, 16).unwrap();
    /// let zone = machine.zone();
    /// zone.grow_from(&HeapChunks).unwrap();
    /// let all: Vec<_> = (0..zone.capacity() + 1).map(|_| zone.alloc().unwrap()).collect();
    /// drop(all);
    /// assert_eq!(zone.spare_chunks(), 1);
    /// assert_eq!(zone.release_spare(), 1);
    /// assert_eq!((zone.spare_chunks(), zone.release_spare()), (0, 0));
    /// ```
    pub fn release_spare(&self) -> usize {
        self.growth
            .get()
            .map_or(0, |grown| grown.release_spare(self))
    }

    /// Whether the zone grows ([`grow_from`](Zone::grow_from) gave it a source).
    pub fn grows(&self) -> bool {
        self.growth.get().is_some()
    }

    /// The value CPU `cpu`'s per-CPU register must hold before that CPU adds to a counter.
    pub fn cpu_base(&self, cpu: usize) -> Result<usize, Error> {
        self.layout.cpu_base(cpu)
    }

    /// Whether `off` is the offset of a slot of this zone (allocated or not): of its first
    /// blocks, or of a chunk it grew (a walk over the chunks).
    pub fn holds_offset(&self, off: usize) -> bool {
        self.in_first_blocks(off)
            || self
                .growth
                .get()
                .is_some_and(|shape| shape.holds_run(self, off, off))
    }

    /// Whether `off` is a slot of the zone's first blocks (no lock, no memory read).
    #[inline]
    pub(crate) fn in_first_blocks(&self, off: usize) -> bool {
        off.is_multiple_of(8)
            && off >= self.layout.offset
            && off < self.layout.offset + self.layout.len
    }

    /// Where the slot at `off`, a slot of the zone, lies.
    ///
    /// # Safety
    /// As [`Chunks::find`]: `off` is a live slot of the zone, or a C handle whose masked chunk
    /// header is readable.
    unsafe fn place(&self, off: usize) -> Option<Place> {
        if self.in_first_blocks(off) {
            return Some(Place::First(self.layout.slot_index(off)));
        }
        // The tag check reads the header alone: no lock is needed to find the chunk.
        // SAFETY: the caller's contract.
        unsafe { self.growth.get()?.place(self, off) }
    }

    /// Whether the run of `len` slots from `off` is slots of this zone, all in its first
    /// blocks or all in one chunk (found by a walk, as [`holds_offset`](Zone::holds_offset)).
    pub(crate) fn holds_run(&self, off: usize, len: usize) -> bool {
        let Some(last) = len
            .checked_sub(1)
            .and_then(|n| n.checked_mul(8))
            .map(|b| off.wrapping_add(b))
        else {
            return false;
        };
        if self.in_first_blocks(off) {
            return last >= off && self.in_first_blocks(last);
        }
        self.growth
            .get()
            .is_some_and(|shape| shape.holds_run(self, off, last))
    }

    /// Whether the run of `len` slots from `off` lies where the slot `live` lies: in the
    /// first blocks, or in `live`'s chunk. No walk: `live`'s chunk is found by its tag.
    ///
    /// # Safety
    /// `live` is a live slot of this zone (a live counter's or array's) for the call.
    pub(crate) unsafe fn run_beside(&self, live: usize, off: usize, len: usize) -> bool {
        if self.in_first_blocks(live) {
            return self.in_first_blocks(off) && self.holds_run(off, len);
        }
        // SAFETY: the caller's contract.
        let Some(Place::Chunk(_, index)) = (unsafe { self.place(live) }) else {
            return false;
        };
        // The run's place in the chunk, counted from its slot 0 (wrapping: before it is far).
        let from = off.wrapping_sub(live.wrapping_sub(8 * index));
        let per_chunk = ChunkShape::slots_for(&self.layout);
        from.is_multiple_of(8) && len >= 1 && (from / 8).checked_add(len) <= Some(per_chunk)
    }

    /// Whether `off` is a slot of the zone, for a handle from C: as
    /// [`holds_offset`](Zone::holds_offset) without the walk (the chunk's tag instead).
    ///
    /// # Safety
    /// As [`place`](Zone::place).
    #[cfg(pcpu_c_abi)]
    #[inline]
    pub(crate) unsafe fn holds_handle(&self, off: usize) -> bool {
        // SAFETY: the caller's contract.
        // SAFETY: the caller's contract.
        self.in_first_blocks(off) || unsafe { self.holds_chunk_handle(off) }
    }

    /// The chunk half of [`holds_handle`](Zone::holds_handle): out of the add path's line.
    ///
    /// # Safety
    /// As [`place`](Zone::place).
    #[cfg(pcpu_c_abi)]
    #[cold]
    #[inline(never)]
    unsafe fn holds_chunk_handle(&self, off: usize) -> bool {
        // SAFETY: the caller's contract.
        self.growth
            .get()
            .is_some_and(|shape| unsafe { shape.place(self, off) }.is_some())
    }

    /// Allocates `len` adjacent slots, clears them and their baselines, and returns the
    /// register-relative offset of the first. A zone that grows asks its source for a chunk
    /// when none has the run, with `wait` (see [`Wait`]).
    pub(crate) fn alloc_run(&self, len: usize, wait: Wait) -> Result<usize, Error> {
        // One call of `clear_run`, which the C library then inlines.
        let off = self.take_run(len, wait)?;
        self.clear_run(off, len)
    }

    /// Takes a run of `len` slots and returns its offset.
    fn take_run(&self, len: usize, wait: Wait) -> Result<usize, Error> {
        if let Some(first) = self.slots.lock().bitmap.alloc_run(len) {
            return Ok(self.layout.slot_offset(first));
        }
        match self.growth.get() {
            Some(shape) => shape.take_run(self, len, wait),
            None => Err(self.full()),
        }
    }

    /// The error of a run the first blocks have no room for, in a zone that does not grow (a
    /// chunk holds as many slots as the first blocks, or more: `Zone::max_run`).
    fn full(&self) -> Error {
        Error::ZoneFull {
            capacity: self.layout.capacity(),
        }
    }

    /// [`alloc_run`](Zone::alloc_run) unless the lock is held or a chunk would have to be
    /// taken (`None`, nothing changed): an allocation that never waits, for a lazy counter's
    /// move, which may run in an interrupt handler that interrupted this CPU's own `alloc` or
    /// `free`.
    pub(crate) fn try_alloc_run(&self, len: usize) -> Option<Result<usize, Error>> {
        let taken = match self.slots.try_lock()?.bitmap.alloc_run(len) {
            Some(first) => Ok(self.layout.slot_offset(first)),
            None => match self.growth.get() {
                Some(shape) => shape.try_take_run(self, len)?,
                None => Err(self.full()),
            },
        };
        Some(taken.and_then(|off| self.clear_run(off, len)))
    }

    /// Clears the `len` slots from offset `off` (just allocated) and their baselines, and
    /// returns `off`.
    fn clear_run(&self, off: usize, len: usize) -> Result<usize, Error> {
        for slot in 0..len {
            let slot_off = off.wrapping_add(slot * 8);
            // The broken variant the churn tests must catch (`tests/grow.rs`, the QEMU
            // kernels' growth runs): a reused chunk slot keeps its old count.
            let cpus = match cfg!(pcpu_counter_broken = "chunk_slot_not_cleared")
                && !self.in_first_blocks(off)
            {
                true => 0,
                false => self.ncpus(),
            };
            for cpu in 0..cpus {
                let addr = self.slot_addr(cpu, slot_off);
                // Only a slot that reads non-zero is written: a fresh counter does not fault
                // in (or dirty) every CPU's page of a lazily backed zone or chunk
                // (`rseq::RseqZone`): a load of an untouched page reads the shared zero page.
                // SAFETY: the slot is inside the zone (its first blocks or a chunk, whose
                // memory the source gave initialised) and newly allocated, so no CPU adds to
                // it; the handle that publishes it to other CPUs carries the happens-before
                // edge for these stores.
                unsafe {
                    if arch::load_slot(addr) != 0 {
                        arch::store_slot(addr, 0);
                    }
                }
            }
            // SAFETY: the slot's own baseline word; nobody reads it before the handle exists.
            unsafe { baseline::store(self.baseline(slot_off), 0) };
        }
        Ok(off)
    }

    /// Returns `len` slots starting at offset `off` to the zone; a chunk that empties goes
    /// back to its source (or stays as the spare).
    ///
    /// # Panics
    /// If the run is not a run of the zone's slots or a slot of it is not allocated (a
    /// double free).
    pub(crate) fn free_run(&self, off: usize, len: usize) {
        // SAFETY: callers free offsets of live handles (Rust's) or C handles the C caller
        // vouches for.
        match unsafe { self.place(off) } {
            Some(Place::First(index)) => self.slots.lock().bitmap.free_run(index, len),
            Some(Place::Chunk(chunk, index)) => {
                if let Some(shape) = self.growth.get() {
                    shape.free_run(self, chunk, index, len)
                }
            }
            // Fixed text, not formatted: it keeps `core::fmt`'s hex printing out of a C
            // kernel's library (`tests/c/footprint.sh`).
            None => panic!("pcpu-counter: free of an offset that is not a slot of this zone"),
        }
    }

    /// The address of the slot at `off` in CPU `cpu`'s block (of the first blocks or of a
    /// chunk: the arithmetic wraps, as the add's does). `cpu` must be in range.
    #[inline]
    pub(crate) fn slot_addr(&self, cpu: usize, off: usize) -> *mut u64 {
        debug_assert!(cpu < self.ncpus());
        (self.layout.base + cpu * self.layout.stride).wrapping_add(off) as *mut u64
    }

    /// The baseline word of the slot at `off`, a live slot of the zone.
    pub(crate) fn baseline(&self, off: usize) -> *mut u64 {
        // SAFETY: callers pass offsets of live slots (a handle's).
        match unsafe { self.place(off) } {
            // SAFETY: `index` is below the baseline count (a slot of the first blocks).
            Some(Place::First(index)) => unsafe { self.baselines.as_ptr().add(index) },
            Some(Place::Chunk(chunk, index)) => ChunkShape::baseline(chunk, index),
            None => panic!("pcpu-counter: a counter offset that is no slot of its zone"),
        }
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

    /// The count of slot `off` since its last zero: the sum minus the baseline.
    pub(crate) fn fetch(&self, off: usize) -> u64 {
        // SAFETY: the slot's own baseline word.
        let baseline = unsafe { baseline::load(self.baseline(off)) };
        self.sum(off).wrapping_sub(baseline)
    }

    /// Returns the count of slot `off` since its last zero and zeroes it, as one step.
    pub(crate) fn fetch_and_zero(&self, off: usize) -> u64 {
        let word = self.baseline(off);
        loop {
            // The baseline is read before the slots, and each slot after the reads that made
            // that baseline: the delta below is only the adds since then, never negative for a
            // counter that only grows.
            // SAFETY: the slot's own baseline word.
            let old = unsafe { baseline::load(word) };
            let sum = self.sum(off);
            // SAFETY: as above.
            if unsafe { baseline::replace(word, old, sum) } {
                return sum.wrapping_sub(old);
            }
        }
    }

    /// Adds `v` to this CPU's slot at `off`, after the platform's check (none in a kernel).
    ///
    /// # Safety
    /// `off` is a live slot of this zone; the per-CPU register is set (the platform's contract).
    #[inline(always)]
    pub(crate) unsafe fn add(&self, off: usize, v: i64) {
        platform::check_add(self.area());
        // SAFETY: per the caller.
        unsafe { arch::add(off, v) }
    }

    /// Adds 1 to this CPU's slot at `off` (an immediate operand where the arch has one),
    /// after the platform's check.
    ///
    /// # Safety
    /// As [`add`](Zone::add).
    #[inline(always)]
    pub(crate) unsafe fn inc(&self, off: usize) {
        platform::check_add(self.area());
        // SAFETY: per the caller.
        unsafe { arch::inc(off) }
    }

    /// Adds `v` to this CPU's slot at `off` inside `counter_enter`, after the platform's check.
    ///
    /// # Safety
    /// As [`add`](Zone::add), and the caller holds a [`Protected`](crate::Protected) section.
    #[inline(always)]
    pub(crate) unsafe fn add_protected(&self, off: usize, v: i64) {
        platform::check_add(self.area());
        // SAFETY: per the caller.
        unsafe { arch::add_protected(off, v) }
    }

    /// Adds `v` to this CPU's slot at `off` and returns how many multiples of 16 it crossed
    /// (see [`arch::add_crossings16`]), after the platform's check.
    ///
    /// # Safety
    /// As [`add`](Zone::add).
    #[inline(always)]
    pub(crate) unsafe fn add_crossings16(&self, off: usize, v: i64) -> u64 {
        platform::check_add(self.area());
        // SAFETY: per the caller.
        unsafe { arch::add_crossings16(off, v) }
    }

    /// Adds `v` to this CPU's slot at `off` and returns the slot's value before the add, after
    /// the platform's check.
    ///
    /// # Safety
    /// As [`add`](Zone::add).
    #[inline(always)]
    pub(crate) unsafe fn fetch_add(&self, off: usize, v: i64) -> u64 {
        platform::check_add(self.area());
        // SAFETY: per the caller.
        unsafe { arch::fetch_add(off, v) }
    }
}

#[cfg(feature = "alloc")]
impl Zone<'static> {
    /// A zone on heap memory for `ncpus` CPUs and at least `counters` counters, carved from
    /// the kernel's area (as [`from_raw_parts`](Zone::from_raw_parts)).
    ///
    /// Each CPU's block is rounded up to a multiple of 128 bytes, so that no two CPUs share a
    /// cache line; [`capacity`](Zone::capacity) reports the rounded count. A size that
    /// overflows is [`Error::AddressOverflow`], memory the allocator refuses
    /// [`Error::OutOfMemory`]: never an abort.
    pub fn with_capacity(ncpus: usize, counters: usize) -> Result<Self, Error> {
        cpu_register()?;
        Self::on_heap(ncpus, counters, 0)
    }

    /// As [`with_capacity`](Zone::with_capacity), with `header` bytes (a multiple of 8) at the
    /// start of every block left out of the zone (a simulated machine's zone starts its
    /// counters at offset 8, so that no counter's offset is 0).
    pub(crate) fn on_heap(ncpus: usize, counters: usize, header: usize) -> Result<Self, Error> {
        extern crate alloc;
        use alloc::alloc::{alloc_zeroed, Layout};

        if ncpus == 0 {
            return Err(Error::NoCpus);
        }
        if counters == 0 {
            return Err(Error::BadAreaLength { len: 0 });
        }
        let len = counters
            .checked_mul(8)
            .and_then(|b| b.checked_next_multiple_of(128))
            .ok_or(Error::AddressOverflow)?;
        let stride = len
            .checked_add(header)
            .and_then(|b| b.checked_next_multiple_of(128))
            .ok_or(Error::AddressOverflow)?;
        let total = stride.checked_mul(ncpus).ok_or(Error::AddressOverflow)?;
        let layout = Layout::from_size_align(total, 128).map_err(|_| Error::AddressOverflow)?;
        // SAFETY: `layout` has a non-zero size.
        let blocks = NonNull::new(unsafe { alloc_zeroed(layout) })
            .ok_or(Error::OutOfMemory { bytes: total })?;
        let dense = ZoneLayout {
            offset: header,
            len,
            ..ZoneLayout::dense(blocks.as_ptr() as usize, stride, ncpus)
        };
        let words = dense.meta_words();
        let mut meta = alloc::vec::Vec::new();
        if meta.try_reserve_exact(words).is_err() {
            // SAFETY: allocated just above with `layout`, and used by nothing yet.
            unsafe { alloc::alloc::dealloc(blocks.as_ptr(), layout) };
            return Err(Error::OutOfMemory {
                bytes: words.saturating_mul(8),
            });
        }
        meta.resize(words, 0u64);
        // The raw pointer is the owner (it frees the words on drop); the `&mut` the zone uses is
        // derived from it, so using that borrow never invalidates the pointer.
        let meta_ptr = NonNull::from(alloc::boxed::Box::leak(meta.into_boxed_slice()));
        // SAFETY: the words were just leaked from their box: valid, and used through this
        // borrow alone until the zone is dropped and frees them through `meta_ptr`.
        let meta: &'static mut [u64] = unsafe { &mut *meta_ptr.as_ptr() };
        // SAFETY: the blocks and metadata were just allocated for this zone alone and are freed
        // only when it is dropped.
        match unsafe { Self::from_raw_parts(dense, meta) } {
            Ok(mut zone) => {
                zone.backing = Backing::Heap {
                    blocks,
                    layout,
                    meta: meta_ptr,
                };
                Ok(zone)
            }
            Err(e) => {
                // SAFETY: both allocations are unused: the zone was not made.
                unsafe {
                    alloc::alloc::dealloc(blocks.as_ptr(), layout);
                    drop(alloc::boxed::Box::from_raw(meta_ptr.as_ptr()));
                }
                Err(e)
            }
        }
    }
}

impl Drop for Zone<'_> {
    fn drop(&mut self) {
        if let Some(shape) = self.growth.get() {
            shape.release_all(self);
        }
        self.area().release(&self.layout);
        match self.backing {
            Backing::Borrowed => {}
            Backing::Static(flag) => {
                // SAFETY: the flag lives in the `ZoneMemory` borrowed for 'm, still alive here.
                let flag = unsafe { flag.as_ref() };
                flag.store(false, crate::atomic::Ordering::Release)
            }
            #[cfg(feature = "alloc")]
            Backing::Heap {
                blocks,
                layout,
                meta,
            } => {
                extern crate alloc;
                // SAFETY: both were allocated in `with_capacity` for this zone; no counter
                // outlives the zone (they borrow it), so nothing uses them any more.
                unsafe {
                    alloc::alloc::dealloc(blocks.as_ptr(), layout);
                    drop(alloc::boxed::Box::from_raw(meta.as_ptr()));
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

// The zone's fields depend on feature `alloc` (heap backing) alone, never on the simulation:
// the same size in a kernel's build and under `sim`.
const _: () = assert!(
    core::mem::size_of::<Zone<'_>>()
        == core::mem::size_of::<usize>() * if cfg!(feature = "alloc") { 27 } else { 22 }
);

#[cfg(test)]
mod tests {
    use super::*;

    /// `holds_offset` is exactly the zone's slots: from `offset`, 8-byte aligned, below
    /// `offset + len`.
    #[test]
    fn holds_offset_is_exactly_the_counter_area() {
        let zone = Zone::on_heap(2, 16, 64).unwrap();
        let (offset, len) = (zone.layout().offset, zone.layout().len);
        assert_eq!((offset, len), (64, 128));
        assert!(zone.holds_offset(64));
        assert!(zone.holds_offset(64 + 120), "the last slot");
        assert!(!zone.holds_offset(64 + 128), "one past the last slot");
        assert!(!zone.holds_offset(56), "below the area");
        assert!(!zone.holds_offset(68), "not 8-byte aligned");
    }

    #[test]
    fn debug_shows_the_layout_and_the_slots_in_use() {
        let zone = Zone::with_capacity(1, 16).unwrap();
        let _c = zone.alloc().unwrap();
        assert_eq!(
            std::format!("{zone:?}"),
            std::format!("Zone {{ layout: {:?}, in_use: 1 }}", zone.layout())
        );
    }
}
