// SPDX-License-Identifier: BSD-2-Clause
//! Counter arrays: `N` counters in one contiguous run of slots (FreeBSD's `COUNTER_ARRAY_*`).

use crate::{Error, Protected, Wait, Zone};

/// `N` per-CPU counters allocated as one run of `N` adjacent slots: one allocation, one free.
///
/// Element `i` is the slot at [`offset`](CounterArray::offset)` + 8 * i` on every CPU, and
/// behaves exactly like a [`Counter`](crate::Counter): adds touch only the current CPU's slot,
/// fetches sum every CPU's slot, and zeroes are lossless (each element has its own baseline).
/// Dropping the array frees the whole run.
///
/// An index `i >= N` panics with the index and the length; it never reaches memory outside
/// the array.
///
/// ```
/// use pcpu_counter::{array::CounterArray, sim::Machine};
///
/// let machine = Machine::new(2);
/// let by_proto: CounterArray<'_, 3> = CounterArray::new(machine.zone()).unwrap();
/// machine.run_on(0, || by_proto.add(0, 5));
/// machine.run_on(1, || by_proto.add(2, 7));
/// let mut out = [0; 3];
/// by_proto.fetch_all(&mut out);
/// assert_eq!(out, [5, 0, 7]);
/// by_proto.fetch_and_zero_all(&mut out);
/// assert_eq!((out, by_proto.fetch(2)), ([5, 0, 7], 0));
/// ```
pub struct CounterArray<'z, const N: usize> {
    zone: &'z Zone<'z>,
    off: usize,
}

impl<'z, const N: usize> CounterArray<'z, N> {
    /// Allocates `N` counters reading 0 as one run of adjacent slots in `zone`
    /// (FreeBSD's `COUNTER_ARRAY_ALLOC`).
    ///
    /// Fails with [`Error::ZoneFull`] when no run of `N` free slots exists; nothing is
    /// allocated then. `N == 0` does not compile.
    ///
    /// ```
    /// # use pcpu_counter::{array::CounterArray, sim::Machine, Error};
    /// let machine = Machine::with_capacity(1, 64).unwrap();
    /// let _a: CounterArray<'_, 60> = CounterArray::new(machine.zone()).unwrap();
    /// let b = CounterArray::<'_, 8>::new(machine.zone());
    /// assert_eq!(b.err(), Some(Error::ZoneFull { capacity: 64 }));
    /// assert_eq!(machine.zone().in_use(), 60); // nothing half-allocated
    /// ```
    pub fn new(zone: &'z Zone<'z>) -> Result<Self, Error> {
        Self::alloc_with(zone, Wait::NoWait)
    }

    /// As [`new`](CounterArray::new), in a zone that grows asking its chunk source with `wait`
    /// (see [`Zone::alloc_with`]). A run stays in one chunk: [`Error::RunTooLong`] for more
    /// than [`Zone::max_run`] counters.
    pub fn alloc_with(zone: &'z Zone<'z>, wait: Wait) -> Result<Self, Error> {
        const { assert!(N > 0, "a counter array needs at least one element") };
        let off = zone.alloc_run(N, wait)?;
        Ok(CounterArray { zone, off })
    }

    /// Number of elements, `N`.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// let a = pcpu_counter::array::CounterArray::<'_, 4>::new(machine.zone()).unwrap();
    /// assert_eq!(a.len(), 4);
    /// ```
    pub const fn len(&self) -> usize {
        N
    }

    /// Always `false`: an array has at least one element.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// let a = pcpu_counter::array::CounterArray::<'_, 1>::new(machine.zone()).unwrap();
    /// assert!(!a.is_empty());
    /// ```
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// The slot offset of element `i`, after the bounds check.
    #[inline(always)]
    #[track_caller]
    fn slot(&self, i: usize) -> usize {
        assert!(i < N, "counter array index {i} out of range (length {N})");
        self.off + 8 * i
    }

    /// Adds `v` to element `i` on the current CPU.
    ///
    /// # Panics
    /// If `i >= N`, with the index and the length.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// let a = pcpu_counter::array::CounterArray::<'_, 2>::new(machine.zone()).unwrap();
    /// machine.run_on(0, || { a.add(1, 40); a.add(1, 2) });
    /// assert_eq!(a.fetch(1), 42);
    /// ```
    #[inline(always)]
    #[track_caller]
    pub fn add(&self, i: usize, v: i64) {
        let off = self.slot(i);
        // SAFETY: `off` is a live slot of this array (bounds checked); the per-CPU register
        // is the platform's setup contract, as for `Counter::add`.
        unsafe { self.zone.add(off, v) }
    }

