// SPDX-License-Identifier: BSD-2-Clause
//! `counter_ratecheck`: an MP-safe events-per-second limit on a per-CPU counter.
//!
//! FreeBSD's contract (`sys/kern/subr_counter.c`): every call counts one event on the
//! current CPU. It returns 0 while the events of the current second are within `limit`, and
//! -1 once they are over it. The first call of a new second resets the count and returns
//! the count of the second before if that was over the limit (else 0). Exactly one CPU wins
//! the reset; a CPU that finds another one resetting skips its event and returns at once.

//!
//! [`CounterRate`] counts into an [`ApproxCounter`], so that a check compares this second's
//! count with the limit from the approximate value (one load) and sums every CPU only when
//! the count is within the counter's bound of the limit (see [`CounterRate::check`]). The C
//! API's `counter_ratecheck` keeps FreeBSD's `struct counter_rate` (a plain counter) and sums
//! on every check.

use crate::atomic::{AtomicI32, AtomicU32, Ordering};

use crate::{ApproxCounter, Counter, Error, Zone};

/// The counter a rate check counts into: one event, "is the count over the limit", and the
/// reset's lossless `fetch_and_zero`.
pub(crate) trait RateCount {
    /// Counts one event on the current CPU.
    fn add_one(&self);
    /// Whether the count since the last reset is over `limit`.
    fn over(&self, limit: i64) -> bool;
    /// The count since the last reset, zeroed as one step.
    fn fetch_and_zero(&self) -> u64;
}

/// A plain counter's slot (the C API's `struct counter_rate`): every check sums every CPU.
impl RateCount for (&Zone<'_>, usize) {
    fn add_one(&self) {
        // SAFETY: a live slot of the zone, per `RateState::check`'s caller.
        unsafe { self.0.add(self.1, 1) };
    }
    fn over(&self, limit: i64) -> bool {
        self.0.fetch(self.1) as i64 > limit
    }
    fn fetch_and_zero(&self) -> u64 {
        self.0.fetch_and_zero(self.1)
    }
}

/// An approximate counter: a check far below (or far above) the limit is one load.
impl RateCount for ApproxCounter<'_> {
    fn add_one(&self) {
        self.inc();
    }
    fn over(&self, limit: i64) -> bool {
        self.compare(limit) == core::cmp::Ordering::Greater
    }
    fn fetch_and_zero(&self) -> u64 {
        ApproxCounter::fetch_and_zero(self)
    }
}

/// The time source of a rate check: a tick count that wraps, and the ticks per second.
///
/// A kernel passes its tick counter (FreeBSD's `ticks` and `hz`) or a monotonic clock.
///
/// ```
/// use core::sync::atomic::{AtomicU32, Ordering};
/// use pcpu_counter::ratecheck::Clock;
///
/// static TICKS: AtomicU32 = AtomicU32::new(0);
/// fn ticks() -> u32 { TICKS.load(Ordering::Relaxed) }
/// let clock = Clock { now: ticks, hz: 100 };
/// TICKS.store(250, Ordering::Relaxed);
/// assert_eq!((clock.now)(), 250);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// The current tick count; it may wrap.
    pub now: fn() -> u32,
    /// Ticks per second (non-zero).
    pub hz: u32,
}

#[cfg(feature = "std")]
impl Clock {
    /// Milliseconds of `std::time::Instant` since the first use, 1000 per second.
    ///
    /// ```
    /// let clock = pcpu_counter::ratecheck::Clock::monotonic();
    /// assert_eq!(clock.hz, 1000);
    /// assert!((clock.now)() <= (clock.now)());
    /// ```
    pub fn monotonic() -> Clock {
        fn now() -> u32 {
            static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
            // Truncation is the wrap the tick arithmetic expects.
            START
                .get_or_init(std::time::Instant::now)
                .elapsed()
                .as_millis() as u32
        }
        Clock { now, hz: 1000 }
    }
}

/// The shared state of a rate check, laid out as FreeBSD's `struct counter_rate` after its
/// counter: `cr_lock`, `cr_ticks`, `cr_over`. 32-bit atomics only, so it works on i386
/// without CX8.
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct RateState {
    /// 1 while one CPU resets the second (`cr_lock`).
    pub(crate) lock: AtomicI32,
    /// Tick of the last reset (`cr_ticks`).
    pub(crate) ticks: AtomicU32,
    /// -1 once the current second went over the limit, else 0 (`cr_over`).
    pub(crate) over: AtomicI32,
}

impl RateState {
    pub(crate) const fn new() -> Self {
        RateState {
            lock: AtomicI32::new(0),
            ticks: AtomicU32::new(0),
            over: AtomicI32::new(0),
        }
    }

