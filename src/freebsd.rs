// SPDX-License-Identifier: BSD-2-Clause
//! FreeBSD's counter(9) names, as `sys/sys/counter.h` spells them: `use
//! pcpu_counter::freebsd::*` and FreeBSD code reads the same.
//!
//! FreeBSD has one per-CPU zone for the whole kernel; a kernel here installs one with
//! [`install`] and then uses the `counter_u64_*` functions. Each is a thin wrapper over the
//! Rust types ([`Counter`], [`Protected`], [`CounterArray`], [`CounterRate`]); zones of one's
//! own ([`Zone::alloc`](crate::Zone::alloc)) work the same and report errors as values. The C header
//! `include/pcpu_counter.h` has the same names (feature `capi`).
//!
//! | FreeBSD | here |
//! |---|---|
//! | `counter_u64_t` | [`CounterU64`] (a [`Counter`] of the global zone) |
//! | `counter_u64_alloc(M_WAITOK)` / `(M_NOWAIT)` | [`counter_u64_alloc`]`(Wait::WaitOk)` / `(Wait::NoWait)` |
//! | `counter_u64_add`, `_fetch`, `_zero`, `_free` | [`counter_u64_add`], [`counter_u64_fetch`], [`counter_u64_zero`], [`counter_u64_free`] |
//! | `counter_enter()`, `counter_u64_add_protected`, `counter_exit()` | [`counter_enter`], [`counter_u64_add_protected`], [`counter_exit`] |
//! | `COUNTER_ARRAY_ALLOC(a, n, wait)` | [`counter_array_alloc`]`::<N>(wait)` |
//! | `counter_ratecheck(cr, limit)` | [`counter_ratecheck`] |
//! | `COUNTER_U64_DEFINE_EARLY(name)` | [`counter_u64_define_early!`]`(static NAME)` |

use crate::array::CounterArray;
// The macro is defined (`macro_export`, so at the crate root, hidden there) in `early`;
// this is its documented path.
#[doc(inline)]
pub use crate::counter_u64_define_early;
use crate::ratecheck::CounterRate;
use crate::{Counter, Protected};

// The global zone lives beside the zone (`src/zone/global.rs`); these are its documented
// paths.
use crate::zone::global::alloc_waiting;
pub use crate::zone::global::{global_zone, install};

/// How [`counter_u64_alloc`] behaves when the zone is full: FreeBSD's `M_NOWAIT` and
/// `M_WAITOK` (see [`counter_u64_alloc`]).
pub use crate::chunk::Wait;

/// FreeBSD's `counter_u64_t`: a counter of the global zone.
pub type CounterU64 = Counter<'static>;

/// FreeBSD's `counter_u64_alloc(flags)`: a new counter of the global zone, reading 0.
///
/// - A zone that grows ([`Zone::grow_from`](crate::Zone::grow_from)) takes a chunk from its source when it is full:
///   `Wait::WaitOk` asks the source with `wait` set (it may block until it has memory, as
///   FreeBSD's `M_WAITOK` sleeps in UMA), `Wait::NoWait` asks it not to block. `None` only
///   when the source says no (FreeBSD would sleep; here the source decides how long to wait,
///   and its refusal is final).
/// - A zone that does not grow fails at once when full with `Wait::NoWait`; with
///   `Wait::WaitOk` it waits for another CPU to free a counter (yielding the thread under
///   `std`, spinning without it): size such a zone for the worst case, or give it a source.
///
/// `None` also when no global zone is installed.
pub fn counter_u64_alloc(wait: Wait) -> Option<CounterU64> {
    let zone = global_zone().ok()?;
    alloc_waiting(wait, || zone.alloc_with(wait)).ok()
}

/// FreeBSD's `counter_u64_free(c)`: frees a counter; `None` (FreeBSD's NULL) is fine.
pub fn counter_u64_free<'z>(counter: impl Into<Option<Counter<'z>>>) {
    drop(counter.into())
}

