//! Shared test harness: a tiny PRNG and a random workload on simulated CPUs.
#![allow(dead_code)] // Each test file uses part of it.

use pcpu_counter::sim::{host_load, interrupt_storm_inside, Machine};
use std::sync::atomic::{AtomicU64, Ordering};

/// xorshift64*: deterministic, dependency-free randomness for the tests.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A value in `-range..range`.
    pub fn signed(&mut self, range: i64) -> i64 {
        (self.next() % (2 * range as u64)) as i64 - range
    }
}

/// A workload: how many threads, how often they migrate, how much they add.
#[derive(Clone, Copy)]
pub struct Workload {
    pub threads: usize,
    /// Each round binds a random CPU (a migration), does `adds_per_round` adds, and leaves.
    pub rounds: usize,
    pub adds_per_round: usize,
    pub counters: usize,
    /// Adds are random values in `-range..range` (or exactly 1 when `range` is 0).
    pub range: i64,
    pub seed: u64,
}

/// Runs `w` on `machine`: every add goes through `add(counter_index, value)` while the thread
/// holds a random simulated CPU. Returns, per counter, the wrapping sum of every value added.
pub fn run(machine: &Machine, w: Workload, add: &(dyn Fn(usize, i64) + Sync)) -> Vec<u64> {
    let expected: Vec<AtomicU64> = (0..w.counters).map(|_| AtomicU64::new(0)).collect();
    std::thread::scope(|s| {
        for t in 0..w.threads {
            let expected = &expected;
            s.spawn(move || {
                let mut rng = Rng::new(w.seed ^ ((t as u64 + 1) * 0x1_0000_0001));
                let mut mine = vec![0u64; w.counters];
                for _ in 0..w.rounds {
                    let _cpu = machine.bind(rng.below(machine.ncpus())).unwrap();
                    for _ in 0..w.adds_per_round {
                        let (i, v) = (
                            rng.below(w.counters),
                            if w.range == 0 { 1 } else { rng.signed(w.range) },
                        );
                        add(i, v);
                        mine[i] = mine[i].wrapping_add(v as u64);
                    }
                }
                for (e, m) in expected.iter().zip(mine) {
                    e.fetch_add(m, Ordering::Relaxed);
                }
            });
        }
    });
    expected.into_iter().map(AtomicU64::into_inner).collect()
}

/// The instructions of `symbol` in this test binary, one per line, as `objdump` (the first of
/// `objdumps` that runs) prints them with `extra` options.
pub fn disassemble(objdumps: &[&str], extra: &[&str], symbol: &str) -> Vec<String> {
    let exe = std::env::current_exe().unwrap();
    let objdump = objdumps
        .iter()
        .find(|o| {
            std::process::Command::new(o)
                .arg("--version")
                .output()
                .is_ok()
        })
        .unwrap_or_else(|| panic!("one of {objdumps:?} (binutils) is needed for this check"));
    let out = std::process::Command::new(objdump)
        .args(["-d", "--no-show-raw-insn"])
        .args(extra)
        .arg(format!("--disassemble={symbol}"))
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{objdump} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with(' ') && l.contains(":\t"))
        .map(|l| l.split_once(":\t").unwrap().1.trim().to_string())
        .collect()
}

/// How long a storm on CPU 0 waits for its event before the test fails. Not a measure of the
/// event (natively it takes milliseconds, under `qemu-* -singlestep` seconds, with the machine
/// loaded too): only a bound that turns a storm that can never deliver into a failure instead
/// of a hang.
pub const STORM_CAP: std::time::Duration = std::time::Duration::from_secs(300);

