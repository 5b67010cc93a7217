//! i386 test kernel glue (`qemu-system-i386`, one CPU): multiboot entry and interrupt stubs
//! (`entry.s`), a GDT whose entry 3 is the FS segment, COM1 serial, the PIT through the 8259
//! PIC, `isa-debug-exit`.
//!
//! The zone is on static memory ([`ZoneMemory`]); the CPU's FS segment base is its block,
//! written into GDT entry 3 and loaded with [`pcpu_counter::arch::set_cpu_base_in`]. The
//! kernel is a uniprocessor, as FreeBSD assumes of i386 without CX8; the same binary runs on a
//! CPU with CX8 (`cmpxchg8b` loop) and on a 486 (plain add under interrupt disable), as the
//! crate checks CPUID at run time.

use core::arch::{asm, global_asm};
use core::ptr::addr_of_mut;

use pcpu_counter::{Zone, ZoneMemory};

use crate::checks::MAX_CPUS;

mod idt;
mod pic;

global_asm!(include_str!("entry.s"), options(att_syntax));

/// The machine, for the banner.
pub const NAME: &str = "qemu-system-i386 (multiboot, FS segment per CPU, PIT timer)";

/// The FS selector: GDT entry 3.
const FS_SELECTOR: u16 = 3 << 3;

/// The kernel's GDT: null, flat code (0x08), flat data (0x10), the FS segment (0x18, set by
/// `set_cpu_base`). `entry.s` loads it.
#[no_mangle]
static mut I386_GDT: [u64; 4] = [
    0,
    0x00CF_9A00_0000_FFFF,
    0x00CF_9200_0000_FFFF,
    0x00CF_9200_0000_FFFF,
];

/// 4 CPUs x 64 counters (only CPU 0 runs).
static MEMORY: ZoneMemory<MAX_CPUS, 1> = ZoneMemory::new();

pub(crate) fn outb(port: u16, value: u8) {
    // SAFETY: port I/O on a QEMU device port; no memory is touched.
    unsafe { asm!("out dx, al", in("dx") port, in("al") value, options(nomem, nostack)) }
}

pub(crate) fn inb(port: u16) -> u8 {
    let value: u8;
    // SAFETY: as in `outb`.
    unsafe { asm!("in al, dx", out("al") value, in("dx") port, options(nomem, nostack)) };
    value
}

fn outl(port: u16, value: u32) {
    // SAFETY: as in `outb`.
    unsafe { asm!("out dx, eax", in("dx") port, in("eax") value, options(nomem, nostack)) }
}

/// Writes one byte to COM1 once its transmitter is empty.
pub fn putc(b: u8) {
    while inb(0x3FD) & 0x20 == 0 {
        core::hint::spin_loop();
    }
    outb(0x3F8, b);
}

/// Leaves QEMU through `isa-debug-exit`: status 33 on pass, 35 on fail.
pub fn exit(pass: bool) -> ! {
    outl(0xF4, if pass { 0x10 } else { 0x11 });
    halt()
}

/// Parks the CPU for good.
pub fn halt() -> ! {
    loop {
        // SAFETY: interrupts off and halt.
        unsafe { asm!("cli; hlt", options(nomem, nostack)) }
    }
}

/// A uniprocessor kernel.
pub fn cpu_count() -> usize {
    1
}

/// The only CPU.
pub fn cpu_id() -> usize {
    0
}

/// Disables interrupts; returns EFLAGS from before.
pub fn irq_save() -> usize {
    let flags: usize;
    // SAFETY: reads EFLAGS and clears IF; the stack use is balanced.
    unsafe { asm!("pushfd", "pop {}", "cli", out(reg) flags, options(nomem)) };
    flags
}

/// Re-enables interrupts if they were on at the matching `irq_save`.
///
/// # Safety
/// `flags` comes from `irq_save`, restored in LIFO order.
pub unsafe fn irq_restore(flags: usize) {
    if flags & 0x200 != 0 {
        // SAFETY: interrupts were on before the matching `irq_save`.
        unsafe { asm!("sti", options(nomem, nostack)) }
    }
}

/// Starts the PIT and enables interrupts.
pub fn timer_start() {
    pic::timer_start();
    // SAFETY: the IDT and the timer handler are in place.
    unsafe { asm!("sti", options(nomem, nostack)) }
}

/// Disables interrupts and masks the PIT.
pub fn timer_stop() {
    // SAFETY: only clears IF.
    unsafe { asm!("cli", options(nomem, nostack)) }
    pic::timer_stop();
}

/// The zone on static memory.
pub fn make_zone() -> Zone<'static> {
    match Zone::new(&MEMORY) {
        Ok(zone) => zone,
        Err(e) => crate::fail_setup("Zone::new", e),
    }
}

/// Writes the FS descriptor (GDT entry 3) with base `base` and loads it into `%fs`.
///
/// # Safety
/// Runs at CPL 0 on the only CPU; `base` is its block.
pub unsafe fn set_cpu_base(_cpu: usize, base: usize) {
    // SAFETY: entry 3 of the loaded GDT is the FS segment; only this code writes it, once,
    // with interrupts off.
    let entry = unsafe { &mut (*addr_of_mut!(I386_GDT))[3] };
    // SAFETY: CPL 0, the GDT this CPU loaded, nothing else uses `%fs`.
    if !unsafe { pcpu_counter::arch::set_cpu_base_in(entry, FS_SELECTOR, base) } {
        crate::fail_setup(
            "set_cpu_base_in",
            pcpu_counter::Error::Misaligned { addr: base },
        );
    }
}

/// No other CPUs.
pub fn start_secondaries(_wanted: usize) -> usize {
    1
}

/// The CPU in 32-bit protected mode on the boot stack, from `entry.s`.
#[no_mangle]
extern "C" fn i386_bsp_entry() -> ! {
    pic::init();
    idt::load();
    crate::console::println!(
        "i386: CPU {} CX8",
        if pcpu_counter::arch::has_cx8() {
            "has"
        } else {
            "has no"
        }
    );
    crate::bsp_main()
}
