//! The check protocol of the Rust test beds: the QEMU SMP kernels (`testbeds/kernel/`) and
//! the Cortex-M firmware (`testbeds/firmware/`) run these phases, with these counters and
//! these exact totals, and print these lines. Each bed keeps its own boot code and hands this
//! crate a [`Bed`]: its numbers (a [`Profile`]), its console and its timer.
//!
//! Every started CPU runs each phase at the same time; after a barrier CPU 0 compares the
//! counters with the exact totals and prints one line per check:
//!
//! ```text
//! PASS <name> on <n> CPUs: <what> = <got> exact (<k> values checked)
//! FAIL <name> <what> expected <x> got <y>
//! DONE <checks> checks, <failed> failed
//! ```
//!
//! `cargo xtask qemu` fails a run on any `FAIL` line and wants `PASS cpus on <n> CPUs` and
//! `DONE ... 0 failed`; a broken build must print a line starting with `FAIL timer`.
//!
//! The C-only kernels (`testbeds/ckernel/`) run the same phases from `protocol.h` in this
//! folder; `build.rs` checks at compile time that its numbers are this crate's.
//!
//! Only loads and stores of `u32`/`bool` atomics are used for the protocol's own state: the
//! Cortex-M0 has no read-modify-write atomics and a 486 no 64-bit ones.
#![no_std]
#![warn(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use core::cell::UnsafeCell;
use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use pcpu_counter::freebsd::{
    counter_enter, counter_exit, counter_u64_add, counter_u64_add_protected, counter_u64_alloc,
    counter_u64_fetch, counter_u64_free, counter_u64_zero, global_zone, CounterU64, Wait,
};

/// CPUs the protocol's state is sized for; a bed starts at most this many.
pub const MAX_CPUS: usize = 4;

/// What a CPU's timer handler adds to ([`timer_tick`]), set by that CPU around a phase.
pub const PHASE_NONE: u32 = 0;
pub const PHASE_RACE: u32 = 1;
pub const PHASE_TIMER: u32 = 2;

/// What the timer handler adds to the timer counter each time it runs.
pub const HANDLER_ADD: u64 = 1000;
/// The timer loop's protected section (`+2`, `+3`), every this many adds.
pub const TIMER_BATCH_EVERY: u64 = 8;

/// How many counters the fixed phases hold: the zone's `in_use` outside the alloc phase.
pub const FIXED: usize = 9;

/// A bed's numbers: how long each phase runs, and which variant of a phase it takes.
pub struct Profile {
    /// Adds per CPU on each of the four `sums` counters.
    pub sum_adds: u64,
    /// `counter_enter` .. `counter_exit` batches per CPU.
    pub batches: u64,
    /// Adds per CPU in the `fetch_and_zero` race, and how often each CPU zeroes.
    pub race_adds: u64,
    pub race_every: u64,
    /// What the timer handler adds to the race counter during the race; 0: the timer stays
    /// off in the race.
    pub race_handler_add: u64,
    /// Adds per CPU before and after `zero`.
    pub zero_adds: u64,
    /// Alloc/free rounds per CPU, `alloc_held` counters held at once in each; 0 rounds: every
    /// CPU allocates until the zone is full instead (a small zone), frees, allocates again.
    pub alloc_rounds: u64,
    pub alloc_held: u64,
    /// The timer phase runs until a CPU has made this many adds and taken this many ticks...
    pub timer_min_adds: u64,
    pub timer_min_ticks: u64,
    /// ... or gives up after this many adds (a timer that never fires fails, not hangs).
    pub timer_max_adds: u64,
    /// Whether protection excludes every CPU (a global lock): then a plain word incremented
    /// inside `counter_enter` .. `counter_exit` must come out exact too.
    pub plain_word: bool,
}

/// The SMP kernels' numbers (Rust and C).
pub const KERNEL: Profile = Profile {
    sum_adds: 20_000,
    batches: 10_000,
    race_adds: 20_000,
    race_every: 61,
    race_handler_add: 0,
    zero_adds: 5_000,
    alloc_rounds: 300,
    alloc_held: 4,
    timer_min_adds: 20_000,
    timer_min_ticks: 300,
    timer_max_adds: 200_000_000,
    plain_word: false,
};

