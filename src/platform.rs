//! The hooks a kernel implements: the current CPU and local protection.
//!
//! The number of possible CPUs and where each CPU's block lies are given to the
//! [`Zone`](crate::Zone); each CPU's per-CPU register is set with
//! [`arch::set_cpu_base`](crate::arch::set_cpu_base) (or by the kernel itself). What is left
//! are two questions only the kernel can answer, asked only on some paths:
//!
//! | hook | asked by |
//! |---|---|
//! | [`Platform::current_cpu`] | the portable fallback (archs without a per-CPU register primitive) |
//! | [`Platform::protect`] / [`Platform::unprotect`] | [`counter_enter`](crate::freebsd::counter_enter), the i386 path without CX8, the portable fallback, and the baseline where 64-bit atomics are missing |
//!
//! Local protection defaults to the `critical-section` crate, which is correct as is on
//! single-core firmware and on any kernel whose `critical-section` implementation is global.
//! A kernel with a cheaper CPU-local one (preemption or interrupt disable) turns on the
//! `custom-protection` feature and names it with [`set_platform!`](crate::set_platform). The x86_64 and aarch64
//! add paths call no hook at all.
//!
//! With the `sim` feature the host simulation (the `sim` module) answers both hooks: the
//! current CPU is the simulated CPU the thread holds, and protection blocks simulated
//! interrupts.

/// A kernel's answers to the crate's questions, installed with [`set_platform!`](crate::set_platform).
///
/// # Safety
/// `current_cpu` must return the index of the CPU running the caller, below the zone's
/// `ncpus`, and the caller must not migrate while it holds protection. `protect` must keep
/// everything that may add to a counter on this CPU (preemption, interrupts whose handlers add)
/// from running until the matching `unprotect`; it must nest.
pub unsafe trait Platform {
    /// The index of the CPU running the caller.
    fn current_cpu() -> usize;
    /// Enters local protection and returns what `unprotect` needs to leave it.
    fn protect() -> usize;
    /// Leaves local protection.
    ///
    /// # Safety
    /// `state` is the value of the matching `protect` on this CPU, released in LIFO order.
    unsafe fn unprotect(state: usize);
}

/// Installs a [`Platform`] implementation, as `critical_section::set_impl!` does: it defines
/// the link-time symbols the crate calls. Use it once in the final binary.
///
/// ```ignore
/// struct Kernel;
/// unsafe impl pcpu_counter::Platform for Kernel {
///     fn current_cpu() -> usize { my_kernel::cpu_id() }
///     fn protect() -> usize { my_kernel::preempt_disable() }
///     unsafe fn unprotect(state: usize) { my_kernel::preempt_restore(state) }
/// }
/// pcpu_counter::set_platform!(Kernel);
/// ```
#[macro_export]
macro_rules! set_platform {
    ($t:ty) => {
        #[unsafe(no_mangle)]
        fn _pcpu_counter_current_cpu() -> usize {
            <$t as $crate::Platform>::current_cpu()
        }
        #[unsafe(no_mangle)]
        fn _pcpu_counter_protect() -> usize {
            <$t as $crate::Platform>::protect()
        }
        #[unsafe(no_mangle)]
        unsafe fn _pcpu_counter_unprotect(state: usize) {
            // SAFETY: the crate pairs every call with its `protect`, in LIFO order.
            unsafe { <$t as $crate::Platform>::unprotect(state) }
        }
    };
}

#[cfg(not(feature = "sim"))]
extern "Rust" {
    fn _pcpu_counter_current_cpu() -> usize;
    #[cfg(feature = "custom-protection")]
    fn _pcpu_counter_protect() -> usize;
    #[cfg(feature = "custom-protection")]
    fn _pcpu_counter_unprotect(state: usize);
}

/// The index of the CPU running the caller, from the platform.
#[allow(dead_code)] // Only the portable fallback asks.
#[inline]
pub(crate) fn current_cpu() -> usize {
    cfg_if::cfg_if! {
        if #[cfg(feature = "sim")] {
            crate::sim::current_cpu()
        } else {
            // SAFETY: `set_platform!` defines it with the contract of `Platform::current_cpu`.
            unsafe { _pcpu_counter_current_cpu() }
        }
    }
}

cfg_if::cfg_if! {
    if #[cfg(feature = "sim")] {
        type State = crate::sim::ProtectState;

        fn acquire() -> State {
            crate::sim::protect()
        }

        unsafe fn release(state: State) {
            // SAFETY: `state` comes from the matching `acquire`, as `unprotect` requires.
            unsafe { crate::sim::unprotect(state) }
        }
    } else if #[cfg(feature = "custom-protection")] {
        type State = usize;

        fn acquire() -> State {
            // SAFETY: `set_platform!` defines it with the contract of `Platform::protect`.
            unsafe { _pcpu_counter_protect() }
        }

        unsafe fn release(state: State) {
            // SAFETY: `state` comes from the matching `acquire`, as `unprotect` requires.
            unsafe { _pcpu_counter_unprotect(state) }
        }
    } else {
        type State = critical_section::RestoreState;

        fn acquire() -> State {
            // SAFETY: released by `release` in LIFO order, which is all `acquire` asks.
            unsafe { critical_section::acquire() }
        }

        unsafe fn release(state: State) {
            // SAFETY: `state` comes from the matching `acquire`.
            unsafe { critical_section::release(state) }
        }
    }
}

/// Local protection held until drop. Not `Send`: protection belongs to one CPU.
pub(crate) struct Protection {
    state: State,
    _cpu_local: core::marker::PhantomData<*mut ()>,
}

impl Protection {
    /// Enters local protection.
    #[inline]
    pub(crate) fn acquire() -> Self {
        Protection {
            state: acquire(),
            _cpu_local: core::marker::PhantomData,
        }
    }
}

impl Drop for Protection {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the state came from `acquire` in `Protection::acquire`, and guards are
        // dropped in LIFO order because they cannot leave the scope (or thread) that made them.
        unsafe { release(self.state) }
    }
}

#[cfg(test)]
mod tests {
    /// The platform's current CPU is the CPU the thread runs on (the simulated CPU here).
    #[test]
    fn current_cpu_is_the_running_cpu() {
        let machine = crate::sim::Machine::new(4);
        for cpu in [3, 0, 2] {
            assert_eq!(machine.run_on(cpu, super::current_cpu), cpu);
        }
    }
}
