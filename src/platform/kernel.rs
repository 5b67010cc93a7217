// SPDX-License-Identifier: BSD-2-Clause
//! The kernel's backend (a bare-metal target, or any target that is neither hosted nor the
//! simulation): every answer is a link-time hook that the final binary defines with
//! [`set_platform!`](crate::set_platform); local protection is the `critical-section` crate's,
//! or the kernel's own with feature `custom-protection`.

extern "Rust" {
    fn _pcpu_counter_0_1_current_cpu() -> usize;
    fn _pcpu_counter_0_1_cpu_base() -> usize;
    #[cfg(feature = "custom-protection")]
    fn _pcpu_counter_0_1_protect() -> usize;
    #[cfg(feature = "custom-protection")]
    fn _pcpu_counter_0_1_unprotect(state: usize);
}

/// The index of the CPU running the caller, from the kernel's `set_platform!`.
// Asked only by the C ABI's `counter_enter` and the bring-up check (the portable add asks
// `cpu_base`).
#[allow(dead_code)]
#[inline]
pub(crate) fn current_cpu() -> usize {
    // SAFETY: `set_platform!` defines it with the contract of `Platform::current_cpu`.
    unsafe { _pcpu_counter_0_1_current_cpu() }
}

/// The current CPU's per-CPU base where the add takes it from the platform, from the
/// kernel's `set_platform!` ([`Platform::cpu_base`](super::Platform::cpu_base)).
// Asked only by the portable fallback and the `platform-base` arches.
#[allow(dead_code)]
#[inline]
pub(crate) fn cpu_base() -> usize {
    // SAFETY: `set_platform!` defines it with the contract of `Platform::cpu_base`.
    unsafe { _pcpu_counter_0_1_cpu_base() }
}

/// A kernel's register is read by the arch (`arch::current_base`), not simulated.
#[inline(always)]
pub(crate) fn simulated_register() -> Option<usize> {
    None
}

/// Before every add: nothing to check (a kernel's one area is its register's).
#[inline(always)]
pub(crate) fn check_add(_area: &crate::area::Area) {}

/// Before every add to a per-CPU static: nothing to check (the statics' blocks are the
/// kernel's per-CPU blocks).
// Called only under the simulation (`statics::__check`).
#[allow(dead_code)]
#[inline(always)]
pub(crate) fn check_static_add(_area: usize) {}

/// Whether every zone gets an area of its own instead of the kernel's one area: no, a
/// kernel's CPUs have one per-CPU register each.
#[cfg(feature = "alloc")]
#[inline(always)]
pub(crate) const fn own_areas() -> bool {
    false
}

cfg_if::cfg_if! {
    if #[cfg(feature = "custom-protection")] {
        /// What leaving local protection needs: the kernel's `protect` result.
        pub(crate) type State = usize;

        /// Enters local protection through the kernel's `set_platform!`.
        pub(crate) fn acquire() -> State {
            // SAFETY: `set_platform!` defines it with the contract of `Platform::protect`.
            unsafe { _pcpu_counter_0_1_protect() }
        }

        /// Leaves local protection through the kernel's `set_platform!`.
        ///
        /// # Safety
        /// `state` is from the matching `acquire` on this CPU, released in LIFO order.
        pub(crate) unsafe fn release(state: State) {
            // SAFETY: `state` comes from the matching `acquire`, as `unprotect` requires.
            unsafe { _pcpu_counter_0_1_unprotect(state) }
        }
    } else {
        /// What leaving local protection needs: the `critical-section` crate's state.
        pub(crate) type State = critical_section::RestoreState;

        /// Enters local protection through the `critical-section` crate.
        pub(crate) fn acquire() -> State {
            // SAFETY: released by `release` in LIFO order, which is all `acquire` asks.
            unsafe { critical_section::acquire() }
        }

        /// Leaves local protection through the `critical-section` crate.
        ///
        /// # Safety
        /// `state` is from the matching `acquire`, released in LIFO order.
        pub(crate) unsafe fn release(state: State) {
            // SAFETY: `state` comes from the matching `acquire`.
            unsafe { critical_section::release(state) }
        }
    }
}