/// The Cortex-M firmware's numbers: shorter phases, the SysTick handler racing
/// `fetch_and_zero`, a zone filled to the last slot, and protection that is global.
pub const FIRMWARE: Profile = Profile {
    sum_adds: 10_000,
    batches: 5_000,
    race_adds: 20_000,
    race_every: 61,
    race_handler_add: 7,
    zero_adds: 2_000,
    alloc_rounds: 0,
    alloc_held: 0,
    timer_min_adds: 20_000,
    timer_min_ticks: 1000,
    timer_max_adds: 5_000_000,
    plain_word: true,
};

// The numbers of `protocol.h`, checked against the ones above (see build.rs).
include!(concat!(env!("OUT_DIR"), "/protocol_h.rs"));

/// What the protocol needs from a bed besides the crate's global zone.
pub struct Bed {
    pub profile: Profile,
    /// Prints its arguments (the protocol adds the newline).
    pub print: fn(fmt::Arguments<'_>),
    /// Starts and stops the running CPU's periodic timer, whose handler calls [`timer_tick`]
    /// (interrupts on while it runs, off again after).
    pub timer_start: fn(),
    pub timer_stop: fn(),
}

/// A line on the bed's console.
macro_rules! say {
    ($bed:expr, $($arg:tt)*) => {
        ($bed.print)(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// The counters of the fixed phases, allocated once by CPU 0.
struct Counters {
    sums: [CounterU64; 4],
    packets: CounterU64,
    bytes: CounterU64,
    race: CounterU64,
    zeroed: CounterU64,
    timer: CounterU64,
}

/// The bed and its counters: set once by CPU 0 in [`setup`], read by every CPU after.
struct State {
    bed: &'static Bed,
    counters: Counters,
}

/// A cell written by one CPU and read by others only after a barrier, the `GO` flag, or (for
/// [`STATE`]) before any other CPU or timer runs.
struct Shared<T>(UnsafeCell<T>);

// SAFETY: every write happens-before the reads through the barrier's release/acquire, the
// `GO` flag, or the start of the other CPUs and timers; no two CPUs write one cell in one
// phase, except `PLAIN`, which is only touched inside protection that excludes every CPU
// (`Profile::plain_word`).
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

static STATE: Shared<Option<&'static State>> = Shared::new(None);
static GO: AtomicBool = AtomicBool::new(false);
static STARTED: AtomicUsize = AtomicUsize::new(1);
/// Barrier epochs, one per CPU, each written only by its CPU.
static EPOCH: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(0) }; MAX_CPUS];
/// What each CPU reports for a phase (two figures), read by CPU 0 after a barrier.
static REPORT: [Shared<[u64; 2]>; MAX_CPUS] = [const { Shared::new([0; 2]) }; MAX_CPUS];
/// Per CPU: what its handler adds to, and the ticks it took in the current phase (written
/// only by that CPU: by its handler, or by its main loop with the phase off).
static PHASE: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(PHASE_NONE) }; MAX_CPUS];
static TICKS: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(0) }; MAX_CPUS];
/// Incremented with plain loads and stores inside `counter_enter` .. `counter_exit`.
static PLAIN: Shared<u64> = Shared::new(0);
/// Written by CPU 0 only.
static CHECKS: AtomicU32 = AtomicU32::new(0);
static FAILED: AtomicU32 = AtomicU32::new(0);

