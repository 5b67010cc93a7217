// SPDX-License-Identifier: BSD-2-Clause
//! Per-CPU histograms: buckets and a sum as a run of per-CPU slots, observed with one add to
//! a bucket and one to the sum, read consistently in one pass and zeroed losslessly.

#[cfg(target_has_atomic = "64")]
mod extremes;
mod rules;
#[cfg(target_has_atomic = "64")]
pub use extremes::MinMax;
pub use rules::{Buckets, MAX_SUB_BITS};

use crate::group::{self, Part};
use crate::{Error, Protected, Wait, Zone};

/// A histogram of `u64` values (latencies, sizes) whose buckets are counters of a zone: a
/// run of adjacent slots, as a [`CounterArray`](crate::array::CounterArray)'s, holding the
/// underflow bucket, the [`Buckets::count`] buckets of its rule, the overflow bucket and the
/// sum of the values.
///
/// [`observe`](Histogram::observe) adds 1 to the value's bucket and the value to the sum on
/// the current CPU's slots: the counters' own adds (`add gs:[off]` on x86_64), no lock and
/// no protection beyond theirs, so it is exact under interrupts and migration as an add is.
/// The count is never stored: it is the sum of the buckets, so every read has
/// `count == ` the last cumulative bucket (`+Inf`), whatever observes run meanwhile. The sum
/// is a separate slot: a read taken while CPUs observe may see an observation in its bucket
/// and not yet in the sum, or the reverse; a read with no observe running is exact.
///
/// Memory: 8 bytes per slot per CPU, [`Buckets::slots`] slots: 536 bytes per CPU for 64
/// buckets (67 slots), plus a baseline word per slot (536 bytes, not per CPU) and the zone's
/// bitmap bits.
///
/// ```
/// use pcpu_counter::{histogram::{Buckets, Histogram}, sim::Machine};
///
/// const RULE: Buckets = Buckets::power_of_two(1, 16); // [1, 2) ... [2^15, 2^16)
/// let machine = Machine::new(2);
/// let latency = Histogram::new(machine.zone(), RULE).unwrap();
/// machine.run_on(0, || latency.observe(300));
/// machine.run_on(1, || { latency.observe(5); latency.observe(0) });
/// let mut buffer = [0; RULE.slots()];
/// let read = latency.read(&mut buffer);
/// assert_eq!((read.count(), read.sum(), read.underflow()), (3, 305, 1));
/// assert_eq!((read.bucket(2), read.bucket(8)), (1, 1)); // [4, 8) and [256, 512)
/// ```
pub struct Histogram<'z> {
    zone: &'z Zone<'z>,
    off: usize,
    buckets: Buckets,
}

impl<'z> Histogram<'z> {
    /// Allocates a histogram reading all zeros with bucket rule `buckets`, as one run of
    /// [`Buckets::slots`] adjacent slots of `zone`.
    ///
    /// Fails with [`Error::ZoneFull`] when no run of that many free slots exists; nothing is
    /// allocated then.
    pub fn new(zone: &'z Zone<'z>, buckets: Buckets) -> Result<Self, Error> {
        Self::alloc_with(zone, buckets, Wait::NoWait)
    }

    /// As [`new`](Histogram::new), in a zone that grows asking its chunk source with `wait`
    /// (see [`Zone::alloc_with`]). A run stays in one chunk: [`Error::RunTooLong`] for more
    /// than [`Zone::max_run`] slots.
    pub fn alloc_with(zone: &'z Zone<'z>, buckets: Buckets, wait: Wait) -> Result<Self, Error> {
        let off = zone.alloc_run(buckets.slots(), wait)?;
        Ok(Histogram { zone, off, buckets })
    }

    /// The histogram's bucket rule.
    pub fn buckets(&self) -> Buckets {
        self.buckets
    }

    /// The offset of slot `slot` (below [`Buckets::slots`]).
    #[inline(always)]
    fn slot(&self, slot: usize) -> usize {
        self.off + 8 * slot
    }

