// SPDX-License-Identifier: BSD-2-Clause
//! The user-space zone: `nslots + 1` page-aligned blocks on one lazily backed anonymous
//! mapping, under the core [`Zone`](crate::Zone); a zone that grows takes its chunks from
//! `MmapChunks`.

use core::mem::ManuallyDrop;
use core::ptr::NonNull;
use std::alloc::Layout;

use crate::ChunkSource;

use super::registration::{config, Config};
use super::{fast, Path, RseqCounter};
use crate::{Error, ZoneLayout};

/// The page size the blocks are aligned to.
const PAGE: usize = 4096;

/// The most counters a zone holds: 2^28, so a block's stride is at most 2 GiB and even
/// 8192 possible CPUs' blocks take 16 TiB, an eighth of x86_64's user address space; the
/// metadata of such a zone is about 2.2 GB of (lazily zeroed) heap.
const MAX_COUNTERS: usize = 1 << 28;

/// A zone of per-CPU counters for a Linux process (see the [module docs](super)).
///
/// Blocks `0..nslots` are per-CPU (or per-concurrency-ID) blocks; block `nslots` is the
/// *shared* block, written only by locked adds (threads whose rseq registration failed).
/// [`fetch`](RseqCounter::fetch) sums all of them. The mapping is anonymous and private: a block
/// costs memory only once some thread adds to it.
pub struct RseqZone {
    /// Dropped first, in `drop`: it uses the mapping and the metadata.
    core: ManuallyDrop<crate::zone::Zone<'static>>,
    map: Mapping,
    _meta: Meta,
    cfg: &'static Config,
    nslots: usize,
    stride: usize,
}

// SAFETY: the core zone is Send and Sync; the mapping and the metadata are owned by the zone
// and only released on drop (`&mut self`).
unsafe impl Send for RseqZone {}
// SAFETY: as above.
unsafe impl Sync for RseqZone {}

impl RseqZone {
    /// A zone for at least `counters` counters, one block per possible CPU plus the shared
    /// block, each `8 * counters` bytes rounded up to a power of two of at least a page
    /// ([`capacity`](RseqZone::capacity) reports the rounded count).
    ///
    /// The first zone of the process also chooses the add path ([`path`](super::path)).
    /// Fails, with nothing left allocated, with:
    /// - [`Error::BadEnvVar`] when `PCPU_COUNTER_RSEQ` has an unknown value (every zone of
    ///   the process then fails so);
    /// - [`Error::BadAreaLength`] for 0 counters, [`Error::CapacityTooLarge`] for more than
    ///   2^28 (268 435 456);
    /// - [`Error::AddressOverflow`] when the mapping's size overflows or the kernel has no
    ///   address space for it (`mmap` fails, as under `ulimit -v`);
    /// - [`Error::OutOfMemory`] when the mapping cannot be made writable or the metadata
    ///   (8 bytes and a bit per counter) cannot be allocated.
    pub fn new(counters: usize) -> Result<RseqZone, Error> {
        Self::with_slots(config()?.nslots, counters)
    }

    /// As [`new`](RseqZone::new) with `nslots` per-CPU blocks instead of the possible CPUs
    /// ([`Error::NoCpus`] for 0).
    ///
    /// A thread whose index (CPU or concurrency ID) is not below `nslots` adds to the shared
    /// block with a locked add, so any `nslots >= 1` counts exactly. With fewer blocks than
    /// the possible CPUs every add of the zone goes through the add's out-of-line path (a
    /// call, and the zone's values loaded there): meant for tests and odd sizes, not speed.
    pub fn with_slots(nslots: usize, counters: usize) -> Result<RseqZone, Error> {
        let cfg = config()?;
        if nslots == 0 {
            return Err(Error::NoCpus);
        }
        if counters == 0 {
            return Err(Error::BadAreaLength { len: 0 });
        }
        if counters > MAX_COUNTERS {
            return Err(Error::CapacityTooLarge {
                counters,
                max: MAX_COUNTERS,
            });
        }
        // A power of two, so that the add forms a slot's address with a shift; the rounding
        // costs address space only (a page is backed once a slot in it is written).
        let stride = counters
            .checked_mul(8)
            .and_then(usize::checked_next_power_of_two)
            .ok_or(Error::AddressOverflow)?
            .max(PAGE);
        let blocks = nslots.checked_add(1).ok_or(Error::AddressOverflow)?;
        let map_len = stride.checked_mul(blocks).ok_or(Error::AddressOverflow)?;
        let map = Mapping::new(map_len)?;
        if map.base.as_ptr() as usize + map_len > fast::ADDR_LIMIT {
            // Not on Linux today (user space ends below 2^56): the add's word could not hold it.
            return Err(Error::AddressOverflow);
        }
        let layout = ZoneLayout::dense(map.base.as_ptr() as usize, stride, blocks);
        let meta = Meta::zeroed(layout.meta_words())?;
        // SAFETY: the words are this zone's alone, zeroed, and freed only after the core
        // zone, which `drop` drops first (or here, on an error, with nothing left using them).
        let words = unsafe { &mut *meta.words.as_ptr() };
        // SAFETY: the mapping is `blocks * stride` bytes, readable and writable, owned by this
        // zone until drop; only the core zone and the counters from it touch it.
        // Its own area: the process has no per-CPU register for a global one to describe, and
        // any number of rseq zones live side by side.
        let core = unsafe { crate::zone::Zone::from_raw_parts_own_area(layout, words) }?;
        fast::publish(cfg);
        Ok(RseqZone {
            core: ManuallyDrop::new(core),
            map,
            _meta: meta,
            cfg,
            nslots,
            stride,
        })
    }

