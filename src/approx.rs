// SPDX-License-Identifier: BSD-2-Clause
//! A per-CPU counter with an O(1) approximate read of stated accuracy: [`ApproxCounter`].
//!
//! # The carry protocol
//! The counter is a plain per-CPU [`Counter`] (one slot per CPU, a zero baseline), a second
//! per-CPU slot counting the first slot's multiples of 16 (the "sixteens"), and one shared
//! word, `total`, on a cache line of its own: a two-level tree whose leaves are per-CPU. The
//! batch `B` is a power of two from 16.
//!
//! * **add(v)**: add `v` to this CPU's slot, and learn in the same step how many multiples of
//!   16 it crossed, `c = ((old + v) >> 4) - (old >> 4)` (x86_64: the plain non-locked
//!   `add qword ptr gs:[off], v`, then `c = (v >> 4) + AF` from the add's auxiliary carry
//!   flag; elsewhere from the arch's add that returns the old value). For adds of 1, 15 in
//!   16 have `c == 0` and stop there: the add is the plain counter's add and one branch.
//!   Otherwise add `c` to this CPU's sixteens slot (one non-locked `xadd` on x86_64), and if
//!   that crossed a multiple of `B / 16`, add the whole batches crossed, times 16, to `total`
//!   with one atomic add.
//! * Each CPU's slot changes only through its own adds, one after another, and each add's
//!   `c` is its own step of the slot's chain (one instruction, or one step under protection),
//!   so the steps telescope: the sixteens slot stays `slot >> 4` (modulo 2^60), and with it
//!   the carries of a CPU add up to exactly `slot & !(B-1)` (modulo 2^64) once every add has
//!   returned. An interrupt between an add and its carries makes its own steps on both
//!   levels, and the sum is the same. Carries are atomic adds, so they commute: none is lost
//!   whatever order they land in. (A kernel thread migrated between its slot add and its
//!   sixteens add puts `c` on another CPU's sixteens: nothing is lost, and every sixteens
//!   remainder still lies in `[0, B/16)`, so the bound below holds all the same.)
//! * **zero / fetch_and_zero**: the slot's baseline moves from `old` to the sum of the slots
//!   `sum` by compare-and-swap (exactly [`Counter::fetch_and_zero`]), and then the same delta
//!   `sum - old` is subtracted from `total` with one atomic add. No slot is written, so an
//!   add racing with a zero is counted before or after it, never lost or twice; a carry in
//!   flight across a zero (its slot add read by the zero's sum, its carry landing after the
//!   zero's subtraction, or the other way round) lands in `total` all the same, because
//!   `total` is only ever added to. Once every add and zero has returned,
//!   `total == Σ (slot & !(B-1)) - baseline`, while
//!   `precise() == Σ slot - baseline`, so
//!
//!   `precise() - approximate() == Σ_cpu (slot_cpu & (B-1))`, in `[0, ncpus * (B-1)]`.
//!
//! * **approximate()** is one load of `total`. **precise()** sums every CPU (as
//!   [`Counter::fetch`]). **compare(t)** answers from `approximate()` when the whole interval
//!   the precise value can lie in is on one side of `t`, and sums precisely only otherwise.
//!
//! # What the bound covers
//! The bound [`accuracy`](ApproxCounter::accuracy) states holds against every add that
//! returned before the read started (its carry has landed) and every zero that returned: the
//! precise value over exactly those lies in `[approximate, approximate + ncpus * (B-1)]`. An
//! add or a zero still in flight may already show in `approximate()` or not yet (a read
//! concurrent with it is counted before or after it), so with adds in flight the approximate
//! value can also differ by their own carries. The deltas of successive `fetch_and_zero`
//! calls are exact (precise sums), never approximate.

use crate::counter::Counter;
use crate::zone::Zone;
use crate::{arch, baseline, Error};
use core::cell::UnsafeCell;
use core::cmp::Ordering;

/// The shared approximate total on a cache line (128 bytes: two on x86_64's adjacent-line
/// prefetch) of its own, so that the carries other CPUs make do not evict the handle's fields
/// every add reads.
#[repr(C, align(128))]
struct Total(UnsafeCell<u64>);

