// SPDX-License-Identifier: BSD-2-Clause
//! The global zone: the one per-CPU zone of a whole kernel, as FreeBSD has one, installed
//! once ([`install`]) and then reached from anywhere ([`global_zone`]). The FreeBSD names
//! ([`counter_u64_alloc`](crate::freebsd::counter_u64_alloc) and the rest) and the C API
//! allocate from it, waiting for a free slot as FreeBSD's `M_WAITOK` does ([`alloc_waiting`]);
//! `crate::freebsd` re-exports both functions under their documented paths.

use super::Zone;
use crate::chunk::Wait;
use crate::Error;

static GLOBAL: spin::Once<Zone<'static>> = spin::Once::new();

/// Makes `zone` the global zone behind [`counter_u64_alloc`](crate::freebsd::counter_u64_alloc).
/// Once only: a second call returns [`Error::AlreadyInstalled`] and drops the zone it was given.
pub fn install(zone: Zone<'static>) -> Result<&'static Zone<'static>, Error> {
    let mut offered = Some(zone);
    // A literal panic, not `expect`: `expect` would link `core::fmt` into C kernels' library.
    let installed = GLOBAL.call_once(|| match offered.take() {
        Some(zone) => zone,
        None => panic!("pcpu-counter: install's zone offered twice"),
    });
    match offered {
        None => Ok(installed),
        Some(_) => Err(Error::AlreadyInstalled),
    }
}

/// The global zone, once installed.
pub fn global_zone() -> Result<&'static Zone<'static>, Error> {
    GLOBAL.get().ok_or(Error::NotInstalled)
}

/// Runs `attempt` (an allocation) until it succeeds or fails for another reason than a full
/// zone that does not grow, or once with `Wait::NoWait`: FreeBSD's `M_WAITOK` loop, which
/// yields the thread under `std` and spins without it. The FreeBSD names and the C API
/// allocate through it.
pub(crate) fn alloc_waiting<T>(
    wait: Wait,
    mut attempt: impl FnMut() -> Result<T, Error>,
) -> Result<T, Error> {
    loop {
        match (attempt(), wait) {
            (Err(Error::ZoneFull { .. }), Wait::WaitOk) => {
                #[cfg(feature = "std")]
                std::thread::yield_now();
                #[cfg(not(feature = "std"))]
                core::hint::spin_loop();
            }
            (done, _) => return done,
        }
    }
}
