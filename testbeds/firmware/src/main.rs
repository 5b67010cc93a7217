//! The Cortex-M test firmware: the crate's portable fallback on emulated microcontrollers,
//! with a SysTick handler adding to the same counters as the main loop.
//!
//! One image per target (`cargo xtask qemu thumbv6m|thumbv7em|thumbv8m-dual`), boot code in
//! this bed's `boot/mod.rs`, one linker script per machine there. Every CPU of the image runs
//! each phase at once; CPU 0 checks the exact totals and prints one line per check over
//! semihosting (`PASS <name> ...` or `FAIL <name> <what> expected X got Y`), then `DONE`, and
//! exits QEMU with the verdict.
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

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use boot::NCPUS;
use console::println;
use pcpu_counter::{
    counter_enter, counter_exit, counter_u64_add, counter_u64_add_protected, counter_u64_alloc,
    counter_u64_fetch, counter_u64_zero, CounterU64, Wait, Zone, ZoneMemory,
};

/// Adds per CPU on each of the four `sums` counters.
const SUM_ADDS: u64 = 10_000;
/// `counter_enter` .. `counter_exit` batches per CPU.
const BATCHES: u64 = 5_000;
/// Adds per CPU in the `fetch_and_zero` race (with SysTick adding), and how often it zeroes.
const RACE_ADDS: u64 = 20_000;
const RACE_EVERY: u64 = 61;
/// What the SysTick handler adds to the race counter each time.
const RACE_HANDLER_ADD: u64 = 7;
/// Adds per CPU before and after `zero`.
const ZERO_ADDS: u64 = 2_000;
/// The timer phase runs until a CPU has made this many adds and taken this many ticks...
const TIMER_MIN_ADDS: u64 = 20_000;
const TIMER_MIN_TICKS: u64 = 1000;
/// ... or gives up after this many adds (a timer that never fires is a failure, not a hang).
const TIMER_MAX_ADDS: u64 = 5_000_000;
/// What the SysTick handler adds to the timer counter each time.
const HANDLER_ADD: u64 = 1000;

/// What the SysTick handler of a CPU adds to, set by that CPU around a phase.
const PHASE_NONE: u32 = 0;
const PHASE_RACE: u32 = 1;
const PHASE_TIMER: u32 = 2;

/// The counters of the fixed phases, allocated once by CPU 0.
struct Counters {
    sums: [CounterU64; 4],
    packets: CounterU64,
    bytes: CounterU64,
    race: CounterU64,
    zeroed: CounterU64,
    timer: CounterU64,
}

/// How many counters `Counters` holds: the zone's `in_use` outside the alloc phase.
const FIXED: usize = 9;

/// A cell written before a barrier (or before the other CPU starts) and read after it.
struct Shared<T>(UnsafeCell<T>);

// SAFETY: every write happens-before the reads through the barrier's release/acquire (or the
// `GO` flag), and no two CPUs write the same cell in the same phase, except `PLAIN`, which
// is only touched inside protection (which excludes the other CPU).
unsafe impl<T> Sync for Shared<T> {}

impl<T: Copy> Shared<T> {
    const fn new(value: T) -> Self {
        Shared(UnsafeCell::new(value))
    }
    fn get(&self) -> T {
        // SAFETY: see the `Sync` impl: no write races with this read.
        unsafe { self.0.get().read_volatile() }
    }
    fn set(&self, value: T) {
        // SAFETY: see the `Sync` impl: this CPU is the only writer now.
        unsafe { self.0.get().write_volatile(value) }
    }
}