/// A per-CPU counter whose approximate value is one load, with a bound stated by
/// [`accuracy`](ApproxCounter::accuracy).
///
/// The add is the plain counter's add (on x86_64 the same `add gs:[off]`, its carry out of
/// the low 4 bits read from the flags), then one branch; once in 16 adds of 1 it adds to a
/// second per-CPU slot, and only when that crosses a multiple of `batch / 16` does it add the
/// whole batches crossed to a shared word. [`approximate`](ApproxCounter::approximate) reads that word;
/// [`precise`](ApproxCounter::precise) sums every CPU like [`Counter::fetch`];
/// [`compare`](ApproxCounter::compare) sums only when the approximate value is within the
/// bound of the threshold. Zeroes are lossless, as the plain counter's. The protocol and the
/// proof of the bound are in the module source (`src/approx.rs`) and docs/reading.md.
///
/// Memory: 16 bytes per CPU (the slot and its sixteens), plus the handle (256 bytes: the
/// shared word has a 128-byte line of its own).
///
/// ```
/// use pcpu_counter::{sim::Machine, ApproxCounter};
///
/// let machine = Machine::new(4);
/// let c = ApproxCounter::new(machine.alloc().unwrap(), 16).unwrap();
/// assert_eq!(c.accuracy(), (4 * 15, 0));
/// for cpu in 0..4 {
///     machine.run_on(cpu, || (0..20).for_each(|_| c.inc()));
/// }
/// assert_eq!(c.precise(), 80);
/// assert_eq!(c.approximate(), 64); // each CPU carried one batch of 16
/// assert_eq!(c.compare(10), core::cmp::Ordering::Greater); // from the approximate value
/// assert_eq!(c.compare(80), core::cmp::Ordering::Equal); // near: summed precisely
/// ```
pub struct ApproxCounter<'z> {
    counter: Counter<'z>,
    /// Per CPU, the multiples of 16 `counter`'s slot crossed: `slot >> 4` (modulo 2^60).
    sixteens: Counter<'z>,
    /// `!(batch / 16 - 1)`: the bits of a sixteens slot that count whole batches.
    high: u64,
    total: Total,
}

// SAFETY: `total` is only accessed atomically (through `baseline`'s functions or an
// `AtomicU64` on targets with 64-bit atomics); the counter handle is shared like `Counter`.
unsafe impl Sync for ApproxCounter<'_> {}
// SAFETY: as above; nothing in it is tied to a thread.
unsafe impl Send for ApproxCounter<'_> {}

impl<'z> ApproxCounter<'z> {
    /// The batch [`ApproxCounter::new`] takes when the caller has no better choice: 64.
    /// At 256 CPUs the approximate value is then at most 256 * 63 = 16128 under the precise
    /// one, and a CPU adding 1 at a time writes its sixteens slot once every 16 adds and the
    /// shared word once every 64.
    ///
    /// cbindgen:ignore
    pub const DEFAULT_BATCH: u64 = 64;

    /// An approximate counter on `counter`'s slot, keeping its count, with batch `batch` (a
    /// power of two from 16 to 2^32; [`Error::BadBatch`] otherwise). It takes a second slot
    /// of the same zone (its sixteens): [`Error::ZoneFull`] when there is none. On an error
    /// `counter` is dropped.
    ///
    /// The approximate total starts from the counter's current value: the handle is moved in,
    /// so no add runs through it meanwhile.
    pub fn new(counter: Counter<'z>, batch: u64) -> Result<Self, Error> {
        let high = batch_high(batch)?;
        let zone = counter.zone();
        let sixteens = zone.alloc()?;
        // SAFETY: both slots are live (their handles are here); the sixteens slot was just
        // allocated and no CPU adds to it yet, and no add runs through `counter` (moved in).
        let start = unsafe { init_parts(zone, counter.offset(), sixteens.offset(), batch) };
        Ok(ApproxCounter {
            counter,
            sixteens,
            high,
            total: Total(UnsafeCell::new(start)),
        })
    }

    /// Adds `v` (which may be negative): the per-CPU add, and more only when this CPU's slot
    /// crosses a multiple of 16 (see the module docs). Call it on a CPU, like
    /// [`Counter::add`].
    #[inline(always)]
    pub fn add(&self, v: i64) {
        let c = self.counter.add_crossings16(v);
        if c != 0 {
            self.carry(c);
        }
    }

    /// Adds 1.
    #[inline(always)]
    pub fn inc(&self) {
        self.add(1)
    }

    /// The rare path of [`add`](ApproxCounter::add).
    #[cold]
    #[inline(never)]
    fn carry(&self, c: u64) {
        // SAFETY: the sixteens slot is live (its handle is here); the total word is ours.
        unsafe {
            carry_parts(
                self.zone(),
                self.sixteens.offset(),
                self.high,
                self.total.0.get(),
                c,
            )
        }
    }

    /// The approximate value: one load of the shared word. With every add and zero returned,
    /// the precise value lies in `[approximate, approximate + under]` (see
    /// [`accuracy`](ApproxCounter::accuracy)); values wrap modulo 2^64 as [`Counter::fetch`]'s.
    #[inline]
    pub fn approximate(&self) -> u64 {
        // SAFETY: the word is live and aligned, and only accessed atomically.
        unsafe { load_total(self.total.0.get()) }
    }

