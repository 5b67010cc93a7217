//! `counter_enter` / `counter_exit`: paying for local protection once for several adds.
#![cfg(pcpu_kernel_api)]

use crate::arch;
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
    _protection: Option<Protection>,
}

impl Protected {
    /// Enters the protected section (FreeBSD's `counter_enter()`).
    #[inline(always)]
    pub fn enter() -> Self {
        Protected {
            _protection: arch::needs_protection().then(Protection::acquire),
        }
    }
}

impl Protected {
    /// Whether this section holds local protection (false where the arch's add needs none).
    pub fn holds_protection(&self) -> bool {
        self._protection.is_some()
    }
}

impl core::fmt::Debug for Protected {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Protected")
            .field("holds_protection", &self._protection.is_some())
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
