//! aarch64 test kernel glue (`qemu-system-aarch64 -M virt`): entry and vectors (`entry.s`),
//! PL011 serial, PSCI (HVC) to count and start CPUs, the EL1 virtual timer through GICv2,
//! semihosting exit.
//!
//! Each CPU's `TPIDR_EL1` is its block of a zone on static memory ([`ZoneMemory`]), set with
//! [`pcpu_counter::arch::set_cpu_base`]; the CPU index comes from `MPIDR_EL1`.

use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicBool, Ordering};

use pcpu_counter::{Error, Zone, ZoneMemory};

use crate::checks::MAX_CPUS;

mod gic;

global_asm!(include_str!("entry.s"));

/// The machine, for the banner.
pub const NAME: &str = "qemu-system-aarch64 -M virt (PSCI, TPIDR_EL1 per CPU, generic timer)";

/// 4 CPUs x 128 counters.
static MEMORY: ZoneMemory<MAX_CPUS, 2> = ZoneMemory::new();

static AP_UP: AtomicBool = AtomicBool::new(false);

/// Timer period in counter ticks (QEMU's counter runs at 62.5 MHz: 50 us).
const PERIOD: u64 = 3125;

const UART: usize = 0x0900_0000;

/// Writes one byte to the PL011 once its FIFO has room.
pub fn putc(b: u8) {
    // SAFETY: the PL011's flag and data registers (MMU off: physical addresses).
    unsafe {
        while ((UART + 0x18) as *const u32).read_volatile() & 0x20 != 0 {
            core::hint::spin_loop();
        }
        (UART as *mut u32).write_volatile(b as u32);
    }
}

/// Leaves QEMU through semihosting `SYS_EXIT` (ADP_Stopped_ApplicationExit): status 0 on
/// pass, 1 on fail.
pub fn exit(pass: bool) -> ! {
    let block: [u64; 2] = [0x20026, if pass { 0 } else { 1 }];
    // SAFETY: the semihosting call reads the two-word block and ends the emulation.
    unsafe { asm!("hlt #0xf000", in("w0") 0x18u32, in("x1") &block, options(nostack)) };
    halt()
}

/// Parks this CPU for good.
pub fn halt() -> ! {
    loop {
        // SAFETY: masks interrupts and waits: nothing runs on this CPU any more.
        unsafe { asm!("msr daifset, #2", "wfe", options(nomem, nostack)) }
    }
}

/// A PSCI call through HVC (the conduit of `-M virt` at EL1).
fn psci(function: u32, a: u64, b: u64, c: u64) -> i64 {
    let result: i64;
    // SAFETY: PSCI calls change power state only as asked; x0-x3 are the interface.
    unsafe {
        asm!("hvc #0", inout("x0") function as u64 => result, in("x1") a, in("x2") b,
             in("x3") c, options(nomem, nostack))
    };
    result
}

const PSCI_CPU_ON: u32 = 0xC400_0003;
const PSCI_AFFINITY_INFO: u32 = 0xC400_0004;

/// The number of CPUs: PSCI `AFFINITY_INFO` answers for every existing MPIDR (Aff0 = 0..n on
/// virt) and fails for the first one past the end.
pub fn cpu_count() -> usize {
    (0..MAX_CPUS as u64 + 1)
        .take_while(|&mpidr| psci(PSCI_AFFINITY_INFO, mpidr, 0, 0) >= 0)
        .count()
}

/// The running CPU's index: `MPIDR_EL1.Aff0`.
pub fn cpu_id() -> usize {
    let mpidr: usize;
    // SAFETY: reads an ID register.
    unsafe { asm!("mrs {}, mpidr_el1", out(reg) mpidr, options(nomem, nostack, preserves_flags)) };
    mpidr & 0xFF
}

/// Masks IRQs; returns DAIF from before.
pub fn irq_save() -> usize {
    let daif: usize;
    // SAFETY: reads DAIF and masks IRQs.
    unsafe { asm!("mrs {}, daif", "msr daifset, #2", out(reg) daif, options(nomem, nostack)) };
    daif
}