    /// `(under, over)`: how far the approximate value can be under and over the precise
    /// value (against every add and zero that returned before the read): `under` is
    /// `ncpus * (batch - 1)`, and `over` is 0 (the slots' remainders below a batch are never
    /// negative, whatever the sign of the adds).
    pub fn accuracy(&self) -> (u64, u64) {
        accuracy(self.counter.zone().ncpus(), self.batch())
    }

    /// The batch: a CPU's slot carries into the shared word each time it crosses a multiple
    /// of it.
    pub fn batch(&self) -> u64 {
        (!self.high + 1) << 4
    }

    /// The precise value: every CPU's slot summed, less the baseline ([`Counter::fetch`]).
    pub fn precise(&self) -> u64 {
        self.counter.fetch()
    }

    /// The precise value (an alias of [`precise`](ApproxCounter::precise), so that code
    /// written for a [`Counter`] reads the same).
    pub fn fetch(&self) -> u64 {
        self.precise()
    }

    /// How the value, as an `i64`, compares with `threshold`: from the approximate value
    /// alone when every value the bound allows is on one side of `threshold` (one load),
    /// else from the precise sum.
    pub fn compare(&self, threshold: i64) -> Ordering {
        match self.compare_approximate(threshold) {
            Some(ordering) => ordering,
            None => (self.precise() as i64).cmp(&threshold),
        }
    }

    /// The answer [`compare`](ApproxCounter::compare) gives from the approximate value alone:
    /// `Some` when the precise value (as an `i64`) lies on one side of `threshold` whatever
    /// it is within the bound, `None` when it is too near to tell (or the interval crosses
    /// `i64::MAX`).
    #[inline]
    pub fn compare_approximate(&self, threshold: i64) -> Option<Ordering> {
        let (under, over) = self.accuracy();
        compare_bounded(self.approximate(), under, over, threshold)
    }

    /// Returns the count since the last zero and zeroes it, as one step (exact, as
    /// [`Counter::fetch_and_zero`]); the approximate total drops by the same amount.
    pub fn fetch_and_zero(&self) -> u64 {
        let delta = self.counter.fetch_and_zero();
        // SAFETY: the total word is ours.
        unsafe { add_total(self.total.0.get(), delta.wrapping_neg()) };
        delta
    }

    /// Resets the counter to 0 without writing any CPU's slot.
    pub fn zero(&self) {
        self.fetch_and_zero();
    }

    /// The raw value of this counter's slot on CPU `cpu` (not adjusted by zeroes).
    pub fn cpu_slot(&self, cpu: usize) -> Result<u64, Error> {
        self.counter.cpu_slot(cpu)
    }

    /// The slot's offset from every CPU's per-CPU register value.
    pub fn offset(&self) -> usize {
        self.counter.offset()
    }

    /// The zone the counter lives in.
    pub fn zone(&self) -> &'z Zone<'z> {
        self.counter.zone()
    }
}

impl core::fmt::Debug for ApproxCounter<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ApproxCounter")
            .field("offset", &self.offset())
            .field("batch", &self.batch())
            .field("approximate", &self.approximate())
            .field("precise", &self.precise())
            .finish()
    }
}

// The protocol on raw parts (a zone, the two slots' offsets, `!(batch / 16 - 1)` and the
// shared word), shared with the C API's `struct pcpu_approx`.

/// Checks `batch` (a power of two from 16 to 2^32) and returns its `high` mask.
pub(crate) fn batch_high(batch: u64) -> Result<u64, Error> {
    if batch.is_power_of_two() && (16..=1 << 32).contains(&batch) {
        Ok(!(batch / 16 - 1))
    } else {
        Err(Error::BadBatch { batch })
    }
}

/// `(under, over)` of a counter on `ncpus` CPUs with batch `batch`.
pub(crate) fn accuracy(ncpus: usize, batch: u64) -> (u64, u64) {
    (ncpus as u64 * (batch - 1), 0)
}

/// Sets every CPU's sixteens slot to `slot >> 4` and returns the shared word's start:
/// the count less every slot's remainder below `batch`.
///
/// # Safety
/// `off` and `sixteens` are live slots of `zone`; no CPU adds to either meanwhile, and none
/// has added to `sixteens` since it was allocated.
pub(crate) unsafe fn init_parts(zone: &Zone<'_>, off: usize, sixteens: usize, batch: u64) -> u64 {
    let mut below = 0u64;
    for cpu in 0..zone.ncpus() {
        // SAFETY: `cpu` is in range and the slots are live (the caller's contract).
        let slot = unsafe { arch::load_slot(zone.slot_addr(cpu, off)) };
        below = below.wrapping_add(slot & (batch - 1));
        // SAFETY: no CPU adds to the sixteens slot yet (as `Zone::alloc_run` clears it).
        unsafe { arch::store_slot(zone.slot_addr(cpu, sixteens), slot >> 4) };
    }
    zone.fetch(off).wrapping_sub(below)
}