    /// Counts `v` on the current CPU: 1 added to its bucket's slot, `v` to the sum's (which
    /// wraps past `u64::MAX`, as a counter does).
    ///
    /// ```
    /// # use pcpu_counter::{histogram::{Buckets, Histogram}, sim::Machine};
    /// let machine = Machine::new(1);
    /// let h = Histogram::new(machine.zone(), Buckets::linear(0, 4, 2)).unwrap();
    /// machine.run_on(0, || h.observe(9));
    /// assert_eq!((h.count(), h.sum()), (1, 9)); // in the overflow bucket, [8, ...)
    /// ```
    #[inline(always)]
    pub fn observe(&self, v: u64) {
        let bucket = self.slot(self.buckets.slot_of(v));
        let sum = self.slot(self.buckets.sum_slot());
        // SAFETY: both are live slots of this histogram's run; the per-CPU register is the
        // platform's setup contract, as for `Counter::add`.
        unsafe {
            self.zone.inc(bucket);
            self.zone.add(sum, v as i64);
        }
        self.count_stored_apart();
    }

    /// As [`observe`](Histogram::observe), inside `counter_enter()` (the adds without their
    /// own protection, where the arch's add needs it).
    #[inline(always)]
    pub fn observe_protected(&self, _guard: &Protected, v: u64) {
        let bucket = self.slot(self.buckets.slot_of(v));
        let sum = self.slot(self.buckets.sum_slot());
        // SAFETY: as in `observe`; `_guard` proves the section is protected where needed.
        unsafe {
            self.zone.add_protected(bucket, 1);
            self.zone.add_protected(sum, v as i64);
        }
        self.count_stored_apart();
    }

    /// TEST ONLY (`--cfg pcpu_counter_broken="histogram_stored_count"`): a count stored
    /// apart, added after the bucket, which reads then trust: a read can see a count that is
    /// not the sum of its buckets (`tests/histogram.rs` must catch it). Nothing otherwise.
    #[inline(always)]
    fn count_stored_apart(&self) {
        #[cfg(pcpu_counter_broken = "histogram_stored_count")]
        // SAFETY: the broken variant's extra slot, the run's last.
        unsafe {
            self.zone.inc(self.slot(self.buckets.slots() - 1))
        };
    }

    /// Every slot's value since the last zero (the underflow bucket, the buckets, the
    /// overflow bucket and the sum) into `out`, read in one pass over the CPUs (see
    /// [`Zone::fetch_range`]), as a [`Reading`] of it.
    ///
    /// # Panics
    /// If `out` holds fewer than [`Buckets::slots`] values.
    pub fn read<'b>(&self, out: &'b mut [u64]) -> Reading<'b> {
        let values = self.buffer(out);
        group::fetch(&[self.run(0, values.len())], values);
        Reading {
            buckets: self.buckets,
            values,
        }
    }

    /// As [`read`](Histogram::read), zeroing every slot as one step with its read (see
    /// [`Zone::fetch_and_zero_range`]): the readings successive calls return add up, with a
    /// final read, to exactly every observation made, bucket by bucket and in the sum; an
    /// observe racing with the call is in this reading or the next, never both, never lost.
    ///
    /// ```
    /// # use pcpu_counter::{histogram::{Buckets, Histogram}, sim::Machine};
    /// let machine = Machine::new(1);
    /// let h = Histogram::new(machine.zone(), Buckets::power_of_two(0, 8)).unwrap();
    /// machine.run_on(0, || h.observe(3));
    /// let mut out = [0; 11];
    /// assert_eq!(h.fetch_and_zero(&mut out).count(), 1);
    /// assert_eq!(h.read(&mut out).count(), 0);
    /// ```
    pub fn fetch_and_zero<'b>(&self, out: &'b mut [u64]) -> Reading<'b> {
        let values = self.buffer(out);
        group::fetch_and_zero(&[self.run(0, values.len())], values);
        Reading {
            buckets: self.buckets,
            values,
        }
    }

    /// The first [`Buckets::slots`] values of `out`.
    #[track_caller]
    fn buffer<'b>(&self, out: &'b mut [u64]) -> &'b mut [u64] {
        let slots = self.buckets.slots();
        let len = out.len();
        match out.get_mut(..slots) {
            Some(values) => values,
            None => panic!("histogram read into {len} values: its rule has {slots} slots"),
        }
    }

    /// The run of `len` of its slots from slot `first`, for the group reads.
    fn run(&self, first: usize, len: usize) -> Part<'z> {
        // SAFETY: the histogram's first slot, live while it is.
        unsafe { Part::beside(self.zone, self.off, first, len) }
    }

    /// The number of values observed since the last zero: the sum of every bucket, read 64
    /// buckets at a time (a [`read`](Histogram::read) takes them all in one pass).
    pub fn count(&self) -> u64 {
        let mut scratch = [0u64; group::CHUNK];
        let buckets = self.buckets.overflow_slot() + 1;
        (0..buckets)
            .step_by(group::CHUNK)
            .map(|first| {
                let len = (buckets - first).min(group::CHUNK);
                group::fetch(&[self.run(first, len)], &mut scratch);
                scratch[..len]
                    .iter()
                    .fold(0u64, |acc, &v| acc.wrapping_add(v))
            })
            .fold(0, u64::wrapping_add)
    }

    /// The sum of the values observed since the last zero (wrapping past `u64::MAX`).
    pub fn sum(&self) -> u64 {
        self.zone.fetch(self.slot(self.buckets.sum_slot()))
    }

    /// The offset of slot 0 (the underflow bucket) from every CPU's per-CPU register value;
    /// slot `i` is `8 * i` bytes further.
    pub fn offset(&self) -> usize {
        self.off
    }

    /// The zone the histogram lives in.
    pub fn zone(&self) -> &'z Zone<'z> {
        self.zone
    }
}

