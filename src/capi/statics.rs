// SPDX-License-Identifier: BSD-2-Clause
//! Per-CPU statics from C: `PCPU_COUNTER_DEFINE(name)` (in the header's hand-written part)
//! puts a 64-bit slot in the per-CPU section `pcpu_counter_statics` and defines
//! `struct pcpu_static name` beside it (the slot's address and the zero baseline, outside
//! the section); `PCPU_COUNTER_ADD(name, v)` / `PCPU_COUNTER_INC(name)` add through the
//! per-CPU register and the slot's link-time address (on x86_64 one
//! `addq %gs:name_pcpu_slot(%rip)`), as Rust's `percpu_counter!` (`crate::statics`). The
//! library part is the bring-up and the reads: [`pcpu_statics_install`],
//! [`pcpu_static_fetch`], [`pcpu_static_fetch_and_zero`], [`pcpu_static_zero`].

use core::ffi::c_int;

use super::error::{code, PCPU_EINVAL, PCPU_OK};
use crate::{statics, Area, AreaShape};

/// A per-CPU static from C (`PCPU_COUNTER_DEFINE`): its template slot and its zero baseline.
#[repr(C)]
pub struct pcpu_static {
    /// The template slot, in the section `pcpu_counter_statics`.
    pub slot: *mut u64,
    /// The zero baseline (starts at 0; only the library touches it).
    pub baseline: u64,
}

/// Installs the per-CPU statics' copies: CPU `i`'s register holds `base + i * stride`.
///
/// That is (wrapping) CPU `i`'s copy of the per-CPU section minus the section's start
/// (`__start_pcpu_counter_statics`). Clears every block that is not the section itself; call
/// it once, on the boot CPU, before any CPU's register holds its block (the Rust
/// `statics::install_section` in the kernel's one area).
///
/// Returns 0 or a `PCPU_E*` code, having written nothing: a second call (`PCPU_EINSTALLED`),
/// no CPUs, a stride not a multiple of 8 or below the section's length, a misaligned base, a
/// copy at an address the arch cannot have (`PCPU_EUNADDR`: on x86_64 not canonical, as when
/// `base` is the block itself instead of the block less the section's start), a copy past
/// the end of the address space (`PCPU_EOVERFLOW`), a copy over part of the section itself
/// or a zone's counters (`PCPU_EOVERLAP`), or a zone that needs other register values.
///
/// # Safety
/// As `statics::install_section`: for every CPU `i`, the section's length of bytes at
/// `base + i * stride + start` is memory for ever the statics', and no CPU adds to it yet.
#[no_mangle]
pub unsafe extern "C" fn pcpu_statics_install(base: usize, stride: usize, ncpus: usize) -> c_int {
    let shape = AreaShape {
        base,
        stride,
        ncpus,
    };
    // SAFETY: the caller's contract.
    match unsafe { statics::install_section(Area::global(), shape) } {
        Ok(()) => PCPU_OK,
        Err(e) => code(e),
    }
}

/// The slot and baseline word of `s`, or `None` for NULL.
///
/// # Safety
/// `s` is NULL or a `PCPU_COUNTER_DEFINE`d static.
unsafe fn parts(s: *const pcpu_static) -> Option<(usize, *mut u64)> {
    // SAFETY: per the caller; the baseline is only accessed through `baseline`.
    let s = unsafe { s.cast_mut().as_mut() }?;
    Some((s.slot as usize, core::ptr::addr_of_mut!(s.baseline)))
}

/// The static's count since its last zero (0 for NULL).
///
/// The sum over the section (the template) and every installed CPU's copy, less the
/// baseline.
///
/// # Safety
/// `s` is NULL or a `PCPU_COUNTER_DEFINE`d static.
#[no_mangle]
pub unsafe extern "C" fn pcpu_static_fetch(s: *const pcpu_static) -> u64 {
    // SAFETY: per the caller.
    match unsafe { parts(s) } {
        // SAFETY: a defined static's slot and baseline word.
        Some((off, word)) => unsafe { statics::fetch_at(off, word) },
        None => 0,
    }
}

/// The static's count since its last zero, zeroed as one step (0 for NULL).
///
/// Lossless: the baseline moves, no CPU's copy is written.
///
/// # Safety
/// As [`pcpu_static_fetch`].
#[no_mangle]
pub unsafe extern "C" fn pcpu_static_fetch_and_zero(s: *mut pcpu_static) -> u64 {
    // SAFETY: per the caller.
    match unsafe { parts(s) } {
        // SAFETY: as in `pcpu_static_fetch`.
        Some((off, word)) => unsafe { statics::fetch_and_zero_at(off, word) },
        None => 0,
    }
}

/// Zeroes the static, losslessly. Returns 0, or `PCPU_EINVAL` for NULL.
///
/// # Safety
/// As [`pcpu_static_fetch`].
#[no_mangle]
pub unsafe extern "C" fn pcpu_static_zero(s: *mut pcpu_static) -> c_int {
    if s.is_null() {
        return PCPU_EINVAL;
    }
    // SAFETY: per the caller.
    unsafe { pcpu_static_fetch_and_zero(s) };
    PCPU_OK
}

/// Adds `v` to the running CPU's copy of a per-CPU static's `slot`, out of line.
///
/// `PCPU_COUNTER_ADD` calls it where the header has no inline form: the portable fallback,
/// the host simulation but on x86_64, i386 without CX8.
///
/// # Safety
/// `slot` is a `PCPU_COUNTER_DEFINE`d static's slot (`name_pcpu_slot`), and the running CPU's
/// register holds its block minus the section's start (or 0: the section itself, on the boot
/// CPU before bring-up).
#[no_mangle]
pub unsafe extern "C" fn pcpu_static_add(slot: *mut u64, v: i64) {
    statics::private::add_at(slot as usize, v)
}
