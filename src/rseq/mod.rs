// SPDX-License-Identifier: BSD-2-Clause
//! Per-CPU counters for ordinary Linux programs, through restartable sequences (feature
//! `rseq`; Linux on x86_64 and aarch64).
//!
//! The simple case: counters from the process-wide zone, added to from any thread.
//!
//! ```
//! use pcpu_counter::rseq;
//!
//! let requests = rseq::RseqCounter::new().unwrap();
//! std::thread::scope(|s| {
//!     for _ in 0..8 {
//!         s.spawn(|| (0..1000).for_each(|_| requests.inc()));
//!     }
//! });
//! assert_eq!(requests.fetch(), 8000);
//! println!("counting through {}", rseq::path());
//! ```
//!
//! A counter is one 8-byte slot in each of `nslots + 1` page-aligned blocks (`nslots` = the
//! possible CPUs); [`RseqCounter::add`] adds to the current CPU's slot with one rseq critical
//! section whose commit is a single non-locked add, with no lock and no binding: the kernel
//! restarts the section if the thread is preempted, migrated or signalled inside it.
//! [`RseqCounter::fetch`] sums the blocks; `zero` and `fetch_and_zero` are the core's lossless
//! baselines. For counters of your own lifetime and capacity, make an [`RseqZone`].
//!
//! An [`RseqCounter`] is two words (its zone, and the add's word: the slot's address and the
//! block stride, packed), an [`RseqStaticCounter`] two (that word, and the atomic it counts on
//! when no slot can be had: see [Growth](#growth)). The add loads that word and one word of the process
//! (the rseq area's offset, the index field, the block count) and runs the section; where it
//! cannot ([`RseqZone::adds_inline`]: the paths that check every add, a zone with fewer blocks
//! than CPUs) it calls the out-of-line path, exact all the same.
//!
//! # The path
//! Chosen once per process, at the first zone, and reported by [`path`]:
//! - [`Path::Rseq`] with glibc's registration (glibc 2.35+ registers every thread; it finds
//!   the area with `__rseq_offset`). The index is `mm_cid` ([`Index::ConcurrencyId`]) when
//!   the kernel offers it (Linux 6.3+, `getauxval(AT_RSEQ_FEATURE_SIZE) >= 28`): the blocks in
//!   use are then as many as the threads running at once, not the CPUs. Else `cpu_id`.
//!   The add trusts glibc's registration: glibc registers each thread before it runs any
//!   code and aborts the process if that fails, so the section checks only the index's
//!   range. A library that unregisters glibc's area of a thread (to register its own) breaks
//!   that trust for the `mm_cid` index: run such a process with `PCPU_COUNTER_RSEQ=cpu`,
//!   whose index read out of range sends an unregistered thread to the shared block.
//! - With `GLIBC_TUNABLES=glibc.pthread.rseq=0` (`__rseq_size` is 0), each thread registers
//!   an area itself, on its first add (one system call, async-signal-safe), as long as the
//!   kernel asks (`getauxval(AT_RSEQ_FEATURE_SIZE)` rounded up to `AT_RSEQ_ALIGN`, at least
//!   32 bytes): glibc's reserved 32-byte area, or an area of the crate's own where the
//!   kernel asks for more (Linux 7.3: 64 bytes).
//! - A thread whose registration fails (another library registered another area) adds with a
//!   locked add to the shared block: exact, slower, and never mixed with the non-locked adds.
//! - [`Path::Fallback`] when the kernel has no rseq (`ENOSYS`, as under qemu-user) or libc
//!   lacks `__rseq_offset`, or the kernel is known to lose rseq adds
//!   ([`known_broken_kernel`]): `sched_getcpu()` and a locked add on that CPU's block, every
//!   add of the process locked, so still exact.
//!
//! The environment variable `PCPU_COUNTER_RSEQ`, read once (at the first zone or [`path`]),
//! overrides the choice: `auto` (the default, as when unset or empty), `cpu` (rseq with
//! `cpu_id`), `cid` (rseq with `mm_cid` where offered, else `cpu_id`), `off` (the fallback),
//! `force` (rseq as `auto` picks it, even on a kernel known to lose adds: for one with the
//! fix backported). `cpu` and `cid` choose the index, not whether rseq is safe: on a known
//! broken kernel they take the fallback too.
//!
//! # Kernels known to lose adds
//! The 6.19 rseq rework broke rseq on arm64: a critical section preempted and resumed on the
//! same CPU is not aborted ("\[REGRESSION\] rseq: refactoring in v6.19 broke everyone on
//! arm64 and tcmalloc everywhere", lkml, 2026-04-22), fixed in 7.0.14 (aarch64; "rseq: Revert
//! to historical performance killing behaviour", "arm64/entry: Fix arm64-specific rseq
//! brokenness"). An aarch64 process on Linux 6.19 up to 7.0.14 therefore takes the fallback
//! unless forced ([`Choice::ForceRseq`], `PCPU_COUNTER_RSEQ=force`). x86-64 6.19 is not
//! gated: its regression (`cpu_id_start` no longer rewritten) touches no field this crate
//! reads, and its sections are still aborted.
//! It is meant for tests and CI, so it is matched exactly: any other value (`CPU`, a typo)
//! makes every zone of the process fail with [`Error::BadEnvVar`], naming the variable and
//! the accepted values, and [`path`] report [`Path::Unusable`], rather than run a path
//! nobody asked for.
//!
//! # Memory
//! The zone is one anonymous private mapping of `(nslots + 1) * stride` bytes, `stride` =
//! 8 bytes per counter rounded up to a power of two of at least a page (the add forms a
//! slot's address with a shift; the rounding costs address space, not memory); a block costs
//! memory only once a thread adds to it (a new counter's slots are cleared only where they
//! read non-zero). Resident cost: at most `stride` per block some thread ever added to, so
//! with `cpu_id` the CPUs the process ran on, with `mm_cid` the concurrency IDs it used.
//! [`RseqZone::resident_bytes`] reports it.
//!
//! # Growth
//! The process-wide zone, and a zone whose owner calls [`RseqZone::grow`], grows when its slots
//! are all in use: an alloc maps a *chunk* of as many slots, `nslots + 1` parts of `stride`
//! bytes (the shared block's part included) and the chunk's metadata, anonymous, private and
//! lazily backed as the first mapping, at a multiple of `stride`. A counter's add word holds
//! its slot's address in the chunk's part 0, so its add is the same two loads and critical
//! section as a first-block counter's, inline wherever those are. A chunk that empties is
//! unmapped, but one kept as a spare. The process-wide zone's allocs therefore fail only
//! when `mmap` does ([`Error::OutOfMemory`], as under `ulimit -v`): only then does a
//! [`RseqStaticCounter`] spill to a shared atomic.
//!
//! # Signed totals
//! [`RseqCounter::add`] takes an `i64` and the sum is kept modulo 2^64: [`RseqCounter::fetch`] reads
//! it as a `u64`, [`RseqCounter::fetch_i64`] as an `i64` (a gauge that goes up and down, a
//! balance), exact while the true total lies in `i64`'s range.
//!
//! # Signal handlers
//! `add`, `inc`, `fetch`, `fetch_i64`, `zero` and `fetch_and_zero` are async-signal-safe
//! (the rseq section or one locked add; atomic loads; a compare-and-swap loop; no lock, no
//! allocation), on every path. A handler's `fetch` counts every add that committed before it
//! started, in any thread: an add of the interrupted thread whose critical section the signal
//! cut is not committed yet (the kernel restarts it after the handler returns), so that add
//! is counted by a later `fetch`, never twice and never lost. A handler's `fetch_and_zero`
//! that interrupts the same thread's `fetch_and_zero` makes the interrupted one retry: the
//! two deltas still add up to every add. What a handler must not do first is what allocates:
//! making a zone, [`RseqCounter::new`], and the first use of an [`RseqStaticCounter`] (which
//! allocates its slot; touch it once before installing the handler).
//!
//! # Fork
//! A zone's mapping and metadata are private memory, which `fork` copies (copy-on-write):
//! a child starts from its parent's counts at the fork, and from then on each process counts
//! on its own copy: the child's adds (and zeroes) never show in the parent, nor the parent's
//! in the child. The child's thread keeps its rseq registration (the kernel copies it) and
//! the process's add path. Until it calls `exec`, a child of a multi-threaded parent may only
//! do async-signal-safe work: [`RseqCounter::add`], `inc`, `fetch`, `zero` and `fetch_and_zero`
//! are (the rseq section, atomic loads and a compare-and-swap; on the fallback path
//! `sched_getcpu` and a locked add: no lock, no allocation), while making a zone, allocating
//! a counter and dropping one are not (they take the zone's slot lock, which a parent thread
//! may have held at the fork, and allocate).