/// Restores DAIF from the matching `irq_save`.
///
/// # Safety
/// `daif` comes from `irq_save` on this CPU, restored in LIFO order.
pub unsafe fn irq_restore(daif: usize) {
    // SAFETY: puts back the mask bits this CPU had.
    unsafe { asm!("msr daif, {}", in(reg) daif, options(nomem, nostack)) }
}

/// Starts this CPU's virtual timer and unmasks IRQs.
pub fn timer_start() {
    // SAFETY: programs this CPU's own timer; the vectors and GIC are set up.
    unsafe {
        asm!("msr cntv_tval_el0, {}", "msr cntv_ctl_el0, {}", "isb", "msr daifclr, #2",
             in(reg) PERIOD, in(reg) 1u64, options(nomem, nostack))
    }
}

/// Masks IRQs and stops this CPU's timer.
pub fn timer_stop() {
    // SAFETY: masks IRQs and disables this CPU's own timer.
    unsafe {
        asm!(
            "msr daifset, #2",
            "msr cntv_ctl_el0, xzr",
            "isb",
            options(nomem, nostack)
        )
    }
}

/// The zone on static memory.
pub fn make_zone() -> Result<Zone<'static>, Error> {
    Zone::new(&MEMORY)
}

/// Points this CPU's `TPIDR_EL1` at `base`.
///
/// # Safety
/// Runs at EL1 on the CPU whose block `base` is.
pub unsafe fn set_cpu_base(_cpu: usize, base: usize) -> Result<(), Error> {
    // SAFETY: per the caller; nothing else in this kernel uses TPIDR_EL1.
    unsafe { pcpu_counter::arch::set_cpu_base(base) }
}

extern "C" {
    fn aarch64_secondary_entry();
}

/// Starts CPUs `1..wanted` with PSCI `CPU_ON` (context: the CPU's index), one at a time.
/// Returns the number of CPUs running.
pub fn start_secondaries(wanted: usize) -> usize {
    for cpu in 1..wanted {
        AP_UP.store(false, Ordering::SeqCst);
        let entry = aarch64_secondary_entry as *const () as usize as u64;
        let rc = psci(PSCI_CPU_ON, cpu as u64, entry, cpu as u64);
        if rc != 0 {
            crate::console::println!("aarch64: PSCI CPU_ON for CPU {cpu} returned {rc}");
            return cpu;
        }
        while !AP_UP.load(Ordering::Acquire) {
            core::hint::spin_loop();
        }
    }
    wanted
}

/// The boot CPU, from `entry.s`.
#[no_mangle]
extern "C" fn aarch64_bsp_entry() -> ! {
    gic::init_distributor();
    gic::init_cpu();
    crate::bsp_main()
}

/// A secondary CPU on its own stack, from `entry.s`.
#[no_mangle]
extern "C" fn aarch64_ap_entry(cpu: usize) -> ! {
    gic::init_cpu();
    AP_UP.store(true, Ordering::Release);
    crate::ap_main(cpu)
}

/// An IRQ: the timer's tick re-arms the timer and runs the checks' handler.
#[no_mangle]
extern "C" fn aarch64_irq() {
    let iar = gic::acknowledge();
    if iar & 0x3FF == gic::SPURIOUS {
        return;
    }
    if iar & 0x3FF == gic::TIMER_INTID {
        // SAFETY: re-arms this CPU's own timer, which also drops its interrupt line.
        unsafe { asm!("msr cntv_tval_el0, {}", in(reg) PERIOD, options(nomem, nostack)) };
        crate::checks::timer_tick(cpu_id());
    }
    gic::end(iar);
}

/// Any other exception: report it and fail the run.
#[no_mangle]
extern "C" fn aarch64_fault(kind: u64, esr: u64, elr: u64, far: u64) -> ! {
    crate::console::print_unlocked(format_args!(
        "\nFAIL exception kind {kind} ESR {esr:#x} ELR {elr:#x} FAR {far:#x} on CPU {}\n",
        cpu_id()
    ));
    exit(false)
}
