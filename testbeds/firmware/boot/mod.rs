//! Cortex-M boot code for the firmware images (`testbeds/firmware/`): vector table, reset,
//! SysTick, semihosting console and exit, the CPU index and the `critical-section`
//! implementation.
//!
//! | target | machine | CPUs | CPU index | protection |
//! |---|---|---|---|---|
//! | `thumbv6m-none-eabi` | `microbit` (nRF51, Cortex-M0) | 1 | 0 | PRIMASK |
//! | `thumbv7em-none-eabihf` | `mps2-an386` (Cortex-M4F) | 1 | 0 | PRIMASK |
//! | `thumbv8m.main-none-eabihf` | `mps2-an521` (SSE-200, 2 x Cortex-M33) | 2 | `CPU_IDENTITY` (0x4001F000) | PRIMASK + a cross-core spin lock |
//!
//! Protection is `critical_section::acquire`: save PRIMASK, `cpsid i`; release restores the
//! saved PRIMASK (so it nests). On one core that is all (3 instructions in, 1-2 out, no
//! memory traffic). On two cores it must also keep the other core away, because the portable
//! add is a plain load/add/store and a remote `fetch` reads a 64-bit slot as two words: after
//! `cpsid i` the CPU takes a spin lock (`ldrex`/`strex` through `AtomicU32::compare_exchange`)
//! unless it holds it already (nesting), and releases it in the matching release.

use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicU32, Ordering};

/// The machine, for the banner (`fw_machine` comes from the bed's build.rs, by target).
#[cfg(fw_machine = "microbit")]
pub const NAME: &str = "microbit (nRF51822, Cortex-M0)";
#[cfg(fw_machine = "mps2-an386")]
pub const NAME: &str = "mps2-an386 (Cortex-M4F)";
#[cfg(fw_machine = "mps2-an521")]
pub const NAME: &str = "mps2-an521 (SSE-200, two Cortex-M33)";

/// CPUs this image runs on: two on the an521 image (`fw_dual`), else one.
pub const NCPUS: usize = if cfg!(fw_dual) { 2 } else { 1 };

/// SSE-200 system control: `CPU_IDENTITY` (per-CPU view) and CPU 1's `CPUWAIT`.
const CPU_IDENTITY: *const u32 = 0x4001_F000 as *const u32;
const CPUWAIT: *mut u32 = 0x5002_1118 as *mut u32;

/// SysTick registers (each CPU's own, in its private peripheral bus).
const SYST_CSR: *mut u32 = 0xE000_E010 as *mut u32;
const SYST_RVR: *mut u32 = 0xE000_E014 as *mut u32;
const SYST_CVR: *mut u32 = 0xE000_E018 as *mut u32;
/// Processor-clock ticks between SysTick interrupts: 100 us at the mps2's 25 MHz (160 us at
/// the micro:bit's 16 MHz). QEMU runs the SysTick on its virtual clock, which follows the
/// host's, so the interrupts land at instructions the image cannot choose.
const SYST_RELOAD: u32 = 2_500;

// The vector table: initial SP, reset, the system exceptions and 32 external interrupts
// (none enabled). Handlers are AAPCS functions: the hardware stacks r0-r3, r12, lr, pc, xPSR.
global_asm!(
    ".section .vector_table, \"a\", %progbits",
    ".p2align 7",
    ".global __vectors",
    "__vectors:",
    ".word __stack_top",
    ".word reset",
    ".word fault_nmi",
    ".word fault_hard",
    // MemManage, BusFault, UsageFault, SecureFault (ARMv8-M; reserved before), 3 reserved.
    ".rept 4",
    ".word fault_other",
    ".endr",
    ".word 0, 0, 0",
    ".word fault_other",
    ".word fault_other",
    ".word 0",
    ".word fault_other",
    ".word systick_handler",
    ".rept 32",
    ".word fault_other",
    ".endr",
);

