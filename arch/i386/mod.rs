// SPDX-License-Identifier: BSD-2-Clause
//! i386: a `cmpxchg8b` loop on an fs-relative slot where the CPU has CX8, else a plain 64-bit
//! add inside local protection (FreeBSD's i386 `counter_u64_add`).
//!
//! Each CPU's FS segment base is that CPU's block of the zone, so `fs:[off]` is the current
//! CPU's slot. With CX8 (CPUID leaf 1, EDX bit 8) the add loads `edx:eax` from `fs:[off]`,
//! computes the sum in `ecx:ebx` and stores it with `cmpxchg8b fs:[off]`, without a lock
//! prefix: only this CPU writes the slot, and an interrupt or a migration that changes
//! `fs:[off]` between the load and the `cmpxchg8b` makes the compare fail, which reloads
//! `edx:eax` and retries. Without CX8 (a 486) the add is `add fs:[off], lo; adc fs:[off+4], hi`
//! inside local protection, and [`counter_enter`](crate::counter_enter) enters that protection.
//!
//! The CPUID check runs once and is cached in an `AtomicU8`: on i386 every `AtomicU64`
//! operation compiles to `cmpxchg8b`, which faults on a 486, so nothing on the no-CX8 path
//! touches a 64-bit atomic. Reading a slot never tears: a locked `cmpxchg8b` with equal old and
//! new values with CX8, else a plain read under local protection (FreeBSD's rule: i386 machines
//! without CX8 are uniprocessors).
//!
//! Setting up FS: the FS base lives in a segment descriptor the kernel owns, so i386's
//! [`set_cpu_base`] takes this CPU's GDT entry and its selector besides the base: it writes
//! [`gdt_data_descriptor`]`(base)` into the entry (each CPU has its own GDT, or its own entry)
//! and loads the selector with [`load_fs`]. (The host simulation points a bound thread's
//! `%fs` at its CPU's block with Linux's own calls: `src/sim/i386.rs`.)

use core::arch::asm;
use core::sync::atomic::{AtomicU8, Ordering};

pub use super::defaults::*;
use crate::platform::Protection;
use crate::Error;

/// The arch this build's primitives are for.
pub const NAME: &str = "i386 (fs-relative cmpxchg8b loop, plain add without CX8)";

/// The cached CX8 answer: 0 not asked yet, 1 no CX8, 2 CX8.
///
/// With feature `capi` this very byte is the C symbol `pcpu_cx8` (declared in
/// `include/pcpu_counter_inline.h`): the header's inline `counter_u64_add` runs the
/// `cmpxchg8b` loop itself when it reads 2 and otherwise calls `pcpu_counter_add`, which asks
/// CPUID on the first call (0) and takes protection without CX8 (1). One object, so C and Rust
/// never disagree; an `AtomicU8` has the layout of C's `uint8_t`.
#[cfg_attr(pcpu_c_abi, export_name = "pcpu_cx8")]
static CX8: AtomicU8 = AtomicU8::new(0);

/// Whether this CPU has `cmpxchg8b`: asks CPUID once, then answers from the cache.
#[inline]
pub fn has_cx8() -> bool {
    match CX8.load(Ordering::Relaxed) {
        2 => true,
        1 => false,
        _ => detect_cx8(),
    }
}

#[cold]
fn detect_cx8() -> bool {
    let cx8 = cpuid_leaf1_edx().is_some_and(|edx| edx & (1 << 8) != 0);
    CX8.store(if cx8 { 2 } else { 1 }, Ordering::Relaxed);
    cx8
}

/// Replaces the cached CPUID answer: `Some(false)` takes the no-CX8 path from now on (the host
/// simulation runs it on a CPU with CX8 this way), `None` asks CPUID again at the next call.
/// Switch only while no thread is inside an add or a `counter_enter` section: a section
/// entered on one path and used on the other is not protected.
// Asked only by the host simulation's `force_no_cx8` (src/sim/i386.rs).
#[allow(dead_code)]
pub(crate) fn set_cx8_answer(answer: Option<bool>) {
    let cached = match answer {
        Some(true) => 2,
        Some(false) => 1,
        None => 0,
    };
    CX8.store(cached, Ordering::Relaxed);
}

