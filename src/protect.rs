// SPDX-License-Identifier: BSD-2-Clause
//! `counter_enter` / `counter_exit`: paying for local protection once for several adds.

use crate::arch;
#[cfg(not(pcpu_unprotected_add))]
use crate::platform::Protection;

/// Proof that the caller is inside `counter_enter()`; dropping it is `counter_exit()`.
///
/// [`Counter::add_protected`](crate::Counter::add_protected) takes it, so a protected add outside a protected section does
/// not compile. It is not `Send`: the protection belongs to the CPU that entered it. Where the
/// arch's add needs no protection (x86_64, aarch64, i386 with CX8) it holds nothing and costs
/// nothing. Guards that nest must be dropped in reverse order of creation.
///
/// ```
/// # let machine = pcpu_counter::sim::Machine::new(2);
/// # let (packets, bytes) = (machine.alloc().unwrap(), machine.alloc().unwrap());
/// # machine.run_on(1, || {
/// let guard = pcpu_counter::freebsd::counter_enter();
/// packets.add_protected(&guard, 1);
/// bytes.add_protected(&guard, 1500);
/// pcpu_counter::freebsd::counter_exit(guard);
/// # });
/// # assert_eq!((packets.fetch(), bytes.fetch()), (1, 1500));
/// ```
#[must_use = "dropping the guard ends the protected section at once"]
pub struct Protected {
    /// Where the arch's add needs no protection (x86_64, aarch64, riscv64) the guard holds
    /// nothing at all: it is zero-sized, and no protection hook is linked, in debug builds
    /// too.
    #[cfg(not(pcpu_unprotected_add))]
    protection: Option<Protection>,
    _cpu_local: core::marker::PhantomData<*mut ()>,
}

impl Protected {
    /// Enters the protected section (FreeBSD's `counter_enter()`).
    #[inline(always)]
    pub fn enter() -> Self {
        // Where the build says the add needs no protection (`pcpu_unprotected_add`), the arch
        // agrees and the guard is zero-sized: checked when the crate compiles.
        #[cfg(pcpu_unprotected_add)]
        const {
            assert!(!arch::needs_protection() && core::mem::size_of::<Protected>() == 0)
        };
        Protected {
            #[cfg(not(pcpu_unprotected_add))]
            protection: arch::needs_protection().then(Protection::acquire),
            _cpu_local: core::marker::PhantomData,
        }
    }

    /// Whether this section holds local protection (false where the arch's add needs none).
    pub fn holds_protection(&self) -> bool {
        #[cfg(not(pcpu_unprotected_add))]
        return self.protection.is_some();
        #[cfg(pcpu_unprotected_add)]
        false
    }
}

impl core::fmt::Debug for Protected {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Protected")
            .field("holds_protection", &self.holds_protection())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guard holds local protection exactly where the arch's add needs it (never on
    /// x86_64), and says so in its `Debug`.
    #[test]
    fn holds_protection_where_the_add_needs_it() {
        let machine = crate::sim::Machine::new(1);
        let (holds, debug) = machine.run_on(0, || {
            let guard = Protected::enter();
            (guard.holds_protection(), std::format!("{guard:?}"))
        });
        assert_eq!(holds, arch::needs_protection());
        #[cfg(target_arch = "x86_64")]
        assert!(!holds, "x86_64's one-instruction add needs no protection");
        assert_eq!(
            debug,
            std::format!("Protected {{ holds_protection: {holds} }}")
        );
    }
}