/// The add on raw parts, after the platform's check (as `Zone::add`).
///
/// # Safety
/// `off` and `sixteens` are live slots of `zone`, `total` its counter's live shared word;
/// the per-CPU register is set (the platform's contract).
// Used by the C API only.
#[cfg_attr(not(pcpu_c_abi), allow(dead_code))]
#[inline(always)]
pub(crate) unsafe fn add_parts(
    zone: &Zone<'_>,
    off: usize,
    sixteens: usize,
    high: u64,
    total: *mut u64,
    v: i64,
) {
    // SAFETY: per the caller.
    let c = unsafe { zone.add_crossings16(off, v) };
    if c != 0 {
        // SAFETY: per the caller.
        unsafe { carry_parts(zone, sixteens, high, total, c) };
    }
}

/// `c` multiples of 16 to this CPU's sixteens slot, and the whole batches that crossed (times
/// 16) to the shared word.
///
/// # Safety
/// As [`add_parts`].
#[cold]
#[inline(never)]
pub(crate) unsafe fn carry_parts(
    zone: &Zone<'_>,
    sixteens: usize,
    high: u64,
    total: *mut u64,
    c: u64,
) {
    // SAFETY: per the caller.
    let old = unsafe { zone.fetch_add(sixteens, c as i64) };
    let new = old.wrapping_add(c);
    if (old ^ new) & high != 0 {
        // SAFETY: per the caller.
        unsafe { add_total(total, (new & high).wrapping_sub(old & high) << 4) };
    }
}

/// One atomic add to the shared word.
///
/// # Safety
/// `total` is a live, aligned shared word, only ever accessed through these functions.
#[inline]
pub(crate) unsafe fn add_total(total: *mut u64, v: u64) {
    cfg_if::cfg_if! {
        if #[cfg(pcpu_counter_broken = "approx_racy_carry")] {
            // Broken on purpose (test only): a load and a store, not one atomic add, so two
            // CPUs carrying at once lose one carry.
            // SAFETY: per the caller; every access is atomic.
            unsafe { baseline::store(total, baseline::load(total).wrapping_add(v)) }
        } else if #[cfg(all(target_has_atomic = "64", not(target_arch = "x86")))] {
            // SAFETY: per the caller.
            unsafe { core::sync::atomic::AtomicU64::from_ptr(total) }
                .fetch_add(v, core::sync::atomic::Ordering::AcqRel);
        } else {
            // SAFETY: per the caller (`baseline`'s lock where 64-bit atomics may be missing).
            unsafe { baseline::add(total, v) }
        }
    }
}

/// One load of the shared word.
///
/// # Safety
/// As [`add_total`].
#[inline]
pub(crate) unsafe fn load_total(total: *mut u64) -> u64 {
    // SAFETY: per the caller.
    unsafe { baseline::load(total) }
}

/// The answer of `compare` from the approximate value `approx` alone (see
/// [`ApproxCounter::compare_approximate`]).
pub(crate) fn compare_bounded(
    approx: u64,
    under: u64,
    over: u64,
    threshold: i64,
) -> Option<Ordering> {
    let a = i128::from(approx as i64);
    let (lo, hi) = (a - i128::from(over), a + i128::from(under));
    let t = i128::from(threshold);
    if lo < i128::from(i64::MIN) || hi > i128::from(i64::MAX) {
        None
    } else if lo > t {
        Some(Ordering::Greater)
    } else if hi < t {
        Some(Ordering::Less)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::compare_bounded;
    use core::cmp::Ordering;

    #[test]
    fn compare_answers_only_outside_the_interval() {
        // The precise value lies in [approx - over, approx + under].
        assert_eq!(compare_bounded(100, 0, 10, 95), None);
        assert_eq!(compare_bounded(100, 0, 10, 89), Some(Ordering::Greater));
        assert_eq!(compare_bounded(100, 5, 0, 105), None);
        assert_eq!(compare_bounded(100, 5, 0, 106), Some(Ordering::Less));
        assert_eq!(compare_bounded(100, 5, 10, 90), None);
    }

    #[test]
    fn compare_gives_up_only_where_the_interval_leaves_i64() {
        let (min, max) = (i64::MIN as u64, i64::MAX as u64);
        // The interval reaching i64's ends exactly still answers...
        assert_eq!(compare_bounded(min, 0, 0, 0), Some(Ordering::Less));
        assert_eq!(compare_bounded(max, 0, 0, 0), Some(Ordering::Greater));
        // ...one past either end does not, whichever end it is.
        assert_eq!(compare_bounded(min, 0, 1, 0), None);
        assert_eq!(compare_bounded(max, 1, 0, 0), None);
    }
}
