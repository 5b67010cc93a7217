// SPDX-License-Identifier: BSD-2-Clause
//! Zones that grow: chunks from a [`ChunkSource`], reached through the same per-CPU register.
//!
//! A chunk is `ncpus * stride` bytes from the source, CPU `i`'s part at `chunk + i * stride`,
//! then the chunk's header and metadata. A slot `k` of the chunk has the offset
//! `chunk + 8 * k - base` (wrapping, as FreeBSD's `zpcpu` offsets from `&__pcpu[0]`), so
//! CPU `i`'s add, `base + i * stride + offset`, lands at `chunk + i * stride + 8 * k`: the
//! add is the same instruction whatever chunk a counter lives in.
//!
//! A chunk is aligned to the power of two at or above `stride`, so that CPU 0's copy of any
//! of its slots, masked, gives the chunk back (UMA finds a slab's header by masking an item's
//! address the same way): freeing, zeroing and reading a counter find its chunk's bitmap and
//! baselines in a few instructions, whatever the number of chunks.
//!
//! The zone's lock guards every header and the lists: the chunks with a free slot (an alloc
//! takes the first), and all of them (for the zone's drop). A chunk that empties goes back
//! to the source, except one kept as a spare, so that a counter allocated and freed over and
//! over at a chunk's edge does not take and return memory each time.

use core::alloc::Layout;
use core::mem::offset_of;
use core::ptr::{self, NonNull};

use crate::bitmap::Bitmap;
use crate::{Error, ZoneLayout};

/// Whether an allocation may wait for memory: FreeBSD's `M_WAITOK` and `M_NOWAIT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Never wait (`M_NOWAIT`): the chunk source is asked not to block, and a full zone
    /// fails at once.
    NoWait,
    /// May wait (`M_WAITOK`): the chunk source is asked with `wait` set and may block until
    /// it has memory. A zone without a source waits for another CPU to free a counter (see
    /// [`counter_u64_alloc`](crate::freebsd::counter_u64_alloc)).
    WaitOk,
}

/// Where a zone's chunks come from when it grows: the kernel's page allocator, the heap
/// (`HeapChunks`, feature `alloc`), `mmap` (a Linux program's `rseq` zone).
///
/// Both methods are called outside the zone's lock, in the context of the caller of the alloc
/// or free that needs them (the thread or CPU that allocates or frees a counter, or drops the
/// zone): they may sleep exactly when that caller may, and may take locks of their own.
///
/// # Safety
/// [`alloc_chunk`](ChunkSource::alloc_chunk) returns `None` or memory aligned to
/// `layout.align()` and the number of bytes it gave (the slice's length; the zone uses
/// `layout.size()` of them, and refuses a chunk that says it is shorter, with
/// [`Error::ShortChunk`]), readable and writable, that nothing else uses until it is given to
/// [`free_chunk`](ChunkSource::free_chunk). Its contents must be initialised (the zone reads a
/// slot before it clears it, so that a fresh chunk of a lazily backed mapping costs no page
/// until an add), to any values: zeroed memory, a mapping, the kernel's pages; not
/// `alloc::alloc`'s uninitialised memory.
pub unsafe trait ChunkSource: Sync {
    /// A chunk of `layout`, as a pointer to the bytes given (its length: at least
    /// `layout.size()`; a page allocator that gave one page says so), or `None` when there is
    /// no memory for it. With `wait` ([`Wait::WaitOk`]) the source may block until there is;
    /// without it, it must not block (the caller may hold locks or run in an interrupt
    /// handler).
    fn alloc_chunk(&self, layout: Layout, wait: bool) -> Option<NonNull<[u8]>>;

    /// Takes back a chunk: an empty one, with the `layout` it was asked with; or one the zone
    /// refused at once, misaligned, or shorter than asked (then `layout.size()` is the length
    /// the source gave).
    ///
    /// # Safety
    /// `chunk` came from this source's `alloc_chunk` with that layout, and is given back once.
    unsafe fn free_chunk(&self, chunk: NonNull<u8>, layout: Layout);
}

/// Chunks from the global allocator (feature `alloc`): `zone.grow_from(&HeapChunks)`.
#[cfg(feature = "alloc")]
#[derive(Debug, Clone, Copy, Default)]
pub struct HeapChunks;