/// CPU 0, once the global zone is installed and before any other CPU or timer runs:
/// allocates the counters. False (after a `FAIL setup` line) if the zone had no room.
pub fn setup(bed: &'static Bed) -> bool {
    static STORE: Shared<Option<State>> = Shared(UnsafeCell::new(None));
    let alloc = || counter_u64_alloc(Wait::NoWait);
    let (Some(a), Some(b), Some(c), Some(d), Some(packets), Some(bytes)) =
        (alloc(), alloc(), alloc(), alloc(), alloc(), alloc())
    else {
        say!(bed, "FAIL setup counter_u64_alloc returned None");
        return false;
    };
    let (Some(race), Some(zeroed), Some(timer)) = (alloc(), alloc(), alloc()) else {
        say!(bed, "FAIL setup counter_u64_alloc returned None");
        return false;
    };
    let counters = Counters {
        sums: [a, b, c, d],
        packets,
        bytes,
        race,
        zeroed,
        timer,
    };
    // SAFETY: only CPU 0 runs, before the others start and before any timer tick; `STORE` is
    // written this once and never again.
    let state = unsafe {
        *STORE.0.get() = Some(State { bed, counters });
        (*STORE.0.get()).as_ref().expect("just set")
    };
    STATE.set(Some(state));
    true
}

/// CPU 0, once `started` of the `wanted` CPUs are up: releases them into the phases and
/// reports the `cpus` check.
pub fn start(wanted: usize, started: usize) {
    STARTED.store(started.min(MAX_CPUS), Ordering::Release);
    GO.store(true, Ordering::Release);
    report(
        "cpus",
        &[("started", wanted as u64, started as u64)],
        started,
    );
}

/// A secondary CPU: waits for CPU 0's [`start`].
pub fn wait_go() {
    while !GO.load(Ordering::Acquire) {
        core::hint::spin_loop();
    }
}

/// The CPUs running the phases (valid after [`start`]).
pub fn ncpus() -> usize {
    STARTED.load(Ordering::Acquire)
}

/// CPU 0, after the last phase: prints `DONE`; true if every check passed.
pub fn finish() -> bool {
    let bed = state().bed;
    let (checks, failed) = (
        CHECKS.load(Ordering::Relaxed),
        FAILED.load(Ordering::Relaxed),
    );
    say!(bed, "DONE {checks} checks, {failed} failed");
    failed == 0
}

fn state() -> &'static State {
    STATE.get().expect("setup ran")
}

/// Waits until every started CPU has reached this barrier (loads and stores only).
pub fn barrier(cpu: usize) {
    let n = ncpus();
    let epoch = EPOCH[cpu].load(Ordering::Relaxed) + 1;
    EPOCH[cpu].store(epoch, Ordering::Release);
    for other in EPOCH.iter().take(n) {
        while other.load(Ordering::Acquire) < epoch {
            core::hint::spin_loop();
        }
    }
}

