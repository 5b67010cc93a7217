//! riscv64 test kernel glue (`qemu-system-riscv64 -M virt -bios default`, S-mode under
//! OpenSBI): entry and trap vector (`entry.s`), the virt machine's 16550 UART, SBI HSM to
//! count and start harts, the SBI timer, the `sifive_test` device to exit.
//!
//! The boot hart is whichever OpenSBI picked (its hart id arrives in a0): it becomes CPU 0,
//! and the other harts, in hart id order, CPUs 1, 2, ... `sscratch` holds each hart's CPU
//! index (`cpu_id`), and `tp` (`gp` with the `riscv-gp` feature, linked with `--no-relax`)
//! its block of a zone on static memory ([`ZoneMemory`]), set with
//! [`pcpu_counter::arch::set_cpu_base`].
//!
//! Built for `riscv64imac-unknown-none-elf` (no floating point), so that the trap entry saves
//! only integer registers.

use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use pcpu_counter::{Counter, Error, Zone, ZoneMemory};

use crate::checks::MAX_CPUS;

global_asm!(include_str!("entry.s"));

/// The machine, for the banner.
pub const NAME: &str =
    "qemu-system-riscv64 -M virt (OpenSBI, SBI HSM, per-CPU base per hart, SBI timer)";

/// 4 CPUs x 128 counters.
static MEMORY: ZoneMemory<MAX_CPUS, 2> = ZoneMemory::new();

static AP_UP: AtomicBool = AtomicBool::new(false);
/// The boot hart's id (from a0), set once before any other hart starts.
static BOOT_HART: AtomicUsize = AtomicUsize::new(0);

/// Hart ids probed with HSM `hart_get_status` (virt numbers them 0..n-1); `entry.s` has the
/// same bound (`RISCV64_MAX_HART_ID`).
const MAX_HART_ID: usize = 32;

/// Timer period in `time` ticks (the virt timebase is 10 MHz: 50 us).
const PERIOD: u64 = 500;

/// The 16550 UART: transmit register and line status (bit 5: transmitter empty).
const UART: usize = 0x1000_0000;
const UART_LSR: usize = UART + 5;
/// The `sifive_test` device: 0x5555 exits QEMU with 0, `(code << 16) | 0x3333` with `code`.
const SIFIVE_TEST: usize = 0x10_0000;

/// `scause` of a supervisor timer interrupt.
const SCAUSE_TIMER: usize = (1 << 63) | 5;
/// `sie.STIE` and `sstatus.SIE`.
const SIE_STIE: usize = 1 << 5;
const SSTATUS_SIE: usize = 1 << 1;

/// Writes one byte to the UART once it can take it.
pub fn putc(b: u8) {
    // SAFETY: the virt machine's UART registers (paging off: physical addresses).
    unsafe {
        while (UART_LSR as *const u8).read_volatile() & 0x20 == 0 {
            core::hint::spin_loop();
        }
        (UART as *mut u8).write_volatile(b);
    }
}

/// Leaves QEMU through the `sifive_test` device: status 0 on pass, 1 on fail.
pub fn exit(pass: bool) -> ! {
    let value: u32 = if pass { 0x5555 } else { (1 << 16) | 0x3333 };
    // SAFETY: the test device's register; the write ends the emulation.
    unsafe { (SIFIVE_TEST as *mut u32).write_volatile(value) };
    halt()
}

/// Parks this hart for good.
pub fn halt() -> ! {
    loop {
        // SAFETY: masks interrupts and waits: nothing runs on this hart any more.
        unsafe { asm!("csrci sstatus, 2", "wfi", options(nomem, nostack)) }
    }
}

/// An SBI call: a7 = extension, a6 = function, arguments in a0..a2. Returns (error, value).
fn sbi(eid: usize, fid: usize, a0: usize, a1: usize, a2: usize) -> (isize, usize) {
    let (error, value): (isize, usize);
    // SAFETY: an environment call into OpenSBI, which only does what the call asks.
    unsafe {
        asm!("ecall", inlateout("a0") a0 => error, inlateout("a1") a1 => value, in("a2") a2,
             in("a6") fid, in("a7") eid, options(nostack))
    };
    (error, value)
}

const SBI_HSM: usize = 0x48_534D;
const HSM_HART_START: usize = 0;
const HSM_HART_GET_STATUS: usize = 2;
const SBI_TIME: usize = 0x5449_4D45;
const TIME_SET_TIMER: usize = 0;

/// Whether hart `id` exists: HSM `hart_get_status` fails for a hart id that does not.
fn hart_exists(id: usize) -> bool {
    sbi(SBI_HSM, HSM_HART_GET_STATUS, id, 0, 0).0 == 0
}

/// The number of harts.
pub fn cpu_count() -> usize {
    (0..MAX_HART_ID).filter(|&id| hart_exists(id)).count()
}

/// The running hart's CPU index, from its `sscratch`.
pub fn cpu_id() -> usize {
    let cpu: usize;
    // SAFETY: reads this hart's scratch CSR.
    unsafe { asm!("csrr {}, sscratch", out(reg) cpu, options(nomem, nostack, preserves_flags)) };
    cpu
}

/// Masks interrupts; returns `sstatus` from before.
pub fn irq_save() -> usize {
    let sstatus: usize;
    // SAFETY: reads sstatus and clears its SIE bit, atomically.
    unsafe { asm!("csrrci {}, sstatus, 2", out(reg) sstatus, options(nomem, nostack)) };
    sstatus
}