    /// Lets the zone grow: once every slot is in use, an alloc maps a *chunk* of as many
    /// slots (`nslots + 1` parts of [`stride`](RseqZone::stride) bytes, then the chunk's
    /// metadata: [`chunk_layout`](RseqZone::chunk_layout)) with `mmap`, anonymous, private and
    /// lazily backed as the zone's own mapping. Its counters add exactly as the first
    /// blocks' do, inline where those do: a counter's add word holds its slot's address, which
    /// lies in the chunk. A chunk that empties is unmapped, but for one kept as a spare;
    /// dropping the zone unmaps them all.
    ///
    /// The process-wide zone ([`process_zone`](super::process_zone)) always grows; a zone of
    /// one's own grows only when asked, so that its [`capacity`](RseqZone::capacity) stays the
    /// bound it was made with unless its owner wants otherwise. An alloc of a zone that
    /// grows fails only when the chunk cannot be mapped ([`Error::OutOfMemory`]).
    ///
    /// Fails with [`Error::SourceAlreadySet`] when the zone grows already.
    pub fn grow(&self) -> Result<(), Error> {
        static MMAP: MmapChunks = MmapChunks;
        self.core.grow_from(&MMAP)
    }

    /// Whether the zone grows ([`grow`](RseqZone::grow)).
    pub fn grows(&self) -> bool {
        self.core.grows()
    }

    /// The bytes one chunk of a zone that grows asks `mmap` for (before rounding up to
    /// pages), and the alignment it is placed at (the stride).
    pub fn chunk_layout(&self) -> Layout {
        // The zone was made, so a chunk of its shape fits the address space (a chunk is its
        // mapping plus a header and one chunk's metadata).
        self.core
            .chunk_layout()
            .expect("a made zone's chunk layout fits")
    }