/// FreeBSD's `counter_u64_add(c, v)`.
#[inline(always)]
pub fn counter_u64_add(counter: &Counter<'_>, v: i64) {
    counter.add(v)
}

/// FreeBSD's `counter_u64_fetch(c)`.
pub fn counter_u64_fetch(counter: &Counter<'_>) -> u64 {
    counter.fetch()
}

/// FreeBSD's `counter_u64_zero(c)`, lossless without an IPI rendezvous.
pub fn counter_u64_zero(counter: &Counter<'_>) {
    counter.zero()
}

/// FreeBSD's `counter_enter()`: enters local protection where the arch's add needs it.
#[inline(always)]
pub fn counter_enter() -> Protected {
    Protected::enter()
}

/// FreeBSD's `counter_exit()`: leaves the section `guard` proves.
#[inline(always)]
pub fn counter_exit(guard: Protected) {
    drop(guard)
}

/// FreeBSD's `counter_u64_add_protected(c, v)`, inside `counter_enter()`.
#[inline(always)]
pub fn counter_u64_add_protected(guard: &Protected, counter: &Counter<'_>, v: i64) {
    counter.add_protected(guard, v)
}

/// FreeBSD's `COUNTER_ARRAY_ALLOC(a, N, wait)` on the global zone: `N` counters in one run.
///
/// `Wait::NoWait` returns `None` at once when no run of `N` free slots exists; `Wait::WaitOk`
/// takes a chunk or waits, as [`counter_u64_alloc`] does. `None` also when no global zone is
/// installed, and when `N` is more than [`Zone::max_run`](crate::Zone::max_run) (a run that could never fit, which
/// `WaitOk` would wait for for ever). `COUNTER_ARRAY_FREE` is dropping the array, `COUNTER_ARRAY_ZERO`
/// is [`CounterArray::zero_all`], `COUNTER_ARRAY_COPY` is [`CounterArray::fetch_all`].
///
/// ```
/// // No global zone installed in this doctest:
/// use pcpu_counter::freebsd::{counter_array_alloc, Wait};
/// assert!(counter_array_alloc::<4>(Wait::NoWait).is_none());
/// ```
pub fn counter_array_alloc<const N: usize>(wait: Wait) -> Option<CounterArray<'static, N>> {
    let zone = global_zone().ok()?;
    if N > zone.max_run() {
        return None;
    }
    alloc_waiting(wait, || CounterArray::alloc_with(zone, wait)).ok()
}

/// FreeBSD's `counter_ratecheck(cr, limit)`: [`CounterRate::check`].
///
/// ```
/// # let machine = pcpu_counter::sim::Machine::new(1);
/// # let rate = pcpu_counter::ratecheck::CounterRate::new(machine.alloc().unwrap(), pcpu_counter::ratecheck::Clock::monotonic()).unwrap();
/// machine.run_on(0, || assert_eq!(pcpu_counter::freebsd::counter_ratecheck(&rate, 1_000_000), 0));
/// ```
pub fn counter_ratecheck(cr: &CounterRate<'_>, limit: i64) -> i64 {
    cr.check(limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ratecheck::Clock;
    use crate::sim::Machine;
    use core::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn counter_ratecheck_is_the_rate_check() {
        static TICKS: AtomicU32 = AtomicU32::new(500);
        let machine = Machine::new(1);
        let clock = Clock {
            now: || TICKS.load(Ordering::Relaxed),
            hz: 100,
        };
        let rate = CounterRate::new(machine.alloc().unwrap(), clock).unwrap();
        machine.run_on(0, || {
            assert_eq!(counter_ratecheck(&rate, 2), 0);
            assert_eq!(counter_ratecheck(&rate, 2), 0);
            assert_eq!(counter_ratecheck(&rate, 2), -1);
            TICKS.store(600, Ordering::Relaxed);
            assert_eq!(counter_ratecheck(&rate, 2), 3);
        });
    }
}
