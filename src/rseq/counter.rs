//! The user-space counter handle and its add.

use super::registration::{self, Config, Path};
use super::Zone;

// Plain `#[cfg]`s, not `cfg_if!`: tools that do not expand macros (rustfmt, cargo-mutants)
// find the files.
#[cfg(target_arch = "x86_64")]
#[path = "../../arch/x86_64/rseq.rs"]
mod imp;
#[cfg(target_arch = "aarch64")]
#[path = "../../arch/aarch64/rseq.rs"]
mod imp;

/// How this counter's add goes, cached from the process's [`Path`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// rseq, areas registered by glibc.
    Rseq,
    /// rseq, each thread's area registered by this crate on its first add.
    RseqOwn,
    /// `sched_getcpu()` and a locked add.
    Fallback,
}

/// A per-CPU counter of a [`Zone`] (see the [module docs](super)); dropping it frees the
/// slot.
///
/// [`add`](Counter::add) may be called from any thread, and from signal handlers, with no
/// binding or setup.
pub struct Counter<'z> {
    inner: crate::counter::Counter<'z>,
    /// Address of the slot in block 0.
    slot0: usize,
    /// Block `i`'s slot is at `slot0 + (i << shift)` (the stride is a power of two).
    shift: u32,
    nslots: usize,
    rseq_offset: isize,
    index_offset: usize,
    mode: Mode,
}

impl<'z> Counter<'z> {
    pub(crate) fn new_in(zone: &'z Zone, cfg: &Config, inner: crate::counter::Counter<'z>) -> Self {
        let mode = match cfg.path {
            Path::Rseq {
                glibc_registered: true,
                ..
            } => Mode::Rseq,
            Path::Rseq { .. } => Mode::RseqOwn,
            // (A zone never has an unusable path: making it failed.)
            Path::Fallback { .. } | Path::Unusable { .. } => Mode::Fallback,
        };
        Counter {
            slot0: zone.slot0(inner.offset()),
            inner,
            shift: zone.stride().trailing_zeros(),
            nslots: zone.nslots(),
            rseq_offset: cfg.rseq_offset,
            index_offset: cfg.index_offset,
            mode,
        }
    }

    /// Adds `v` (which may be negative) to the slot of the current CPU (or concurrency ID).
    ///
    /// On the rseq path this is one restartable sequence whose commit is one non-locked add
    /// (x86_64 `add qword ptr [slot], v`; aarch64 `ldr; add; str`): a preemption, migration
    /// or signal inside it restarts it. See [`path`](super::path) for the others.
    #[inline(always)]
    pub fn add(&self, v: i64) {
        let done = match self.mode {
            // SAFETY: on this path glibc registered every thread before it ran any code (a
            // failed registration of a new thread is fatal in glibc), so the index needs no
            // registration check.
            Mode::Rseq => unsafe { self.try_rseq_add::<false>(v) },
            // SAFETY: the registration is checked in the section.
            Mode::RseqOwn => unsafe { self.try_rseq_add::<true>(v) },
            Mode::Fallback => false,
        };
        if !done {
            self.add_slow(v);
        }
    }

    /// One add through this thread's rseq area; `false` (nothing added) when the index is
    /// out of range or, with `CHECK_REGISTERED`, the thread is not registered.
    ///
    /// # Safety
    /// Without `CHECK_REGISTERED` the calling thread's area is registered.
    #[inline(always)]
    unsafe fn try_rseq_add<const CHECK_REGISTERED: bool>(&self, v: i64) -> bool {
        // SAFETY: the slots `slot0 + (i << shift)` for `i < nslots` are this counter's live
        // slots in the per-CPU blocks, which on the rseq path only rseq adds write;
        // `rseq_offset` and `index_offset` are the process's (`registration`); the registration
        // per the caller.
        unsafe {
            imp::try_add::<CHECK_REGISTERED>(
                self.rseq_offset,
                self.index_offset,
                self.nslots,
                self.shift,
                self.slot0,
                v,
            )
        }
    }

    /// Adds 1.
    #[inline(always)]
    pub fn inc(&self) {
        self.add(1)
    }

    /// Everything but the rseq fast path: a thread to register, a thread whose registration
    /// failed (locked add on the shared block), or the fallback (locked add on
    /// `sched_getcpu()`'s block).
    #[cold]
    #[inline(never)]
    fn add_slow(&self, v: i64) {
        match self.mode {
            Mode::Rseq => self.add_shared(v),
            Mode::RseqOwn => {
                if registration::register_current_thread(self.rseq_offset)
                    // SAFETY: the registration is checked in the section.
                    && unsafe { self.try_rseq_add::<true>(v) }
                {
                    return;
                }
                self.add_shared(v)
            }
            Mode::Fallback => {
                // SAFETY: sched_getcpu has no preconditions (and is async-signal-safe).
                let cpu = unsafe { libc::sched_getcpu() };
                let block = if cpu >= 0 && (cpu as usize) < self.nslots {
                    cpu as usize
                } else {
                    self.nslots
                };
                // SAFETY: `block <= nslots` is a block of the zone; on the fallback path every
                // add to every block is locked.
                unsafe { imp::locked_add(self.slot(block), v) }
            }
        }
    }

    /// A locked add on the shared block.
    fn add_shared(&self, v: i64) {
        // SAFETY: the shared block (`nslots`) is written only by locked adds.
        unsafe { imp::locked_add(self.slot(self.nslots), v) }
    }

    fn slot(&self, block: usize) -> *mut u64 {
        (self.slot0 + (block << self.shift)) as *mut u64
    }

    /// The sum over all blocks since the last zero (the core's
    /// [`fetch`](crate::Counter::fetch)).
    pub fn fetch(&self) -> u64 {
        self.inner.fetch()
    }

    /// The signed count since the last zero: [`fetch`](Counter::fetch) read as two's
    /// complement, for counters whose adds may be negative (a gauge, a balance). The sum is
    /// kept modulo 2^64 either way, so `fetch_i64` is exact while the true total lies in
    /// `i64`'s range.
    pub fn fetch_i64(&self) -> i64 {
        self.fetch() as i64
    }

    /// Resets the counter to 0, losslessly (the core's [`zero`](crate::Counter::zero)).
    pub fn zero(&self) {
        self.inner.zero()
    }

    /// Returns the count since the last zero and zeroes it, as one step.
    pub fn fetch_and_zero(&self) -> u64 {
        self.inner.fetch_and_zero()
    }

    /// The raw value of block `block`'s slot (`nslots` is the shared block).
    pub fn block_slot(&self, block: usize) -> Result<u64, crate::Error> {
        self.inner.cpu_slot(block)
    }

    /// The slot's offset in every block: block `i`'s slot is at
    /// `zone.layout().base + i * zone.stride() + offset`.
    pub fn offset(&self) -> usize {
        self.inner.offset()
    }
}

impl core::fmt::Debug for Counter<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Counter")
            .field("offset", &self.inner.offset())
            .field("value", &self.fetch())
            .finish()
    }
}