    /// One event at tick `now` with `hz` ticks per second; see the module docs.
    ///
    /// `count` is the counter of this second's events (for a `(zone, off)` pair, `off` is a
    /// live slot of `zone`).
    pub(crate) fn check(&self, count: &impl RateCount, now: u32, hz: u32, limit: i64) -> i64 {
        let mut val = i64::from(self.over.load(Ordering::Relaxed));
        if now.wrapping_sub(self.ticks.load(Ordering::Relaxed)) >= hz {
            // A new second. Try the cheap read first, then take the reset lock.
            let won = self.lock.load(Ordering::Relaxed) == 0
                && self
                    .lock
                    .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok();
            if !won {
                // Another CPU is resetting: counting now could race with its zero; skip.
                return val;
            }
            // Another CPU may have reset this second between our two reads.
            if now.wrapping_sub(self.ticks.load(Ordering::Relaxed)) >= hz {
                let last = count.fetch_and_zero() as i64;
                self.over.store(0, Ordering::Relaxed);
                self.ticks.store(now, Ordering::Relaxed);
                val = if last <= limit { 0 } else { last };
            }
            self.lock.store(0, Ordering::Release);
        }
        count.add_one();
        // This event's add, then the read below, in one total order with every other event's
        // (the fences'): the read sees every add whose fence came first (for an
        // `ApproxCounter`, the slot add and its carry, both before the fence), so at most
        // `limit` events of a second return 0. Without it two CPUs can each miss the other's
        // add still in its store buffer and both return 0 past the limit (the store-buffering
        // pattern; Miri's weak-memory emulation found it, tests/ratecheck.rs
        // `concurrent_events_within_a_second_are_all_counted`). The approximate value is at
        // most the bound under the count of those adds, so "not over" from it alone is as
        // safe as from the sum; a reset in flight (its baseline swapped, its subtraction
        // from the shared word not yet landed) can only make it read high.
        crate::atomic::fence(Ordering::SeqCst);
        if self.over.load(Ordering::Relaxed) != 0 {
            return -1;
        }
        if count.over(limit) {
            self.over.store(-1, Ordering::Relaxed);
            val = -1;
        }
        val
    }
}

/// FreeBSD's `struct counter_rate`: a per-CPU counter of this second's events (an
/// [`ApproxCounter`]), the reset state, and the clock that says when a second has passed.
///
/// A check reads the approximate count (one load) and sums every CPU only when the count is
/// within the counter's bound (`ncpus * (batch - 1)`) of the limit: in a second with `limit`
/// well above the bound, the checks that walk every CPU are at most those of the events
/// between `limit - bound` and the first one over the limit, after which the second's
/// `over` flag answers.
///
/// ```
/// use pcpu_counter::{ratecheck::{Clock, CounterRate}, sim::Machine};
/// use core::sync::atomic::{AtomicU32, Ordering};
///
/// static TICKS: AtomicU32 = AtomicU32::new(1000);
/// let clock = Clock { now: || TICKS.load(Ordering::Relaxed), hz: 100 };
/// let machine = Machine::new(2);
/// let rate = CounterRate::new(machine.alloc().unwrap(), clock).unwrap();
/// machine.run_on(0, || {
///     assert_eq!(rate.check(2), 0); // 1st event this second
///     assert_eq!(rate.check(2), 0); // 2nd
///     assert_eq!(rate.check(2), -1); // 3rd: over the limit
///     TICKS.store(1100, Ordering::Relaxed); // one second later
///     assert_eq!(rate.check(2), 3); // the last second's count, over the limit
///     assert_eq!(rate.check(2), 0);
/// });
/// ```
#[derive(Debug)]
pub struct CounterRate<'z> {
    rate: ApproxCounter<'z>,
    state: RateState,
    clock: Clock,
}

impl<'z> CounterRate<'z> {
    /// A rate check counting into `rate` (which should read 0) and timed by `clock`, with
    /// the approximate counter's [default batch](ApproxCounter::DEFAULT_BATCH). The
    /// approximate counter takes a second slot of `rate`'s zone: [`Error::ZoneFull`] when
    /// there is none (and `rate` is dropped).
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// let rate = pcpu_counter::ratecheck::CounterRate::new(
    ///     machine.alloc().unwrap(),
    ///     pcpu_counter::ratecheck::Clock::monotonic(),
    /// )
    /// .unwrap();
    /// assert_eq!(rate.counter().fetch(), 0);
    /// ```
    pub fn new(rate: Counter<'z>, clock: Clock) -> Result<Self, Error> {
        Self::with_batch(rate, clock, ApproxCounter::DEFAULT_BATCH)
    }

