// SPDX-License-Identifier: BSD-2-Clause
//! The registry's unit tests' fixture: one statistic of each kind, with values, and a
//! registry that names them.

use super::Registry;
use crate::array::CounterArray;
use crate::early::EarlyCounter;
use crate::sim::{machine_for_ever, Machine};
use crate::Counter;

/// On a 2-CPU machine: a counter `c` at 3, an array `a` at `[0, 4]` (both added on CPU 1)
/// and an early counter `early` at 6, not yet given a slot.
pub(super) struct Stats {
    pub(super) machine: &'static Machine,
    pub(super) c: Counter<'static>,
    pub(super) a: CounterArray<'static, 2>,
    pub(super) early: EarlyCounter,
}

impl Stats {
    pub(super) fn new() -> Self {
        let machine = machine_for_ever(2);
        let c = machine.alloc().unwrap();
        let a = CounterArray::new(machine.zone()).unwrap();
        let early = EarlyCounter::new();
        early.add(6);
        machine.run_on(1, || {
            c.add(3);
            a.add(1, 4);
        });
        Stats {
            machine,
            c,
            a,
            early,
        }
    }

    /// A registry of the three, in this order: "c", "a" and "e".
    pub(super) fn registry(&self) -> Registry<'_, 3> {
        let stats = Registry::new();
        stats.register("c", "a counter", &self.c).unwrap();
        stats.register("a", "an array", &self.a).unwrap();
        stats
            .register("e", "an early counter", &self.early)
            .unwrap();
        stats
    }
}