/// Prints one check's line: `PASS` if every `(what, expected, got)` matches, else one
/// `FAIL` line per mismatch. CPU 0 only.
pub fn report(name: &str, values: &[(&str, u64, u64)], ncpus: usize) {
    let bed = state().bed;
    CHECKS.store(CHECKS.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    let mut failed = false;
    for (what, expected, got) in values.iter().filter(|(_, e, g)| e != g) {
        say!(bed, "FAIL {name} {what} expected {expected} got {got}");
        failed = true;
    }
    if failed {
        FAILED.store(FAILED.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    } else {
        let (what, _, got) = values[0];
        let checked = values.len();
        say!(
            bed,
            "PASS {name} on {ncpus} CPUs: {what} = {got} exact ({checked} values checked)"
        );
    }
}

/// The timer handler's work on CPU `cpu`: in the race and timer phases, add to the phase's
/// counter and count the tick.
pub fn timer_tick(cpu: usize) {
    let phase = PHASE[cpu].load(Ordering::Relaxed);
    if phase == PHASE_NONE {
        return;
    }
    let Some(state) = STATE.get() else { return };
    let c = &state.counters;
    match phase {
        PHASE_RACE => c.race.add(state.bed.profile.race_handler_add as i64),
        _ => c.timer.add(HANDLER_ADD as i64),
    }
    // Only this CPU's handler writes it while the phase is on.
    let ticks = TICKS[cpu].load(Ordering::Relaxed);
    TICKS[cpu].store(ticks + 1, Ordering::Relaxed);
}

/// Turns this CPU's handler's adds on for `phase` (ticks from 0) and starts its timer.
fn handler_on(bed: &Bed, cpu: usize, phase: u32) {
    TICKS[cpu].store(0, Ordering::Relaxed);
    PHASE[cpu].store(phase, Ordering::Relaxed);
    (bed.timer_start)();
}

/// Stops this CPU's timer and its handler's adds; returns the ticks it took.
fn handler_off(bed: &Bed, cpu: usize) -> u64 {
    (bed.timer_stop)();
    PHASE[cpu].store(PHASE_NONE, Ordering::Relaxed);
    TICKS[cpu].load(Ordering::Relaxed) as u64
}

/// The sum of figure `i` of every CPU's report.
fn reports(n: usize, i: usize) -> u64 {
    REPORT.iter().take(n).map(|r| r.get()[i]).sum()
}

/// The sum of `counter`'s raw slots on CPUs `0..n`.
fn slots(counter: &CounterU64, n: usize) -> u64 {
    (0..n).fold(0, |a, cpu| {
        a.wrapping_add(counter.cpu_slot(cpu).unwrap_or(0))
    })
}

/// `1 + 2 + ... + n`: what `n` CPUs adding `cpu + 1` each add together.
pub const fn cpus_sum(n: u64) -> u64 {
    n * (n + 1) / 2
}

/// Every phase on CPU `cpu`; CPU 0 checks each after every CPU finished it. Ends at a
/// barrier, so that a bed can run phases of its own after it.
pub fn run(cpu: usize) {
    let n = ncpus();
    if cpu >= n {
        return;
    }
    let State { bed, counters: c } = state();
    let p = &bed.profile;
    let checker = cpu == 0;

    // Exact sums: several counters, positive, negative and above 2^32 adds.
    barrier(cpu);
    for k in 0..p.sum_adds {
        counter_u64_add(&c.sums[0], 1);
        c.sums[1].add(cpu as i64 + 1);
        c.sums[2].add(-3);
        c.sums[3].inc();
        c.sums[3].add((1 << 33) + (k & 0xff) as i64);
    }
    barrier(cpu);
    if checker {
        check_sums(p, c, n);
    }

    // Protected batches.
    barrier(cpu);
    for _ in 0..p.batches {
        let guard = counter_enter();
        counter_u64_add_protected(&guard, &c.packets, 1);
        c.bytes.add_protected(&guard, 1500);
        if p.plain_word {
            PLAIN.set(PLAIN.get() + 1);
        }
        counter_exit(guard);
    }
    barrier(cpu);
    if checker {
        let b = n as u64 * p.batches;
        let values = [
            ("packets", b, counter_u64_fetch(&c.packets)),
            ("bytes", 1500 * b, c.bytes.fetch()),
            (
                "plain word under counter_enter on every CPU",
                b,
                PLAIN.get(),
            ),
        ];
        report("protected", &values[..2 + p.plain_word as usize], n);
    }

    // fetch_and_zero from every CPU, racing every CPU's adds (and, with `race_handler_add`,
    // this CPU's timer handler's).
    barrier(cpu);
    let handler = p.race_handler_add != 0;
    if handler {
        handler_on(bed, cpu, PHASE_RACE);
    }
    let mut deltas = 0u64;
    for k in 0..p.race_adds {
        c.race.add(cpu as i64 + 1);
        if k % p.race_every == cpu as u64 {
            deltas = deltas.wrapping_add(c.race.fetch_and_zero());
        }
    }
    let ticks = if handler { handler_off(bed, cpu) } else { 0 };
    REPORT[cpu].set([deltas, ticks]);
    barrier(cpu);
    if checker {
        check_race(bed, c, n);
    }

    // zero after adds, then more adds: only the later adds count, and no slot is written.
    barrier(cpu);
    (0..p.zero_adds).for_each(|_| c.zeroed.add(cpu as i64 + 1));
    barrier(cpu);
    if checker {
        counter_u64_zero(&c.zeroed);
        REPORT[0].set([c.zeroed.fetch(), 0]);
    }
    barrier(cpu);
    (0..p.zero_adds).for_each(|_| c.zeroed.add(7));
    barrier(cpu);
    if checker {
        let nn = n as u64;
        report(
            "zero",
            &[
                (
                    "fetch after later adds",
                    7 * nn * p.zero_adds,
                    c.zeroed.fetch(),
                ),
                ("fetch right after zero", 0, REPORT[0].get()[0]),
                (
                    "raw slots",
                    p.zero_adds * cpus_sum(nn) + 7 * nn * p.zero_adds,
                    slots(&c.zeroed, n),
                ),
            ],
            n,
        );
    }

    // alloc/free from every CPU.
    barrier(cpu);
    if p.alloc_rounds > 0 {
        alloc_rounds(p, cpu, n);
    } else {
        alloc_until_full(cpu, n);
    }

    // Adds, plain and protected, with this CPU's timer handler adding to the same counter.
    barrier(cpu);
    handler_on(bed, cpu, PHASE_TIMER);
    let adds = timer_loop(p, c, cpu);
    let ticks = handler_off(bed, cpu);
    REPORT[cpu].set([adds, ticks]);
    barrier(cpu);
    if checker {
        check_timer(bed, c, n);
    }
    barrier(cpu);
}

fn check_sums(p: &Profile, c: &Counters, n: usize) {
    let nn = n as u64;
    let low_bytes: u64 = (0..p.sum_adds).map(|k| k & 0xff).sum();
    let mut values = [("", 0, 0); 4 + MAX_CPUS];
    values[..4].copy_from_slice(&[
        ("sums[0]", nn * p.sum_adds, c.sums[0].fetch()),
        ("sums[1]", p.sum_adds * cpus_sum(nn), c.sums[1].fetch()),
        (
            "sums[2]",
            (3 * nn * p.sum_adds).wrapping_neg(),
            c.sums[2].fetch(),
        ),
        (
            "sums[3]",
            nn * (p.sum_adds * ((1 << 33) + 1) + low_bytes),
            c.sums[3].fetch(),
        ),
    ]);
    // Each CPU's own slot holds exactly its own adds: its per-CPU register was its block.
    const SLOT: [&str; MAX_CPUS] = ["slot cpu0", "slot cpu1", "slot cpu2", "slot cpu3"];
    let zone_cpus = global_zone().map_or(MAX_CPUS, |z| z.ncpus().min(MAX_CPUS));
    for (cpu, name) in SLOT.iter().enumerate().take(zone_cpus) {
        let own = if cpu < n {
            (cpu as u64 + 1) * p.sum_adds
        } else {
            0
        };
        values[4 + cpu] = (name, own, c.sums[1].cpu_slot(cpu).unwrap_or(u64::MAX));
    }
    report("sums", &values[..4 + zone_cpus], n);
}

fn check_race(bed: &Bed, c: &Counters, n: usize) {
    let p = &bed.profile;
    let ticks = reports(n, 1);
    let total = p.race_adds * cpus_sum(n as u64) + ticks * p.race_handler_add;
    report(
        "fetch_and_zero",
        &[
            (
                "deltas + final fetch",
                total,
                reports(n, 0).wrapping_add(c.race.fetch()),
            ),
            (
                "raw slots (never written by zero)",
                total,
                slots(&c.race, n),
            ),
        ],
        n,
    );
    if p.race_handler_add != 0 {
        say!(
            bed,
            "INFO fetch_and_zero raced {ticks} timer handler adds of {}",
            p.race_handler_add
        );
    }
}

/// A value no other CPU, round or counter adds.
const fn tag(cpu: usize, round: u64, h: u64) -> u64 {
    ((cpu as u64 + 1) << 40) | (round << 8) | h
}

/// Whether a new counter reads 0 in every CPU's slot and in total.
fn fresh(counter: &CounterU64) -> bool {
    let ncpus = global_zone().map_or(0, |z| z.ncpus());
    (0..ncpus).all(|i| counter.cpu_slot(i) == Ok(0)) && counter.fetch() == 0
}

/// Rounds of alloc/free on every CPU: every new counter is fresh, holds exactly what this CPU
/// added to it while others allocate, and is freed.
fn alloc_rounds(p: &Profile, cpu: usize, n: usize) {
    const HELD: usize = 8;
    let held_n = (p.alloc_held as usize).min(HELD);
    let mut bad = 0u64;
    for round in 0..p.alloc_rounds {
        let mut held: [Option<CounterU64>; HELD] = [const { None }; HELD];
        for (h, slot) in held.iter_mut().take(held_n).enumerate() {
            let Some(counter) = counter_u64_alloc(Wait::NoWait) else {
                bad += 1;
                continue;
            };
            if !fresh(&counter) {
                bad += 1;
            }
            counter.add(tag(cpu, round, h as u64) as i64);
            *slot = Some(counter);
        }
        for (h, counter) in held.iter_mut().enumerate() {
            if let Some(counter) = counter.take() {
                if counter.fetch() != tag(cpu, round, h as u64) {
                    bad += 1;
                }
                counter_u64_free(counter);
            }
        }
    }
    REPORT[cpu].set([bad, 0]);
    barrier(cpu);
    if cpu == 0 {
        let in_use = global_zone().map_or(0, |z| z.in_use());
        report(
            "alloc_free",
            &[
                ("bad counters", 0, reports(n, 0)),
                ("in_use after", FIXED as u64, in_use as u64),
            ],
            n,
        );
    }
}

/// Every CPU allocates until the zone is full, frees everything, and CPU 0 allocates again.
fn alloc_until_full(cpu: usize, n: usize) {
    let Ok(zone) = global_zone() else { return };
    let mut held: [Option<CounterU64>; 64] = [const { None }; 64];
    let mut got = 0u64;
    let mut bad = 0u64;
    for slot in held.iter_mut() {
        let Some(counter) = counter_u64_alloc(Wait::NoWait) else {
            break;
        };
        if !fresh(&counter) {
            bad += 1;
        }
        counter.add(cpu as i64 + 1);
        *slot = Some(counter);
        got += 1;
    }
    REPORT[cpu].set([got, bad]);
    barrier(cpu);
    if cpu == 0 {
        // Full: no slot left, and one more alloc fails.
        let full_bad = (zone.in_use() != zone.capacity()) as u64
            + counter_u64_alloc(Wait::NoWait).is_some() as u64;
        REPORT[0].set([got, bad + full_bad]);
    }
    barrier(cpu);
    let mut lost = 0u64;
    for counter in held.iter_mut().filter_map(Option::take) {
        if counter.fetch() != cpu as u64 + 1 {
            lost += 1;
        }
        counter_u64_free(counter);
    }
    let [got, bad] = REPORT[cpu].get();
    REPORT[cpu].set([got, bad + lost]);
    barrier(cpu);
    if cpu == 0 {
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
}

/// Adds (plain, and protected every [`TIMER_BATCH_EVERY`]) with the timer on, until enough
/// adds and ticks happened. Returns this CPU's adds, in units of 1.
fn timer_loop(p: &Profile, c: &Counters, cpu: usize) -> u64 {
    let mut adds = 0u64;
    while adds < p.timer_max_adds
        && (adds < p.timer_min_adds
            || (TICKS[cpu].load(Ordering::Relaxed) as u64) < p.timer_min_ticks)
    {
        c.timer.inc();
        adds += 1;
        if adds.is_multiple_of(TIMER_BATCH_EVERY) {
            let guard = counter_enter();
            c.timer.add_protected(&guard, 2);
            c.timer.add_protected(&guard, 3);
            counter_exit(guard);
            adds += 5;
        }
    }
    adds
}

fn check_timer(bed: &Bed, c: &Counters, n: usize) {
    let (adds, ticks) = (reports(n, 0), reports(n, 1));
    let min_ticks = REPORT.iter().take(n).map(|r| r.get()[1]).min().unwrap_or(0);
    let slots_ok = (0..n).all(|cpu| {
        let [adds, ticks] = REPORT[cpu].get();
        c.timer.cpu_slot(cpu) == Ok(adds + HANDLER_ADD * ticks)
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
            (
                "every CPU took enough ticks",
                1,
                (min_ticks >= bed.profile.timer_min_ticks) as u64,
            ),
        ],
        n,
    );
    say!(
        bed,
        "INFO timer: {ticks} handler runs, {adds} adds in the loop, fewest ticks on one CPU {min_ticks}"
    );
}