/// CPUID leaf 1's EDX, or `None` on a CPU without CPUID (an early 486: EFLAGS.ID, bit 21,
/// cannot be toggled).
fn cpuid_leaf1_edx() -> Option<u32> {
    let toggled: u32;
    // SAFETY: flips EFLAGS.ID and restores the original EFLAGS; balanced pushes and pops.
    unsafe {
        asm!(
            "pushfd",
            "pop {orig}",
            "mov {flipped}, {orig}",
            "xor {flipped}, 0x200000",
            "push {flipped}",
            "popfd",
            "pushfd",
            "pop {flipped}",
            "push {orig}",
            "popfd",
            "xor {flipped}, {orig}",
            orig = out(reg) _,
            flipped = out(reg) toggled,
        )
    };
    if toggled & 0x20_0000 == 0 {
        return None;
    }
    let edx: u32;
    // SAFETY: CPUID exists (checked above). LLVM reserves ebx, so it is saved on the stack.
    unsafe {
        asm!(
            "push ebx",
            "cpuid",
            "pop ebx",
            inout("eax") 1u32 => _,
            out("ecx") _,
            out("edx") edx,
        )
    };
    Some(edx)
}

/// Adds `v` to the current CPU's slot at FS-relative offset `off`.
///
/// # Safety
/// This CPU's FS base must be its block of the area whose live slot `off` is.
#[inline(always)]
pub(crate) unsafe fn add(off: usize, v: i64) {
    if has_cx8() {
        // SAFETY: same contract.
        unsafe { add_cx8(off, v) }
    } else {
        let _protection = Protection::acquire();
        // SAFETY: same contract, and local protection is held.
        unsafe { add_plain(off, v) }
    }
}

/// Adds `v`; the caller is inside `counter_enter` (which holds protection without CX8).
///
/// # Safety
/// As [`add`], and the caller holds a [`Protected`](crate::Protected) section.
#[inline(always)]
pub(crate) unsafe fn add_protected(off: usize, v: i64) {
    if has_cx8() {
        // SAFETY: same contract.
        unsafe { add_cx8(off, v) }
    } else {
        // SAFETY: same contract; `counter_enter` took protection because `needs_protection`
        // was true.
        unsafe { add_plain(off, v) }
    }
}

/// The CX8 add: the non-locked `cmpxchg8b` loop on `fs:[off]` ([`fetch_add_cx8`], its old
/// value unused: the same instructions).
///
/// # Safety
/// As [`add`], on a CPU with CX8.
#[inline(always)]
unsafe fn add_cx8(off: usize, v: i64) {
    // SAFETY: same contract.
    unsafe { fetch_add_cx8(off, v) };
}

/// Adds `v` to the current CPU's slot at FS-relative offset `off` and returns the slot's
/// value before the add (the approximate counter's add): with CX8 the same `cmpxchg8b` loop,
/// keeping the value its successful compare matched; without, the two halves read and the
/// plain add, all under local protection.
///
/// # Safety
/// As [`add`].
#[inline(always)]
pub(crate) unsafe fn fetch_add(off: usize, v: i64) -> u64 {
    if has_cx8() {
        // SAFETY: same contract.
        unsafe { fetch_add_cx8(off, v) }
    } else {
        let _protection = Protection::acquire();
        let (lo, hi): (u32, u32);
        // SAFETY: `fs:[off]` is this CPU's own slot; protection keeps every other writer of
        // it away until the add below is done.
        unsafe {
            asm!(
                "mov {lo}, dword ptr fs:[{off}]",
                "mov {hi}, dword ptr fs:[{off} + 4]",
                off = in(reg) off,
                lo = out(reg) lo,
                hi = out(reg) hi,
                options(nostack, readonly, preserves_flags),
            );
            add_plain(off, v);
        }
        (u64::from(hi) << 32) | u64::from(lo)
    }
}

