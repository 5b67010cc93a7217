//! The global zone and FreeBSD's counter(9) names.
//!
//! FreeBSD has one per-CPU zone for the whole kernel; a kernel here installs one with
//! [`install`] and then uses the `counter_u64_*` functions, exactly as in `sys/sys/counter.h`.
//! Zones of its own ([`Zone::alloc`]) work the same and report errors as values.

use crate::{Counter, Error, Zone};

static GLOBAL: spin::Once<Zone<'static>> = spin::Once::new();

/// Makes `zone` the global zone behind [`counter_u64_alloc`]. Once only: a second call
/// returns [`Error::AlreadyInstalled`] and drops the zone it was given.
pub fn install(zone: Zone<'static>) -> Result<&'static Zone<'static>, Error> {
    let mut offered = Some(zone);
    let installed = GLOBAL.call_once(|| offered.take().expect("offered once"));
    match offered {
        None => Ok(installed),
        Some(_) => Err(Error::AlreadyInstalled),
    }
}

/// The global zone, once installed.
pub fn global_zone() -> Result<&'static Zone<'static>, Error> {
    GLOBAL.get().ok_or(Error::NotInstalled)
}

/// How [`counter_u64_alloc`] behaves when the zone is full (FreeBSD's `M_NOWAIT`/`M_WAITOK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Return `None` at once when the zone is full (`M_NOWAIT`).
    NoWait,
    /// Never fail for want of a slot (`M_WAITOK`): when the zone is full, spin (yield, under
    /// `std`) until another CPU frees a counter. A zone never grows, so a zone that is full
    /// for good hangs the caller: size the zone for the worst case, or use `NoWait` (or
    /// [`Zone::alloc`], which says why) where full must be handled. Returns `None` only when
    /// no global zone is installed.
    WaitOk,
}

/// FreeBSD's `counter_u64_t`: a counter of the global zone.
pub type CounterU64 = Counter<'static>;

/// FreeBSD's `counter_u64_alloc(flags)`: a new counter of the global zone, reading 0.
pub fn counter_u64_alloc(wait: Wait) -> Option<CounterU64> {
    let zone = global_zone().ok()?;
    loop {
        match (zone.alloc(), wait) {
            (Ok(counter), _) => return Some(counter),
            (Err(_), Wait::NoWait) => return None,
            (Err(_), Wait::WaitOk) => {
                #[cfg(feature = "std")]
                std::thread::yield_now();
                #[cfg(not(feature = "std"))]
                core::hint::spin_loop();
            }
        }
    }
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
