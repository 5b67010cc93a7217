//! The checks every test kernel runs, from every CPU at once, each printed as one line:
//! `PASS <name> ...` or `FAIL <name> <what> expected X got Y`.
//!
//! CPU 0 allocates the counters, every CPU runs each phase at the same time, and after a
//! barrier CPU 0 compares the counters with the exact totals. Each figure a CPU reports for a
//! phase (its deltas, its adds, its failures) lands in `REPORT[cpu]`.

use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use pcpu_counter::{
    counter_enter, counter_exit, counter_u64_add, counter_u64_add_protected, counter_u64_alloc,
    counter_u64_fetch, counter_u64_free, counter_u64_zero, CounterU64, Error, Wait, Zone,
    ZoneLayout, ZoneMemory,
};

use crate::boot;
use crate::console::println;

/// CPUs the kernels' zones are built for; more CPUs than this are left parked.
pub const MAX_CPUS: usize = 4;

/// Adds per CPU on each of the four `sums` counters.
const SUM_ADDS: u64 = 20_000;
/// `counter_enter` .. `counter_exit` batches per CPU.
const BATCHES: u64 = 10_000;
/// Adds per CPU in the `fetch_and_zero` race, and how often each CPU zeroes.
const RACE_ADDS: u64 = 20_000;
const RACE_EVERY: u64 = 61;
/// Adds per CPU before and after `zero`.
const ZERO_ADDS: u64 = 5_000;
/// Alloc/free rounds per CPU, and counters held at once per round.
const ALLOC_ROUNDS: u64 = 300;
const ALLOC_HELD: usize = 4;
/// The timer phase runs until a CPU has made this many adds and taken this many ticks...
const TIMER_MIN_ADDS: u64 = 20_000;
const TIMER_MIN_TICKS: usize = 300;
/// ... or gives up after this many adds (a timer that never fires is a failure, not a hang).
const TIMER_MAX_ADDS: u64 = 200_000_000;
/// What the timer handler adds each time it runs.
const HANDLER_ADD: u64 = 1000;

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

static COUNTERS: spin::Once<Counters> = spin::Once::new();
static ZONE: spin::Once<&'static Zone<'static>> = spin::Once::new();
/// Set by CPU 0 once every CPU it could start is up; `NCPUS` is then valid.
static GO: AtomicBool = AtomicBool::new(false);
static NCPUS: AtomicUsize = AtomicUsize::new(0);
static BARRIER: Barrier = Barrier::new();
static REPORT: [spin::Mutex<u64>; MAX_CPUS] = [const { spin::Mutex::new(0) }; MAX_CPUS];
static TICKS: [AtomicUsize; MAX_CPUS] = [const { AtomicUsize::new(0) }; MAX_CPUS];
static FAILED: AtomicUsize = AtomicUsize::new(0);
static CHECKS: AtomicUsize = AtomicUsize::new(0);

/// A reusable barrier: the last CPU to arrive opens the next generation. Only `usize`
/// atomics, which every target here has (a 486 has no 64-bit atomics at all).
struct Barrier {
    arrived: AtomicUsize,
    generation: AtomicUsize,
}

impl Barrier {
    const fn new() -> Self {
        Barrier {
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
        }
    }

    fn wait(&self) {
        let n = NCPUS.load(Ordering::Acquire);
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == n {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
        } else {
            while self.generation.load(Ordering::Acquire) == generation {
                core::hint::spin_loop();
            }
        }
    }
}

/// Allocates the fixed counters from the (installed) global zone. CPU 0, before the others
/// start.
pub fn setup(zone: &'static Zone<'static>) {
    let alloc = || match counter_u64_alloc(Wait::NoWait) {
        Some(counter) => counter,
        None => {
            println!("FAIL setup counter_u64_alloc returned None");
            boot::exit(false)
        }
    };
    ZONE.call_once(|| zone);
    COUNTERS.call_once(|| Counters {
        sums: [alloc(), alloc(), alloc(), alloc()],
        packets: alloc(),
        bytes: alloc(),
        race: alloc(),
        zeroed: alloc(),
        timer: alloc(),
    });
}