// SAFETY: the global allocator's memory, of the layout asked, given back with that layout.
#[cfg(feature = "alloc")]
unsafe impl ChunkSource for HeapChunks {
    fn alloc_chunk(&self, layout: Layout, _wait: bool) -> Option<NonNull<[u8]>> {
        extern crate alloc;
        // SAFETY: a chunk's layout is never zero-sized (it holds a header).
        let chunk = NonNull::new(unsafe { alloc::alloc::alloc_zeroed(layout) })?;
        Some(NonNull::slice_from_raw_parts(chunk, layout.size()))
    }

    unsafe fn free_chunk(&self, chunk: NonNull<u8>, layout: Layout) {
        extern crate alloc;
        // SAFETY: allocated above with `layout` (the caller's contract).
        unsafe { alloc::alloc::dealloc(chunk.as_ptr(), layout) }
    }
}

/// The chunk layout of a zone that grows, known before the zone exists (here, beside the
/// chunks it describes).
impl ZoneLayout {
    /// The size and alignment of the chunks a zone of `ncpus` CPUs whose blocks are `stride`
    /// bytes apart asks its [`ChunkSource`](crate::ChunkSource) for when it grows
    /// ([`Zone::grow_from`](crate::Zone::grow_from)), before the zone exists. A chunk holds
    /// `stride / 8` counters (a slot for each on every CPU), then their metadata:
    ///
    /// - size: `ncpus * stride + 8 * meta_words_for(stride / 8) + H`, where `H` is the chunk
    ///   header, 88 bytes on 64-bit targets and 48 on 32-bit ones;
    /// - alignment: the power of two at or above `stride`, at least 64.
    ///
    /// Errors: [`Error::NoCpus`], [`Error::StrideNotMultipleOf8`], [`Error::StrideTooSmall`]
    /// (a zero stride), [`Error::AddressOverflow`] (no such chunk fits the address space). A
    /// `const fn`, so a kernel can size a static arena or check its page size at compile time.
    ///
    /// ```
    /// use pcpu_counter::ZoneLayout;
    /// // 8 CPUs, 1 KiB blocks: 128 counters a chunk, 9,328 bytes aligned to 1,024 (64-bit).
    /// const CHUNK: core::alloc::Layout = match ZoneLayout::chunk_layout_for(8, 1024) {
    ///     Ok(layout) => layout,
    ///     Err(_) => panic!("no such chunk"),
    /// };
    /// # #[cfg(target_pointer_width = "64")]
    /// assert_eq!((CHUNK.size(), CHUNK.align()), (8 * 1024 + 8 * (128 + 2 + 1) + 88, 1024));
    /// // 2 CPUs, 1 KiB blocks: one chunk fits a 4 KiB page.
    /// assert!(ZoneLayout::chunk_layout_for(2, 1024).unwrap().size() <= 4096);
    /// ```
    pub const fn chunk_layout_for(ncpus: usize, stride: usize) -> Result<Layout, Error> {
        ChunkShape::chunk_layout(ncpus, stride)
    }
}

/// A chunk's header, after its CPUs' parts; its baselines and bitmap words follow it (8-byte
/// aligned on 32-bit targets too, where its fields alone would end on 4).
#[repr(C, align(8))]
pub(crate) struct Chunk {
    /// [`Chunks::tag`] of the chunk: proves a masked address is a chunk of this zone.
    tag: usize,
    bitmap: Bitmap,
    /// Its place on the list of chunks with a free slot, while `listed`.
    with_free: Links,
    /// Its place on the list of all chunks (the spare is on neither).
    all: Links,
    /// Whether the chunk is on the list of chunks with a free slot.
    listed: bool,
}

/// A chunk's neighbours on one of the two lists.
#[derive(Clone, Copy)]
struct Links {
    next: *mut Chunk,
    prev: *mut Chunk,
}

impl Links {
    const NONE: Links = Links {
        next: ptr::null_mut(),
        prev: ptr::null_mut(),
    };
}

// A chunk's header is the `H` of [`ZoneLayout::chunk_layout_for`]'s formula (and of the C
// header's `pcpu_chunk_size`): 88 bytes on 64-bit targets, 48 on 32-bit ones.
const _: () = assert!(
    size_of::<Chunk>()
        == if cfg!(target_pointer_width = "64") {
            88
        } else {
            48
        }
);

