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
//! | [`Platform::current_cpu`] | the portable fallback (archs without a per-CPU register primitive), and [`MinMax::observe`](crate::histogram::MinMax::observe) on every arch (which CPU's marks to raise) |
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
//! # Backends
//!
//! Who answers depends on the build, chosen in one place (the `backend` module's `path`):
//!
//! | backend | built when | answers |
//! |---|---|---|
//! | `kernel.rs` | neither of the two below (a kernel, firmware) | the link-time hooks of [`set_platform!`](crate::set_platform); protection from `critical-section`, or the kernel's with `custom-protection` |
//! | `hosted.rs` | a hosted target without feature `sim` (`cfg pcpu_no_cpu_register`) | none is asked: an ordinary thread has no per-CPU register, so no zone is made and no add runs |
//! | `sim.rs` | feature `sim` (`cfg pcpu_hosted_cpus`) | the host simulation: the current CPU is the simulated CPU the thread holds, protection blocks simulated interrupts, and each add first checks that the thread holds a CPU of the counter's machine |
//!
//! Each backend defines the same names, which the rest of the crate reaches through this
//! module: `current_cpu()`, `cpu_base()`, `simulated_register()` (the bound CPU's register
//! where the simulation keeps it, else `None`), `check_add(&Area)` and
//! `check_static_add(area)` (the checks before an add), `own_areas()` (with feature `alloc`:
//! whether each zone gets an area of its own), and local protection's `State`, `acquire()` and
//! `release(State)`, behind `Protection`. The simulation's harness (the `sim` module) writes
//! the thread state that `sim.rs` reads; the product never imports the harness.

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

// The backend: the one place that chooses it. Each backend file defines the same names,
// listed in the module's docs; nothing below depends on which one it is.
#[cfg_attr(pcpu_hosted_cpus, path = "sim.rs")]
#[cfg_attr(pcpu_no_cpu_register, path = "hosted.rs")]
#[cfg_attr(not(any(pcpu_hosted_cpus, pcpu_no_cpu_register)), path = "kernel.rs")]
pub(crate) mod backend;

#[cfg(feature = "alloc")]
pub(crate) use backend::own_areas;
// Each is asked only on some arches and builds (see the backends' docs).
#[allow(unused_imports)]
pub(crate) use backend::{check_add, check_static_add, cpu_base, current_cpu, simulated_register};

/// Local protection held until drop. Not `Send`: protection belongs to one CPU.
// Where the arch's add needs no protection, only the C ABI's `counter_enter` and the
// simulation's harness take it.
#[cfg_attr(pcpu_unprotected_add, allow(dead_code))]
pub(crate) struct Protection {
    state: backend::State,
    _cpu_local: core::marker::PhantomData<*mut ()>,
}

impl Protection {
    /// Enters local protection.
    #[cfg_attr(pcpu_unprotected_add, allow(dead_code))]
    #[inline]
    pub(crate) fn acquire() -> Self {
        Protection {
            state: backend::acquire(),
            _cpu_local: core::marker::PhantomData,
        }
    }
}

impl Drop for Protection {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the state came from `acquire` in `Protection::acquire`, and guards are
        // dropped in LIFO order because they cannot leave the scope (or thread) that made them.
        unsafe { backend::release(self.state) }
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