    /// [`new`](CounterRate::new) with the approximate counter's batch (a power of two from
    /// 16 to 2^32, else [`Error::BadBatch`]): pick it so that `ncpus * (batch - 1)` is well
    /// below the limits checked, and checks far below a limit never sum every CPU.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(4);
    /// use pcpu_counter::ratecheck::{Clock, CounterRate};
    /// let rate = CounterRate::with_batch(machine.alloc().unwrap(), Clock::monotonic(), 16).unwrap();
    /// assert_eq!(rate.counter().accuracy(), (4 * 15, 0));
    /// ```
    pub fn with_batch(rate: Counter<'z>, clock: Clock, batch: u64) -> Result<Self, Error> {
        Ok(CounterRate {
            rate: ApproxCounter::new(rate, batch)?,
            state: RateState::new(),
            clock,
        })
    }

    /// Counts one event now and checks it against `limit` events per second (FreeBSD's
    /// `counter_ratecheck(cr, limit)`): 0 under the limit, -1 over it, and at the first
    /// call of a new second the previous second's count if it was over the limit.
    ///
    /// Call it on a CPU (the counter's per-CPU register set), like any add.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// # let rate = pcpu_counter::ratecheck::CounterRate::new(machine.alloc().unwrap(), pcpu_counter::ratecheck::Clock::monotonic()).unwrap();
    /// // With a limit this high, no second of this doctest goes over it.
    /// machine.run_on(0, || assert_eq!(rate.check(1_000_000), 0));
    /// ```
    pub fn check(&self, limit: i64) -> i64 {
        self.check_at((self.clock.now)(), limit)
    }

    /// [`check`](CounterRate::check) at tick `now` instead of the clock's.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// # let rate = pcpu_counter::ratecheck::CounterRate::new(machine.alloc().unwrap(), pcpu_counter::ratecheck::Clock::monotonic()).unwrap();
    /// machine.run_on(0, || {
    ///     assert_eq!(rate.check_at(5000, 1), 0);
    ///     assert_eq!(rate.check_at(5001, 1), -1);
    ///     assert_eq!(rate.check_at(6000, 1), 2); // hz is 1000
    /// });
    /// ```
    pub fn check_at(&self, now: u32, limit: i64) -> i64 {
        self.state.check(&self.rate, now, self.clock.hz, limit)
    }

    /// The counter of this second's events (its [`fetch`](ApproxCounter::fetch) is the
    /// precise count).
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// # let rate = pcpu_counter::ratecheck::CounterRate::new(machine.alloc().unwrap(), pcpu_counter::ratecheck::Clock::monotonic()).unwrap();
    /// machine.run_on(0, || rate.check_at(7000, 10));
    /// assert_eq!(rate.counter().fetch(), 1);
    /// ```
    pub fn counter(&self) -> &ApproxCounter<'z> {
        &self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CPU that finds another one resetting skips its event and returns the second's
    /// state: -1 once it went over the limit (FreeBSD's `cr_over`).
    #[test]
    fn a_cpu_that_finds_a_reset_in_progress_skips_and_reports_over() {
        let machine = crate::sim::Machine::new(1);
        let c = machine.alloc().unwrap();
        let state = RateState::new();
        machine.run_on(0, || {
            assert_eq!(state.check(&(machine.zone(), c.offset()), 100, 100, 0), -1);
            state.lock.store(1, Ordering::Relaxed); // another CPU is resetting
            assert_eq!(state.check(&(machine.zone(), c.offset()), 200, 100, 0), -1);
            assert_eq!(c.fetch(), 1, "the skipped event is not counted");
            state.lock.store(0, Ordering::Relaxed);
            // The reset happens at the next call: the second held 1 event, within a limit of 5.
            assert_eq!(state.check(&(machine.zone(), c.offset()), 200, 100, 5), 0);
            assert_eq!(c.fetch(), 1, "the new second's first event");
        });
    }

    /// The monotonic clock's ticks are milliseconds: after a sleep of 5 ms (at least 5 ms, by
    /// `sleep`'s contract) it has advanced by at least 5.
    #[test]
    fn the_monotonic_clock_counts_milliseconds() {
        let clock = Clock::monotonic();
        assert_eq!(clock.hz, 1000);
        let before = (clock.now)();
        std::thread::sleep(core::time::Duration::from_millis(5));
        let elapsed = (clock.now)().wrapping_sub(before);
        assert!((5..1 << 31).contains(&elapsed), "{elapsed} ticks");
    }
}