/// The two doubly linked lists of a zone's chunks.
#[derive(Clone, Copy)]
enum List {
    WithFree,
    All,
}

impl List {
    /// `header`'s links on this list.
    fn links(self, header: *mut Chunk) -> *mut Links {
        match self {
            // Places, not reads: no memory is touched.
            List::WithFree => header
                .wrapping_byte_add(offset_of!(Chunk, with_free))
                .cast(),
            List::All => header.wrapping_byte_add(offset_of!(Chunk, all)).cast(),
        }
    }
}

/// A mix-in for the chunk tag, so that a stray word rarely passes for one.
const TAG: usize = 0x5043_5055_4348_4e4b_u64 as usize; // "PCPUCHNK"

/// The shape of a zone's chunks: set once, by
/// [`Zone::grow_from`](crate::Zone::grow_from), and read without the zone's lock.
#[derive(Clone, Copy)]
pub(crate) struct ChunkShape {
    /// The zone's identity in the chunk tags (its baselines' address: it never moves).
    zone_id: usize,
    /// CPU 0's register value: the base every offset is relative to.
    base: usize,
    /// `ncpus * stride`: where the header starts.
    header_at: usize,
    /// Slots per chunk: [`slots_for`](ChunkShape::slots_for).
    pub(crate) slots: usize,
    /// Size and alignment of a chunk.
    pub(crate) layout: Layout,
}

impl ChunkShape {
    /// The chunks of a zone of `layout`, identified by `zone_id`, whose chunk layout
    /// [`layout_for`](ChunkShape::layout_for) accepted (a zone that grows): computed anew
    /// where needed rather than kept in the zone.
    pub(crate) fn of(layout: &ZoneLayout, zone_id: usize) -> Self {
        // SAFETY: `Zone::grow_from` made the zone grow only once `layout_for` accepted it.
        let chunk = unsafe { Self::layout_for(layout).unwrap_unchecked() };
        ChunkShape {
            zone_id,
            base: layout.base,
            header_at: layout.ncpus * layout.stride,
            slots: Self::slots_for(layout),
            layout: chunk,
        }
    }

    /// The slots of one chunk of a zone of `layout`: one per 8 bytes of a CPU's block, as in
    /// the first blocks (a chunk holds every CPU's copy of each of its counters).
    pub(crate) const fn slots_for(layout: &ZoneLayout) -> usize {
        layout.stride / 8
    }

    /// The size and alignment of the chunks of a zone of `layout`: see
    /// [`chunk_layout`](ChunkShape::chunk_layout).
    pub(crate) const fn layout_for(layout: &ZoneLayout) -> Result<Layout, Error> {
        Self::chunk_layout(layout.ncpus, layout.stride)
    }

    /// The size and alignment of the chunks of a zone of `ncpus` CPUs `stride` bytes apart
    /// ([`ZoneLayout::chunk_layout_for`]): `ncpus * stride` bytes for the slots, then the
    /// header and the metadata of `stride / 8` slots, aligned to the power of two at or above
    /// `stride` (at least 64).
    pub(crate) const fn chunk_layout(ncpus: usize, stride: usize) -> Result<Layout, Error> {
        if ncpus == 0 {
            return Err(Error::NoCpus);
        }
        if !stride.is_multiple_of(8) {
            return Err(Error::StrideNotMultipleOf8 { stride });
        }
        if stride == 0 {
            return Err(Error::StrideTooSmall { stride, needed: 8 });
        }
        let Some(header_at) = ncpus.checked_mul(stride) else {
            return Err(Error::AddressOverflow);
        };
        let Some(align) = stride.checked_next_power_of_two() else {
            return Err(Error::AddressOverflow);
        };
        let align = if align < 64 { 64 } else { align };
        let meta = ZoneLayout::meta_words_for(stride / 8) * 8 + size_of::<Chunk>();
        let Some(size) = header_at.checked_add(meta) else {
            return Err(Error::AddressOverflow);
        };
        match Layout::from_size_align(size, align) {
            Ok(layout) => Ok(layout),
            Err(_) => Err(Error::AddressOverflow),
        }
    }