static MEMORY: ZoneMemory<NCPUS, 1> = ZoneMemory::new();
static COUNTERS: Shared<Option<&'static Counters>> = Shared::new(None);
static GO: AtomicBool = AtomicBool::new(false);
static UP: [AtomicBool; NCPUS] = [const { AtomicBool::new(false) }; NCPUS];
static STARTED: AtomicUsize = AtomicUsize::new(1);
/// Barrier epochs, one per CPU, each written only by its CPU (loads and stores only: the
/// Cortex-M0 has no read-modify-write atomics).
static EPOCH: [AtomicU32; NCPUS] = [const { AtomicU32::new(0) }; NCPUS];
static REPORT: [Shared<[u64; 2]>; NCPUS] = [const { Shared::new([0; 2]) }; NCPUS];
/// Per CPU: what its handler adds to, and the ticks it took in the current phase (written
/// only by that CPU: by its handler, or by its main loop with the phase off).
static PHASE: [AtomicU32; NCPUS] = [const { AtomicU32::new(PHASE_NONE) }; NCPUS];
static TICKS: [AtomicU32; NCPUS] = [const { AtomicU32::new(0) }; NCPUS];
/// Incremented with plain loads and stores inside `counter_enter` .. `counter_exit`.
static PLAIN: Shared<u64> = Shared::new(0);
static CHECKS: AtomicU32 = AtomicU32::new(0);
static FAILED: AtomicU32 = AtomicU32::new(0);

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
    println!(
        "pcpu-counter test firmware on {}: {} ({} CPUs)",
        boot::NAME,
        pcpu_counter::arch::NAME,
        NCPUS
    );
    let zone = match Zone::new(&MEMORY).and_then(pcpu_counter::install) {
        Ok(zone) => zone,
        Err(e) => {
            println!("FAIL setup zone: {e:?}");
            boot::exit(false)
        }
    };
    let alloc = || match counter_u64_alloc(Wait::NoWait) {
        Some(counter) => counter,
        None => {
            println!("FAIL setup counter_u64_alloc returned None");
            boot::exit(false)
        }
    };
    static STORE: Shared<Option<Counters>> = Shared(UnsafeCell::new(None));
    // SAFETY: only CPU 0 runs here, before the other CPU starts and before any SysTick.
    let counters: &'static Counters = unsafe {
        (*STORE.0.get()) = Some(Counters {
            sums: [alloc(), alloc(), alloc(), alloc()],
            packets: alloc(),
            bytes: alloc(),
            race: alloc(),
            zeroed: alloc(),
            timer: alloc(),
        });
        (*STORE.0.get()).as_ref().expect("just set")
    };
    COUNTERS.set(Some(counters));
    UP[0].store(true, Ordering::Release);
    let wanted = boot::start_secondaries();
    let mut started = 1;
    for cpu in 1..wanted {
        let mut spins = 0u32;
        while !UP[cpu].load(Ordering::Acquire) && spins < 20_000_000 {
            spins += 1;
            core::hint::spin_loop();
        }
        started += UP[cpu].load(Ordering::Acquire) as usize;
    }
    STARTED.store(started, Ordering::Release);
    GO.store(true, Ordering::Release);
    report(
        "cpus",
        &[("started", NCPUS as u64, started as u64)],
        started,
    );
    report(
        "zone",
        &[
            ("ncpus", NCPUS as u64, zone.ncpus() as u64),
            ("in_use", FIXED as u64, zone.in_use() as u64),
        ],
        started,
    );
    boot::timer_start();
    run(0, zone);
    println!(
        "DONE {} checks, {} failed",
        CHECKS.load(Ordering::Relaxed),
        FAILED.load(Ordering::Relaxed)
    );
    boot::timer_stop();
    boot::exit(FAILED.load(Ordering::Relaxed) == 0)
}

/// A secondary CPU, from reset: checks in, waits for CPU 0's go, runs every phase.
pub fn secondary_main(cpu: usize) -> ! {
    if cpu >= NCPUS {
        boot::halt()
    }
    UP[cpu].store(true, Ordering::Release);
    while !GO.load(Ordering::Acquire) {
        core::hint::spin_loop();
    }
    let zone = match pcpu_counter::global_zone() {
        Ok(zone) => zone,
        Err(_) => boot::halt(),
    };
    boot::timer_start();
    run(cpu, zone);
    boot::timer_stop();
    boot::halt()
}