/// Under an interrupt storm on CPU 0, calls `add(&handled)` until it returns true: the event
/// the caller waits for (`event`, as the failure names it), which it counts itself: retries,
/// handler runs, a loss. The handler adds 2^32 to `c` through `Counter::add` (so its adds land
/// in the high half) and counts its runs in `handled`. Returns (adds, handled).
///
/// The storm is [`interrupt_storm_inside`]'s: steps of [`STORM_STEP`] adds that never yield
/// the core, so that interrupts land inside the adds however loaded the machine is (a yield
/// between steps is where they all land under load: see that function). It waits for the
/// event however long it takes, and panics, naming the event, the counts and the host's load,
/// only if [`STORM_CAP`] passes first.
pub fn storm_on_cpu0(
    machine: &Machine,
    c: &pcpu_counter::Counter<'_>,
    event: &str,
    mut add: impl FnMut(&AtomicU64) -> bool,
) -> (u64, u64) {
    let handled = AtomicU64::new(0);
    let handler = |_cpu: usize| {
        c.add(1 << 32);
        handled.fetch_add(1, Ordering::Relaxed);
    };
    let (adds, steps, storm, done) = machine.with_interrupt_handler(&handler, || {
        machine.run_on(0, || {
            let mut adds = 0u64;
            let (steps, storm, done) = interrupt_storm_inside(STORM_CAP, |_| {
                for _ in 0..STORM_STEP {
                    adds += 1;
                    if add(&handled) {
                        return true;
                    }
                }
                false
            });
            (adds, steps, storm, done)
        })
    });
    let handled = handled.into_inner();
    assert_eq!(
        storm.handled, handled,
        "every interrupt handled on CPU 0 ran this handler"
    );
    assert!(
        done,
        "{event}: not counted in {} s of storm ({adds} adds in {steps} steps, {handled} \
         interrupts handled, {} raised, {} taken), with the host at {}",
        STORM_CAP.as_secs(),
        storm.raised,
        storm.taken,
        host_load()
    );
    (adds, handled)
}

/// Adds per step of [`storm_on_cpu0`]'s storm.
pub const STORM_STEP: u64 = 1024;

/// A deliberately broken counter: one shared value updated with a plain load and store, as a
/// racy `+=` would. The harness must catch it losing adds.
pub struct RacyShared(std::cell::UnsafeCell<u64>);

// SAFETY: it is not safe; that is the point. Accesses are volatile so the race happens in
// the machine code, and the values are only ever compared, never trusted.
unsafe impl Sync for RacyShared {}

impl RacyShared {
    pub fn new() -> Self {
        RacyShared(std::cell::UnsafeCell::new(0))
    }

    pub fn add(&self, v: i64) {
        // SAFETY: a deliberate data race on an integer, read and written with volatile accesses.
        unsafe {
            let p = self.0.get();
            p.write_volatile(p.read_volatile().wrapping_add(v as u64));
        }
    }

    pub fn get(&self) -> u64 {
        // SAFETY: as in `add`.
        unsafe { self.0.get().read_volatile() }
    }
}

/// Runs `racy_add(off, slot)`, a deliberately broken add of 1 to CPU 0's slot of a new
/// counter (its offset `off`, CPU 0's slot address `slot`), under an interrupt storm on CPU 0
/// until the count shows a loss (however long that takes, up to [`STORM_CAP`]), and asserts
/// that adds were lost: the storm can catch a broken add. The arch tests' negative control.
pub fn assert_storm_catches_racy_add(mut racy_add: impl FnMut(usize, *mut u64)) {
    let machine = Machine::new(1);
    let c = machine.alloc().unwrap();
    let off = c.offset();
    let slot = (machine.zone().cpu_base(0).unwrap() + off) as *mut u64;
    let mut adds_done = 0u64;
    let (adds, handled) = storm_on_cpu0(&machine, &c, "a racy add losing an add", |handled| {
        racy_add(off, slot);
        adds_done += 1;
        // Stop once the count shows a loss (checked now and then, and only when no interrupt
        // ran during the check).
        adds_done.is_multiple_of(1024) && {
            let before = handled.load(Ordering::Relaxed);
            let sum = c.fetch();
            before == handled.load(Ordering::Relaxed) && sum != adds_done + (before << 32)
        }
    });
    let lost = (adds + (handled << 32)).wrapping_sub(c.fetch());
    assert!(
        lost > 0,
        "a racy add lost nothing in {adds} adds ({handled} interrupts): the storm proves nothing"
    );
    println!("racy add lost {lost:#x} in {adds} adds, {handled} interrupts");
}

/// The property tests' proptest configuration: `PROPTEST_CASES` cases (default 256), and no
/// regression file in the source tree (a failure prints its minimal input instead).
pub fn proptest_config() -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(256),
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}