impl Drop for Histogram<'_> {
    fn drop(&mut self) {
        self.zone.free_run(self.off, self.buckets.slots());
    }
}

impl core::fmt::Debug for Histogram<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Histogram")
            .field("offset", &self.off)
            .field("buckets", &self.buckets)
            .finish()
    }
}

/// One read of a histogram: its slots' values in a caller's buffer, with its rule.
#[derive(Debug)]
pub struct Reading<'b> {
    buckets: Buckets,
    values: &'b [u64],
}

impl Reading<'_> {
    /// The bucket rule of the histogram read.
    pub fn buckets(&self) -> Buckets {
        self.buckets
    }

    /// The values read, slot by slot ([`Buckets::slots`]): the underflow bucket, bucket 0 to
    /// bucket `count - 1`, the overflow bucket, the sum.
    pub fn values(&self) -> &[u64] {
        self.values
    }

    /// The values counted in regular bucket `i`.
    ///
    /// # Panics
    /// If `i` is not below [`Buckets::count`].
    #[track_caller]
    pub fn bucket(&self, i: usize) -> u64 {
        let count = self.buckets.count();
        assert!(
            i < count,
            "histogram bucket {i} out of range ({count} buckets)"
        );
        self.values[1 + i]
    }

    /// The values below the first bucket.
    pub fn underflow(&self) -> u64 {
        self.values[Buckets::UNDERFLOW]
    }

    /// The values past the last bucket.
    pub fn overflow(&self) -> u64 {
        self.values[self.buckets.overflow_slot()]
    }

    /// The sum of the values observed (wrapping past `u64::MAX`).
    pub fn sum(&self) -> u64 {
        self.values[self.buckets.sum_slot()]
    }

    /// The bucket slots' values, the underflow bucket to the overflow bucket.
    fn bucket_slots(&self) -> &[u64] {
        &self.values[..=self.buckets.overflow_slot()]
    }

    /// The number of values observed: the sum of the bucket slots of this same read, so it is
    /// always the last of [`cumulative`](Reading::cumulative) (the `+Inf` bucket).
    pub fn count(&self) -> u64 {
        #[cfg(pcpu_counter_broken = "histogram_stored_count")]
        return self.values[self.buckets.slots() - 1];
        #[cfg(not(pcpu_counter_broken = "histogram_stored_count"))]
        self.bucket_slots()
            .iter()
            .fold(0u64, |acc, &v| acc.wrapping_add(v))
    }

    /// The cumulative counts, slot by slot from the underflow bucket: `(highest, values at or
    /// below it)`, `highest` the slot's largest value (`u64::MAX` for the overflow bucket,
    /// the `+Inf` bucket). Empty ranges (an underflow below 0, an overflow past `u64::MAX`)
    /// are left out.
    pub fn cumulative(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut total = 0u64;
        self.bucket_slots()
            .iter()
            .enumerate()
            .filter_map(move |(slot, &v)| {
                total = total.wrapping_add(v);
                let (_, highest) = self.buckets.range(slot)?;
                Some((highest, total))
            })
    }

    /// Writes this reading as a histogram family named `name` (see
    /// [`export::write_histogram`](crate::export::write_histogram)): a cumulative
    /// `name_bucket{le="..."}` per bucket with values (the underflow bucket's `le` is the value
    /// below the first bucket, the overflow bucket's `+Inf`), `name_sum` and `name_count`,
    /// whose count is the `+Inf` bucket's of this same reading, so that they agree in every
    /// scrape.
    ///
    /// ```
    /// # use pcpu_counter::{export::Format, histogram::{Buckets, Histogram}, sim::Machine};
    /// let machine = Machine::new(1);
    /// let h = Histogram::new(machine.zone(), Buckets::power_of_two(1, 2)).unwrap();
    /// machine.run_on(0, || { h.observe(0); h.observe(3); h.observe(9) });
    /// let (mut out, mut text) = ([0; 5], String::new());
    /// h.read(&mut out).write(&mut text, Format::Prometheus, "io_bytes", "I/O sizes").unwrap();
    /// assert_eq!(text, "# HELP io_bytes I/O sizes\n# TYPE io_bytes histogram\n\
    ///     io_bytes_bucket{le=\"0\"} 1\nio_bytes_bucket{le=\"1\"} 1\nio_bytes_bucket{le=\"3\"} 2\n\
    ///     io_bytes_bucket{le=\"+Inf\"} 3\nio_bytes_sum 12\nio_bytes_count 3\n");
    /// ```
    pub fn write(
        &self,
        w: &mut dyn core::fmt::Write,
        format: crate::export::Format,
        name: &str,
        help: &str,
    ) -> core::fmt::Result {
        let count = self.cumulative().last().map_or(0, |(_, below)| below);
        crate::export::write_histogram(w, format, name, help, self.cumulative(), count, self.sum())
    }

    /// The bucket that holds the `q`-quantile of the values observed (the value of rank
    /// `ceil(q * count)`, at least 1), or `None` when nothing was observed. The true quantile
    /// lies in [`Estimate::lowest`]`..=`[`Estimate::highest`]; see [`Buckets`] for the error of
    /// [`Estimate::midpoint`] for each rule.
    ///
    /// # Panics
    /// If `q` is not in `0.0..=1.0`.
    ///
    /// ```
    /// # use pcpu_counter::{histogram::{Buckets, Histogram}, sim::Machine};
    /// let machine = Machine::new(1);
    /// let h = Histogram::new(machine.zone(), Buckets::linear(0, 16, 8)).unwrap();
    /// machine.run_on(0, || (0..100).for_each(|v| h.observe(v)));
    /// let mut out = [0; 11];
    /// let median = h.read(&mut out).quantile(0.5).unwrap(); // the 50th value, 49
    /// assert_eq!((median.lowest(), median.highest(), median.midpoint()), (48, 63, 55));
    /// ```
    #[track_caller]
    pub fn quantile(&self, q: f64) -> Option<Estimate> {
        assert!(
            (0.0..=1.0).contains(&q),
            "histogram quantile {q} is not in 0..=1"
        );
        let count = self.count();
        let exact = q * count as f64;
        let mut rank = exact as u64; // truncates: `f64::ceil` is not in `core`
        if (rank as f64) < exact {
            rank += 1;
        }
        let rank = rank.clamp(1, count.max(1));
        let mut below = 0u64;
        for (slot, &v) in self.bucket_slots().iter().enumerate() {
            below = below.wrapping_add(v);
            if v > 0 && below >= rank {
                let (lowest, highest) = self.buckets.range(slot)?;
                return Some(Estimate {
                    slot,
                    lowest,
                    highest,
                });
            }
        }
        None
    }
}

/// Where a quantile lies: one bucket's range of values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    slot: usize,
    lowest: u64,
    highest: u64,
}

impl Estimate {
    /// The slot of the bucket (0: the underflow bucket, `1 + i`: bucket `i`).
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// The bucket's smallest value.
    pub fn lowest(&self) -> u64 {
        self.lowest
    }

    /// The bucket's largest value.
    pub fn highest(&self) -> u64 {
        self.highest
    }

    /// The middle of the bucket, rounded down: the estimate whose error [`Buckets`] bounds.
    pub fn midpoint(&self) -> u64 {
        self.lowest + (self.highest - self.lowest) / 2
    }
}