    /// Allocates a counter that reads 0. Fails with [`Error::ZoneFull`] when every slot is
    /// in use and the zone does not [`grow`](RseqZone::grow); in one that grows, with
    /// [`Error::OutOfMemory`] when a chunk cannot be mapped.
    pub fn alloc(&self) -> Result<RseqCounter<'_>, Error> {
        let off = self.core.alloc_run(1, crate::Wait::NoWait)?;
        Ok(RseqCounter::new_in(self, off))
    }

    /// Where the blocks lie: `nslots + 1` blocks (the last the shared one) of
    /// [`stride`](RseqZone::stride) bytes from `base`.
    pub fn layout(&self) -> &ZoneLayout {
        self.core.layout()
    }

    /// Number of counters allocated now.
    pub fn in_use(&self) -> usize {
        self.core.in_use()
    }

    /// Number of counters the zone holds at once: its first blocks', and in a zone that
    /// grows, those of the chunks it has mapped now (a spare chunk not counted).
    pub fn capacity(&self) -> usize {
        self.core.capacity()
    }

    /// Number of per-CPU blocks (the shared block not included).
    pub fn nslots(&self) -> usize {
        self.nslots
    }

    /// Bytes from one block to the next (a power of two, at least the page size).
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// The add path of the process.
    pub fn path(&self) -> Path {
        self.cfg.path
    }

    /// Whether this zone's counters add inline: two loads (the counter's word and the
    /// process's) and the critical section. `false`, their adds going through an out-of-line
    /// call that loads the zone's values (exact all the same), on the paths that check every
    /// add (the fallback, this crate's own registration with `mm_cid`) and for a zone with
    /// fewer blocks than the possible CPUs ([`with_slots`](RseqZone::with_slots)).
    pub fn adds_inline(&self) -> bool {
        fast::is_inline(self.counter_word(0)) && fast::block_count() == self.cfg.nslots
    }

    /// Virtual size of the zone's first mapping: `(nslots + 1) * stride` (chunks not
    /// counted).
    pub fn mapped_bytes(&self) -> usize {
        self.map.len
    }

    /// Resident memory of the zone's first mapping now (`Rss` of its `/proc/self/smaps`
    /// entry; chunks not counted): only the pages some thread wrote (untouched pages read as
    /// the shared zero page, which is not counted). `None` if smaps cannot be read.
    pub fn resident_bytes(&self) -> Option<usize> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let start = self.map.base.as_ptr() as usize;
        let end = start + self.map.len;
        let mut total = 0;
        let mut inside = false;
        let mut found = false;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) = first.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    // A mapping header line (the guard pages keep ours unmerged).
                    inside = a < end && b > start;
                    found |= inside;
                    continue;
                }
            }
            if inside {
                if let Some(kb) = line.strip_prefix("Rss:") {
                    total += kb
                        .trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<usize>()
                        .ok()?
                        * 1024;
                }
            }
        }
        found.then_some(total)
    }

    /// The address of counter offset `off`'s slot in block 0 (wrapping: a chunk's offsets
    /// are relative to the first mapping, and a chunk may lie below it).
    pub(crate) fn slot0(&self, off: usize) -> usize {
        (self.map.base.as_ptr() as usize).wrapping_add(off)
    }

    /// The add's word for the counter at offset `off`: with the stride's shift when the zone
    /// has every block the fast path may pick (the process word's, the possible CPUs), else
    /// with 0 (the slow path, which checks the zone's own block count).
    pub(crate) fn counter_word(&self, off: usize) -> usize {
        let shift = if self.nslots >= self.cfg.nslots {
            self.stride.trailing_zeros()
        } else {
            0
        };
        fast::counter_word(self.slot0(off), shift)
    }

    /// The core zone: reads, zeroes, frees.
    pub(crate) fn core(&self) -> &crate::zone::Zone<'static> {
        &self.core
    }

    /// The process's configuration, as this zone was made with.
    pub(crate) fn config(&self) -> &'static Config {
        self.cfg
    }
}

impl Drop for RseqZone {
    fn drop(&mut self) {
        // SAFETY: dropped once, here; no counter outlives the zone (they borrow it). The
        // mapping and the metadata it used are released after this, as fields.
        unsafe { ManuallyDrop::drop(&mut self.core) };
    }
}

/// An anonymous private mapping of `len` readable and writable bytes from `base`, between two
/// inaccessible guard pages; unmapped on drop.
struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

impl Mapping {
    /// Maps `len` bytes: [`Error::AddressOverflow`] when the guarded size overflows or `mmap`
    /// finds no room, [`Error::OutOfMemory`] when the pages cannot be made writable.
    fn new(len: usize) -> Result<Mapping, Error> {
        // The blocks between two guard pages, so that the kernel never merges their mapping
        // with a neighbour's (resident_bytes reads the mapping's own pages).
        let reserve = len.checked_add(2 * PAGE).ok_or(Error::AddressOverflow)?;
        // SAFETY: a fresh anonymous private mapping; no existing memory is affected.
        let r = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                reserve,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if r == libc::MAP_FAILED {
            return Err(Error::AddressOverflow);
        }
        let base = NonNull::new(r.cast::<u8>().wrapping_add(PAGE)).ok_or(Error::AddressOverflow)?;
        // From here on dropping `map` unmaps the whole reservation.
        let map = Mapping { base, len };
        let p = base.as_ptr().cast::<libc::c_void>();
        // SAFETY: `p..p + len` lies inside the reservation just made.
        if unsafe { libc::mprotect(p, len, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
            return Err(Error::OutOfMemory { bytes: len });
        }
        // No transparent huge pages: one would back 2 MiB (many blocks) at the first add.
        // SAFETY: advice on the mapping just made; failure only leaves the default.
        unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
        Ok(map)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the reservation made in `new`, one guard page either side of `base`; its
        // owner (the zone) no longer uses it.
        unsafe {
            libc::munmap(
                self.base.as_ptr().wrapping_sub(PAGE).cast(),
                self.len + 2 * PAGE,
            )
        };
    }
}

/// The chunks of the zones that grow ([`RseqZone::grow`]): anonymous private mappings, lazily
/// backed (a page costs memory once written), aligned to the chunk's alignment by mapping
/// that much more and unmapping the ends; `free_chunk` unmaps.
struct MmapChunks;

impl MmapChunks {
    /// The system's page size: `mmap`'s unit.
    fn page() -> usize {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(page).unwrap_or(PAGE).max(PAGE)
    }

