//! aarch64 under the simulation: the test control of the LL/SC loop.

use core::arch::asm;

/// The LL/SC loop (as [`Counter::add`](crate::Counter::add) runs it
/// without `lse`) with a count of failed `stxr`s, i.e. of interrupts (or other writers)
/// that fell between the `ldxr` and the `stxr`. Returns the retries.
///
/// # Safety
/// The thread is bound to a simulated CPU of the zone owning slot offset `off`.
pub unsafe fn add_counting_retries(off: usize, v: i64) -> u32 {
    let slot = super::host::cpu_base().wrapping_add(off) as *mut u64;
    let retries: u32;
    // SAFETY: as the LL/SC `atomic_add`, with a retry count in a register.
    unsafe {
        asm!(
            "mov {r:w}, #0",
            "b 3f",
            "2:",
            "add {r:w}, {r:w}, #1",
            "3:",
            "ldxr {t}, [{slot}]",
            "add {t}, {t}, {v}",
            "stxr {s:w}, {t}, [{slot}]",
            "cbnz {s:w}, 2b",
            slot = in(reg) slot,
            v = in(reg) v,
            t = out(reg) _,
            s = out(reg) _,
            r = out(reg) retries,
            options(nostack),
        )
    };
    retries
}