/// The non-locked `cmpxchg8b` loop on `fs:[off]`, returning the value the successful
/// `cmpxchg8b` replaced.
///
/// # Safety
/// As [`add`], on a CPU with CX8.
#[inline(always)]
unsafe fn fetch_add_cx8(off: usize, v: i64) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: `fs:[off]` is this CPU's own slot (caller's contract). `v` is pushed so the
    // loop can read it while eax, ebx, ecx, edx belong to cmpxchg8b; ebx (reserved by LLVM)
    // is saved and restored; the pushes and pops balance. A failed compare (the slot changed
    // under an interrupt or a migration) leaves the current value in edx:eax for the retry.
    // When `cmpxchg8b` succeeds (ZF set, the loop ends), edx:eax still holds the value it
    // compared equal to the slot: the value before this add.
    unsafe {
        asm!(
            "push ebx",
            "push edx",
            "push eax",
            "mov eax, fs:[edi]",
            "mov edx, fs:[edi + 4]",
            "2:",
            "mov ebx, eax",
            "mov ecx, edx",
            "add ebx, [esp]",
            "adc ecx, [esp + 4]",
            "cmpxchg8b fs:[edi]",
            "jnz 2b",
            "add esp, 8",
            "pop ebx",
            in("edi") off,
            inout("eax") v as u32 => lo,
            inout("edx") ((v as u64) >> 32) as u32 => hi,
            out("ecx") _,
        )
    }
    (u64::from(hi) << 32) | u64::from(lo)
}

/// The no-CX8 add: `add fs:[off], lo; adc fs:[off + 4], hi`.
///
/// # Safety
/// As [`add`], and local protection is held (nothing else on this CPU runs in between).
#[inline(always)]
unsafe fn add_plain(off: usize, v: i64) {
    // SAFETY: `fs:[off]` is this CPU's own slot and protection keeps every other writer of
    // it away between the two halves.
    unsafe {
        asm!(
            "add dword ptr fs:[{off}], {lo}",
            "adc dword ptr fs:[{off} + 4], {hi}",
            off = in(reg) off,
            lo = in(reg) v as u32,
            hi = in(reg) ((v as u64) >> 32) as u32,
            options(nostack),
        )
    }
}

/// `counter_enter` enters local protection only without CX8, as on FreeBSD's i386.
#[inline(always)]
pub(crate) fn needs_protection() -> bool {
    !has_cx8()
}

/// `lock cmpxchg8b [slot]`: stores `new` if the slot holds `old`; returns what it held.
///
/// # Safety
/// `slot` is an aligned, live slot, on a CPU with CX8.
#[inline]
unsafe fn cmpxchg8b_locked(slot: *mut u64, old: u64, new: u64) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: `slot` is valid per the caller; ebx (reserved by LLVM) is swapped in and out
    // through a scratch register, so it holds its old value after the asm.
    unsafe {
        asm!(
            "xchg ebx, {new_lo}",
            "lock cmpxchg8b [edi]",
            "mov ebx, {new_lo}",
            // An explicit register: as a `reg` operand LLVM may put `slot` in ebx itself
            // (seen in the i386 QEMU kernel), and the xchg would then replace the address.
            in("edi") slot,
            new_lo = inout(reg) new as u32 => _,
            inout("eax") old as u32 => lo,
            inout("edx") (old >> 32) as u32 => hi,
            in("ecx") (new >> 32) as u32,
            options(nostack),
        )
    };
    u64::from(lo) | (u64::from(hi) << 32)
}

