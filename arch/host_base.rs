//! Host simulation for arches whose per-CPU register a Linux thread cannot own: aarch64 (EL0
//! cannot write `TPIDR_EL1`), riscv64 (`tp` and `gp` are glibc's thread pointer and the
//! program's global pointer) and the portable fallback (no register at all). Binding a
//! simulated CPU puts its block's address in a thread-local instead; the arch's add code runs
//! on it unchanged. Included with `#[path]` by those arches' `mod.rs` under feature `sim`.

use core::cell::Cell;

std::thread_local! {
    /// The bound CPU's block, or 0. Read from signal handlers: a const-initialised `Cell`.
    static BASE: Cell<usize> = const { Cell::new(0) };
}

/// This thread's per-CPU base: the bound simulated CPU's block, or 0.
// The portable arch asks the simulation for the CPU index instead.
#[cfg_attr(
    not(any(target_arch = "aarch64", target_arch = "riscv64")),
    allow(dead_code)
)]
#[inline(always)]
pub(crate) fn base() -> usize {
    BASE.with(Cell::get)
}

/// Sets this thread's per-CPU base to `base`.
///
/// # Safety
/// `base` is a block of a live zone.
pub(crate) unsafe fn host_bind(base: usize) {
    BASE.with(|b| b.set(base));
}

/// Clears this thread's per-CPU base, so that a stray add faults instead of counting.
///
/// # Safety
/// As [`host_bind`].
pub(crate) unsafe fn host_unbind() {
    BASE.with(|b| b.set(0));
}
