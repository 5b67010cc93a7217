// SPDX-License-Identifier: BSD-2-Clause
//! The hooks a kernel implements: the current CPU and local protection.
//!
//! The number of possible CPUs and where each CPU's block lies are given to the
//! [`Zone`](crate::Zone); each CPU's per-CPU register is set with
//! [`arch::set_cpu_base`](crate::arch::set_cpu_base) (or by the kernel itself). What is left
//! are the questions only the kernel can answer, asked only on some paths:
//!
//! | hook | asked by |
//! |---|---|
//! | [`Platform::current_cpu`] | the portable fallback (archs without a per-CPU register primitive) |
//! | [`Platform::cpu_base`] (provided: from `current_cpu` and `Area::global()`) | the portable fallback, and aarch64/riscv64 with feature `platform-base` |
//! | [`Platform::protect`] / [`Platform::unprotect`] | [`counter_enter`](crate::freebsd::counter_enter), the i386 path without CX8, the portable fallback, and the baseline where 64-bit atomics are missing |
//!
//! Local protection defaults to the `critical-section` crate, which is correct as is on
//! single-core firmware and on any kernel whose `critical-section` implementation is global.
//! A kernel with a cheaper CPU-local one (preemption or interrupt disable) turns on the
//! `custom-protection` feature and names it with [`set_platform!`](crate::set_platform). The x86_64 and aarch64
//! add paths call no hook at all.
//!
//! The hook symbols carry the crate's ABI version (`_pcpu_counter_0_1_*`, as
//! `critical-section` names its `_critical_section_1_0_*`), so that two incompatible versions
//! of the crate can live in one binary.
//!
//! With the `sim` feature the host simulation (the `sim` module) answers instead, through this
//! module alone (the crate's one seam for it): the current CPU is the simulated CPU the thread
//! holds, protection blocks simulated interrupts, and each add first checks that the thread
//! holds a CPU of the counter's machine.

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
    /// The running CPU's per-CPU base, asked on every add where the add takes the base from
    /// the platform instead of a register: the portable fallback (archs without a per-CPU
    /// register primitive), and aarch64 and riscv64 with feature `platform-base` (a kernel
    /// that cannot give the crate `TPIDR_EL1`, `tp` or `gp`). It must be the value
    /// [`Zone::cpu_base`](crate::Zone::cpu_base) gives for the running CPU.
    ///
    /// The default is the register value of [`current_cpu`](Platform::current_cpu) in the
    /// kernel's one area ([`Area::register`](crate::Area::register) of
    /// [`Area::global`](crate::Area::global)); it panics, naming the CPU, while no zone lives
    /// or when the CPU is out of range.
    fn cpu_base() -> usize {
        global_cpu_base(Self::current_cpu())
    }
}

/// CPU `cpu`'s register value in the kernel's one area: [`Platform::cpu_base`]'s default.
/// The panic is fixed text, not formatted: a C kernel's library links no `core::fmt` for it.
fn global_cpu_base(cpu: usize) -> usize {
    match crate::area::Area::global().register(cpu) {
        Ok(base) => base,
        Err(_) => panic!(
            "pcpu-counter: an add on a CPU whose index the zone does not have, or before any \
             zone exists"
        ),
    }
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
        fn _pcpu_counter_0_1_current_cpu() -> usize {
            <$t as $crate::Platform>::current_cpu()
        }
        #[unsafe(no_mangle)]
        fn _pcpu_counter_0_1_cpu_base() -> usize {
            <$t as $crate::Platform>::cpu_base()
        }
        #[unsafe(no_mangle)]
        fn _pcpu_counter_0_1_protect() -> usize {
            <$t as $crate::Platform>::protect()
        }
        #[unsafe(no_mangle)]
        unsafe fn _pcpu_counter_0_1_unprotect(state: usize) {
            // SAFETY: the crate pairs every call with its `protect`, in LIFO order.
            unsafe { <$t as $crate::Platform>::unprotect(state) }
        }
    };
}