    fn tag(&self, chunk: usize) -> usize {
        TAG ^ self.zone_id ^ chunk
    }

    /// The chunk address and slot index that offset `off` would name (no memory read).
    fn locate(&self, off: usize) -> (usize, usize) {
        let addr = self.base.wrapping_add(off);
        let chunk = addr & !(self.layout.align() - 1);
        (chunk, (addr - chunk) / 8)
    }

    /// Whether two offsets name slots of the same chunk (if either names one).
    pub(crate) fn same_chunk(&self, a: usize, b: usize) -> bool {
        self.locate(a).0 == self.locate(b).0 && self.locate(b).1 < self.slots
    }

    fn header(&self, chunk: usize) -> *mut Chunk {
        chunk.wrapping_add(self.header_at) as *mut Chunk
    }

    /// The chunk memory of a header.
    fn memory(&self, header: *mut Chunk) -> *mut u8 {
        (header as usize).wrapping_sub(self.header_at) as *mut u8
    }

    /// The offset of slot `index` of the chunk whose header is `header`.
    fn offset(&self, header: *mut Chunk, index: usize) -> usize {
        (self.memory(header) as usize)
            .wrapping_add(index * 8)
            .wrapping_sub(self.base)
    }

    /// The chunk of the slot at `off` (an offset outside the zone's first blocks) and the
    /// slot's index in it, after checking the chunk's tag: `None` for an offset that is no
    /// slot of a chunk of this zone.
    ///
    /// # Safety
    /// If `off` is no slot of this zone's chunks, the header address it masks to must still
    /// be readable (a C handle the caller vouches for); for an offset of a live counter it is.
    pub(crate) unsafe fn find(&self, off: usize) -> Option<(*mut Chunk, usize)> {
        if !off.is_multiple_of(8) {
            return None;
        }
        let (chunk, index) = self.locate(off);
        if index >= self.slots {
            return None;
        }
        let header = self.header(chunk);
        // SAFETY: readable per the caller's contract; the tag is written once, when the chunk
        // is made (before any offset of it exists), and only read after.
        let tag = unsafe { ptr::addr_of!((*header).tag).read() };
        (tag == self.tag(chunk)).then_some((header, index))
    }

    /// The baseline word of slot `index` of `chunk`: the baselines follow the header.
    pub(crate) fn baseline(chunk: *mut Chunk, index: usize) -> *mut u64 {
        chunk.wrapping_add(1).cast::<u64>().wrapping_add(index)
    }
}

/// A zone's chunks, under its lock: those with a free slot, all of them, the spare.
pub(crate) struct Chunks {
    with_free: *mut Chunk,
    all: *mut Chunk,
    spare: *mut Chunk,
    count: usize,
    used: usize,
}

// SAFETY: the chunks are memory the zone owns; their lists and bitmaps are only reached under
// the zone's lock (this struct lives inside it), baselines atomically, tags once written.
unsafe impl Send for Chunks {}

/// What an alloc from the chunks found.
pub(crate) enum Found {
    /// A run taken at this offset.
    Slot(usize),
    /// No chunk has the run: take a chunk from the source and try again.
    Grow,
    /// The run is longer than a chunk (`shape.slots`), the longest run in a zone that grows
    /// (its first blocks hold at most as many).
    TooLong,
}

impl Chunks {
    /// No chunks.
    pub(crate) const fn new() -> Self {
        Chunks {
            with_free: ptr::null_mut(),
            all: ptr::null_mut(),
            spare: ptr::null_mut(),
            count: 0,
            used: 0,
        }
    }

    /// Chunks taken (the spare not counted).
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Emptied chunks kept rather than given back: 0 or 1 (the spare).
    pub(crate) fn spares(&self) -> usize {
        usize::from(!self.spare.is_null())
    }

    /// Takes the spare off the zone: its memory, to give back to the source (outside the
    /// lock), if one is kept.
    pub(crate) fn take_spare(&mut self, shape: &ChunkShape) -> Option<NonNull<u8>> {
        let spare = core::mem::replace(&mut self.spare, ptr::null_mut());
        if spare.is_null() {
            return None;
        }
        NonNull::new(shape.memory(spare))
    }

    /// Slots in use in the chunks.
    pub(crate) fn used(&self) -> usize {
        self.used
    }

