// SPDX-License-Identifier: BSD-2-Clause
//! i386 under the simulation: `%fs` of a bound thread is a segment whose base is the CPU's
//! block; and the test controls of the i386 primitives.
//!
//! The segment is, where the host's TLS descriptors are per-thread (Linux natively), a
//! GDT TLS entry of the thread's own (`set_thread_area`, the mechanism glibc uses for
//! `%gs`): the kernel switches those entries with the thread, so a bind rewrites only the
//! calling thread's descriptor and reloads `%fs`. Elsewhere (qemu-i386, whose one GDT is
//! shared by all threads: `tests/qemu-i386/`) it is an LDT entry per bound thread
//! (`modify_ldt`), which on Linux installs a new LDT for the whole process (an IPI to
//! every CPU running it), 15-40 times slower: the numbers are at [`bind`].

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

/// How binds set `%fs` in this process.
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
pub(super) unsafe fn bind(base: usize) {
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
        unsafe { crate::arch::load_fs(((tls as u16) << 3) | 3) };
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
    unsafe { crate::arch::load_fs((entry << 3) | 7) };
}

/// Loads the null selector into `%fs` (a stray add faults) and frees the LDT entry.
///
/// # Safety
/// As [`bind`].
pub(super) unsafe fn unbind() {
    // SAFETY: the null selector is always loadable into a data segment register.
    unsafe { crate::arch::load_fs(0) };
    let entry = ENTRY.with(|e| e.replace(u16::MAX));
    if entry != u16::MAX {
        let mut free = FREE.lock().unwrap_or_else(|p| p.into_inner());
        free.get_or_insert_with(Vec::new).push(entry);
    }
}

/// `true` makes [`has_cx8`](crate::arch::has_cx8) answer `false` from now on (the no-CX8
/// path), `false` asks CPUID again at the next call, unless the environment variable
/// `PCPU_COUNTER_FORCE_NO_CX8` (any value) forces the no-CX8 path.
/// Switch only while no thread is inside an add or a `counter_enter` section: a section
/// entered on one path and used on the other is not protected.
pub fn force_no_cx8(force: bool) {
    let forced = force || std::env::var_os("PCPU_COUNTER_FORCE_NO_CX8").is_some();
    crate::arch::imp::set_cx8_answer(forced.then_some(false));
}

/// Applies `PCPU_COUNTER_FORCE_NO_CX8` (any value): called as each simulated machine is made,
/// before its zone allocates, so that no add runs on the other path (an add needs a machine's
/// CPU). Until the first machine `pcpu_cx8` stays as the library left it (0 until it first
/// asks CPUID), as a C program checks (`tests/c/i386_inline_test.c`).
pub(super) fn force_no_cx8_from_environment() {
    if std::env::var_os("PCPU_COUNTER_FORCE_NO_CX8").is_some() {
        force_no_cx8(true);
    }
}