cfg_if::cfg_if! {
    if #[cfg(pcpu_hosted_cpus)] {
        // The one seam of the host simulation (feature `sim`): its CPUs are threads, and it
        // answers every question of this module from `src/sim/host.rs`, inline. Nothing
        // else in the product names the simulation.
        pub(crate) use crate::sim::host::{check_add, check_static_add, own_areas};
        // Asked only where the arch takes the base from the platform, and by the C ABI.
        #[allow(unused_imports)]
        pub(crate) use crate::sim::host::{cpu_base, current_cpu};
        use crate::sim::host::{protect as acquire, unprotect as release, ProtectState as State};

        /// What the bound CPU's per-CPU register holds, for the bring-up check: the
        /// simulation's record of it (`host::cpu_base`), set with the register itself.
        pub(crate) fn simulated_register() -> Option<usize> {
            Some(cpu_base())
        }
    } else if #[cfg(pcpu_no_cpu_register)] {
        // A hosted program without the simulation: its threads have no per-CPU register, so
        // no zone can be made (`Error::NoCpuRegister`) and no add runs. Nothing here is asked
        // for an add; local protection has nothing to protect (early counters add to an
        // atomic word), and no kernel hook is linked.
        #[cold]
        fn no_cpu_register() -> ! {
            panic!("pcpu-counter: {}", crate::Error::NoCpuRegister)
        }

        /// No CPU index exists for an ordinary thread.
        #[allow(dead_code)]
        pub(crate) fn current_cpu() -> usize {
            no_cpu_register()
        }

        /// No per-CPU base exists for an ordinary thread.
        #[allow(dead_code)]
        pub(crate) fn cpu_base() -> usize {
            no_cpu_register()
        }

        /// The arch's register is read directly (there is none here: no zone is made).
        pub(crate) fn simulated_register() -> Option<usize> {
            None
        }

        type State = ();

        fn acquire() -> State {}

        /// # Safety
        /// None needed.
        unsafe fn release(_state: State) {}
    } else {
        extern "Rust" {
            fn _pcpu_counter_0_1_current_cpu() -> usize;
            fn _pcpu_counter_0_1_cpu_base() -> usize;
            #[cfg(feature = "custom-protection")]
            fn _pcpu_counter_0_1_protect() -> usize;
            #[cfg(feature = "custom-protection")]
            fn _pcpu_counter_0_1_unprotect(state: usize);
        }

        /// The index of the CPU running the caller, from the kernel's `set_platform!`.
        // Asked only by the C ABI's `counter_enter` (the portable add asks `cpu_base`).
        #[allow(dead_code)]
        #[inline]
        pub(crate) fn current_cpu() -> usize {
            // SAFETY: `set_platform!` defines it with the contract of `Platform::current_cpu`.
            unsafe { _pcpu_counter_0_1_current_cpu() }
        }

        /// The current CPU's per-CPU base where the add takes it from the platform, from the
        /// kernel's `set_platform!` ([`Platform::cpu_base`]).
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

        cfg_if::cfg_if! {
            if #[cfg(feature = "custom-protection")] {
                type State = usize;

                fn acquire() -> State {
                    // SAFETY: `set_platform!` defines it with the contract of
                    // `Platform::protect`.
                    unsafe { _pcpu_counter_0_1_protect() }
                }

                unsafe fn release(state: State) {
                    // SAFETY: `state` comes from the matching `acquire`, as `unprotect`
                    // requires.
                    unsafe { _pcpu_counter_0_1_unprotect(state) }
                }
            } else {
                type State = critical_section::RestoreState;

                fn acquire() -> State {
                    // SAFETY: released by `release` in LIFO order, which is all `acquire`
                    // asks.
                    unsafe { critical_section::acquire() }
                }

                unsafe fn release(state: State) {
                    // SAFETY: `state` comes from the matching `acquire`.
                    unsafe { critical_section::release(state) }
                }
            }
        }
    }
}

/// Before every add, where the CPUs are not the simulation's: nothing to check (a kernel's
/// one area is its register's; a hosted program without the simulation makes no zone).
#[cfg(not(pcpu_hosted_cpus))]
#[inline(always)]
pub(crate) fn check_add(_area: &crate::area::Area) {}

/// Whether every zone gets an area of its own instead of the kernel's one area: not where the
/// CPUs are not the simulation's (a kernel's CPUs have one per-CPU register each).
#[cfg(all(not(pcpu_hosted_cpus), feature = "alloc"))]
#[inline(always)]
pub(crate) const fn own_areas() -> bool {
    false
}

/// Local protection held until drop. Not `Send`: protection belongs to one CPU.
// Where the arch's add needs no protection, only the C ABI's `counter_enter` and the
// simulation's own tests take it.
#[cfg_attr(pcpu_unprotected_add, allow(dead_code))]
pub(crate) struct Protection {
    state: State,
    _cpu_local: core::marker::PhantomData<*mut ()>,
}

impl Protection {
    /// Enters local protection.
    #[cfg_attr(pcpu_unprotected_add, allow(dead_code))]
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
