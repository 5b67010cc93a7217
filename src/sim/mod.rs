// SPDX-License-Identifier: BSD-2-Clause
//! Host mode (feature `sim`): simulated CPUs on threads, so `cargo test` runs the real arch
//! primitives.
//!
//! A [`Machine`] has `ncpus` simulated CPUs and a zone with one block per CPU. A thread runs
//! on a simulated CPU only while it holds it exclusively ([`Machine::bind`],
//! [`Machine::run_on`]), as a real CPU runs one thread at a time; a thread asking for a busy
//! CPU waits. Binding points the thread's per-CPU register at the CPU's block: on x86_64
//! Linux the GS base (`arch_prctl(ARCH_SET_GS)`), so counters run the real `add gs:[off]`.
//! Simulated CPUs may outnumber the host's cores.
//!
//! Migration is leaving one CPU and taking another ([`Bound::migrate`]). Simulated
//! interrupts are signals: [`Machine::with_interrupt_handler`] names a handler that runs on
//! the interrupted thread, on the simulated CPU it holds, and [`interrupt_storm`] fires them
//! at a thread as fast as the host can while it works; [`interrupt_storm_until`] keeps the
//! storm on until the caller's count is reached, such as [`Storm::handled`], the interrupts
//! that ran a handler (on a loaded host, raised or taken ones may have run none). Local
//! protection (the platform hook behind `counter_enter` and the fallback paths) blocks them,
//! as disabling interrupts would.

#[cfg(pcpu_c_abi)]
pub mod capi;
#[cfg(target_arch = "x86")]
pub mod i386;
mod interrupt;
mod machine;
mod register;
mod statics;

pub use interrupt::{
    host_load, interrupt_storm, interrupt_storm_inside, interrupt_storm_until, interrupts_handled,
    missed_interrupts, Storm,
};
pub use machine::{Bound, Machine};

#[cfg(test)]
pub(crate) use crate::platform::backend::interrupts_blocked;
#[cfg(test)]
pub(crate) use machine::machine_for_ever;

pub use crate::platform::backend::current_cpu_checked;