/// TEST ONLY (`--cfg pcpu_counter_broken="i386_unlocked_read"`, set by `cargo xtask cross`
/// and never by a user build): the remote read FreeBSD once had, `cmpxchg8b [slot]` with equal
/// operands WITHOUT `lock`. The instruction always writes its destination: the value it read
/// when the compare fails, the (equal) operand when it succeeds; without `lock` that read and
/// write are two accesses, and an add the slot's CPU stores between them is overwritten: lost.
/// `tests/arch_i386.rs` `remote_reads_racing_adds_lose_nothing` must catch it.
///
/// # Safety
/// As [`cmpxchg8b_locked`].
#[cfg(pcpu_counter_broken = "i386_unlocked_read")]
#[inline]
unsafe fn cmpxchg8b_unlocked_read(slot: *mut u64) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: as in `cmpxchg8b_locked` with old = new = 0 (ebx is swapped in and out through
    // a scratch register); the missing `lock` is the deliberate bug.
    unsafe {
        asm!(
            "xchg ebx, {new_lo}",
            "cmpxchg8b [edi]",
            "mov ebx, {new_lo}",
            in("edi") slot,
            new_lo = inout(reg) 0u32 => _,
            inout("eax") 0u32 => lo,
            inout("edx") 0u32 => hi,
            in("ecx") 0u32,
            options(nostack),
        )
    };
    u64::from(lo) | (u64::from(hi) << 32)
}

/// Reads a slot of any CPU without tearing.
///
/// # Safety
/// `slot` is an aligned slot inside a live zone.
#[inline]
pub(crate) unsafe fn load_slot(slot: *mut u64) -> u64 {
    if has_cx8() {
        // SAFETY: as the caller's contract; equal old and new values leave the slot as it is.
        #[cfg(not(pcpu_counter_broken = "i386_unlocked_read"))]
        let value = unsafe { cmpxchg8b_locked(slot, 0, 0) };
        // SAFETY: as above; that the read is not atomic is the deliberate bug.
        #[cfg(pcpu_counter_broken = "i386_unlocked_read")]
        let value = unsafe { cmpxchg8b_unlocked_read(slot) };
        value
    } else {
        let _protection = Protection::acquire();
        // SAFETY: aligned and live per the caller; protection keeps this CPU's writers away
        // and a machine without CX8 has no other CPU.
        unsafe { slot.read_volatile() }
    }
}

/// Writes a slot that no CPU adds to (a slot being allocated).
///
/// # Safety
/// As [`load_slot`], and no CPU may add to the slot now.
#[inline]
pub(crate) unsafe fn store_slot(slot: *mut u64, value: u64) {
    if has_cx8() {
        let mut seen = 0;
        loop {
            // SAFETY: as the caller's contract.
            let held = unsafe { cmpxchg8b_locked(slot, seen, value) };
            if held == seen {
                break;
            }
            seen = held;
        }
    } else {
        let _protection = Protection::acquire();
        // SAFETY: as in `load_slot`.
        unsafe { slot.write_volatile(value) }
    }
}

/// A GDT (or LDT) descriptor for a flat 32-bit read/write data segment at `base`: limit 4 GiB
/// (page granular), present, DPL 0, accessed. Loaded into FS, `fs:[off]` is `base + off`.
pub const fn gdt_data_descriptor(base: u32) -> u64 {
    let base = base as u64;
    let limit = 0xF_FFFF_u64;
    (limit & 0xFFFF)
        | ((base & 0xFF_FFFF) << 16)
        | (0x93 << 40) // present, DPL 0, data, writable, accessed
        | (((limit >> 16) & 0xF) << 48)
        | (0xC << 52) // 4 KiB granularity, 32-bit
        | ((base >> 24) << 56)
}

/// Loads `selector` into `%fs`.
///
/// # Safety
/// `selector` names a present data segment descriptor this CPU may load, and nothing else on
/// this CPU relies on the previous `%fs`.
pub unsafe fn load_fs(selector: u16) {
    // SAFETY: per the caller's contract the load succeeds and only `%fs` changes.
    unsafe { asm!("mov fs, {0:x}", in(reg) selector, options(nostack, preserves_flags)) }
}