mod counter;
mod fast;
mod handles;
mod kernels;
mod registration;
mod zone;

use std::sync::OnceLock;

pub use counter::RseqCounter;
pub use handles::{RseqOwnedCounter, RseqStaticCounter};
pub use registration::{Choice, Index, Path};
pub use zone::RseqZone;

// The face's former names, deprecated aliases of the `Rseq` names (each also named a type or
// function of another meaning at the crate root or in `freebsd`).

/// Renamed [`RseqCounter`].
#[deprecated(
    note = "renamed to `rseq::RseqCounter` (`pcpu_counter::Counter` is a kernel zone's counter)"
)]
pub type Counter<'z> = RseqCounter<'z>;

/// Renamed [`RseqZone`].
#[deprecated(note = "renamed to `rseq::RseqZone` (`pcpu_counter::Zone` is a kernel's zone)")]
pub type Zone = RseqZone;

/// Renamed [`RseqStaticCounter`].
#[deprecated(
    note = "renamed to `rseq::RseqStaticCounter` (`pcpu_counter::StaticCounter` is a per-CPU-section static)"
)]
pub type StaticCounter = RseqStaticCounter;

/// Renamed [`RseqOwnedCounter`].
#[deprecated(note = "renamed to `rseq::RseqOwnedCounter`")]
pub type OwnedCounter = RseqOwnedCounter;

