//! The local APIC (xAPIC MMIO at 0xFEE00000, identity mapped): enable, EOI, the periodic
//! timer, and INIT/SIPI to start the application processors.
//!
//! Shared by the x86_64 and i386 test kernels (`#[path]` from `boot/x86_64/mod.rs` and
//! `boot/i386/mod.rs`); their trampolines, GDTs and AP stacks stay in their own directories.

use core::sync::atomic::{AtomicBool, Ordering};

const BASE: usize = 0xFEE0_0000;
const ID: usize = 0x20;
const EOI: usize = 0xB0;
const SVR: usize = 0xF0;
const ICR_LOW: usize = 0x300;
const ICR_HIGH: usize = 0x310;
const LVT_TIMER: usize = 0x320;
const TIMER_INITIAL: usize = 0x380;
const TIMER_DIVIDE: usize = 0x3E0;

/// The timer's vector (see `idt.rs`) and the spurious vector.
pub const TIMER_VECTOR: u32 = 0x40;
pub const SPURIOUS_VECTOR: u32 = 0xFF;

/// Timer period in bus clocks at divide-by-1 (QEMU's APIC clock is 1 GHz: 50 us).
const PERIOD: u32 = 50_000;

fn read(reg: usize) -> u32 {
    // SAFETY: an xAPIC register, identity mapped by the boot page tables.
    unsafe { ((BASE + reg) as *const u32).read_volatile() }
}

fn write(reg: usize, value: u32) {
    // SAFETY: as in `read`.
    unsafe { ((BASE + reg) as *mut u32).write_volatile(value) }
}

/// This CPU's APIC ID.
pub fn id() -> u32 {
    read(ID) >> 24
}

/// Software-enables this CPU's APIC with the spurious vector.
pub fn enable() {
    write(SVR, 0x100 | SPURIOUS_VECTOR);
}

/// Ends the interrupt being handled.
pub fn eoi() {
    write(EOI, 0);
}

/// Starts this CPU's periodic timer.
pub fn timer_start() {
    write(TIMER_DIVIDE, 0xB);
    write(LVT_TIMER, TIMER_VECTOR | 1 << 17);
    write(TIMER_INITIAL, PERIOD);
}

/// Stops and masks this CPU's timer.
pub fn timer_stop() {
    write(LVT_TIMER, 1 << 16);
    write(TIMER_INITIAL, 0);
}

/// Sends an IPI (`command` to ICR low) to APIC `apic_id` and waits until it is delivered.
fn ipi(apic_id: u32, command: u32) {
    write(ICR_HIGH, apic_id << 24);
    write(ICR_LOW, command);
    while read(ICR_LOW) & (1 << 12) != 0 {
        core::hint::spin_loop();
    }
}

/// Where both kernels copy their AP trampoline (their `entry.s` is assembled for this
/// address): the SIPI vector is its page, 0x08.
pub const TRAMPOLINE: usize = 0x8000;

/// INIT: puts `apic_id` into wait-for-SIPI.
fn send_init(apic_id: u32) {
    ipi(apic_id, 0x4500);
}

/// Startup IPI: `apic_id` starts in real mode at [`TRAMPOLINE`].
fn send_sipi(apic_id: u32) {
    ipi(apic_id, 0x4600 | (TRAMPOLINE >> 12) as u32);
}

/// Starts the CPU with APIC ID `apic_id` at [`TRAMPOLINE`] and returns once it has set `up`
/// (the caller cleared it and placed the trampoline and the CPU's stack).
///
/// INIT, SIPI, and a second SIPI if the first went unanswered for a while (the MP protocol's
/// resend); after that the CPU is waited for without a bound: a CPU that never starts hangs
/// the kernel, which the harness's timeout turns into a failure (no figure here depends on
/// how fast the host runs the vCPUs).
pub fn start_ap(apic_id: u32, up: &AtomicBool) {
    send_init(apic_id);
    send_sipi(apic_id);
    if !(0..50_000_000u32).any(|_| up.load(Ordering::Acquire)) {
        send_sipi(apic_id);
        while !up.load(Ordering::Acquire) {
            core::hint::spin_loop();
        }
    }
}