/// The SysTick handler's work on CPU `cpu`: in the race and timer phases, add to the
/// phase's counter and count the tick.
pub fn timer_tick(cpu: usize) {
    let phase = PHASE[cpu].load(Ordering::Relaxed);
    if phase == PHASE_NONE {
        return;
    }
    let Some(c) = COUNTERS.get() else { return };
    match phase {
        PHASE_RACE => c.race.add(RACE_HANDLER_ADD as i64),
        _ => c.timer.add(HANDLER_ADD as i64),
    }
    // Only this CPU's handler writes it while the phase is on.
    let ticks = TICKS[cpu].load(Ordering::Relaxed);
    TICKS[cpu].store(ticks + 1, Ordering::Relaxed);
}

/// Turns this CPU's handler's adds on for `phase` (ticks from 0), or off.
fn set_phase(cpu: usize, phase: u32) {
    if phase != PHASE_NONE {
        TICKS[cpu].store(0, Ordering::Relaxed);
    }
    PHASE[cpu].store(phase, Ordering::Relaxed);
}

/// A fault: report it and leave QEMU.
pub fn fail_fault(what: &str) -> ! {
    console::print_unlocked(format_args!(
        "FAIL fault {what} on CPU {}\n",
        boot::cpu_id()
    ));
    boot::exit(false)
}

/// Waits until every started CPU has reached this barrier.
fn barrier(cpu: usize) {
    let n = STARTED.load(Ordering::Acquire);
    let epoch = EPOCH[cpu].load(Ordering::Relaxed) + 1;
    EPOCH[cpu].store(epoch, Ordering::Release);
    for other in EPOCH.iter().take(n) {
        while other.load(Ordering::Acquire) < epoch {
            core::hint::spin_loop();
        }
    }
}

fn reports(n: usize, i: usize) -> u64 {
    REPORT.iter().take(n).map(|r| r.get()[i]).sum()
}