    /// Whether `off` is a slot of one of the chunks, by walking them: no memory but the
    /// headers' links is read, so any number may be asked.
    pub(crate) fn holds(&self, shape: &ChunkShape, off: usize) -> bool {
        let (chunk, index) = shape.locate(off);
        if !off.is_multiple_of(8) || index >= shape.slots {
            return false;
        }
        let mut at = self.all;
        while !at.is_null() {
            if at == shape.header(chunk) {
                return true;
            }
            // SAFETY: a live chunk of the list (under the zone's lock).
            at = unsafe { (*at).all.next };
        }
        false
    }

    /// Whether the slots from `off` to `last` are slots of one chunk (a walk, as `holds`).
    pub(crate) fn holds_run(&self, shape: &ChunkShape, off: usize, last: usize) -> bool {
        last >= off
            && (last - off) / 8 < shape.slots
            && shape.same_chunk(off, last)
            && self.holds(shape, off)
    }

    /// Takes a run of `len` slots from the first chunk that has one (`len` 1: the first chunk
    /// with a free slot, always), or from the spare.
    pub(crate) fn alloc_run(&mut self, shape: &ChunkShape, len: usize) -> Found {
        if len > shape.slots {
            return Found::TooLong;
        }
        // Twice at most: the chunks there are, then the spare once linked (a loop, not a
        // recursion: the stack check bounds no recursion).
        loop {
            let mut at = self.with_free;
            while !at.is_null() {
                // SAFETY: a live chunk on the list, under the zone's lock; only its bitmap
                // field is borrowed (a lookup may read its tag meanwhile).
                let bitmap = unsafe { &mut (*at).bitmap };
                if let Some(first) = bitmap.alloc_run(len) {
                    let full = bitmap.count_used() == shape.slots;
                    self.used += len;
                    if full {
                        self.unlist(at);
                    }
                    return Found::Slot(shape.offset(at, first));
                }
                // SAFETY: as above.
                at = unsafe { (*at).with_free.next };
            }
            if self.spare.is_null() {
                return Found::Grow;
            }
            let spare = core::mem::replace(&mut self.spare, ptr::null_mut());
            self.link(spare);
        }
    }

    /// Makes `memory` (a chunk of `shape.layout` from the source) a chunk of the zone, with
    /// every slot free.
    ///
    /// # Safety
    /// `memory` is such a chunk, unused.
    pub(crate) unsafe fn add(&mut self, shape: &ChunkShape, memory: NonNull<u8>) {
        // SAFETY: the caller's contract.
        let header = unsafe { Self::make(shape, memory) };
        self.link(header);
    }

    /// Keeps `memory` (a chunk of `shape.layout` from the source) as the spare when there is
    /// none; else returns it, to go back to the source (outside the lock). For a chunk taken
    /// while another CPU grew the zone first.
    ///
    /// # Safety
    /// As [`add`](Chunks::add).
    pub(crate) unsafe fn stash(
        &mut self,
        shape: &ChunkShape,
        memory: NonNull<u8>,
    ) -> Option<NonNull<u8>> {
        if !self.spare.is_null() {
            return Some(memory);
        }
        // SAFETY: the caller's contract.
        self.spare = unsafe { Self::make(shape, memory) };
        None
    }

    /// Writes the header of a new chunk, every slot free, on no list.
    ///
    /// # Safety
    /// As [`add`](Chunks::add).
    unsafe fn make(shape: &ChunkShape, memory: NonNull<u8>) -> *mut Chunk {
        let chunk = memory.as_ptr() as usize;
        debug_assert!(chunk.is_multiple_of(shape.layout.align()));
        // From the chunk's pointer, not its address: the lists then hold pointers with the
        // chunk's provenance (what the zone reaches its chunks by, for Miri's leak check too).
        let header = memory
            .as_ptr()
            .wrapping_add(shape.header_at)
            .cast::<Chunk>();
        let words = ChunkShape::baseline(header, shape.slots);
        // SAFETY: the words lie in the chunk after the baselines (the layout counted them), so
        // not at address 0, and are the bitmap's alone.
        let bitmap = unsafe { Bitmap::new(NonNull::new_unchecked(words), shape.slots) };
        // SAFETY: the header lies inside the chunk, 8-byte aligned (the stride is a multiple
        // of 8 and the chunk is aligned to at least 64).
        unsafe {
            header.write(Chunk {
                tag: shape.tag(chunk),
                bitmap,
                with_free: Links::NONE,
                all: Links::NONE,
                listed: false,
            })
        };
        header
    }

