//! A per-CPU counter with an O(1) approximate read of stated accuracy: [`ApproxCounter`].
//!
//! # The carry protocol
//! The counter is a plain per-CPU [`Counter`] (one slot per CPU, a zero baseline) plus one
//! shared word, `total`, on a cache line of its own. The batch `B` is a power of two.
//!
//! * **add(v)**: add `v` to this CPU's slot and get the slot's old value in one step on this
//!   CPU (x86_64: one non-locked `xadd qword ptr gs:[off], v`; elsewhere the arch's add
//!   under local protection, then the slot read back). If the add moved the slot across a
//!   multiple of `B` (`(old ^ new) & !(B - 1) != 0`), add the carry
//!   `(new & !(B-1)) - (old & !(B-1))` (wrapping) to `total` with one atomic add. Otherwise
//!   (`B - 1` times in `B` for adds of 1) nothing else is written.
//! * Each CPU's slot changes only through its own adds, one after another, so the carries of
//!   one slot telescope: once every add has returned, the carries added up are exactly
//!   `slot & !(B-1)` for every slot (modulo 2^64). Adds interrupted by other adds on the same
//!   CPU (an interrupt between the `xadd` and its carry) each carry their own step of the
//!   chain, so the sum is the same. Carries are atomic adds, so they commute: none is lost
//!   whatever order they land in.
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
use crate::{baseline, Error};
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
/// The add is the plain counter's add that also returns the old slot value (on x86_64 one
/// non-locked `xadd gs:[off]` instead of `add gs:[off]`), then one branch; only when the
/// slot crosses a multiple of the batch does it add the whole batches crossed to a shared
/// word. [`approximate`](ApproxCounter::approximate) reads that word;
/// [`precise`](ApproxCounter::precise) sums every CPU like [`Counter::fetch`];
/// [`compare`](ApproxCounter::compare) sums only when the approximate value is within the
/// bound of the threshold. Zeroes are lossless, as the plain counter's. The protocol and the
/// proof of the bound are in the module source (`src/approx.rs`) and docs/reading.md.
///
/// Memory: the plain counter's 8 bytes per CPU, plus the handle (256 bytes: the shared word
/// has a 128-byte line of its own).
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
    /// `!(batch - 1)`: the bits of a slot that count whole batches.
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
    /// one, and a CPU adding 1 at a time writes the shared word once every 64 adds.
    pub const DEFAULT_BATCH: u64 = 64;

    /// An approximate counter on `counter`'s slot, keeping its count, with batch `batch` (a
    /// power of two from 1 to 2^32; [`Error::BadBatch`] otherwise, and `counter` is dropped).
    ///
    /// The approximate total starts from the counter's current value: the handle is moved in,
    /// so no add runs through it meanwhile.
    pub fn new(counter: Counter<'z>, batch: u64) -> Result<Self, Error> {
        if !batch.is_power_of_two() || batch > 1 << 32 {
            return Err(Error::BadBatch { batch });
        }
        let high = !(batch - 1);
        let zone = counter.zone();
        let below: u64 = (0..zone.ncpus()).fold(0u64, |acc, cpu| {
            acc.wrapping_add(zone.slot_value(cpu, counter.offset()).unwrap_or(0) & !high)
        });
        let start = counter.fetch().wrapping_sub(below);
        Ok(ApproxCounter {
            counter,
            high,
            total: Total(UnsafeCell::new(start)),
        })
    }

    /// Adds `v` (which may be negative): the per-CPU add, and a carry to the shared word only
    /// when this CPU's slot crosses a multiple of the batch. Call it on a CPU, like
    /// [`Counter::add`].
    #[inline(always)]
    pub fn add(&self, v: i64) {
        let old = self.counter.fetch_add_slot(v);
        let new = old.wrapping_add(v as u64);
        if (old ^ new) & self.high != 0 {
            self.carry((new & self.high).wrapping_sub(old & self.high));
        }
    }

    /// Adds 1.
    #[inline(always)]
    pub fn inc(&self) {
        self.add(1)
    }

    /// Adds `carry` to the shared word (the rare path of [`add`](ApproxCounter::add)).
    #[cold]
    #[inline(never)]
    fn carry(&self, carry: u64) {
        self.add_total(carry)
    }

    /// One atomic add to the shared word.
    #[inline]
    fn add_total(&self, v: u64) {
        let word = self.total.0.get();
        cfg_if::cfg_if! {
            if #[cfg(pcpu_counter_broken = "approx_racy_carry")] {
                // Broken on purpose (test only): a load and a store, not one atomic add, so two
                // CPUs carrying at once lose one carry.
                // SAFETY: the word is live and aligned; every access is atomic.
                unsafe { baseline::store(word, baseline::load(word).wrapping_add(v)) }
            } else if #[cfg(all(target_has_atomic = "64", not(target_arch = "x86")))] {
                // SAFETY: the word is live and aligned, and only accessed atomically.
                unsafe { core::sync::atomic::AtomicU64::from_ptr(word) }
                    .fetch_add(v, core::sync::atomic::Ordering::AcqRel);
            } else {
                // SAFETY: as above (`baseline`'s lock where 64-bit atomics may be missing).
                unsafe { baseline::add(word, v) }
            }
        }
    }

    /// The approximate value: one load of the shared word. With every add and zero returned,
    /// the precise value lies in `[approximate, approximate + under]` (see
    /// [`accuracy`](ApproxCounter::accuracy)); values wrap modulo 2^64 as [`Counter::fetch`]'s.
    #[inline]
    pub fn approximate(&self) -> u64 {
        // SAFETY: the word is live and aligned, and only accessed atomically.
        unsafe { baseline::load(self.total.0.get()) }
    }

    /// `(under, over)`: how far the approximate value can be under and over the precise
    /// value (against every add and zero that returned before the read): `under` is
    /// `ncpus * (batch - 1)`, and `over` is 0 (the slots' remainders below a batch are never
    /// negative, whatever the sign of the adds).
    pub fn accuracy(&self) -> (u64, u64) {
        (self.counter.zone().ncpus() as u64 * !self.high, 0)
    }

    /// The batch: a CPU's slot carries into the shared word each time it crosses a multiple
    /// of it.
    pub fn batch(&self) -> u64 {
        !self.high + 1
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
        let a = i128::from(self.approximate() as i64);
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

    /// Returns the count since the last zero and zeroes it, as one step (exact, as
    /// [`Counter::fetch_and_zero`]); the approximate total drops by the same amount.
    pub fn fetch_and_zero(&self) -> u64 {
        let delta = self.counter.fetch_and_zero();
        self.add_total(delta.wrapping_neg());
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
