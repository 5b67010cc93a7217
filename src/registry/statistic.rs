// SPDX-License-Identifier: BSD-2-Clause
//! [`Statistic`]: what a [`Registry`](super::Registry) can name, the [`Slots`] a group read
//! takes, and the crate's six statistics: a [`Counter`], an [`EarlyCounter`], a
//! [`CounterArray`], an [`ApproxCounter`], a per-CPU static ([`StaticCounter`]) and an array
//! of them ([`StaticArray`]).

use crate::array::CounterArray;
use crate::early::EarlyCounter;
use crate::statics::private::{StaticSlot, StaticSlots};
use crate::statics::{StaticArray, StaticCounter};
use crate::{ApproxCounter, Counter, Zone};

/// Adjacent slots of one zone that a group read takes together: a [`Counter`]'s slot or a
/// [`CounterArray`]'s run, and nothing else. Each of these slots, less its baseline, is the
/// whole of its counter's value, so a group zero (which moves the baselines alone) zeroes
/// the counter. A kind whose value is more than its slot cannot be named: an
/// [`ApproxCounter`]'s shared approximate total would stay behind when its slot was zeroed.
///
/// ```compile_fail,E0451
/// # use pcpu_counter::{registry::Slots, sim::Machine, ApproxCounter};
/// # let machine = Machine::new(1);
/// let c = ApproxCounter::new(machine.alloc().unwrap(), 16).unwrap();
/// let slots = Slots { zone: c.zone(), off: c.offset() }; // private fields: no such Slots
/// ```
#[derive(Clone, Copy)]
pub struct Slots<'s> {
    pub(crate) zone: &'s Zone<'s>,
    pub(crate) off: usize,
}

impl<'s> Slots<'s> {
    /// The slot of `counter`.
    pub fn counter(counter: &'s Counter<'_>) -> Self {
        Slots {
            zone: counter.zone(),
            off: counter.offset(),
        }
    }

    /// The run of `array`'s slots.
    pub fn array<const N: usize>(array: &'s CounterArray<'_, N>) -> Self {
        Slots {
            zone: array.zone(),
            off: array.offset(),
        }
    }
}

/// Something a registry can name: one counter or an array of them.
pub trait Statistic: Sync {
    /// Number of values (1 for a counter).
    fn len(&self) -> usize;
    /// Whether there are no values (never, for the crate's types).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Value `i` (below `len`).
    fn value(&self, i: usize) -> u64;
    /// Zeroes value `i` (below `len`).
    fn zero_value(&self, i: usize);
    /// Whether this is an array (its values are listed with their index).
    fn is_array(&self) -> bool {
        false
    }
    /// Where the values live when they are `len()` adjacent slots of one zone: a
    /// [`Counter`]'s or a [`CounterArray`]'s (see [`Slots`]). Group reads
    /// ([`Registry::read_into`](super::Registry::read_into),
    /// [`Registry::snapshot`](super::Registry::snapshot)) then take them CPU by CPU together
    /// with the group's other slots, and a group zero moves their baselines. `None` (the
    /// default): the values are read one by one with [`value`](Statistic::value) and taken
    /// with [`fetch_and_zero_value`](Statistic::fetch_and_zero_value).
    ///
    /// Fewer than `len()` slots from the first (a counter's slot named with a `len()` over 1)
    /// make the group read panic.
    fn slots(&self) -> Option<Slots<'_>> {
        None
    }
    /// Value `i`'s count since its last zero, zeroing it as one step (no add lost or counted
    /// twice). Only called for a statistic without [`slots`](Statistic::slots). The default
    /// reads, then zeroes: an add between the two is lost; override it where the values
    /// can be taken in one step.
    fn fetch_and_zero_value(&self, i: usize) -> u64 {
        let value = self.value(i);
        self.zero_value(i);
        value
    }
}

impl Statistic for Counter<'_> {
    fn len(&self) -> usize {
        1
    }
    fn value(&self, _i: usize) -> u64 {
        self.fetch()
    }
    fn zero_value(&self, _i: usize) {
        self.zero()
    }
    fn slots(&self) -> Option<Slots<'_>> {
        Some(Slots::counter(self))
    }
}

