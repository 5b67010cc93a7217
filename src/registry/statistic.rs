// SPDX-License-Identifier: BSD-2-Clause
//! [`Statistic`]: what a [`Registry`](super::Registry) can name, and the crate's three
//! statistics: a [`Counter`], an [`EarlyCounter`] and a [`CounterArray`].

use crate::array::CounterArray;
use crate::early::EarlyCounter;
use crate::{Counter, Zone};

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
    /// Where the values live when they are `len()` adjacent slots of one zone: the zone and
    /// the first slot's offset. Group reads
    /// ([`Registry::read_into`](super::Registry::read_into),
    /// [`Registry::snapshot`](super::Registry::snapshot)) then take them CPU by CPU together
    /// with the group's other slots. `None` (the default): the values are read one by one
    /// with [`value`](Statistic::value).
    ///
    /// A run that is not inside the zone makes the group read panic.
    fn slots(&self) -> Option<(&Zone<'_>, usize)> {
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
    fn slots(&self) -> Option<(&Zone<'_>, usize)> {
        Some((self.zone(), self.offset()))
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
    fn slots(&self) -> Option<(&Zone<'_>, usize)> {
        Some((self.zone(), self.offset()))
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
