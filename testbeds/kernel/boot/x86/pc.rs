//! What the x86_64 and i386 test kernels share besides the local APIC (`lapic.rs`): port
//! I/O, COM1, `isa-debug-exit`, fw_cfg's CPU count, the interrupt flag, and starting the
//! application processors through a trampoline at [`lapic::TRAMPOLINE`] on stacks of their
//! own. The C kernels' `testbeds/ckernel/boot/x86/pc.h` is the same in C.
//!
//! Used by `#[path]` from `boot/x86_64/mod.rs` and `boot/i386/mod.rs`, beside `lapic.rs`;
//! each arch keeps its entry, trampoline, GDT and IDT (their `entry.s` names the hand-over
//! statics, see [`Trampoline`]).

use core::arch::asm;
use core::ptr::addr_of_mut;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::lapic;
use crate::checks::MAX_CPUS;

pub fn outb(port: u16, value: u8) {
    // SAFETY: port I/O on a QEMU device port; no memory is touched.
    unsafe { asm!("out dx, al", in("dx") port, in("al") value, options(nomem, nostack)) }
}

pub fn outw(port: u16, value: u16) {
    // SAFETY: as in `outb`.
    unsafe { asm!("out dx, ax", in("dx") port, in("ax") value, options(nomem, nostack)) }
}

pub fn outl(port: u16, value: u32) {
    // SAFETY: as in `outb`.
    unsafe { asm!("out dx, eax", in("dx") port, in("eax") value, options(nomem, nostack)) }
}

pub fn inb(port: u16) -> u8 {
    let value: u8;
    // SAFETY: as in `outb`.
    unsafe { asm!("in al, dx", out("al") value, in("dx") port, options(nomem, nostack)) };
    value
}

/// Writes one byte to COM1 once its transmitter is empty.
pub fn putc(b: u8) {
    while inb(0x3FD) & 0x20 == 0 {
        core::hint::spin_loop();
    }
    outb(0x3F8, b);
}

/// Leaves QEMU through `isa-debug-exit` (iobase 0xf4): status 33 on pass, 35 on fail
/// (QEMU exits with `(v << 1) | 1`; a triple fault would exit with 0).
pub fn exit(pass: bool) -> ! {
    outl(0xF4, if pass { 0x10 } else { 0x11 });
    halt()
}

/// Parks this CPU for good.
pub fn halt() -> ! {
    loop {
        // SAFETY: interrupts off and halt: nothing runs on this CPU any more.
        unsafe { asm!("cli; hlt", options(nomem, nostack)) }
    }
}

/// The number of CPUs, from QEMU's fw_cfg (selector 0x05, `FW_CFG_NB_CPUS`).
pub fn fw_cfg_cpu_count() -> usize {
    outw(0x510, 0x05);
    let low = inb(0x511) as usize;
    let high = inb(0x511) as usize;
    low | high << 8
}

/// Disables this CPU's interrupts; returns (E/R)FLAGS from before.
pub fn irq_save() -> usize {
    let flags: usize;
    // SAFETY: reads the flags and clears IF; the stack use is balanced.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        asm!("pushfq", "pop {}", "cli", out(reg) flags, options(nomem))
    };
    // SAFETY: as above, with the 32-bit flags.
    #[cfg(target_arch = "x86")]
    unsafe {
        asm!("pushfd", "pop {}", "cli", out(reg) flags, options(nomem))
    };
    flags
}

/// Re-enables interrupts if they were on at the matching `irq_save`.
///
/// # Safety
/// `flags` comes from `irq_save` on this CPU, restored in LIFO order.
pub unsafe fn irq_restore(flags: usize) {
    if flags & 0x200 != 0 {
        // SAFETY: interrupts were on before the matching `irq_save`.
        unsafe { interrupts_on() }
    }
}

/// `sti`.
///
/// # Safety
/// The IDT and the handlers of every interrupt that can arrive are in place on this CPU.
pub unsafe fn interrupts_on() {
    // SAFETY: the caller's promise.
    unsafe { asm!("sti", options(nomem, nostack)) }
}

/// `cli`.
pub fn interrupts_off() {
    // SAFETY: only clears IF.
    unsafe { asm!("cli", options(nomem, nostack)) }
}

/// An arch's AP trampoline (in its `entry.s`): its bytes, and the statics it takes the
/// application processor's stack top and CPU index from.
pub struct Trampoline {
    pub start: *const u8,
    pub end: *const u8,
    pub stack_top: &'static AtomicUsize,
    pub cpu: &'static AtomicUsize,
}

/// Stacks of the application processors.
#[repr(C, align(16))]
struct Stack([u8; 64 * 1024]);
static mut AP_STACKS: [Stack; MAX_CPUS] = [const { Stack([0; 64 * 1024]) }; MAX_CPUS];
/// Set by each AP as it enters Rust ([`ap_started`]).
static AP_UP: AtomicBool = AtomicBool::new(false);

/// Starts CPUs `1..wanted` one at a time (APIC IDs are 0..n-1 on QEMU): copies the
/// trampoline to [`lapic::TRAMPOLINE`], then for each CPU hands over its stack and index,
/// sends INIT and SIPI and waits for it to check in. Returns the number of CPUs running.
pub fn start_secondaries(trampoline: &Trampoline, wanted: usize) -> usize {
    let len = trampoline.end as usize - trampoline.start as usize;
    // SAFETY: 0x8000.. is free low memory (identity mapped on x86_64) that nothing else uses.
    unsafe { core::ptr::copy_nonoverlapping(trampoline.start, lapic::TRAMPOLINE as *mut u8, len) };
    // Only this CPU touches the stacks until the AP it hands one to is up.
    let stacks = addr_of_mut!(AP_STACKS).cast::<Stack>();
    for cpu in 1..wanted.min(MAX_CPUS) {
        // The top of CPU `cpu`'s stack: where the next one starts.
        let top = stacks.wrapping_add(cpu + 1) as usize;
        trampoline.stack_top.store(top, Ordering::Relaxed);
        trampoline.cpu.store(cpu, Ordering::Relaxed);
        AP_UP.store(false, Ordering::SeqCst);
        lapic::start_ap(cpu as u32, &AP_UP);
    }
    wanted
}

/// An application processor, first thing in Rust: tells [`start_secondaries`] it is up
/// (its stack and index are taken).
pub fn ap_started() {
    AP_UP.store(true, Ordering::Release);
}
