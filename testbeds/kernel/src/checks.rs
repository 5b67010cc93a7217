//! The kernels' checks: the shared protocol (`testbeds/protocol/`, the phases, counters,
//! exact totals and `PASS`/`FAIL` lines the firmware runs too) with the kernels' numbers, plus
//! the checks only a kernel runs: one per-CPU area per kernel (`area`), on x86_64 the C
//! API counted from every CPU (`c_api`), and with `percpu-crate` percpu's own per-CPU value
//! and register intact after the counting (`percpu`), and on x86_64 and riscv64 the zone
//! grown into chunks of a kernel-owned arena (`grow`).

use pcpu_counter::{Error, Zone, ZoneLayout, ZoneMemory};
use pcpu_counter_testbed_protocol as protocol;

use crate::boot;

pub use protocol::{timer_tick, MAX_CPUS};

/// The kernels' part of the protocol: their numbers, the serial console, the arch's timer.
static BED: protocol::Bed = protocol::Bed {
    profile: protocol::KERNEL,
    print: crate::console::print,
    timer_start: boot::timer_start,
    timer_stop: boot::timer_stop,
};

/// Allocates the protocol's counters from the (installed) global zone. CPU 0, before the
/// others start.
pub fn setup() {
    if !protocol::setup(&BED) {
        boot::exit(false)
    }
}

/// CPU 0's part: releases the `started` CPUs, runs every phase with them and checks the
/// results. True if every check passed.
pub fn run_bsp(wanted: usize, started: usize) -> bool {
    protocol::start(wanted, started);
    check_area(started);
    run(0);
    protocol::finish()
}

/// A secondary CPU's part: waits for CPU 0's go, then runs every phase.
pub fn run_ap(cpu: usize) {
    protocol::wait_go();
    run(cpu);
}

/// The protocol's phases, then the C API's (x86_64), the per-CPU statics' (x86_64 without
/// `percpu-crate`: percpu owns GS there), and with `percpu-crate` whether percpu's own
/// per-CPU value and register survived them; last, on x86_64 and riscv64, the growth check
/// (it leaves the zone growing; `mod grow` in main.rs says which builds leave it out).
fn run(cpu: usize) {
    if cpu >= protocol::ncpus() {
        return;
    }
    protocol::run(cpu);
    #[cfg(target_arch = "x86_64")]
    c_api(cpu);
    #[cfg(feature = "percpu-crate")]
    crate::percpu_crate::check(cpu);
    #[cfg(all(target_arch = "x86_64", not(feature = "percpu-crate")))]
    crate::statics::run(cpu);
    #[cfg(feature = "platform-base")]
    crate::platform_base::run(cpu);
    #[cfg(pcpu_testbed_grow)]
    crate::grow::run(cpu);
}

/// One per-CPU area per kernel: a second zone that would need other per-CPU register values
/// (a static `ZoneMemory` of its own) or that overlaps the installed zone is refused at setup,
/// in this release build, instead of adding into the installed zone's slots.
fn check_area(ncpus: usize) {
    static OTHER: ZoneMemory<MAX_CPUS, 1> = ZoneMemory::new();
    let installed = *pcpu_counter::freebsd::global_zone()
        .expect("installed")
        .layout();
    let other = Zone::new(&OTHER).err();
    let mut meta = [0u64; 2];
    let overlapping = ZoneLayout {
        len: 8,
        ..installed
    };
    // SAFETY: refused before any memory is touched (it overlaps the installed zone).
    let overlap = unsafe { Zone::from_raw_parts(overlapping, &mut meta) }.err();
    protocol::report(
        "area",
        &[
            (
                "other register values refused",
                1,
                matches!(other, Some(Error::AreaMismatch { .. })) as u64,
            ),
            (
                "overlap refused",
                1,
                matches!(overlap, Some(Error::ZoneOverlap { .. })) as u64,
            ),
        ],
        ncpus,
    );
}

/// The C API, counted from every CPU (`tests/c/kernel_check.c`, linked by build.rs).
#[cfg(target_arch = "x86_64")]
fn c_api(cpu: usize) {
    extern "C" {
        fn pcpu_c_kernel_check(cpu: u32, ncpus: u32) -> i32;
    }
    let n = protocol::ncpus();
    protocol::barrier(cpu);
    // SAFETY: the global zone is installed and this CPU's GS base is set; every CPU calls it
    // once, at the same time, as the C file requires.
    let rc = unsafe { pcpu_c_kernel_check(cpu as u32, n as u32) };
    protocol::barrier(cpu);
    if cpu == 0 {
        protocol::report("c_api", &[("pcpu_c_kernel_check", 0, rc as u64)], n);
    }
    protocol::barrier(cpu);
}
