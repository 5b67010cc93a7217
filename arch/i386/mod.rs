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
//! and loads the selector with [`load_fs`]. In host tests (feature `sim`) a bound thread's
//! `%fs` is a segment with the CPU's block as base: its own GDT TLS entry (`set_thread_area`) natively,
//! an LDT entry of its own (`modify_ldt`) under qemu-i386 (glibc keeps i386 TLS in `%gs`, so
//! `%fs` is free).

use core::arch::asm;
use core::sync::atomic::{AtomicU8, Ordering};

use crate::platform::Protection;
use crate::zone::Zone;

/// The arch this build's primitives are for.
pub const NAME: &str = "i386 (fs-relative cmpxchg8b loop, plain add without CX8)";

/// The cached CX8 answer: 0 not asked yet, 1 no CX8, 2 CX8.
///
/// With feature `capi` this very byte is the C symbol `pcpu_cx8` (declared in
/// `include/pcpu_counter_inline.h`): the header's inline `counter_u64_add` runs the
/// `cmpxchg8b` loop itself when it reads 2 and otherwise calls `pcpu_counter_add`, which asks
/// CPUID on the first call (0) and takes protection without CX8 (1). One object, so C and Rust
/// never disagree; an `AtomicU8` has the layout of C's `uint8_t`.
#[cfg_attr(feature = "capi", export_name = "pcpu_cx8")]
static CX8: AtomicU8 = AtomicU8::new(0);

/// Whether this CPU has `cmpxchg8b`: asks CPUID once, then answers from the cache.
///
/// With feature `sim` the environment variable `PCPU_COUNTER_FORCE_NO_CX8` (any value), read
/// at the first call, and [`force_no_cx8`] make it answer `false`, so that host tests run the
/// no-CX8 path too.
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
    let forced = cfg!(feature = "sim") && forced_by_environment();
    let cx8 = !forced && cpuid_leaf1_edx().is_some_and(|edx| edx & (1 << 8) != 0);
    CX8.store(if cx8 { 2 } else { 1 }, Ordering::Relaxed);
    cx8
}

#[cfg(feature = "sim")]
fn forced_by_environment() -> bool {
    std::env::var_os("PCPU_COUNTER_FORCE_NO_CX8").is_some()
}

#[cfg(not(feature = "sim"))]
fn forced_by_environment() -> bool {
    false
}

