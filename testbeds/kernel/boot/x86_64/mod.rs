//! x86_64 test kernel glue: multiboot entry (`entry.s`), 4 GiB identity map, COM1 serial,
//! fw_cfg CPU count, LAPIC timer and INIT/SIPI, `isa-debug-exit`.
//!
//! Per-CPU memory is the kernel's own: each CPU's GS base is its 4 KiB `PerCpu` block, whose
//! first word is the CPU's index (`cpu_id` reads `gs:[0]`), and the zone is hosted inside
//! the blocks ([`ZoneLayout`] with `offset` 64), as a kernel that already owns GS does.

use core::arch::{asm, global_asm};
use core::ptr::addr_of_mut;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use pcpu_counter::{Zone, ZoneLayout};

use crate::checks::MAX_CPUS;

mod idt;
#[path = "../x86/lapic.rs"]
mod lapic;

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
static mut META: [u64; pcpu_counter::meta_words(SLOTS)] = [0; pcpu_counter::meta_words(SLOTS)];

/// Stacks of the application processors, and the hand-over to the trampoline.
#[repr(C, align(16))]
struct Stack([u8; 64 * 1024]);
static mut AP_STACKS: [Stack; MAX_CPUS] = [const { Stack([0; 64 * 1024]) }; MAX_CPUS];
#[no_mangle]
static AP_STACK_TOP: AtomicUsize = AtomicUsize::new(0);
#[no_mangle]
static AP_CPU: AtomicUsize = AtomicUsize::new(0);
static AP_UP: AtomicBool = AtomicBool::new(false);

extern "C" {
    static ap_tramp_start: u8;
    static ap_tramp_end: u8;
}

fn outb(port: u16, value: u8) {
    // SAFETY: port I/O on a QEMU device port; no memory is touched.
    unsafe { asm!("out dx, al", in("dx") port, in("al") value, options(nomem, nostack)) }
}

fn outw(port: u16, value: u16) {
    // SAFETY: as in `outb`.
    unsafe { asm!("out dx, ax", in("dx") port, in("ax") value, options(nomem, nostack)) }
}

fn outl(port: u16, value: u32) {
    // SAFETY: as in `outb`.
    unsafe { asm!("out dx, eax", in("dx") port, in("eax") value, options(nomem, nostack)) }
}

fn inb(port: u16) -> u8 {
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
pub fn cpu_count() -> usize {
    outw(0x510, 0x05);
    let low = inb(0x511) as usize;
    let high = inb(0x511) as usize;
    low | high << 8
}

/// The running CPU's index: word 0 of its per-CPU block.
pub fn cpu_id() -> usize {
    let id: usize;
    // SAFETY: GS base is this CPU's `PerCpu` block (set in `set_cpu_base` before anything
    // asks), whose first word is its index.
    unsafe { asm!("mov {}, gs:[0]", out(reg) id, options(nostack, readonly, preserves_flags)) };
    id
}

/// Disables this CPU's interrupts; returns RFLAGS from before.
pub fn irq_save() -> usize {
    let flags: usize;
    // SAFETY: reads RFLAGS and clears IF; the stack use is balanced.
    unsafe { asm!("pushfq", "pop {}", "cli", out(reg) flags, options(nomem)) };
    flags
}

/// Re-enables interrupts if they were on at the matching `irq_save`.
///
/// # Safety
/// `flags` comes from `irq_save` on this CPU, restored in LIFO order.
pub unsafe fn irq_restore(flags: usize) {
    if flags & 0x200 != 0 {
        // SAFETY: interrupts were on before the matching `irq_save`.
        unsafe { asm!("sti", options(nomem, nostack)) }
    }
}

/// Starts this CPU's LAPIC timer and enables interrupts.
pub fn timer_start() {
    lapic::timer_start();
    // SAFETY: the IDT and the timer handler are in place on this CPU.
    unsafe { asm!("sti", options(nomem, nostack)) }
}

/// Disables interrupts and stops this CPU's timer.
pub fn timer_stop() {
    // SAFETY: only clears IF.
    unsafe { asm!("cli", options(nomem, nostack)) }
    lapic::timer_stop();
}

/// The zone, hosted in the per-CPU blocks after their first 64 bytes.
pub fn make_zone() -> Zone<'static> {
    let layout = ZoneLayout {
        base: addr_of_mut!(PERCPU) as usize,
        stride: BLOCK,
        offset: COUNTER_AREA,
        len: SLOTS * 8,
        ncpus: MAX_CPUS,
    };
    // SAFETY: the counter areas of `PERCPU` and `META` are used by nothing but this zone,
    // which is made once (by the boot CPU) and lives forever.
    match unsafe { Zone::from_raw_parts(layout, &mut *addr_of_mut!(META)) } {
        Ok(zone) => zone,
        Err(e) => crate::fail_setup("from_raw_parts", e),
    }
}

/// Writes `cpu` into the block at `base` and points this CPU's GS base at it.
///
/// # Safety
/// Runs on CPU `cpu`, at CPL 0; `base` is that CPU's block.
pub unsafe fn set_cpu_base(cpu: usize, base: usize) {
    // SAFETY: `base` is CPU `cpu`'s `PerCpu` block; only this CPU writes its `id`.
    unsafe { (base as *mut usize).write_volatile(cpu) };
    // SAFETY: CPL 0 on the CPU that owns the block; nothing here used GS before.
    if !unsafe { pcpu_counter::arch::set_cpu_base(base) } {
        crate::fail_setup(
            "set_cpu_base",
            pcpu_counter::Error::Misaligned { addr: base },
        );
    }
}

/// Starts CPUs `1..wanted` one at a time (APIC IDs are 0..n-1 on QEMU): copies the
/// trampoline to 0x8000, then INIT and SIPI and waits for the CPU to check in.
/// Returns the number of CPUs running.
pub fn start_secondaries(wanted: usize) -> usize {
    let start = core::ptr::addr_of!(ap_tramp_start);
    let len = core::ptr::addr_of!(ap_tramp_end) as usize - start as usize;
    // SAFETY: 0x8000.. is free low memory (identity mapped) that nothing else uses.
    unsafe { core::ptr::copy_nonoverlapping(start, lapic::TRAMPOLINE as *mut u8, len) };
    for cpu in 1..wanted {
        // SAFETY: only this CPU touches the stacks until the AP it hands one to is up.
        let stack = unsafe { addr_of_mut!(AP_STACKS[cpu]) };
        AP_STACK_TOP.store(
            stack as usize + core::mem::size_of::<Stack>(),
            Ordering::Relaxed,
        );
        AP_CPU.store(cpu, Ordering::Relaxed);
        AP_UP.store(false, Ordering::SeqCst);
        lapic::start_ap(cpu as u32, &AP_UP);
    }
    wanted
}

/// The boot CPU in 64-bit mode, from `entry.s`.
#[no_mangle]
extern "C" fn x86_64_bsp_entry() -> ! {
    // Mask the legacy 8259 PICs: the firmware maps the PIT's IRQ 0 to vector 8.
    outb(0x21, 0xFF);
    outb(0xA1, 0xFF);
    idt::load();
    lapic::enable();
    crate::bsp_main()
}

/// An application processor in 64-bit mode on its own stack, from the trampoline.
#[no_mangle]
extern "C" fn x86_64_ap_entry(cpu: usize) -> ! {
    AP_UP.store(true, Ordering::Release);
    idt::load();
    lapic::enable();
    crate::ap_main(cpu)
}