/// Renamed [`process_zone`].
#[deprecated(
    note = "renamed to `rseq::process_zone` (`freebsd::global_zone` is the kernel's global zone)"
)]
pub fn global_zone() -> Result<&'static RseqZone, Error> {
    process_zone()
}

use crate::Error;

/// Counters in the process-wide zone's first blocks; it grows by chunks of as many
/// ([`RseqZone::grow`]) when they are all in use.
pub const GLOBAL_CAPACITY: usize = 4096;

static GLOBAL: OnceLock<Result<RseqZone, Error>> = OnceLock::new();

/// The process-wide zone, made on first use: [`GLOBAL_CAPACITY`] counters, and a chunk of as
/// many mapped whenever those in use fill it ([`RseqZone::grow`]).
pub fn process_zone() -> Result<&'static RseqZone, Error> {
    GLOBAL
        .get_or_init(|| {
            let zone = RseqZone::new(GLOBAL_CAPACITY)?;
            zone.grow()?;
            Ok(zone)
        })
        .as_ref()
        .map_err(|e| *e)
}

/// A counter from the process-wide zone (as [`RseqCounter::new`]).
pub fn alloc() -> Result<RseqCounter<'static>, Error> {
    process_zone()?.alloc()
}

impl RseqCounter<'static> {
    /// A counter from the process-wide zone ([`process_zone`]), reading 0. Fails with
    /// [`Error::OutOfMemory`] when its slots are all in use and a chunk for more cannot be
    /// mapped, and as [`RseqZone::new`] when that zone cannot be made (every call then returns
    /// that error).
    pub fn new() -> Result<Self, Error> {
        alloc()
    }
}

/// The add path this process uses (chosen at first use; see the [module docs](self)), or
/// [`Path::Unusable`] when `PCPU_COUNTER_RSEQ` has an unknown value.
pub fn path() -> Path {
    registration::path()
}

/// Fixes the add path of the process in code, beside (and over) `PCPU_COUNTER_RSEQ`: for a
/// program or library that knows which path it needs. Call it before the process's first
/// zone, [`RseqCounter::new`], [`RseqStaticCounter`] use or [`path`] call, which choose the path
/// (from the environment variable) for the rest of the process; once this call has fixed
/// it, the variable is not read.
///
/// Returns the path now in use. Fails, leaving the path unchosen, with
/// [`Error::RseqPathUnavailable`] when the process cannot run `choice` (no rseq in the
/// kernel or libc, no `mm_cid`, glibc's registration on for [`Choice::OwnRegistration`], a
/// kernel known to lose rseq adds for every rseq choice but [`Choice::ForceRseq`], the
/// reason then naming the kernel),
/// and, with the path unchanged, with [`Error::RseqPathTooLate`] when the path was already
/// chosen otherwise. A call whose choice the chosen path already satisfies succeeds (two
/// libraries asking for the same path), as does [`Choice::Auto`] at any time.
///
/// The path is per process, not per zone: the add carries no per-counter mode check.
pub fn set_path(choice: Choice) -> Result<Path, Error> {
    registration::set_path(choice)
}

/// Why this process's kernel is known to lose rseq adds, or `None`: the reason the
/// fallback names when the crate leaves rseq for that reason, e.g. `Linux 6.19.11 aborts no
/// rseq section on arm64 (fixed in 7.0.14; PCPU_COUNTER_RSEQ=force overrides)`.
///
/// The crate's table of such kernels (see [Kernels known to lose adds](crate::rseq#kernels-known-to-lose-adds))
/// is matched against `uname`'s release and the process's arch: aarch64 Linux from 6.19 up
/// to (not including) 7.0.14. A release it cannot read is not known broken.
pub fn known_broken_kernel() -> Option<&'static str> {
    registration::known_broken_kernel()
}

/// The kernel's rseq feature size (`getauxval(AT_RSEQ_FEATURE_SIZE)`, 20 when not given):
/// 28 or more means `mm_cid` is offered.
pub fn kernel_feature_size() -> usize {
    registration::kernel_feature_size()
}