    /// Adds 1 to element `i`.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// let a = pcpu_counter::array::CounterArray::<'_, 2>::new(machine.zone()).unwrap();
    /// machine.run_on(0, || a.inc(0));
    /// assert_eq!(a.fetch(0), 1);
    /// ```
    #[inline(always)]
    #[track_caller]
    pub fn inc(&self, i: usize) {
        self.add(i, 1)
    }

    /// Adds `v` to element `i` inside `counter_enter()`.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// let a = pcpu_counter::array::CounterArray::<'_, 2>::new(machine.zone()).unwrap();
    /// machine.run_on(0, || {
    ///     let guard = pcpu_counter::freebsd::counter_enter();
    ///     a.add_protected(&guard, 0, 3);
    ///     a.add_protected(&guard, 1, 4);
    /// });
    /// assert_eq!((a.fetch(0), a.fetch(1)), (3, 4));
    /// ```
    #[inline(always)]
    #[track_caller]
    pub fn add_protected(&self, _guard: &Protected, i: usize, v: i64) {
        let off = self.slot(i);
        // SAFETY: as in `add`; `_guard` proves the section is protected where needed.
        unsafe { self.zone.add_protected(off, v) }
    }

    /// Element `i`'s sum over all CPUs since its last zero.
    ///
    /// # Panics
    /// If `i >= N`, with the index and the length.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// let a = pcpu_counter::array::CounterArray::<'_, 2>::new(machine.zone()).unwrap();
    /// assert_eq!(a.fetch(1), 0);
    /// ```
    #[track_caller]
    pub fn fetch(&self, i: usize) -> u64 {
        self.zone.fetch(self.slot(i))
    }

    /// Every element's value, into `out` (FreeBSD's `COUNTER_ARRAY_COPY`), read in one pass:
    /// CPU by CPU, each CPU's run of `N` slots in order (see
    /// [`Zone::fetch_range`](crate::Zone::fetch_range)). Each value is what
    /// [`fetch`](CounterArray::fetch) would read.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// let a = pcpu_counter::array::CounterArray::<'_, 2>::new(machine.zone()).unwrap();
    /// machine.run_on(0, || a.add(0, 9));
    /// let mut out = [0; 2];
    /// a.fetch_all(&mut out);
    /// assert_eq!(out, [9, 0]);
    /// ```
    pub fn fetch_all(&self, out: &mut [u64; N]) {
        crate::group::fetch(&[self.part()], out);
    }