    /// The mapped length of a chunk of `layout`: whole pages.
    fn len(layout: Layout) -> Option<usize> {
        layout.size().checked_next_multiple_of(Self::page())
    }
}

// SAFETY: a chunk is a fresh mapping of at least `layout.size()` readable and writable bytes
// at a multiple of `layout.align()`, the caller's until `free_chunk` unmaps it.
unsafe impl ChunkSource for MmapChunks {
    fn alloc_chunk(&self, layout: Layout, _wait: bool) -> Option<NonNull<[u8]>> {
        let page = Self::page();
        let len = Self::len(layout)?;
        let align = layout.align().max(page);
        // Room to slide the chunk up to its alignment (mmap's addresses are page-aligned).
        let reserve = len.checked_add(align - page)?;
        // SAFETY: a fresh anonymous private mapping; no existing memory is affected.
        let raw = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                reserve,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return None;
        }
        let start = raw as usize;
        let chunk = start.next_multiple_of(align);
        let (head, tail) = (chunk - start, start + reserve - (chunk + len));
        // SAFETY: both ends lie in the mapping just made, outside the chunk; page-aligned
        // (the start, the chunk and the lengths are multiples of the page size).
        unsafe {
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap((chunk + len) as *mut libc::c_void, tail);
            }
        }
        if chunk + len > fast::ADDR_LIMIT {
            // Not on Linux today (user space ends below 2^56): no add word could hold it.
            // SAFETY: the chunk just mapped, used by nothing.
            unsafe { libc::munmap(chunk as *mut libc::c_void, len) };
            return None;
        }
        // No transparent huge pages, as for the zone's own mapping.
        // SAFETY: advice on the chunk just mapped; failure only leaves the default.
        unsafe { libc::madvise(chunk as *mut libc::c_void, len, libc::MADV_NOHUGEPAGE) };
        NonNull::new(chunk as *mut u8).map(|c| NonNull::slice_from_raw_parts(c, len))
    }

    unsafe fn free_chunk(&self, chunk: NonNull<u8>, layout: Layout) {
        if let Some(len) = Self::len(layout) {
            // SAFETY: a chunk `alloc_chunk` mapped with this layout, so this length, given
            // back once and used by nothing (the caller's contract).
            unsafe { libc::munmap(chunk.as_ptr().cast(), len) };
        }
    }
}

/// Zeroed words of zone metadata on the heap, freed on drop.
struct Meta {
    words: NonNull<[u64]>,
    layout: Layout,
}

impl Meta {
    /// `n` (at least one) zeroed words, or [`Error::OutOfMemory`]: the allocation is
    /// fallible, the size being the caller's.
    fn zeroed(n: usize) -> Result<Meta, Error> {
        let layout = Layout::array::<u64>(n).map_err(|_| Error::AddressOverflow)?;
        if layout.size() == 0 {
            return Err(Error::BadAreaLength { len: 0 });
        }
        // SAFETY: `layout` has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let p = NonNull::new(p.cast::<u64>()).ok_or(Error::OutOfMemory {
            bytes: layout.size(),
        })?;
        Ok(Meta {
            words: NonNull::slice_from_raw_parts(p, n),
            layout,
        })
    }
}

impl Drop for Meta {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout; its owner (the zone) no longer
        // uses it.
        unsafe { std::alloc::dealloc(self.words.as_ptr().cast(), self.layout) };
    }
}

impl core::fmt::Debug for RseqZone {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RseqZone")
            .field("nslots", &self.nslots)
            .field("stride", &self.stride)
            .field("capacity", &self.capacity())
            .field("path", &self.path())
            .finish()
    }
}