// Reset, Thumb-1 only (the M0 has nothing else). Picks the stack by CPU (dual-core image:
// CPU_IDENTITY), zeroes .bss and copies .data on CPU 0, turns on the FPU (hard-float images),
// then calls `firmware_start(cpu)`.
global_asm!(
    ".section .text.reset, \"ax\", %progbits",
    ".global reset",
    ".type reset, %function",
    ".thumb_func",
    "reset:",
    "movs r4, #0",
    ".if {dual}",
    "ldr r0, =0x4001F000",
    "ldr r4, [r0]",
    ".endif",
    "ldr r1, =__stack_top",
    "cmp r4, #0",
    "beq 1f",
    "ldr r1, =__stack1_top",
    "1:",
    "mov sp, r1",
    "cmp r4, #0",
    "bne 5f",
    "ldr r0, =__sbss",
    "ldr r1, =__ebss",
    "movs r2, #0",
    "2:",
    "cmp r0, r1",
    "bhs 3f",
    "str r2, [r0]",
    "adds r0, #4",
    "b 2b",
    "3:",
    "ldr r0, =__sdata",
    "ldr r1, =__edata",
    "ldr r2, =__sidata",
    "4:",
    "cmp r0, r1",
    "bhs 5f",
    "ldr r3, [r2]",
    "str r3, [r0]",
    "adds r0, #4",
    "adds r2, #4",
    "b 4b",
    "5:",
    ".if {fpu}",
    // CPACR: full access to CP10/CP11 (the FPU), before any floating-point instruction.
    "ldr r0, =0xE000ED88",
    "ldr r1, [r0]",
    "ldr r2, =0x00F00000",
    "orrs r1, r2",
    "str r1, [r0]",
    "dsb",
    "isb",
    ".endif",
    "mov r0, r4",
    "bl firmware_start",
    "6:",
    "b 6b",
    ".ltorg",
    dual = const NCPUS - 1,
    fpu = const cfg!(target_abi = "eabihf") as usize,
);

/// Entered by the reset code on each CPU, on its own stack, interrupts enabled (PRIMASK 0
/// at reset) but none configured yet.
#[unsafe(no_mangle)]
extern "C" fn firmware_start(cpu: usize) -> ! {
    if cpu == 0 {
        crate::main()
    } else {
        crate::secondary_main(cpu)
    }
}

/// The running CPU's index: `CPU_IDENTITY` on the dual-core image, 0 on one core.
#[inline]
pub fn cpu_id() -> usize {
    if NCPUS == 1 {
        0
    } else {
        // SAFETY: the SSE-200's CPU_IDENTITY register, read-only, present on the an521.
        unsafe { CPU_IDENTITY.read_volatile() as usize }
    }
}

/// Releases CPU 1 (held at reset by `CPUWAIT`); it enters `reset` like CPU 0. Returns the
/// number of CPUs that run this image.
pub fn start_secondaries() -> usize {
    if NCPUS > 1 {
        // SAFETY: the SSE-200 system control register, writable from Secure state; CPU 1
        // starts at the same vector table and picks its own stack from CPU_IDENTITY.
        unsafe { CPUWAIT.write_volatile(0) };
    }
    NCPUS
}

/// Starts this CPU's SysTick: processor clock, interrupt on, every [`SYST_RELOAD`] cycles.
pub fn timer_start() {
    // SAFETY: this CPU's own SysTick registers; its handler is `systick_handler`.
    unsafe {
        SYST_RVR.write_volatile(SYST_RELOAD - 1);
        SYST_CVR.write_volatile(0);
        SYST_CSR.write_volatile(0b111);
    }
}

/// Stops this CPU's SysTick.
pub fn timer_stop() {
    // SAFETY: as in `timer_start`.
    unsafe { SYST_CSR.write_volatile(0) };
}

#[unsafe(no_mangle)]
extern "C" fn systick_handler() {
    crate::timer_tick(cpu_id());
}

#[unsafe(no_mangle)]
extern "C" fn fault_nmi() {
    crate::fail_fault("NMI");
}

#[unsafe(no_mangle)]
extern "C" fn fault_hard() {
    crate::fail_fault("HardFault");
}

#[unsafe(no_mangle)]
extern "C" fn fault_other() {
    let ipsr: u32;
    // SAFETY: reads the number of the exception being handled; no memory effects.
    unsafe { asm!("mrs {0}, IPSR", out(reg) ipsr, options(nomem, nostack)) };
    crate::fail_fault(match ipsr {
        4 => "MemManage",
        5 => "BusFault",
        6 => "UsageFault",
        7 => "SecureFault",
        _ => "unexpected exception",
    });
}