    /// The first chunk of `list`.
    fn head(&mut self, list: List) -> &mut *mut Chunk {
        match list {
            List::WithFree => &mut self.with_free,
            List::All => &mut self.all,
        }
    }

    /// Puts a chunk, on neither list, at the front of `list`.
    fn push(&mut self, list: List, header: *mut Chunk) {
        let first = *self.head(list);
        // SAFETY: a chunk of this zone and the list's first, under the zone's lock; the
        // links alone are written.
        unsafe {
            *list.links(header) = Links {
                next: first,
                prev: ptr::null_mut(),
            };
            if !first.is_null() {
                (*list.links(first)).prev = header;
            }
        }
        *self.head(list) = header;
    }

    /// Takes a chunk off `list`, which it is on.
    fn remove(&mut self, list: List, header: *mut Chunk) {
        // SAFETY: as in `push`; the chunk's neighbours on the list are live chunks.
        unsafe {
            let Links { next, prev } = *list.links(header);
            match prev.is_null() {
                true => *self.head(list) = next,
                false => (*list.links(prev)).next = next,
            }
            if !next.is_null() {
                (*list.links(next)).prev = prev;
            }
        }
    }

    /// Puts a chunk with every slot free on both lists.
    fn link(&mut self, header: *mut Chunk) {
        self.push(List::All, header);
        self.count += 1;
        self.list(header);
    }

    /// Puts a chunk on the list of chunks with a free slot.
    fn list(&mut self, header: *mut Chunk) {
        self.push(List::WithFree, header);
        // SAFETY: as in `push`.
        unsafe { (*header).listed = true };
    }

    /// Takes a chunk off the list of chunks with a free slot.
    fn unlist(&mut self, header: *mut Chunk) {
        self.remove(List::WithFree, header);
        // SAFETY: as in `push`.
        unsafe { (*header).listed = false };
    }

    /// Frees the run of `len` slots from slot `index` of `chunk`. Returns the chunk's memory
    /// to give back to the source (outside the lock) when it emptied and a spare is already
    /// kept.
    ///
    /// # Panics
    /// On a double free (the bitmap's check).
    pub(crate) fn free_run(
        &mut self,
        shape: &ChunkShape,
        header: *mut Chunk,
        index: usize,
        len: usize,
    ) -> Option<NonNull<u8>> {
        // SAFETY: a live chunk of this zone (`find` checked its tag), under the lock.
        let bitmap = unsafe { &mut (*header).bitmap };
        bitmap.free_run(index, len);
        let empty = bitmap.count_used() == 0;
        self.used -= len;
        // SAFETY: as above.
        let listed = unsafe { (*header).listed };
        if !empty {
            if !listed {
                self.list(header);
            }
            return None;
        }
        if listed {
            self.unlist(header);
        }
        self.remove(List::All, header);
        self.count -= 1;
        if self.spare.is_null() {
            self.spare = header;
            return None;
        }
        NonNull::new(shape.memory(header))
    }

    /// Gives every chunk's memory to `give_back` (the zone's drop: no counter is alive).
    pub(crate) fn release_all(
        &mut self,
        shape: &ChunkShape,
        mut give_back: impl FnMut(NonNull<u8>),
    ) {
        let mut at = core::mem::replace(&mut self.all, ptr::null_mut());
        let spare = core::mem::replace(&mut self.spare, ptr::null_mut());
        if !spare.is_null() {
            // SAFETY: the spare is off both lists; chaining it to the rest releases it too.
            unsafe { (*spare).all.next = at };
            at = spare;
        }
        while !at.is_null() {
            // SAFETY: a live chunk, released once: its successor is read first.
            let next = unsafe { (*at).all.next };
            if let Some(memory) = NonNull::new(shape.memory(at)) {
                give_back(memory);
            }
            at = next;
        }
        self.with_free = ptr::null_mut();
        self.count = 0;
    }
}