impl Statistic for EarlyCounter {
    fn len(&self) -> usize {
        1
    }
    fn value(&self, _i: usize) -> u64 {
        self.fetch()
    }
    /// Zeroes the per-CPU counter; an early counter not yet given a slot cannot be zeroed
    /// (its early word is only ever added to) and is left as it is.
    fn zero_value(&self, _i: usize) {
        if let Some(counter) = self.counter() {
            counter.zero()
        }
    }
    /// The per-CPU counter's `fetch_and_zero`; before `init` gives it a slot, the early
    /// count, left as it is (as `zero_value` leaves it), so it is reported again.
    fn fetch_and_zero_value(&self, _i: usize) -> u64 {
        match self.counter() {
            Some(counter) => counter.fetch_and_zero(),
            None => self.fetch(),
        }
    }
}

impl<const N: usize> Statistic for CounterArray<'_, N> {
    fn len(&self) -> usize {
        N
    }
    fn value(&self, i: usize) -> u64 {
        self.fetch(i)
    }
    fn zero_value(&self, i: usize) {
        self.zero(i)
    }
    fn is_array(&self) -> bool {
        true
    }
    fn slots(&self) -> Option<Slots<'_>> {
        Some(Slots::array(self))
    }
}

/// Read with [`precise`](ApproxCounter::precise) and taken with its own
/// [`fetch_and_zero`](ApproxCounter::fetch_and_zero), which moves the approximate total with
/// the count: a delta export keeps [`approximate`](ApproxCounter::approximate) within its
/// stated bound. It names no [`Slots`]: a group zero of its slot alone would leave the
/// approximate total behind.
impl Statistic for ApproxCounter<'_> {
    fn len(&self) -> usize {
        1
    }
    fn value(&self, _i: usize) -> u64 {
        self.precise()
    }
    fn zero_value(&self, _i: usize) {
        self.zero()
    }
    fn fetch_and_zero_value(&self, _i: usize) -> u64 {
        self.fetch_and_zero()
    }
}

/// A per-CPU static in a [`Registry`](super::Registry): one value, read one by one
/// (its slots are not a zone's) and taken with its own lossless `fetch_and_zero`.
impl<S: StaticSlot> Statistic for StaticCounter<S> {
    fn len(&self) -> usize {
        1
    }
    fn value(&self, _i: usize) -> u64 {
        self.fetch()
    }
    fn zero_value(&self, _i: usize) {
        self.zero()
    }
    fn fetch_and_zero_value(&self, _i: usize) -> u64 {
        self.fetch_and_zero()
    }
}

/// An array of per-CPU statics in a [`Registry`](super::Registry): `N` values,
/// listed with their index.
impl<S: StaticSlots, const N: usize> Statistic for StaticArray<S, N> {
    fn len(&self) -> usize {
        N
    }
    fn value(&self, i: usize) -> u64 {
        self.fetch(i)
    }
    fn zero_value(&self, i: usize) {
        self.fetch_and_zero(i);
    }
    fn is_array(&self) -> bool {
        true
    }
    fn fetch_and_zero_value(&self, i: usize) -> u64 {
        self.fetch_and_zero(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::fixture::Stats;

    /// A statistic of no values: the trait's default `is_empty` says so.
    struct Nothing;
    impl Statistic for Nothing {
        fn len(&self) -> usize {
            0
        }
        fn value(&self, _i: usize) -> u64 {
            unreachable!()
        }
        fn zero_value(&self, _i: usize) {}
    }

    #[test]
    fn each_statistic_has_its_length_kind_and_zero() {
        assert!(Nothing.is_empty());
        assert!(!Nothing.is_array());
        let s = Stats::new();
        let all: [(&dyn Statistic, usize, bool); 3] =
            [(&s.c, 1, false), (&s.a, 2, true), (&s.early, 1, false)];
        for (stat, len, array) in all {
            assert_eq!(
                (stat.len(), stat.is_empty(), stat.is_array()),
                (len, false, array)
            );
        }
        assert_eq!(s.early.value(0), 6);
        s.early.zero_value(0); // no slot yet: left as it is
        assert_eq!(s.early.fetch(), 6);
        s.machine
            .run_on(0, || s.early.init(s.machine.zone()))
            .unwrap();
        s.early.zero_value(0);
        assert_eq!(s.early.fetch(), 0);
        s.c.zero_value(0);
        s.a.zero_value(1);
        assert_eq!((s.c.fetch(), s.a.fetch(1)), (0, 0));
    }
}
