// SPDX-License-Identifier: BSD-2-Clause
//! The global zone: the one per-CPU zone of a whole kernel, as FreeBSD has one, installed
//! once ([`install`]) and then reached from anywhere ([`global_zone`]). The FreeBSD names
//! ([`counter_u64_alloc`](crate::freebsd::counter_u64_alloc) and the rest) and the C API
//! allocate from it; `crate::freebsd` re-exports both functions under their documented paths.

use super::Zone;
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