/// Host tests only: `true` makes [`has_cx8`] answer `false` from now on (the no-CX8 path),
/// `false` asks again at the next call (the environment variable still forces). Switch only
/// while no thread is inside an add or a `counter_enter` section: a section entered on one
/// path and used on the other is not protected.
#[cfg(feature = "sim")]
pub fn force_no_cx8(force: bool) {
    CX8.store(if force { 1 } else { 0 }, Ordering::Relaxed);
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
/// This CPU's FS base must be its block of the zone that owns `off`, and `off` a live slot.
#[inline(always)]
pub(crate) unsafe fn add(_zone: &Zone<'_>, off: usize, v: i64) {
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
pub(crate) unsafe fn add_protected(_zone: &Zone<'_>, off: usize, v: i64) {
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
pub(crate) unsafe fn fetch_add(_zone: &Zone<'_>, off: usize, v: i64) -> u64 {
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

/// Reads a slot of any CPU without tearing.
///
/// # Safety
/// `slot` is an aligned slot inside a live zone.
#[inline]
pub(crate) unsafe fn load_slot(slot: *mut u64) -> u64 {
    if has_cx8() {
        // SAFETY: as the caller's contract; equal old and new values leave the slot as it is.
        unsafe { cmpxchg8b_locked(slot, 0, 0) }
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
/// CPU's GDT entry for `selector`, and loads `selector` into `%fs`. Returns `false`, writing
/// nothing, if `base` does not fit in 32 bits or `selector` is null or names the LDT.
///
/// # Safety
/// Must run at CPL 0 on the CPU whose block `base` is; `entry` is the descriptor `selector`
/// names in the GDT this CPU has loaded; nothing else on this CPU relies on the old `%fs`.
pub unsafe fn set_cpu_base(entry: &mut u64, selector: u16, base: usize) -> bool {
    let Ok(base) = u32::try_from(base) else {
        return false;
    };
    if selector & !7 == 0 || selector & 4 != 0 {
        return false;
    }
    // SAFETY: the write goes through a valid `&mut`; volatile so it is not reordered after the
    // segment load that reads it.
    unsafe { (entry as *mut u64).write_volatile(gdt_data_descriptor(base)) };
    // SAFETY: the descriptor just written is a present data segment (caller's contract for
    // the rest).
    unsafe { load_fs(selector) };
    true
}

#[cfg(feature = "sim")]
pub use host::add_counting_retries;
#[cfg(feature = "sim")]
pub use host::host_fs_mechanism;
#[cfg(feature = "sim")]
pub(crate) use host::{host_bind, host_unbind};

#[cfg(feature = "sim")]
mod host {
    //! Host simulation: `%fs` of a bound thread is a segment whose base is the CPU's block.
    //!
    //! The segment is, where the host's TLS descriptors are per-thread (Linux natively), a
    //! GDT TLS entry of the thread's own (`set_thread_area`, the mechanism glibc uses for
    //! `%gs`): the kernel switches those entries with the thread, so a bind rewrites only the
    //! calling thread's descriptor and reloads `%fs`. Elsewhere (qemu-i386, whose one GDT is
    //! shared by all threads: `tests/qemu-i386/`) it is an LDT entry per bound thread
    //! (`modify_ldt`), which on Linux installs a new LDT for the whole process (an IPI to
    //! every CPU running it), 15-40 times slower: the numbers are at [`host_bind`].

    use core::arch::asm;
    use core::cell::Cell;
    use core::sync::atomic::{AtomicU32, Ordering};
    use std::sync::{Mutex, Once};
    use std::vec::Vec;

    /// LDT entries no bound thread uses (`None`: not set up yet: all but [`INIT_ENTRY`]).
    static FREE: Mutex<Option<Vec<u16>>> = Mutex::new(None);

    std::thread_local! {
        /// The LDT entry this thread holds while bound, or `u16::MAX`.
        static ENTRY: Cell<u16> = const { Cell::new(u16::MAX) };
    }

    /// Linux's `struct user_desc` (asm/ldt.h).
    #[repr(C)]
    struct UserDesc {
        entry_number: u32,
        base_addr: u32,
        limit: u32,
        /// seg_32bit (bit 0), contents (1-2), read_exec_only (3), limit_in_pages (4),
        /// seg_not_present (5), useable (6).
        flags: u32,
    }

    impl UserDesc {
        /// A flat 32-bit read/write data segment at `base`.
        fn data(entry_number: u32, base: u32) -> Self {
            UserDesc {
                entry_number,
                base_addr: base,
                limit: 0xF_FFFF,
                flags: 1 | (1 << 4) | (1 << 6),
            }
        }
    }

    /// `set_thread_area(desc)`: writes the calling thread's GDT TLS entry
    /// `desc.entry_number` (`u32::MAX`: a free one, whose number the kernel writes back).
    fn set_thread_area(desc: &mut UserDesc) -> bool {
        // SAFETY: `desc` is a valid, writable user_desc; the call changes only the calling
        // thread's TLS descriptors (or, under qemu-i386, the process's one GDT).
        unsafe { libc::syscall(libc::SYS_set_thread_area, desc as *mut UserDesc) == 0 }
    }

    /// `get_thread_area`: the base of the calling thread's GDT TLS entry `entry`.
    fn thread_area_base(entry: u32) -> Option<u32> {
        let mut desc = UserDesc::data(entry, 0);
        // SAFETY: `desc` is a valid, writable user_desc; the call only reads descriptors.
        let rc = unsafe { libc::syscall(libc::SYS_get_thread_area, &mut desc as *mut UserDesc) };
        (rc == 0).then_some(desc.base_addr)
    }

    /// The GDT TLS entry every thread binds through, or [`USE_LDT`].
    static TLS_ENTRY: AtomicU32 = AtomicU32::new(USE_LDT);
    /// [`TLS_ENTRY`] when TLS descriptors are not per-thread or none is free.
    const USE_LDT: u32 = u32::MAX;

    /// Picks the mechanism once: takes a free TLS entry on this thread (base 0), has a new
    /// thread write another base into the same entry, and reads this thread's entry back.
    /// Unchanged, the entries are per-thread and binds use it; changed (one GDT for all
    /// threads, as qemu-i386 7.2 emulates it) or unavailable, binds use the LDT. The
    /// environment variable `PCPU_COUNTER_FORCE_LDT` (any value, read once) forces the LDT,
    /// so that host tests run that path natively too.
    fn probe_tls_entry() -> u32 {
        static PROBE: Once = Once::new();
        PROBE.call_once(|| {
            if std::env::var_os("PCPU_COUNTER_FORCE_LDT").is_some() {
                return;
            }
            let mut desc = UserDesc::data(u32::MAX, 0);
            if !set_thread_area(&mut desc) {
                return;
            }
            let entry = desc.entry_number;
            let written = std::thread::Builder::new()
                .spawn(move || set_thread_area(&mut UserDesc::data(entry, 0x1000)))
                .ok()
                .and_then(|thread| thread.join().ok())
                .unwrap_or(false);
            if written && thread_area_base(entry) == Some(0) {
                TLS_ENTRY.store(entry, Ordering::Relaxed);
            }
        });
        TLS_ENTRY.load(Ordering::Relaxed)
    }

    /// Host tests only: how binds set `%fs` in this process.
    pub fn host_fs_mechanism() -> &'static str {
        if probe_tls_entry() == USE_LDT {
            "LDT entry per bound thread (modify_ldt)"
        } else {
            "per-thread GDT TLS entry (set_thread_area)"
        }
    }

    /// Writes LDT entry `entry` as a flat 32-bit data segment at `base` (`modify_ldt`, func 1).
    fn write_ldt(entry: u16, base: u32) {
        let desc = UserDesc::data(u32::from(entry), base);
        // SAFETY: `desc` is a valid user_desc of the size passed; modify_ldt only changes this
        // process's LDT entry `entry`, which this thread owns.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_modify_ldt,
                1,
                &desc as *const UserDesc,
                core::mem::size_of::<UserDesc>(),
            )
        };
        assert_eq!(
            rc,
            0,
            "modify_ldt failed: {}",
            std::io::Error::last_os_error()
        );
    }

    /// The last LDT entry, never handed out: written (empty) at process start.
    const INIT_ENTRY: u16 = 8191;

    /// Creates the process's LDT at start-up, before any thread exists. qemu-i386 records
    /// where the LDT lives only in the CPU state of the thread that first calls `modify_ldt`
    /// (threads cloned later copy it); a thread that existed before would read its
    /// descriptors from address 0 and fault. Natively this is just an empty entry.
    extern "C" fn create_ldt_at_start() {
        // Linux's "empty descriptor": read_exec_only (bit 3) and seg_not_present (bit 5).
        let desc = UserDesc {
            entry_number: u32::from(INIT_ENTRY),
            base_addr: 0,
            limit: 0,
            flags: (1 << 3) | (1 << 5),
        };
        // SAFETY: as in `write_ldt`; the entry is never handed out.
        unsafe {
            libc::syscall(
                libc::SYS_modify_ldt,
                1,
                &desc as *const UserDesc,
                core::mem::size_of::<UserDesc>(),
            )
        };
    }

    /// Runs [`create_ldt_at_start`] from the ELF constructors, on the main thread.
    #[used]
    #[link_section = ".init_array"]
    static CREATE_LDT_AT_START: extern "C" fn() = create_ldt_at_start;

    /// Points this thread's `%fs` at `base`: writes the thread's TLS entry (natively) or an
    /// LDT entry it holds until it unbinds (see the module docs) and loads its selector
    /// (`entry << 3`, TI = 1 for the LDT, RPL 3).
    ///
    /// Cost natively (a debug i686 test binary on the shared 2-core x86_64 build machine,
    /// Linux compat mode, loaded by other builds; `bind_rate` in `tests/arch_i386.rs`, 200k
    /// binds, 4-5 runs of each alternating with the other, 2026-12-03): the TLS entry
    /// 0.20-0.50 s (400k-1M binds/s, 1.0-2.5 µs a bind), the LDT
    /// (`PCPU_COUNTER_FORCE_LDT=1`) 4.46-8.57 s (23k-45k binds/s, 22-43 µs a bind). Under
    /// qemu-i386 the LDT path took 2.36-3.13 s (12-16 µs a bind).
    ///
    /// # Safety
    /// `base` is a block of a live zone, and nothing else on this thread uses `%fs`.
    pub(crate) unsafe fn host_bind(base: usize) {
        // Keeps the constructor linked into every binary that binds.
        core::hint::black_box(&CREATE_LDT_AT_START);
        let base = u32::try_from(base).expect("32-bit address");
        let tls = probe_tls_entry();
        if tls != USE_LDT {
            let written = set_thread_area(&mut UserDesc::data(tls, base));
            assert!(
                written,
                "set_thread_area failed: {}",
                std::io::Error::last_os_error()
            );
            // SAFETY: the entry was just written as a present data segment, and the kernel
            // keeps it this thread's own.
            unsafe { super::load_fs(((tls as u16) << 3) | 3) };
            return;
        }
        let entry = ENTRY.with(Cell::get);
        let entry = if entry != u16::MAX {
            entry
        } else {
            let mut free = FREE.lock().unwrap_or_else(|p| p.into_inner());
            let entry = free
                .get_or_insert_with(|| (0..INIT_ENTRY).rev().collect())
                .pop()
                .expect("all 8191 LDT entries are in use");
            ENTRY.with(|e| e.set(entry));
            entry
        };
        write_ldt(entry, base);
        // SAFETY: the entry was just written as a present data segment.
        unsafe { super::load_fs((entry << 3) | 7) };
    }

    /// Loads the null selector into `%fs` (a stray add faults) and frees the LDT entry.
    ///
    /// # Safety
    /// As [`host_bind`].
    pub(crate) unsafe fn host_unbind() {
        // SAFETY: the null selector is always loadable into a data segment register.
        unsafe { super::load_fs(0) };
        let entry = ENTRY.with(|e| e.replace(u16::MAX));
        if entry != u16::MAX {
            let mut free = FREE.lock().unwrap_or_else(|p| p.into_inner());
            free.get_or_insert_with(Vec::new).push(entry);
        }
    }

    /// Host tests only: the CX8 add loop (as [`Counter::add`](crate::Counter::add) runs it)
    /// with a count of failed `cmpxchg8b`s, i.e. of interrupts that changed the slot inside
    /// the loop. Returns the retries.
    ///
    /// # Safety
    /// The thread is bound to a simulated CPU of the zone owning slot offset `off`, and the
    /// CPU has CX8.
    pub unsafe fn add_counting_retries(off: usize, v: i64) -> u32 {
        let retries: u32;
        // SAFETY: as `fetch_add_cx8`, with one more stack word for the retry count.
        unsafe {
            asm!(
                "push ebx",
                "push 0",
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
                "je 3f",
                "inc dword ptr [esp + 8]",
                "jmp 2b",
                "3:",
                "add esp, 8",
                "pop ecx",
                "pop ebx",
                in("edi") off,
                inout("eax") v as u32 => _,
                inout("edx") ((v as u64) >> 32) as u32 => _,
                out("ecx") retries,
            )
        };
        retries
    }
}