/// Points this CPU's FS at `base`: writes [`gdt_data_descriptor`]`(base)` into `entry`, this
/// CPU's GDT entry for `selector`, and loads `selector` into `%fs`. Fails with
/// [`Error::BadCpuBase`], writing nothing, if `base` does not fit in 32 bits, and with
/// [`Error::BadSelector`] if `selector` is null or names the LDT.
///
/// # Safety
/// Must run at CPL 0 on the CPU whose block `base` is; `entry` is the descriptor `selector`
/// names in the GDT this CPU has loaded; nothing else on this CPU relies on the old `%fs`.
pub unsafe fn set_cpu_base(entry: &mut u64, selector: u16, base: usize) -> Result<(), Error> {
    let base32 = u32::try_from(base).map_err(|_| Error::BadCpuBase { base })?;
    if selector & !7 == 0 || selector & 4 != 0 {
        return Err(Error::BadSelector { selector });
    }
    // SAFETY: the write goes through a valid `&mut`; volatile so it is not reordered after the
    // segment load that reads it.
    unsafe { (entry as *mut u64).write_volatile(gdt_data_descriptor(base32)) };
    // SAFETY: the descriptor just written is a present data segment (caller's contract for
    // the rest).
    unsafe { load_fs(selector) };
    Ok(())
}

/// The per-CPU register the add goes through, as the bring-up check names it.
pub const REGISTER: &str = "%fs segment base";

/// The byte limit of the segment in `%fs` (`lsl`), which the add goes through: a zone that
/// grows reaches chunks at offsets anywhere in the address space, so the segment must span it
/// all. `None` where `lsl` cannot read the descriptor.
pub(crate) fn segment_limit() -> Option<usize> {
    let selector: u32;
    // SAFETY: copies a segment register.
    unsafe { asm!("mov {0:e}, fs", out(reg) selector, options(nomem, nostack, preserves_flags)) };
    let limit: u32;
    let valid: u8;
    // SAFETY: `lsl` reads the descriptor's limit (scaled by its granularity) or clears ZF for
    // a selector it cannot read; it faults on nothing and writes only its operands.
    unsafe {
        asm!(
            "xor {limit:e}, {limit:e}",
            "lsl {limit:e}, {sel:e}",
            "setz {valid}",
            limit = out(reg) limit,
            sel = in(reg) selector,
            valid = out(reg_byte) valid,
            options(nomem, nostack),
        )
    };
    (valid != 0).then_some(limit as usize)
}

/// The base of the segment in `%fs` now, read from this CPU's GDT (`sgdt`, then the
/// descriptor `%fs` names), for the bring-up check: 0 for the null selector. A selector that
/// names the LDT is [`Error::BadSelector`] (`set_cpu_base` never loads one).
///
/// # Safety
/// Runs at CPL 0 with this CPU's GDT loaded and its `%fs` descriptor not changed since the
/// load (what `set_cpu_base` does).
pub(crate) unsafe fn current_base() -> Result<usize, Error> {
    let selector: u16;
    // SAFETY: copies a segment register.
    unsafe { asm!("mov {0:x}, fs", out(reg) selector, options(nomem, nostack, preserves_flags)) };
    if selector & !7 == 0 {
        return Ok(0);
    }
    if selector & 4 != 0 {
        return Err(Error::BadSelector { selector });
    }
    let mut gdtr = [0u16; 3];
    // SAFETY: `sgdt` stores 6 bytes (limit, then base) into `gdtr`.
    unsafe { asm!("sgdt [{0}]", in(reg) gdtr.as_mut_ptr(), options(nostack, preserves_flags)) };
    let limit = usize::from(gdtr[0]);
    let table = usize::from(gdtr[1]) | usize::from(gdtr[2]) << 16;
    let index = usize::from(selector & !7);
    if index + 7 > limit {
        return Err(Error::BadSelector { selector });
    }
    // SAFETY: the loaded GDT holds `limit + 1` bytes from `table`, and the entry is inside it.
    let d = unsafe { ((table + index) as *const u64).read_volatile() };
    Ok(((d >> 16) & 0xFF_FFFF | ((d >> 56) & 0xFF) << 24) as usize)
}
