// SPDX-License-Identifier: BSD-2-Clause
//! Group reads: many counters read in one pass, CPU by CPU.
//!
//! A counter's `fetch` walks every CPU's block for one slot: one cache miss per CPU per
//! counter, although eight neighbouring slots of one CPU share a cache line. A group read
//! takes a whole group of slots (an array, a registry, a range of a zone) CPU by CPU instead,
//! reading each CPU's run of slots in order, so each cache line is fetched once for the
//! eight counters on it.
//!
//! The group `fetch_and_zero` keeps the single counter's protocol (see `baseline`): for each
//! slot, read its baseline before any of its slots, sum the slots, then move the baseline
//! from the value read to the sum with a compare-and-swap. A CAS that fails (a zero of the
//! same slot ran meanwhile) falls back to that slot's own `fetch_and_zero`, so every add is
//! in exactly one delta. The old baselines are held in a stack chunk of [`ZERO_CHUNK`]
//! values: a group of any size is taken in chunks, each in one pass over the CPUs.

use crate::zone::Zone;
use crate::{arch, baseline, Error};

/// Values a batch of a group read holds (the snapshot iterator's and the C walk's buffers).
pub(crate) const CHUNK: usize = 64;

/// Values of a group `fetch_and_zero` taken in one pass over the CPUs: their old baselines
/// live on the stack, 8 bytes each, and the C library's calls must fit a kernel's 4 KiB
/// stack (docs/c.md, "Stack use"). Two cache lines of slots per CPU.
pub(crate) const ZERO_CHUNK: usize = 16;

/// A run of `len` adjacent slots of `zone`, from offset `off`, or (`zone` is `None`) `len`
/// values the group engine leaves to its caller.
#[derive(Clone, Copy)]
pub(crate) struct Part<'z> {
    pub(crate) zone: Option<&'z Zone<'z>>,
    pub(crate) off: usize,
    pub(crate) len: usize,
}

impl<'z> Part<'z> {
    /// The run of `len` slots of `zone` from slot `first` of the run at `live`, a live
    /// counter's or array's; panics if it leaves the first blocks or the chunk `live` lies in
    /// (an implementation of [`Statistic::slots`](crate::registry::Statistic::slots) that
    /// names more slots than its counter has). No walk over the zone's chunks.
    ///
    /// # Safety
    /// `live` is a live slot of `zone` for the call.
    pub(crate) unsafe fn beside(zone: &'z Zone<'z>, live: usize, first: usize, len: usize) -> Self {
        let off = live.wrapping_add(first.wrapping_mul(8));
        // SAFETY: the caller's contract.
        if !unsafe { zone.run_beside(live, off, len) } {
            // Fixed text, no formatted `Error`: a C kernel's library links no `core::fmt`.
            panic!("pcpu-counter: group read of a run outside its zone (a Statistic::slots naming slots the zone does not have)");
        }
        Part {
            zone: Some(zone),
            off,
            len,
        }
    }

    /// The run of `len` slots of `zone` from `off`, which [`Zone::check_run`] accepted.
    fn checked(zone: &'z Zone<'z>, off: usize, len: usize) -> Self {
        Part {
            zone: Some(zone),
            off,
            len,
        }
    }

    /// `len` values the caller reads itself.
    pub(crate) fn other(len: usize) -> Self {
        Part {
            zone: None,
            off: 0,
            len,
        }
    }
}

