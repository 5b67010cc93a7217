// SPDX-License-Identifier: BSD-2-Clause
//! The counter handle: add, fetch, zero.

use crate::protect::Protected;
use crate::zone::Zone;
use crate::{Error, Wait};

/// A per-CPU 64-bit counter: one private 8-byte slot on every CPU of its zone.
///
/// [`add`](Counter::add) touches only the current CPU's slot, with no lock prefix and no
/// shared cache line; [`fetch`](Counter::fetch) sums every CPU's slot. Dropping the handle
/// frees the slot.
///
/// # Consistency
/// `fetch` is not a snapshot at one instant: it reads the CPUs' slots one after another. It
/// counts every add that completed before it started and none that started after it returned;
/// an add that overlaps it is counted or not, once. Values wrap modulo 2^64, so a negative
/// running total reads as a large `u64` (cast it to `i64`).
///
/// `zero` and `fetch_and_zero` are lossless without IPIs: they record the sum at that moment
/// as the counter's baseline instead of writing other CPUs' slots, and `fetch` reports the sum
/// minus the baseline. An add racing with a zero is counted before it or after it, never lost
/// and never twice; the deltas that successive `fetch_and_zero` calls return add up, with the
/// final `fetch`, to exactly every add made.
///
/// # Setup
/// Before a CPU adds, its per-CPU register must hold
/// [`Zone::cpu_base`] for that CPU (see [`arch::set_cpu_base`](crate::arch::set_cpu_base)).
pub struct Counter<'z> {
    zone: &'z Zone<'z>,
    off: usize,
}

// Two words in every build, with or without the host simulation.
const _: () = assert!(core::mem::size_of::<Counter<'_>>() == 2 * core::mem::size_of::<usize>());

impl Zone<'_> {
    /// Allocates a counter that reads 0: [`alloc_with`](Zone::alloc_with)`(Wait::NoWait)`.
    ///
    /// Fails with [`Error::ZoneFull`] when every slot is in use and the zone does not grow;
    /// nothing changes then.
    pub fn alloc(&self) -> Result<Counter<'_>, Error> {
        self.alloc_with(Wait::NoWait)
    }

    /// Allocates a counter that reads 0; when every slot is in use, a zone that grows
    /// ([`grow_from`](Zone::grow_from)) takes a chunk from its source, asked with `wait`.
    ///
    /// Fails, with nothing changed, with [`Error::ZoneFull`] when the zone is full and does not
    /// grow (whatever `wait`: [`counter_u64_alloc`](crate::freebsd::counter_u64_alloc) is the
    /// call that waits for a free), and [`Error::OutOfMemory`] when its source has no chunk.
    pub fn alloc_with(&self, wait: Wait) -> Result<Counter<'_>, Error> {
        let off = self.alloc_run(1, wait)?;
        // SAFETY: the slot at `off` was just allocated and cleared, and is owned by the counter.
        Ok(unsafe { Counter::from_slot(self, off) })
    }
}

impl<'z> Counter<'z> {
    /// Wraps an allocated, cleared slot.
    ///
    /// # Safety
    /// `off` is a slot of `zone` that was just allocated and cleared, owned by nothing else.
    pub(crate) unsafe fn from_slot(zone: &'z Zone<'z>, off: usize) -> Self {
        Counter { zone, off }
    }

    /// Adds `v` (which may be negative) to this CPU's slot.
    ///
    /// On x86_64 this is one `add qword ptr gs:[off], v`: an interrupt or a migration cannot
    /// fall inside it, so it needs no protection. Under the host simulation it is preceded by
    /// a check that the thread holds a CPU of the counter's machine (see the `sim` module,
    /// feature `sim`).
    #[inline(always)]
    pub fn add(&self, v: i64) {
        // SAFETY: `off` is this counter's live slot; per-CPU registers are the platform's
        // setup contract (see the type's docs).
        unsafe { self.zone.add(self.off, v) }
    }

    /// Adds `v` to this CPU's slot and returns how many multiples of 16 the slot crossed (see
    /// `arch::add_crossings16`): the approximate counter's add.
    #[inline(always)]
    pub(crate) fn add_crossings16(&self, v: i64) -> u64 {
        // SAFETY: as in `add`.
        unsafe { self.zone.add_crossings16(self.off, v) }
    }

    /// Adds 1: on x86_64 one `add qword ptr gs:[off], 1`, an immediate operand.
    #[inline(always)]
    pub fn inc(&self) {
        // SAFETY: as in `add`.
        unsafe { self.zone.inc(self.off) }
    }

    /// Adds `v` inside a protected section (FreeBSD's `counter_u64_add_protected`).
    #[inline(always)]
    pub fn add_protected(&self, _guard: &Protected, v: i64) {
        // SAFETY: as in `add`; `_guard` proves the section is protected where needed.
        unsafe { self.zone.add_protected(self.off, v) }
    }

    /// The sum over all CPUs since the last zero (see the type's consistency notes).
    pub fn fetch(&self) -> u64 {
        self.zone.fetch(self.off)
    }

    /// Resets the counter to 0 without writing any CPU's slot.
    pub fn zero(&self) {
        self.fetch_and_zero();
    }

    /// Returns the count since the last zero and zeroes it, as one step: no add is lost
    /// between the two and none is counted twice.
    pub fn fetch_and_zero(&self) -> u64 {
        self.zone.fetch_and_zero(self.off)
    }

    /// The raw value of this counter's slot on CPU `cpu` (not adjusted by zeroes).
    pub fn cpu_slot(&self, cpu: usize) -> Result<u64, Error> {
        self.zone.slot_value(cpu, self.off)
    }

    /// The slot's offset from every CPU's per-CPU register value: the counter's identity in
    /// its area (and its C `counter_u64_t`).
    pub fn offset(&self) -> usize {
        self.off
    }

    /// The zone the counter lives in.
    pub fn zone(&self) -> &'z Zone<'z> {
        self.zone
    }
}

impl Drop for Counter<'_> {
    fn drop(&mut self) {
        self.zone.free_run(self.off, 1);
    }
}

impl core::fmt::Debug for Counter<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Counter")
            .field("offset", &self.off)
            .field("value", &self.fetch())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::sim::Machine;
    use std::format;

    #[test]
    fn debug_shows_the_offset_and_the_value() {
        let machine = Machine::new(2);
        let c = machine.alloc().unwrap();
        machine.run_on(1, || c.add(5));
        assert_eq!(
            format!("{c:?}"),
            format!("Counter {{ offset: {}, value: 5 }}", c.offset())
        );
    }
}