/// CPU 0's part: releases the `started` CPUs, runs every phase with them and checks the
/// results. True if every check passed.
pub fn run_bsp(wanted: usize, started: usize) -> bool {
    NCPUS.store(started, Ordering::Release);
    GO.store(true, Ordering::Release);
    report(
        "cpus",
        &[("started", wanted as u64, started as u64)],
        started,
    );
    check_area(started);
    run(0);
    let (checks, failed) = (
        CHECKS.load(Ordering::Relaxed),
        FAILED.load(Ordering::Relaxed),
    );
    println!("DONE {checks} checks, {failed} failed");
    failed == 0
}

/// One per-CPU area per kernel: a second zone that would need other per-CPU register values
/// (a static `ZoneMemory` of its own) or that overlaps the installed zone is refused at setup,
/// in this release build, instead of adding into the installed zone's slots.
fn check_area(ncpus: usize) {
    static OTHER: ZoneMemory<MAX_CPUS, 1> = ZoneMemory::new();
    let installed = *ZONE.get().expect("setup ran").layout();
    let other = Zone::new(&OTHER).err();
    let mut meta = [0u64; 2];
    let overlapping = ZoneLayout {
        len: 8,
        ..installed
    };
    // SAFETY: refused before any memory is touched (it overlaps the installed zone).
    let overlap = unsafe { Zone::from_raw_parts(overlapping, &mut meta) }.err();
    report(
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

/// A secondary CPU's part: waits for CPU 0's go, then runs every phase.
pub fn run_ap(cpu: usize) {
    while !GO.load(Ordering::Acquire) {
        core::hint::spin_loop();
    }
    run(cpu);
}

/// The timer handler's work on CPU `cpu`: count the run, add to the timer phase's counter.
pub fn timer_tick(cpu: usize) {
    TICKS[cpu].fetch_add(1, Ordering::Relaxed);
    if let Some(c) = COUNTERS.get() {
        c.timer.add(HANDLER_ADD as i64);
    }
}

fn counters() -> &'static Counters {
    COUNTERS.get().expect("setup ran")
}

fn set_report(cpu: usize, value: u64) {
    *REPORT[cpu].lock() = value;
}

fn reports(n: usize) -> impl Iterator<Item = u64> {
    (0..n).map(|cpu| *REPORT[cpu].lock())
}

/// Prints one check's line: `PASS` if every `(what, expected, got)` matches, else one
/// `FAIL` line per mismatch.
fn report(name: &str, values: &[(&str, u64, u64)], ncpus: usize) {
    CHECKS.fetch_add(1, Ordering::Relaxed);
    let mut failed = false;
    for (what, expected, got) in values.iter().filter(|(_, e, g)| e != g) {
        println!("FAIL {name} {what} expected {expected} got {got}");
        failed = true;
    }
    if failed {
        FAILED.fetch_add(1, Ordering::Relaxed);
    } else {
        let (what, _, got) = values[0];
        let checked = values.len();
        println!("PASS {name} on {ncpus} CPUs: {what} = {got} exact ({checked} values checked)");
    }
}

/// Runs every phase on this CPU; CPU 0 checks each after the others finished it.
fn run(cpu: usize) {
    let n = NCPUS.load(Ordering::Acquire);
    if cpu >= n {
        return;
    }
    let c = counters();
    let checker = cpu == 0;

    // Exact sums: several counters, positive, negative and above 2^32 adds.
    BARRIER.wait();
    for k in 0..SUM_ADDS {
        counter_u64_add(&c.sums[0], 1);
        c.sums[1].add(cpu as i64 + 1);
        c.sums[2].add(-3);
        c.sums[3].inc();
        c.sums[3].add((1 << 33) + (k & 0xff) as i64);
    }
    BARRIER.wait();
    if checker {
        check_sums(c, n);
    }

    // Protected batches.
    BARRIER.wait();
    for _ in 0..BATCHES {
        let guard = counter_enter();
        counter_u64_add_protected(&guard, &c.packets, 1);
        c.bytes.add_protected(&guard, 1500);
        counter_exit(guard);
    }
    BARRIER.wait();
    if checker {
        let b = n as u64 * BATCHES;
        report(
            "protected",
            &[
                ("packets", b, counter_u64_fetch(&c.packets)),
                ("bytes", 1500 * b, c.bytes.fetch()),
            ],
            n,
        );
    }

    // fetch_and_zero from every CPU, racing with every CPU's adds.
    BARRIER.wait();
    let mut deltas = 0u64;
    for k in 0..RACE_ADDS {
        c.race.add(cpu as i64 + 1);
        if k % RACE_EVERY == cpu as u64 {
            deltas = deltas.wrapping_add(c.race.fetch_and_zero());
        }
    }
    set_report(cpu, deltas);
    BARRIER.wait();
    if checker {
        check_race(c, n);
    }

    // zero after adds, then more adds: only the later adds count, and no slot is written.
    BARRIER.wait();
    (0..ZERO_ADDS).for_each(|_| c.zeroed.add(cpu as i64 + 1));
    BARRIER.wait();
    if checker {
        counter_u64_zero(&c.zeroed);
        set_report(0, c.zeroed.fetch());
    }
    BARRIER.wait();
    (0..ZERO_ADDS).for_each(|_| c.zeroed.add(7));
    BARRIER.wait();
    if checker {
        check_zero(c, n);
    }

    // alloc/free from every CPU.
    BARRIER.wait();
    set_report(cpu, alloc_free(cpu));
    BARRIER.wait();
    if checker {
        check_alloc(n);
    }

    // Adds with this CPU's timer firing: its handler adds to the same counter.
    BARRIER.wait();
    TICKS[cpu].store(0, Ordering::Relaxed);
    set_report(cpu, timer_phase(c));
    BARRIER.wait();
    if checker {
        check_timer(c, n);
    }

    // The C API, counted from every CPU (`tests/c/kernel_check.c`).
    #[cfg(target_arch = "x86_64")]
    {
        extern "C" {
            fn pcpu_c_kernel_check(cpu: u32, ncpus: u32) -> i32;
        }
        BARRIER.wait();
        // SAFETY: the global zone is installed and this CPU's GS base is set; every CPU
        // calls it once, at the same time, as the C file requires.
        let rc = unsafe { pcpu_c_kernel_check(cpu as u32, n as u32) };
        BARRIER.wait();
        if checker {
            report("c_api", &[("pcpu_c_kernel_check", 0, rc as u64)], n);
        }
    }
    BARRIER.wait();
}

fn check_sums(c: &Counters, n: usize) {
    let nn = n as u64;
    let low_bytes: u64 = (0..SUM_ADDS).map(|k| k & 0xff).sum();
    let mut values = [
        ("sums[0]", nn * SUM_ADDS, c.sums[0].fetch()),
        ("sums[1]", SUM_ADDS * (nn * (nn + 1) / 2), c.sums[1].fetch()),
        (
            "sums[2]",
            (3 * nn * SUM_ADDS).wrapping_neg(),
            c.sums[2].fetch(),
        ),
        (
            "sums[3]",
            nn * (SUM_ADDS * ((1 << 33) + 1) + low_bytes),
            c.sums[3].fetch(),
        ),
        ("", 0, 0),
        ("", 0, 0),
        ("", 0, 0),
        ("", 0, 0),
    ];
    // Each CPU's own slot holds exactly its own adds: its per-CPU register was its block.
    const SLOT: [&str; MAX_CPUS] = ["slot cpu0", "slot cpu1", "slot cpu2", "slot cpu3"];
    for (cpu, name) in SLOT.iter().enumerate() {
        let own = if cpu < n {
            (cpu as u64 + 1) * SUM_ADDS
        } else {
            0
        };
        values[4 + cpu] = (name, own, c.sums[1].cpu_slot(cpu).unwrap_or(u64::MAX));
    }
    report("sums", &values, n);
}

fn check_race(c: &Counters, n: usize) {
    let nn = n as u64;
    let total = RACE_ADDS * (nn * (nn + 1) / 2);
    let deltas = reports(n).fold(0u64, u64::wrapping_add);
    let slots = (0..n).fold(0u64, |acc, cpu| {
        acc.wrapping_add(c.race.cpu_slot(cpu).unwrap_or(0))
    });
    report(
        "fetch_and_zero",
        &[
            (
                "deltas + final fetch",
                total,
                deltas.wrapping_add(c.race.fetch()),
            ),
            ("raw slots (never written by zero)", total, slots),
        ],
        n,
    );
}

fn check_zero(c: &Counters, n: usize) {
    let nn = n as u64;
    let slots = (0..n).fold(0u64, |acc, cpu| {
        acc.wrapping_add(c.zeroed.cpu_slot(cpu).unwrap_or(0))
    });
    let before = ZERO_ADDS * (nn * (nn + 1) / 2);
    report(
        "zero",
        &[
            (
                "fetch after later adds",
                7 * nn * ZERO_ADDS,
                c.zeroed.fetch(),
            ),
            ("fetch right after zero", 0, *REPORT[0].lock()),
            ("raw slots", before + 7 * nn * ZERO_ADDS, slots),
        ],
        n,
    );
}

/// One CPU's alloc/free rounds: every new counter reads 0 on every CPU, holds exactly what
/// this CPU added to it while others allocate, and is freed. Returns the number of failures.
fn alloc_free(cpu: usize) -> u64 {
    let zone = *ZONE.get().expect("setup ran");
    let mut bad = 0u64;
    for round in 0..ALLOC_ROUNDS {
        let mut held: [Option<CounterU64>; ALLOC_HELD] = [const { None }; ALLOC_HELD];
        for (h, slot) in held.iter_mut().enumerate() {
            let Some(counter) = counter_u64_alloc(Wait::NoWait) else {
                bad += 1;
                continue;
            };
            let fresh = (0..zone.ncpus()).all(|i| counter.cpu_slot(i) == Ok(0));
            if !fresh || counter.fetch() != 0 {
                bad += 1;
            }
            counter.add(tag(cpu, round, h) as i64);
            *slot = Some(counter);
        }
        for (h, counter) in held.iter_mut().enumerate() {
            if let Some(counter) = counter.take() {
                if counter.fetch() != tag(cpu, round, h) {
                    bad += 1;
                }
                counter_u64_free(counter);
            }
        }
    }
    bad
}

/// A value no other CPU, round or counter adds.
fn tag(cpu: usize, round: u64, h: usize) -> u64 {
    ((cpu as u64 + 1) << 40) | (round << 8) | h as u64
}

fn check_alloc(n: usize) {
    let zone = *ZONE.get().expect("setup ran");
    let bad = reports(n).sum();
    report(
        "alloc_free",
        &[
            ("bad counters", 0, bad),
            ("in_use after", FIXED as u64, zone.in_use() as u64),
        ],
        n,
    );
}

/// Adds (plain and protected) with the timer on, until enough adds and ticks happened.
/// Returns this CPU's adds, in units of 1.
fn timer_phase(c: &Counters) -> u64 {
    let cpu = boot::cpu_id();
    let mut adds = 0u64;
    boot::timer_start();
    while adds < TIMER_MAX_ADDS
        && (adds < TIMER_MIN_ADDS || TICKS[cpu].load(Ordering::Relaxed) < TIMER_MIN_TICKS)
    {
        c.timer.inc();
        adds += 1;
        if adds % 8 == 0 {
            let guard = counter_enter();
            c.timer.add_protected(&guard, 2);
            c.timer.add_protected(&guard, 3);
            counter_exit(guard);
            adds += 5;
        }
    }
    boot::timer_stop();
    adds
}

fn check_timer(c: &Counters, n: usize) {
    let ticks: u64 = (0..n)
        .map(|cpu| TICKS[cpu].load(Ordering::Relaxed) as u64)
        .sum();
    let adds: u64 = reports(n).sum();
    let min_ticks = (0..n)
        .map(|cpu| TICKS[cpu].load(Ordering::Relaxed))
        .min()
        .unwrap_or(0);
    let enough = min_ticks >= TIMER_MIN_TICKS;
    let slots_ok = (0..n).all(|cpu| {
        let own = *REPORT[cpu].lock() + HANDLER_ADD * TICKS[cpu].load(Ordering::Relaxed) as u64;
        c.timer.cpu_slot(cpu) == Ok(own)
    });
    report(
        "timer",
        &[
            (
                "adds + 1000 x handler runs",
                adds + HANDLER_ADD * ticks,
                c.timer.fetch(),
            ),
            ("every CPU's slot", 1, slots_ok as u64),
            ("every CPU took enough ticks", 1, enough as u64),
        ],
        n,
    );
    println!("INFO timer: {ticks} handler runs, {adds} adds in the loop, fewest ticks on one CPU {min_ticks}");
}