    /// The array as a run of slots for the group reads.
    fn part(&self) -> crate::group::Part<'z> {
        self.run(0, N)
    }

    /// The run of `len` of its slots from element `first`, for the group reads.
    fn run(&self, first: usize, len: usize) -> crate::group::Part<'z> {
        // SAFETY: the array's first slot, live while it is.
        unsafe { crate::group::Part::beside(self.zone, self.off, first, len) }
    }

    /// Zeroes element `i`, losslessly (see [`Counter::zero`](crate::Counter::zero)).
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// let a = pcpu_counter::array::CounterArray::<'_, 2>::new(machine.zone()).unwrap();
    /// machine.run_on(0, || a.add(1, 9));
    /// a.zero(1);
    /// assert_eq!(a.fetch(1), 0);
    /// ```
    #[track_caller]
    pub fn zero(&self, i: usize) {
        self.fetch_and_zero(i);
    }

    /// Returns element `i`'s count since its last zero and zeroes it, as one step.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// let a = pcpu_counter::array::CounterArray::<'_, 2>::new(machine.zone()).unwrap();
    /// machine.run_on(0, || a.add(0, 5));
    /// assert_eq!((a.fetch_and_zero(0), a.fetch(0)), (5, 0));
    /// ```
    #[track_caller]
    pub fn fetch_and_zero(&self, i: usize) -> u64 {
        self.zone.fetch_and_zero(self.slot(i))
    }

    /// Zeroes every element (FreeBSD's `COUNTER_ARRAY_ZERO`).
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// let a = pcpu_counter::array::CounterArray::<'_, 2>::new(machine.zone()).unwrap();
    /// machine.run_on(0, || { a.add(0, 1); a.add(1, 2) });
    /// a.zero_all();
    /// assert_eq!((a.fetch(0), a.fetch(1)), (0, 0));
    /// ```
    pub fn zero_all(&self) {
        let mut scratch = [0u64; crate::group::CHUNK];
        for first in (0..N).step_by(crate::group::CHUNK) {
            let len = (N - first).min(crate::group::CHUNK);
            crate::group::fetch_and_zero(&[self.run(first, len)], &mut scratch);
        }
    }

    /// Every element's count since its last zero, into `out`, zeroing each as one step (see
    /// [`Zone::fetch_and_zero_range`](crate::Zone::fetch_and_zero_range)): the deltas add
    /// up exactly, an add racing with the call is in this delta or the next, and the slots
    /// are read 16 at a time in one pass over the CPUs.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// let a = pcpu_counter::array::CounterArray::<'_, 2>::new(machine.zone()).unwrap();
    /// machine.run_on(0, || a.add(1, 6));
    /// let mut out = [0; 2];
    /// a.fetch_and_zero_all(&mut out);
    /// assert_eq!((out, a.fetch(1)), ([0, 6], 0));
    /// ```
    pub fn fetch_and_zero_all(&self, out: &mut [u64; N]) {
        crate::group::fetch_and_zero(&[self.part()], out);
    }

    /// The raw value of element `i`'s slot on CPU `cpu` (not adjusted by zeroes).
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(2);
    /// let a = pcpu_counter::array::CounterArray::<'_, 2>::new(machine.zone()).unwrap();
    /// machine.run_on(1, || a.add(0, 3));
    /// assert_eq!((a.cpu_slot(0, 0), a.cpu_slot(1, 0)), (Ok(0), Ok(3)));
    /// ```
    #[track_caller]
    pub fn cpu_slot(&self, cpu: usize, i: usize) -> Result<u64, Error> {
        let off = self.slot(i);
        self.zone.slot_value(cpu, off)
    }

    /// The offset of element 0's slot from every CPU's per-CPU register value; element `i`
    /// is `8 * i` bytes further.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// let a = pcpu_counter::array::CounterArray::<'_, 2>::new(machine.zone()).unwrap();
    /// let b = pcpu_counter::array::CounterArray::<'_, 2>::new(machine.zone()).unwrap();
    /// assert_eq!(b.offset(), a.offset() + 16); // adjacent runs in a fresh zone
    /// ```
    pub fn offset(&self) -> usize {
        self.off
    }

    /// The zone the array lives in.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// let a = pcpu_counter::array::CounterArray::<'_, 2>::new(machine.zone()).unwrap();
    /// assert_eq!(a.zone().in_use(), 2);
    /// ```
    pub fn zone(&self) -> &'z Zone<'z> {
        self.zone
    }
}

impl<const N: usize> Drop for CounterArray<'_, N> {
    fn drop(&mut self) {
        self.zone.free_run(self.off, N);
    }
}

impl<const N: usize> core::fmt::Debug for CounterArray<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut values = [0u64; N];
        self.fetch_all(&mut values);
        f.debug_struct("CounterArray")
            .field("offset", &self.off)
            .field("values", &values.as_slice())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Machine;
    use std::format;

    #[test]
    fn every_accessor_reports_the_array() {
        let machine = Machine::new(2);
        let a: CounterArray<'_, 3> = CounterArray::new(machine.zone()).unwrap();
        assert_eq!((a.len(), a.is_empty()), (3, false));
        assert!(core::ptr::eq(a.zone(), machine.zone()));
        machine.run_on(1, || {
            a.inc(2);
            let guard = crate::Protected::enter();
            a.add_protected(&guard, 0, 40);
            a.add_protected(&guard, 2, 1);
        });
        assert_eq!((a.fetch(0), a.fetch(1), a.fetch(2)), (40, 0, 2));
        assert_eq!((a.cpu_slot(0, 2), a.cpu_slot(1, 2)), (Ok(0), Ok(2)));
        assert_eq!(
            format!("{a:?}"),
            format!(
                "CounterArray {{ offset: {}, values: [40, 0, 2] }}",
                a.offset()
            )
        );
    }
}