/// Adds every CPU's slots of the parts' values in `lo..hi` (positions counted over all
/// parts) to `out[pos - lo]`, one cache line of slots at a time: for each line (up to 8
/// neighbouring slots), every CPU's copy of it read in order and summed in registers, so
/// that each CPU's line is fetched once for all the counters on it (a single `fetch` takes
/// one line per CPU for one counter).
fn add_slots(parts: &[Part<'_>], lo: usize, hi: usize, out: &mut [u64]) {
    let mut at = 0;
    for p in parts {
        let (start, from, to) = (at, at.max(lo), (at + p.len).min(hi));
        at += p.len;
        let Some(zone) = p.zone else { continue };
        let mut pos = from;
        while pos < to {
            let off = p.off + 8 * (pos - start);
            // Slots from `off` to the end of its cache line (blocks are 64-byte aligned in
            // every zone this crate makes; in any other, a block may span two lines).
            let n = slots_to_line_end(zone.slot_addr(0, off) as usize).min(to - pos);
            // `out` holds the values `lo..hi` (the callers size it so) and `pos + n <= hi`:
            // never `None`. No slice index here, nor anywhere on a group read's path: a
            // failed index would bring core's panic path (176 bytes on x86_64) onto the
            // stack of every group read (docs/c.md, "Stack use").
            let Some((first_sum, rest)) = out
                .get_mut(pos - lo..pos - lo + n)
                .and_then(|s| s.split_first_mut())
            else {
                return;
            };
            // First the line's first slot on every CPU: loads with little work between
            // them, so that the lines that miss are fetched together (many in flight), not
            // one CPU's line after another's; then the rest of each line, from the cache.
            let mut first = *first_sum;
            for cpu in 0..zone.ncpus() {
                // SAFETY: the run is inside the zone (as `Part` checked) and `cpu` is
                // below its CPU count: every address is a slot of the zone.
                first = first.wrapping_add(unsafe { arch::load_slot(zone.slot_addr(cpu, off)) });
            }
            *first_sum = first;
            if let Ok(line_sums) = <&mut [u64; 7]>::try_from(&mut *rest) {
                // A whole line: seven sums of a fixed-size array, which the compiler keeps in
                // registers (no copy in and out: a `memcpy` call would add its frame).
                for cpu in 0..zone.ncpus() {
                    let line = zone.slot_addr(cpu, off);
                    for (j, a) in line_sums.iter_mut().enumerate() {
                        // SAFETY: as above.
                        *a = a.wrapping_add(unsafe { arch::load_slot(line.wrapping_add(j + 1)) });
                    }
                }
            } else {
                for cpu in 0..zone.ncpus() {
                    let line = zone.slot_addr(cpu, off);
                    for (j, v) in rest.iter_mut().enumerate() {
                        // SAFETY: as above.
                        *v = v.wrapping_add(unsafe { arch::load_slot(line.wrapping_add(j + 1)) });
                    }
                }
            }
            pos += n;
        }
    }
}

/// The slots from the one at `addr` to the end of its 64-byte cache line: 1 to 8.
fn slots_to_line_end(addr: usize) -> usize {
    8 - (addr % 64) / 8
}

/// Calls `f(position, zone, slot offset)` for every slot value of the parts in `lo..hi`.
fn each_slot<'z>(
    parts: &[Part<'z>],
    lo: usize,
    hi: usize,
    mut f: impl FnMut(usize, &'z Zone<'z>, usize),
) {
    let mut at = 0;
    for p in parts {
        if let Some(zone) = p.zone {
            for pos in at.max(lo)..(at + p.len).min(hi) {
                f(pos, zone, p.off + 8 * (pos - at));
            }
        }
        at += p.len;
    }
}

/// The values of the parts' slots since their last zero, into `out[position]` (one per
/// value of every part; the positions of `other` parts are left as they are), in one pass
/// over the CPUs. Each value is what [`Zone::fetch`] would have read.
pub(crate) fn fetch(parts: &[Part<'_>], out: &mut [u64]) {
    let total: usize = parts.iter().map(|p| p.len).sum();
    // The callers' `out` holds `total` values; no slice index on this path (see `add_slots`).
    let total = total.min(out.len());
    // The baselines first, as `Zone::fetch` reads them: each value starts at minus its
    // baseline, and every CPU's slot is added to it.
    each_slot(parts, 0, total, |pos, zone, off| {
        if let Some(v) = out.get_mut(pos) {
            // SAFETY: the slot's own baseline word (`off` is a slot of `zone`).
            *v = 0u64.wrapping_sub(unsafe { baseline::load(zone.baseline(off)) });
        }
    });
    add_slots(parts, 0, total, out);
}

/// Takes the parts' slot values since their last zero into `out[position]` and zeroes them,
/// each as one step ([`Zone::fetch_and_zero`]): chunk by chunk of [`ZERO_CHUNK`] values, one
/// pass over the CPUs per chunk. Positions of `other` parts are left as they are.
pub(crate) fn fetch_and_zero(parts: &[Part<'_>], out: &mut [u64]) {
    let total: usize = parts.iter().map(|p| p.len).sum();
    let mut lo = 0;
    while lo < total {
        let hi = (lo + ZERO_CHUNK).min(total);
        let mut old = [0u64; ZERO_CHUNK];
        let sums = &mut out[lo..hi];
        // Each baseline is read before any slot of its counter: the delta is only adds made
        // since the sums that set it.
        each_slot(parts, lo, hi, |pos, zone, off| {
            // SAFETY: the slot's own baseline word.
            old[pos - lo] = unsafe { baseline::load(zone.baseline(off)) };
            sums[pos - lo] = 0;
        });
        add_slots(parts, lo, hi, sums);
        each_slot(parts, lo, hi, |pos, zone, off| {
            let (old, sum) = (old[pos - lo], sums[pos - lo]);
            // SAFETY: as above.
            sums[pos - lo] = if unsafe { baseline::replace(zone.baseline(off), old, sum) } {
                sum.wrapping_sub(old)
            } else {
                // Another zero of this slot moved its baseline after we read it: take this
                // one slot on its own, which retries until its baseline holds.
                zone.fetch_and_zero(off)
            };
        });
        lo = hi;
    }
}

impl Zone<'_> {
    /// Checks that the `len` slots from offset `off` are slots of this zone; an empty run
    /// (`len` 0) is a run of the zone when `off` is a slot of it.
    pub(crate) fn check_run(&self, off: usize, len: usize) -> Result<(), Error> {
        // A run of one slot at `off` is held exactly when `off` is a slot of the zone.
        match self.holds_run(off, len.max(1)) {
            true => Ok(()),
            false => Err(Error::NotInZone { offset: off, len }),
        }
    }

    /// The values of the `out.len()` adjacent slots from offset `off` (the slots of
    /// [`Counter::offset`](crate::Counter::offset)s `off`, `off + 8`, ...) since their last
    /// zero, into `out`, read in one pass: CPU by CPU, each CPU's run of slots in order. Each
    /// value is what that counter's `fetch` would read (and has the same consistency).
    ///
    /// Fails with [`Error::NotInZone`], reading nothing, if `off` or another slot of the range
    /// is not a slot of the zone. Slots not allocated read as whatever they last held. An empty
    /// `out` is a valid range, as an empty slice is: at a slot of the zone it reads nothing and
    /// returns `Ok(())`.
    ///
    /// ```
    /// use pcpu_counter::{array::CounterArray, sim::Machine};
    /// let machine = Machine::new(4);
    /// let a: CounterArray<'_, 3> = CounterArray::new(machine.zone()).unwrap();
    /// machine.run_on(3, || a.add(2, 7));
    /// let mut out = [0; 3];
    /// machine.zone().fetch_range(a.offset(), &mut out).unwrap();
    /// assert_eq!(out, [0, 0, 7]);
    /// ```
    pub fn fetch_range(&self, off: usize, out: &mut [u64]) -> Result<(), Error> {
        self.check_run(off, out.len())?;
        let len = out.len();
        fetch(&[Part::checked(self, off, len)], out);
        Ok(())
    }

    /// As [`fetch_range`](Zone::fetch_range), and zeroes each slot as one step with its read
    /// (see [`Counter::fetch_and_zero`](crate::Counter::fetch_and_zero)): the deltas that
    /// successive calls return add up, with a final fetch, to exactly every add made, and an
    /// add racing with the call is in this delta or the next, never both. No IPI and no
    /// write to any CPU's slot: 16 slots at a time in one pass over the CPUs.
    ///
    /// Fails with [`Error::NotInZone`], taking nothing, if `off` or another slot of the range
    /// is not a slot of the zone. An empty `out` at a slot of the zone takes nothing and
    /// returns `Ok(())`.
    ///
    /// ```
    /// use pcpu_counter::{array::CounterArray, sim::Machine};
    /// let machine = Machine::new(2);
    /// let a: CounterArray<'_, 2> = CounterArray::new(machine.zone()).unwrap();
    /// machine.run_on(1, || a.add(0, 5));
    /// let mut out = [0; 2];
    /// machine.zone().fetch_and_zero_range(a.offset(), &mut out).unwrap();
    /// assert_eq!((out, a.fetch(0)), ([5, 0], 0));
    /// ```
    pub fn fetch_and_zero_range(&self, off: usize, out: &mut [u64]) -> Result<(), Error> {
        self.check_run(off, out.len())?;
        let len = out.len();
        fetch_and_zero(&[Part::checked(self, off, len)], out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_run_of_slots_ends_at_the_cache_line() {
        let got: std::vec::Vec<usize> = (0..9)
            .map(|i| super::slots_to_line_end(0x1000 + 8 * i))
            .collect();
        assert_eq!(got, [8, 7, 6, 5, 4, 3, 2, 1, 8]);
    }
}