/// Restores `sstatus.SIE` from the matching `irq_save`.
///
/// # Safety
/// `sstatus` comes from `irq_save` on this hart, restored in LIFO order.
pub unsafe fn irq_restore(sstatus: usize) {
    if sstatus & SSTATUS_SIE != 0 {
        // SAFETY: re-enables interrupts this hart had enabled.
        unsafe { asm!("csrsi sstatus, 2", options(nomem, nostack)) }
    }
}

/// The `time` CSR.
fn now() -> u64 {
    let t: u64;
    // SAFETY: reads the time counter.
    unsafe { asm!("rdtime {}", out(reg) t, options(nomem, nostack, preserves_flags)) };
    t
}

/// Arms this hart's timer `PERIOD` from now through SBI `set_timer`.
fn arm_timer() {
    sbi(SBI_TIME, TIME_SET_TIMER, (now() + PERIOD) as usize, 0, 0);
}

/// Starts this hart's timer and unmasks interrupts.
pub fn timer_start() {
    arm_timer();
    // SAFETY: enables this hart's timer interrupt; the trap vector is set up.
    unsafe { asm!("csrs sie, {}", "csrsi sstatus, 2", in(reg) SIE_STIE, options(nomem, nostack)) }
}

/// Masks interrupts and stops this hart's timer.
pub fn timer_stop() {
    // SAFETY: masks interrupts and this hart's timer interrupt.
    unsafe { asm!("csrci sstatus, 2", "csrc sie, {}", in(reg) SIE_STIE, options(nomem, nostack)) };
    // A deadline that never comes also clears the pending bit.
    sbi(SBI_TIME, TIME_SET_TIMER, usize::MAX, 0, 0);
}

/// The zone on static memory.
pub fn make_zone() -> Result<Zone<'static>, Error> {
    Zone::new(&MEMORY)
}

/// Points this hart's `tp` (`gp`) at `base`. The `register` broken bring-up writes `tp`
/// whatever the build adds through, as a kernel that keeps its per-CPU pointer in `tp` does.
///
/// # Safety
/// Runs in S-mode on the hart whose block `base` is.
pub unsafe fn set_cpu_base(_cpu: usize, base: usize) -> Result<(), Error> {
    if crate::BROKEN_BRINGUP == Some("register") {
        // SAFETY: nothing in this kernel uses tp (no TLS).
        unsafe { asm!("mv tp, {}", in(reg) base, options(nomem, nostack, preserves_flags)) };
        return Ok(());
    }
    // SAFETY: per the caller; nothing else in this kernel uses tp (no TLS) or gp (linked
    // with --no-relax, no `__global_pointer$`).
    unsafe { pcpu_counter::arch::set_cpu_base(base) }
}

/// The kernel's `Counter::add`, out of line and kept by `link.ld`, so that `cargo xtask qemu`
/// can disassemble and pin it: `ld` the offset, `mv` tp (gp), `add`, `amoadd.d zero`, `ret`.
#[no_mangle]
#[inline(never)]
pub fn pcpu_probe_riscv64_kernel_add(counter: &Counter<'_>, v: i64) {
    counter.add(v)
}

extern "C" {
    fn riscv64_secondary_entry();
    /// `entry.s`: each hart id's CPU index + 1, 0 until the hart is started.
    static riscv64_hart_cpu: [AtomicUsize; MAX_HART_ID];
}

/// Starts harts with HSM `hart_start`, in hart id order skipping the boot hart, one at a time,
/// until `wanted` CPUs run. Returns the number of CPUs running. Each hart's CPU index goes to
/// `entry.s` through `riscv64_hart_cpu`, not the opaque value, which OpenSBI 1.1 may not have
/// stored yet when the hart leaves (see `entry.s`).
pub fn start_secondaries(wanted: usize) -> usize {
    let boot = BOOT_HART.load(Ordering::Relaxed);
    let entry = riscv64_secondary_entry as *const () as usize;
    let mut cpu = 1;
    for hart in (0..MAX_HART_ID).filter(|&h| h != boot && hart_exists(h)) {
        if cpu >= wanted {
            break;
        }
        AP_UP.store(false, Ordering::SeqCst);
        // SAFETY: entry.s defines the table, MAX_HART_ID words long, and only reads it.
        unsafe { riscv64_hart_cpu[hart].store(cpu + 1, Ordering::Release) };
        let (rc, _) = sbi(SBI_HSM, HSM_HART_START, hart, entry, 0);
        if rc != 0 {
            crate::console::println!("riscv64: HSM hart_start for hart {hart} returned {rc}");
            return cpu;
        }
        while !AP_UP.load(Ordering::Acquire) {
            core::hint::spin_loop();
        }
        cpu += 1;
    }
    cpu
}

/// The boot hart, from `entry.s`.
#[no_mangle]
extern "C" fn riscv64_bsp_entry(hart: usize) -> ! {
    BOOT_HART.store(hart, Ordering::Relaxed);
    crate::console::println!("riscv64: boot hart {hart} is CPU 0");
    crate::bsp_main()
}

/// A secondary hart on its own stack, from `entry.s`.
#[no_mangle]
extern "C" fn riscv64_ap_entry(cpu: usize) -> ! {
    AP_UP.store(true, Ordering::Release);
    crate::ap_main(cpu)
}

/// A trap: the timer re-arms itself and runs the checks' handler; anything else fails the run.
#[no_mangle]
extern "C" fn riscv64_trap(scause: usize, sepc: usize, stval: usize) {
    if scause == SCAUSE_TIMER {
        arm_timer();
        crate::checks::timer_tick(cpu_id());
        return;
    }
    crate::console::print_unlocked(format_args!(
        "\nFAIL trap scause {scause:#x} sepc {sepc:#x} stval {stval:#x} on CPU {}\n",
        cpu_id()
    ));
    exit(false)
}
