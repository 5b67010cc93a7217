//! x86_64 test kernel glue: multiboot entry (`entry.s`), 4 GiB identity map, COM1 serial,
//! fw_cfg CPU count, LAPIC timer and INIT/SIPI, `isa-debug-exit`.
//!
//! Per-CPU memory is the kernel's own: each CPU's GS base is its 4 KiB `PerCpu` block, whose
//! first word is the CPU's index (`cpu_id` reads `gs:[0]`), and the zone is hosted inside
//! the blocks ([`ZoneLayout`] with `offset` 64), as a kernel that already owns GS does.

use core::arch::global_asm;
use core::ptr::addr_of_mut;
use core::sync::atomic::AtomicUsize;

use pcpu_counter::{Error, Zone, ZoneLayout, ZoneMeta};

use crate::checks::MAX_CPUS;

mod idt;
#[path = "../x86/lapic.rs"]
mod lapic;
#[path = "../x86/pc.rs"]
mod pc;

pub use pc::{exit, halt, irq_restore, irq_save, putc};

global_asm!(include_str!("entry.s"), options(att_syntax));
global_asm!(include_str!("vectors.s"), options(att_syntax));

/// The machine, for the banner.
pub const NAME: &str = "qemu-system-x86_64 (multiboot, GS base per CPU, LAPIC timer)";

/// Bytes of each CPU's block, and where the counter area starts inside it.
const BLOCK: usize = 4096;
const COUNTER_AREA: usize = 64;
const SLOTS: usize = (BLOCK - COUNTER_AREA) / 8;

/// One CPU's block: GS base points here.
#[repr(C, align(4096))]
struct PerCpu {
    /// The CPU's index, read by `cpu_id` as `gs:[0]`.
    id: usize,
    _reserved: [usize; COUNTER_AREA / 8 - 1],
    /// The zone's slots for this CPU.
    counters: [u64; SLOTS],
}

const _: () = assert!(core::mem::size_of::<PerCpu>() == BLOCK);

static mut PERCPU: [PerCpu; MAX_CPUS] = [const {
    PerCpu {
        id: 0,
        _reserved: [0; COUNTER_AREA / 8 - 1],
        counters: [0; SLOTS],
    }
}; MAX_CPUS];
/// The zone's metadata: a zero baseline and a bitmap bit per slot.
static META: ZoneMeta<{ ZoneLayout::meta_words_for(SLOTS) }> = ZoneMeta::new();

/// The hand-over to the trampoline (`entry.s` reads them).
#[no_mangle]
static AP_STACK_TOP: AtomicUsize = AtomicUsize::new(0);
#[no_mangle]
static AP_CPU: AtomicUsize = AtomicUsize::new(0);

extern "C" {
    static ap_tramp_start: u8;
    static ap_tramp_end: u8;
}

/// The number of CPUs, from QEMU's fw_cfg.
pub fn cpu_count() -> usize {
    pc::fw_cfg_cpu_count()
}

/// The running CPU's index, with `percpu-crate`: percpu's per-CPU value.
#[cfg(feature = "percpu-crate")]
pub fn cpu_id() -> usize {
    crate::percpu_crate::cpu_id()
}

/// The running CPU's index: word 0 of its per-CPU block.
#[cfg(not(feature = "percpu-crate"))]
pub fn cpu_id() -> usize {
    let id: usize;
    // SAFETY: GS base is this CPU's `PerCpu` block (set in `set_cpu_base` before anything
    // asks), whose first word is its index.
    unsafe {
        core::arch::asm!("mov {}, gs:[0]", out(reg) id, options(nostack, readonly, preserves_flags))
    };
    id
}

/// Starts this CPU's LAPIC timer and enables interrupts.
pub fn timer_start() {
    lapic::timer_start();
    // SAFETY: the IDT and the timer handler are in place on this CPU.
    unsafe { pc::interrupts_on() }
}

/// Disables interrupts and stops this CPU's timer.
pub fn timer_stop() {
    pc::interrupts_off();
    lapic::timer_stop();
}

/// The zone, hosted in the per-CPU blocks after their first 64 bytes.
pub fn make_zone() -> Result<Zone<'static>, Error> {
    let layout = ZoneLayout {
        base: addr_of_mut!(PERCPU) as usize,
        stride: BLOCK,
        offset: COUNTER_AREA,
        len: SLOTS * 8,
        ncpus: MAX_CPUS,
    };
    // SAFETY: the counter areas of `PERCPU` are used by nothing but this zone, which is made
    // once (by the boot CPU) and lives forever.
    unsafe { Zone::hosted(layout, &META) }
}

/// Writes `cpu` into the block at `base` and points this CPU's GS base at it.
///
/// # Safety
/// Runs on CPU `cpu`, at CPL 0; `base` is that CPU's block.
pub unsafe fn set_cpu_base(cpu: usize, base: usize) -> Result<(), Error> {
    // SAFETY: `base` is CPU `cpu`'s `PerCpu` block; only this CPU writes its `id`.
    unsafe { (base as *mut usize).write_volatile(cpu) };
    // SAFETY: CPL 0 on the CPU that owns the block; nothing here used GS before.
    unsafe { pcpu_counter::arch::set_cpu_base(base) }
}

/// Starts CPUs `1..wanted` through `entry.s`'s trampoline; returns the number running.
pub fn start_secondaries(wanted: usize) -> usize {
    let trampoline = pc::Trampoline {
        start: core::ptr::addr_of!(ap_tramp_start),
        end: core::ptr::addr_of!(ap_tramp_end),
        stack_top: &AP_STACK_TOP,
        cpu: &AP_CPU,
    };
    pc::start_secondaries(&trampoline, wanted)
}

/// The boot CPU in 64-bit mode, from `entry.s`.
#[no_mangle]
extern "C" fn x86_64_bsp_entry() -> ! {
    // Mask the legacy 8259 PICs: the firmware maps the PIT's IRQ 0 to vector 8.
    pc::outb(0x21, 0xFF);
    pc::outb(0xA1, 0xFF);
    idt::load();
    lapic::enable();
    crate::bsp_main()
}

/// An application processor in 64-bit mode on its own stack, from the trampoline.
#[no_mangle]
extern "C" fn x86_64_ap_entry(cpu: usize) -> ! {
    pc::ap_started();
    idt::load();
    lapic::enable();
    crate::ap_main(cpu)
}
