//! The Cortex-M test firmware: the crate's portable fallback on emulated microcontrollers,
//! with a SysTick handler adding to the same counters as the main loop.
//!
//! One image per target (`cargo xtask qemu thumbv6m|thumbv7em|thumbv8m-dual`), boot code in
//! this bed's `boot/mod.rs`, one linker script per machine there. The checks are the shared
//! protocol's (`testbeds/protocol/`, which the QEMU kernels run too) with the firmware's
//! numbers: every CPU of the image runs each phase at once; CPU 0 checks the exact totals and
//! prints one line per check over semihosting (`PASS <name> ...` or `FAIL <name> <what>
//! expected X got Y`), then `DONE`, and exits QEMU with the verdict.
//!
//! The crate's hooks: `current_cpu` is the boot module's `cpu_id` (0 on one core,
//! `CPU_IDENTITY` on the an521); local protection is the default, `critical-section`, whose
//! implementation is the boot module's (PRIMASK, plus a cross-core lock on two cores).
#![no_std]
#![no_main]
#![warn(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

#[path = "../boot/mod.rs"]
mod boot;
mod console;

use core::sync::atomic::{AtomicBool, Ordering};

use boot::NCPUS;
use pcpu_counter::{Zone, ZoneMemory};
use pcpu_counter_testbed_protocol as protocol;

pub use protocol::timer_tick;

const _: () = assert!(NCPUS <= protocol::MAX_CPUS);

/// The firmware's part of the protocol: its numbers, the semihosting console, SysTick.
static BED: protocol::Bed = protocol::Bed {
    profile: protocol::FIRMWARE,
    print: console::print,
    timer_start: boot::timer_start,
    timer_stop: boot::timer_stop,
};

static MEMORY: ZoneMemory<NCPUS, 1> = ZoneMemory::new();

/// A bring-up broken on purpose (`cargo xtask qemu thumbv8m-dual` builds it with
/// `PCPU_TESTBED_BROKEN_BRINGUP=ncpus`): the zone made for the boot CPU alone, which the
/// bring-up check must catch on the second core.
const BROKEN_BRINGUP: Option<&str> = option_env!("PCPU_TESTBED_BROKEN_BRINGUP");
static MEMORY_FOR_ONE: ZoneMemory<1, 1> = ZoneMemory::new();

/// The zone: on every CPU's memory, or on one CPU's in the broken bring-up.
fn make_zone() -> Result<Zone<'static>, pcpu_counter::Error> {
    if BROKEN_BRINGUP == Some("ncpus") {
        Zone::new(&MEMORY_FOR_ONE)
    } else {
        Zone::new(&MEMORY)
    }
}

/// The bring-up check on `cpu`: the platform's `current_cpu` must be `cpu`, and a CPU the zone
/// has.
fn bring_up(cpu: usize) {
    let checked = pcpu_counter::freebsd::global_zone().and_then(|zone| zone.check_cpu(cpu));
    if let Err(e) = checked {
        console::println!("FAIL bring-up: {e}");
        boot::exit(false)
    }
}
/// Set by each CPU once it runs (the other CPU may fail to start).
static UP: [AtomicBool; NCPUS] = [const { AtomicBool::new(false) }; NCPUS];

/// The crate's hooks.
struct Firmware;

// SAFETY: `cpu_id` is the running CPU's index (0, or CPU_IDENTITY), below NCPUS, the zone's
// CPU count; code never migrates. Protection is the boot module's critical section, which
// nests and keeps this CPU's SysTick (and on two cores the other CPU) out.
unsafe impl pcpu_counter::Platform for Firmware {
    fn current_cpu() -> usize {
        boot::cpu_id()
    }
    fn protect() -> usize {
        boot::protect() as usize
    }
    unsafe fn unprotect(state: usize) {
        // SAFETY: the crate passes the matching `protect`'s state, LIFO.
        unsafe { boot::unprotect(state as u32) }
    }
}

pcpu_counter::set_platform!(Firmware);

/// CPU 0, from reset: sets up, starts the other CPU, runs and checks every phase, exits.
pub fn main() -> ! {
    console::println!(
        "pcpu-counter test firmware on {}: {} ({} CPUs)",
        boot::NAME,
        pcpu_counter::arch::NAME,
        NCPUS
    );
    let zone = match make_zone().and_then(pcpu_counter::freebsd::install) {
        Ok(zone) => zone,
        Err(e) => {
            console::println!("FAIL setup zone: {e:?}");
            boot::exit(false)
        }
    };
    bring_up(0);
    if !protocol::setup(&BED) {
        boot::exit(false)
    }
    UP[0].store(true, Ordering::Release);
    let wanted = boot::start_secondaries();
    let mut started = 1;
    for up in UP.iter().take(wanted).skip(1) {
        let mut spins = 0u32;
        while !up.load(Ordering::Acquire) && spins < 20_000_000 {
            spins += 1;
            core::hint::spin_loop();
        }
        started += up.load(Ordering::Acquire) as usize;
    }
    protocol::start(NCPUS, started);
    protocol::report(
        "zone",
        &[
            ("ncpus", NCPUS as u64, zone.ncpus() as u64),
            ("in_use", protocol::FIXED as u64, zone.in_use() as u64),
        ],
        started,
    );
    protocol::run(0);
    boot::exit(protocol::finish())
}

/// A secondary CPU, from reset: checks in, waits for CPU 0's go, runs every phase.
pub fn secondary_main(cpu: usize) -> ! {
    if cpu >= NCPUS {
        boot::halt()
    }
    bring_up(cpu);
    UP[cpu].store(true, Ordering::Release);
    protocol::wait_go();
    protocol::run(cpu);
    boot::halt()
}

/// A fault: report it and leave QEMU.
pub fn fail_fault(what: &str) -> ! {
    console::print_unlocked(format_args!(
        "FAIL fault {what} on CPU {}\n",
        boot::cpu_id()
    ));
    boot::exit(false)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    console::print_unlocked(format_args!(
        "FAIL panic on CPU {}: {info}\n",
        boot::cpu_id()
    ));
    boot::exit(false)
}
