//! i386 test kernel glue (`qemu-system-i386`): multiboot entry, AP trampoline and interrupt
//! stubs (`entry.s`), a GDT with one FS segment per CPU, COM1 serial, `isa-debug-exit`.
//!
//! The zone is on static memory ([`ZoneMemory`]); each CPU's FS segment base is its block,
//! written into its own GDT entry (3 + cpu) and loaded with
//! [`pcpu_counter::arch::set_cpu_base`]. The same binary runs on a CPU with CX8 (the
//! `cmpxchg8b` loop) and on a 486 (plain add under interrupt disable): the crate checks CPUID at
//! run time. With CX8 the kernel uses the local APIC (its timer, INIT/SIPI for the other CPUs
//! the firmware reports, the CPU index from the APIC ID); without it, as FreeBSD assumes of
//! i386 without CX8, it is a uniprocessor with the PIT behind the 8259 PIC as its timer.

use core::arch::global_asm;
use core::ptr::addr_of_mut;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use pcpu_counter::{Error, Zone, ZoneMemory};

use crate::checks::MAX_CPUS;

mod idt;
#[path = "../x86/lapic.rs"]
mod lapic;
#[path = "../x86/pc.rs"]
mod pc;
mod pic;

pub use pc::{exit, halt, irq_restore, irq_save, putc};

global_asm!(include_str!("entry.s"), options(att_syntax));

/// The machine, for the banner.
pub const NAME: &str = "qemu-system-i386 (multiboot, FS segment per CPU, LAPIC or PIT timer)";

/// The first CPU's FS entry in the GDT; CPU `i` has entry `FS_ENTRY + i`.
const FS_ENTRY: usize = 3;

/// The kernel's GDT: null, flat code (0x08), flat data (0x10), then one FS segment per CPU
/// (set by `set_cpu_base`). `entry.s` loads it (limit 55: 7 entries).
#[no_mangle]
static mut I386_GDT: [u64; FS_ENTRY + MAX_CPUS] = [
    0,
    0x00CF_9A00_0000_FFFF,
    0x00CF_9200_0000_FFFF,
    0x00CF_9200_0000_FFFF,
    0x00CF_9200_0000_FFFF,
    0x00CF_9200_0000_FFFF,
    0x00CF_9200_0000_FFFF,
];

/// Whether the kernel runs on the local APIC (a CPU with CX8) or the PIC alone (a 486).
static APIC: AtomicBool = AtomicBool::new(false);

/// The hand-over to the trampoline (`entry.s` reads them).
#[no_mangle]
static I386_AP_STACK_TOP: AtomicUsize = AtomicUsize::new(0);
#[no_mangle]
static I386_AP_CPU: AtomicUsize = AtomicUsize::new(0);

extern "C" {
    static i386_tramp_start: u8;
    static i386_tramp_end: u8;
}

/// 4 CPUs x 64 counters (only CPU 0 runs).
static MEMORY: ZoneMemory<MAX_CPUS, 1> = ZoneMemory::new();

/// The number of CPUs: QEMU's fw_cfg count with the APIC, else 1.
pub fn cpu_count() -> usize {
    if APIC.load(Ordering::Relaxed) {
        pc::fw_cfg_cpu_count()
    } else {
        1
    }
}

/// The running CPU's index: its APIC ID (0..n-1 on QEMU), or 0 on a uniprocessor.
pub fn cpu_id() -> usize {
    if APIC.load(Ordering::Relaxed) {
        lapic::id() as usize
    } else {
        0
    }
}

/// Starts this CPU's timer (LAPIC or PIT) and enables interrupts.
pub fn timer_start() {
    if APIC.load(Ordering::Relaxed) {
        lapic::timer_start();
    } else {
        pic::timer_start();
    }
    // SAFETY: the IDT and the timer handler are in place.
    unsafe { pc::interrupts_on() }
}

/// Disables interrupts and stops this CPU's timer.
pub fn timer_stop() {
    pc::interrupts_off();
    if APIC.load(Ordering::Relaxed) {
        lapic::timer_stop();
    } else {
        pic::timer_stop();
    }
}

/// Ends the timer interrupt being handled.
pub(crate) fn timer_eoi() {
    if APIC.load(Ordering::Relaxed) {
        lapic::eoi();
    } else {
        pic::eoi();
    }
}

/// The zone on static memory.
pub fn make_zone() -> Result<Zone<'static>, Error> {
    Zone::new(&MEMORY)
}

/// Writes CPU `cpu`'s FS descriptor (GDT entry 3 + cpu) with base `base` and loads it into
/// `%fs`.
///
/// # Safety
/// Runs at CPL 0 on CPU `cpu`; `base` is its block.
pub unsafe fn set_cpu_base(cpu: usize, base: usize) -> Result<(), Error> {
    let index = FS_ENTRY + cpu;
    // SAFETY: entry 3 + cpu of the loaded GDT is this CPU's FS segment; only this CPU writes
    // it, once, with interrupts off (`cpu` < MAX_CPUS: the zone's `cpu_base` checked it).
    let entry = unsafe { &mut (*addr_of_mut!(I386_GDT))[index] };
    // SAFETY: CPL 0, the GDT this CPU loaded, nothing else uses `%fs`.
    unsafe { pcpu_counter::arch::set_cpu_base(entry, (index as u16) << 3, base) }
}

/// Starts CPUs `1..wanted` through `entry.s`'s trampoline (as on x86_64); returns the
/// number running: 1 without the local APIC.
pub fn start_secondaries(wanted: usize) -> usize {
    if !APIC.load(Ordering::Relaxed) {
        return 1;
    }
    let trampoline = pc::Trampoline {
        start: core::ptr::addr_of!(i386_tramp_start),
        end: core::ptr::addr_of!(i386_tramp_end),
        stack_top: &I386_AP_STACK_TOP,
        cpu: &I386_AP_CPU,
    };
    pc::start_secondaries(&trampoline, wanted)
}

/// The CPU in 32-bit protected mode on the boot stack, from `entry.s`.
#[no_mangle]
extern "C" fn i386_bsp_entry() -> ! {
    pic::init();
    idt::load();
    let cx8 = pcpu_counter::arch::has_cx8();
    APIC.store(cx8, Ordering::Relaxed);
    if cx8 {
        lapic::enable();
    }
    crate::console::println!(
        "i386: CPU {}",
        if cx8 {
            "has CX8: local APIC, SMP"
        } else {
            "has no CX8: uniprocessor, PIT"
        }
    );
    crate::bsp_main()
}

/// An application processor in protected mode on its own stack, from the trampoline.
#[no_mangle]
extern "C" fn i386_ap_entry(cpu: usize) -> ! {
    pc::ap_started();
    idt::load();
    lapic::enable();
    crate::ap_main(cpu)
}