/// Prints one check's line: `PASS` if every `(what, expected, got)` matches, else one
/// `FAIL` line per mismatch.
fn report(name: &str, values: &[(&str, u64, u64)], ncpus: usize) {
    CHECKS.store(CHECKS.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    let mut failed = false;
    for (what, expected, got) in values.iter().filter(|(_, e, g)| e != g) {
        println!("FAIL {name} {what} expected {expected} got {got}");
        failed = true;
    }
    if failed {
        FAILED.store(FAILED.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    } else {
        let (what, _, got) = values[0];
        let checked = values.len();
        println!("PASS {name} on {ncpus} CPUs: {what} = {got} exact ({checked} values checked)");
    }
}

/// Every phase on this CPU; CPU 0 checks each after every CPU finished it.
fn run(cpu: usize, zone: &'static Zone<'static>) {
    let n = STARTED.load(Ordering::Acquire);
    if cpu >= n {
        return;
    }
    let c = COUNTERS.get().expect("set up before GO");
    let checker = cpu == 0;
    let nn = n as u64;
    let cpus_sum = nn * (nn + 1) / 2;

    // Exact sums: several counters, positive, negative and above 2^32 adds.
    barrier(cpu);
    for k in 0..SUM_ADDS {
        counter_u64_add(&c.sums[0], 1);
        c.sums[1].add(cpu as i64 + 1);
        c.sums[2].add(-3);
        c.sums[3].inc();
        c.sums[3].add((1 << 33) + (k & 0xff) as i64);
    }
    barrier(cpu);
    if checker {
        let low: u64 = (0..SUM_ADDS).map(|k| k & 0xff).sum();
        let slot = |i: usize| {
            if i < n {
                c.sums[1].cpu_slot(i).unwrap_or(u64::MAX)
            } else {
                (i as u64 + 1) * SUM_ADDS
            }
        };
        report(
            "sums",
            &[
                ("sums[0]", nn * SUM_ADDS, c.sums[0].fetch()),
                ("sums[1]", SUM_ADDS * cpus_sum, c.sums[1].fetch()),
                (
                    "sums[2]",
                    (3 * nn * SUM_ADDS).wrapping_neg(),
                    c.sums[2].fetch(),
                ),
                (
                    "sums[3]",
                    nn * (SUM_ADDS * ((1 << 33) + 1) + low),
                    c.sums[3].fetch(),
                ),
                ("slot cpu0", SUM_ADDS, slot(0)),
                ("slot cpu1", 2 * SUM_ADDS, slot(1)),
            ],
            n,
        );
    }

    // Protected batches.
    barrier(cpu);
    for _ in 0..BATCHES {
        let guard = counter_enter();
        counter_u64_add_protected(&guard, &c.packets, 1);
        c.bytes.add_protected(&guard, 1500);
        // A plain shared word, read and written only inside protection: exact only if
        // protection excludes the other core too (the cross-core lock on the an521).
        PLAIN.set(PLAIN.get() + 1);
        counter_exit(guard);
    }
    barrier(cpu);
    if checker {
        let b = nn * BATCHES;
        report(
            "protected",
            &[
                ("packets", b, counter_u64_fetch(&c.packets)),
                ("bytes", 1500 * b, c.bytes.fetch()),
                (
                    "plain word under counter_enter on every CPU",
                    b,
                    PLAIN.get(),
                ),
            ],
            n,
        );
    }

    // fetch_and_zero racing this CPU's SysTick handler's adds (and the other CPU's adds).
    barrier(cpu);
    set_phase(cpu, PHASE_RACE);
    let mut deltas = 0u64;
    for k in 0..RACE_ADDS {
        c.race.add(cpu as i64 + 1);
        if k % RACE_EVERY == cpu as u64 {
            deltas = deltas.wrapping_add(c.race.fetch_and_zero());
        }
    }
    set_phase(cpu, PHASE_NONE);
    REPORT[cpu].set([deltas, TICKS[cpu].load(Ordering::Relaxed) as u64]);
    barrier(cpu);
    if checker {
        let ticks = reports(n, 1);
        let total = RACE_ADDS * cpus_sum + ticks * RACE_HANDLER_ADD;
        let slots = (0..n).fold(0u64, |a, i| a.wrapping_add(c.race.cpu_slot(i).unwrap_or(0)));
        report(
            "fetch_and_zero",
            &[
                (
                    "deltas + final fetch",
                    total,
                    reports(n, 0).wrapping_add(c.race.fetch()),
                ),
                ("raw slots (never written by zero)", total, slots),
            ],
            n,
        );
        println!("     fetch_and_zero raced {ticks} SysTick handler adds of {RACE_HANDLER_ADD}");
    }

    // zero after adds, then more adds: only the later adds count, and no slot is written.
    barrier(cpu);
    (0..ZERO_ADDS).for_each(|_| c.zeroed.add(cpu as i64 + 1));
    barrier(cpu);
    if checker {
        counter_u64_zero(&c.zeroed);
        REPORT[0].set([c.zeroed.fetch(), 0]);
    }
    barrier(cpu);
    (0..ZERO_ADDS).for_each(|_| c.zeroed.add(7));
    barrier(cpu);
    if checker {
        let slots = (0..n).fold(0u64, |a, i| {
            a.wrapping_add(c.zeroed.cpu_slot(i).unwrap_or(0))
        });
        report(
            "zero",
            &[
                (
                    "fetch after later adds",
                    7 * nn * ZERO_ADDS,
                    c.zeroed.fetch(),
                ),
                ("fetch right after zero", 0, REPORT[0].get()[0]),
                (
                    "raw slots",
                    ZERO_ADDS * cpus_sum + 7 * nn * ZERO_ADDS,
                    slots,
                ),
            ],
            n,
        );
    }

    // alloc from every CPU until the zone is full, then free everything and allocate again.
    barrier(cpu);
    let mut held: [Option<CounterU64>; 64] = [const { None }; 64];
    let mut got = 0u64;
    let mut bad = 0u64;
    for slot in held.iter_mut() {
        let Some(counter) = counter_u64_alloc(Wait::NoWait) else {
            break;
        };
        if (0..zone.ncpus()).any(|i| counter.cpu_slot(i) != Ok(0)) || counter.fetch() != 0 {
            bad += 1;
        }
        counter.add(cpu as i64 + 1);
        *slot = Some(counter);
        got += 1;
    }
    REPORT[cpu].set([got, bad]);
    barrier(cpu);
    if checker {
        REPORT[0].set([
            got,
            bad + (zone.in_use() != zone.capacity()) as u64
                + counter_u64_alloc(Wait::NoWait).is_some() as u64,
        ]);
    }
    barrier(cpu);
    for counter in held.iter_mut().filter_map(Option::take) {
        if counter.fetch() != cpu as u64 + 1 {
            bad += 1;
        }
        pcpu_counter::counter_u64_free(counter);
    }
    if checker {
        let full_bad = REPORT[0].get()[1];
        REPORT[0].set([got, full_bad + bad]);
    } else {
        REPORT[cpu].set([got, bad]);
    }
    barrier(cpu);
    if checker {
        let again = counter_u64_alloc(Wait::NoWait);
        let fresh = again.as_ref().map(|c| c.fetch() == 0) == Some(true);
        report(
            "alloc_free",
            &[
                (
                    "allocated until full",
                    (zone.capacity() - FIXED) as u64,
                    reports(n, 0),
                ),
                (
                    "bad counters (not fresh, full zone allocated, lost adds)",
                    0,
                    reports(n, 1),
                ),
                (
                    "in_use after free + 1",
                    FIXED as u64 + 1,
                    zone.in_use() as u64,
                ),
                ("alloc after free is fresh", 1, fresh as u64),
            ],
            n,
        );
        drop(again);
    }

    // Adds, plain and protected, with this CPU's SysTick handler adding to the same counter.
    barrier(cpu);
    set_phase(cpu, PHASE_TIMER);
    let mut adds = 0u64;
    loop {
        c.timer.add(1);
        adds += 1;
        if adds % 8 == 0 {
            let guard = counter_enter();
            c.timer.add_protected(&guard, 2);
            counter_exit(guard);
            adds += 2;
        }
        let ticks = TICKS[cpu].load(Ordering::Relaxed) as u64;
        if (adds >= TIMER_MIN_ADDS && ticks >= TIMER_MIN_TICKS) || adds >= TIMER_MAX_ADDS {
            break;
        }
    }
    set_phase(cpu, PHASE_NONE);
    REPORT[cpu].set([adds, TICKS[cpu].load(Ordering::Relaxed) as u64]);
    barrier(cpu);
    if checker {
        let (adds, ticks) = (reports(n, 0), reports(n, 1));
        let enough = (0..n).all(|i| REPORT[i].get()[1] >= TIMER_MIN_TICKS);
        report(
            "timer",
            &[
                (
                    "main-loop adds + handler adds x 1000",
                    adds + ticks * HANDLER_ADD,
                    c.timer.fetch(),
                ),
                ("every CPU took enough ticks", 1, enough as u64),
            ],
            n,
        );
        println!(
            "     timer: {adds} main-loop adds, {ticks} SysTick handler adds of {HANDLER_ADD}"
        );
    }
    barrier(cpu);
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    console::print_unlocked(format_args!(
        "FAIL panic on CPU {}: {info}\n",
        boot::cpu_id()
    ));
    boot::exit(false)
}
