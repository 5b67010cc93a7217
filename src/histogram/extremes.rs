// SPDX-License-Identifier: BSD-2-Clause
//! The smallest and largest values observed: per-CPU high-water marks, raised with a
//! compare-and-swap, read as the extreme over CPUs, reset losslessly with a swap.

use crate::atomic::{AtomicU64, Ordering};
use crate::{platform, Error, Wait, Zone};

/// The smallest and largest `u64` observed, kept per CPU in two slots of a zone (16 bytes
/// per CPU) and read as the minimum and maximum over CPUs.
///
/// Each slot is a high-water mark: the maximum in one, the bitwise complement of the minimum
/// in the other, so both start at 0 (nothing observed) and only rise. A mark rises by a
/// compare-and-swap loop on the current CPU's slot, which is interrupt-safe and needs no
/// protection: a migration or an interrupt between the load and the swap makes the swap
/// fail and retry, and a swap that lands on the CPU the thread left is still a correct
/// mark, since any CPU's slot may hold any observation. The loop only swaps when the value
/// beats the mark, so after the first observations most observes are a load and a compare.
///
/// [`fetch_and_reset`](MinMax::fetch_and_reset) swaps every CPU's slots back to 0: each
/// observation lands before the swap (in the values it returns) or after (in the next),
/// never in neither or both.
///
/// Only where the target has 64-bit atomics (not on Cortex-M: `thumbv6m-none-eabi`,
/// `thumbv7em-none-eabihf`).
///
/// ```
/// use pcpu_counter::{histogram::MinMax, sim::Machine};
/// let machine = Machine::new(2);
/// let latency = MinMax::new(machine.zone()).unwrap();
/// machine.run_on(0, || latency.observe(40));
/// machine.run_on(1, || { latency.observe(7); latency.observe(90) });
/// assert_eq!((latency.min(), latency.max()), (Some(7), Some(90)));
/// assert_eq!(latency.fetch_and_reset(), (Some(7), Some(90)));
/// assert_eq!((latency.min(), latency.max()), (None, None));
/// ```
pub struct MinMax<'z> {
    zone: &'z Zone<'z>,
    /// The maximum's slot; the complement of the minimum is the next.
    off: usize,
}

impl<'z> MinMax<'z> {
    /// Allocates the two slots in `zone`, nothing observed. Fails with [`Error::ZoneFull`]
    /// when no run of two free slots exists.
    pub fn new(zone: &'z Zone<'z>) -> Result<Self, Error> {
        Self::alloc_with(zone, Wait::NoWait)
    }

    /// As [`new`](MinMax::new), in a zone that grows asking its chunk source with `wait`.
    pub fn alloc_with(zone: &'z Zone<'z>, wait: Wait) -> Result<Self, Error> {
        let off = zone.alloc_run(2, wait)?;
        Ok(MinMax { zone, off })
    }

    /// CPU `cpu`'s mark `mark` (0: the maximum, 1: the minimum's complement).
    fn mark(&self, cpu: usize, mark: usize) -> &AtomicU64 {
        let addr = self.zone.slot_addr(cpu, self.off + 8 * mark);
        // SAFETY: a slot of this run (live while `self` is) on a CPU of the zone: 8-byte
        // aligned, valid for the zone's life, and only ever accessed atomically while live
        // (the zone's plain stores clear it before the run is handed out).
        unsafe { AtomicU64::from_ptr(addr) }
    }

    /// Records `v` on the current CPU: raises its maximum mark to `v` and its minimum mark
    /// to `!v` where they are lower (two loads and compares; a compare-and-swap only for a
    /// new extreme of this CPU). The CPU is the platform's `current_cpu`, a placement hint
    /// only: the marks are correct on any CPU's slots.
    #[inline]
    pub fn observe(&self, v: u64) {
        let cpu = platform::current_cpu();
        raise(self.mark(cpu, 0), v);
        raise(self.mark(cpu, 1), !v);
    }

    /// The largest mark `mark` over every CPU.
    fn highest(&self, mark: usize) -> u64 {
        (0..self.zone.ncpus())
            .map(|cpu| self.mark(cpu, mark).load(Ordering::Relaxed))
            .max()
            .unwrap_or(0)
    }

    /// The largest value observed since the last reset, `None` if nothing was (or only 0:
    /// the maximum of nothing and of zeros both read as 0).
    pub fn max(&self) -> Option<u64> {
        Some(self.highest(0)).filter(|&m| m != 0)
    }

    /// The smallest value observed since the last reset, `None` if nothing was (or only
    /// `u64::MAX`).
    pub fn min(&self) -> Option<u64> {
        Some(!self.highest(1)).filter(|&m| m != u64::MAX)
    }

    /// The `(min, max)` observed since the last reset, each `None` when nothing was (see
    /// [`min`](MinMax::min) and [`max`](MinMax::max)), and a reset: each CPU's mark is
    /// swapped to 0, so every observation is in this result or the next, never lost and
    /// never in both, for the minimum and for the maximum each. The two marks are not one
    /// step together: an observe racing with the reset may be in this minimum and the next
    /// maximum (a result can then have a minimum and no maximum, or a minimum above the
    /// maximum).
    pub fn fetch_and_reset(&self) -> (Option<u64>, Option<u64>) {
        let (mut high, mut low_complement) = (0, 0);
        for cpu in 0..self.zone.ncpus() {
            high = high.max(self.mark(cpu, 0).swap(0, Ordering::Relaxed));
            low_complement = low_complement.max(self.mark(cpu, 1).swap(0, Ordering::Relaxed));
        }
        (
            Some(!low_complement).filter(|&m| m != u64::MAX),
            Some(high).filter(|&m| m != 0),
        )
    }

    /// The offset of the maximum's slot (the minimum's complement is the next).
    pub fn offset(&self) -> usize {
        self.off
    }
}

/// Raises `mark` to `v` if it is lower, with a compare-and-swap that retries while another
/// writer (an interrupt on this CPU, a thread that ran here before a migration, a reset)
/// moved it meanwhile.
#[inline]
fn raise(mark: &AtomicU64, v: u64) {
    let mut now = mark.load(Ordering::Relaxed);
    while v > now {
        match mark.compare_exchange_weak(now, v, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return,
            Err(moved) => now = moved,
        }
    }
}

impl Drop for MinMax<'_> {
    fn drop(&mut self) {
        self.zone.free_run(self.off, 2);
    }
}

impl core::fmt::Debug for MinMax<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MinMax")
            .field("min", &self.min())
            .field("max", &self.max())
            .finish()
    }
}