/// One semihosting call (`bkpt 0xab`, operation in r0, argument in r1).
///
/// # Safety
/// `arg` is what the operation expects.
unsafe fn semihost(op: u32, arg: usize) -> u32 {
    let ret: u32;
    // SAFETY: QEMU (with `-semihosting-config enable=on`) handles the breakpoint; the caller
    // passes a valid argument.
    unsafe {
        asm!("bkpt 0xab", inout("r0") op => ret, in("r1") arg, options(nostack));
    }
    ret
}

/// Writes a NUL-terminated string with `SYS_WRITE0`.
pub fn write0(s: &[u8]) {
    debug_assert!(s.last() == Some(&0));
    // SAFETY: `s` ends in NUL (the console's buffer always does).
    unsafe { semihost(0x04, s.as_ptr() as usize) };
}

/// Leaves QEMU: `SYS_EXIT` with `ADP_Stopped_ApplicationExit` (status 0) or
/// `ADP_Stopped_RunTimeErrorUnknown` (status 1). On AArch32 r1 is the reason itself.
pub fn exit(pass: bool) -> ! {
    let reason = if pass { 0x2_0026 } else { 0x2_0023 };
    // SAFETY: SYS_EXIT takes the reason in r1; QEMU exits.
    unsafe { semihost(0x18, reason) };
    halt()
}

/// Parks this CPU.
pub fn halt() -> ! {
    loop {
        // SAFETY: waits for an interrupt; no memory effects.
        unsafe { asm!("wfi", options(nomem, nostack)) };
    }
}

/// The owner of the cross-core lock (`FREE` when none), dual-core image only.
#[cfg_attr(not(fw_dual), allow(dead_code))]
static LOCK_OWNER: AtomicU32 = AtomicU32::new(FREE);
const FREE: u32 = u32::MAX;
/// Restore-state bits: PRIMASK was set before the acquire; this acquire took the lock.
const WAS_MASKED: u32 = 1;
#[cfg_attr(not(fw_dual), allow(dead_code))]
const TOOK_LOCK: u32 = 2;

/// Enters protection: PRIMASK, then (two CPUs) the cross-core lock.
pub fn protect() -> u32 {
    let primask: u32;
    // SAFETY: reads PRIMASK and masks interrupts on this CPU; acts as a compiler barrier.
    unsafe { asm!("mrs {0}, PRIMASK", "cpsid i", out(reg) primask, options(nostack)) };
    #[allow(unused_mut)]
    let mut state = primask & WAS_MASKED;
    #[cfg(fw_dual)]
    {
        let me = cpu_id() as u32;
        // Only this CPU ever stores its own index there, so seeing it means a nested acquire.
        if LOCK_OWNER.load(Ordering::Relaxed) != me {
            // ldrex/strex: the dual-core image is ARMv8-M Mainline.
            while LOCK_OWNER
                .compare_exchange_weak(FREE, me, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                core::hint::spin_loop();
            }
            state |= TOOK_LOCK;
        }
    }
    state
}

/// Leaves protection: the lock if this acquire took it, then PRIMASK as it was.
///
/// # Safety
/// `state` is from the matching `protect` on this CPU, released in LIFO order.
pub unsafe fn unprotect(state: u32) {
    if state & TOOK_LOCK != 0 {
        LOCK_OWNER.store(FREE, Ordering::Release);
    }
    if state & WAS_MASKED == 0 {
        // SAFETY: unmasks interrupts that the matching `protect` masked; compiler barrier.
        unsafe { asm!("cpsie i", options(nostack)) };
    }
}

struct Protection;

// SAFETY: `protect` masks this CPU's interrupts (everything that can run in between on one
// core) and, on two cores, excludes the other core with the lock; `release` restores exactly
// the state the matching `acquire` saw, so nesting works.
unsafe impl critical_section::Impl for Protection {
    unsafe fn acquire() -> critical_section::RawRestoreState {
        protect()
    }

    unsafe fn release(state: critical_section::RawRestoreState) {
        // SAFETY: critical-section passes the matching acquire's state, LIFO.
        unsafe { unprotect(state) }
    }
}

critical_section::set_impl!(Protection);
