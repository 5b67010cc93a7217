//! Exhaustive loom models of the crate's concurrency protocols (`cfg(loom)` only).
//!
//! Run by `cargo xtask verify`, or by hand:
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test --release --test loom -- --nocapture --test-threads=1
//! ```
//!
//! The real code cannot run under loom: the slot add is inline assembly on a per-CPU
//! register, the slots and baselines are reached through `AtomicU64::from_ptr` on zone memory
//! (which loom cannot track), the baseline fallback lock and the bitmap lock are `spin`
//! mutexes, and `EarlyCounter::new` is a `const fn` (loom's atomics are not `const`). So each
//! model is the protocol of one function, transcribed step by step with loom's atomics and the
//! same orderings, and names the function it mirrors. Every model is then run against a broken
//! variant of itself (test-only: it exists only in this file) and must find it.
//!
//! The per-CPU add is modelled with the atomicity its arch gives: a slot has one owner (the
//! thread bound to that CPU), so the owner's add is a relaxed load and a relaxed store of its
//! own slot (on x86_64 one `add gs:[off]`, which nothing else on that CPU can split; no other
//! CPU writes the slot); `fetch` reads other CPUs' slots with relaxed loads, as
//! `arch::load_slot` does. Interrupts (a second actor on the same CPU) appear only in
//! [`arch_add_against_an_interrupt`], where the arch's add needs its own atomicity or
//! protection.
//!
//! Bound: loom's exhaustive DPOR exploration with at most `PREEMPTIONS` (default 4,
//! `LOOM_MAX_PREEMPTIONS` overrides) preemptions per execution, 2 simulated CPUs and the
//! thread counts and operations each model lists. What the models do not cover is in
//! docs/design.md ("What is proven how").

#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

use std::sync::atomic::AtomicUsize as StdAtomicUsize;
use std::sync::Mutex as StdMutex;

/// Simulated CPUs in every model.
const NCPUS: usize = 2;

/// The preemption bound (`LOOM_MAX_PREEMPTIONS`, default 4).
fn preemptions() -> usize {
    std::env::var("LOOM_MAX_PREEMPTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4)
}

/// Executions of the model closure so far (counted by [`explore`]).
static EXECUTIONS: StdAtomicUsize = StdAtomicUsize::new(0);
/// The first panic message of a failing broken variant.
static FAILURE: StdMutex<Option<String>> = StdMutex::new(None);

/// Explores `model` exhaustively within the bound; returns the number of executions.
fn explore(model: impl Fn() + Sync + Send + 'static) -> usize {
    EXECUTIONS.store(0, std::sync::atomic::Ordering::SeqCst);
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions());
    builder.check(move || {
        EXECUTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        model()
    });
    EXECUTIONS.load(std::sync::atomic::Ordering::SeqCst)
}

/// A broken variant of a model: its name and the model with the bug.
type Broken = (&'static str, Box<dyn Fn() + Sync + Send + 'static>);

/// Explores the correct `model` (which must pass), then each broken variant (which loom must
/// fail), and prints the model's line for `cargo xtask verify`.
fn check(name: &str, mirrors: &str, model: impl Fn() + Sync + Send + 'static, broken: Vec<Broken>) {
    let start = std::time::Instant::now();
    let executions = explore(model);
    let took = start.elapsed();
    let mut found = Vec::new();
    for (broken_name, variant) in broken {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|info| {
            let mut failure = FAILURE.lock().unwrap_or_else(|e| e.into_inner());
            // generator's own unwinding of cancelled loom threads is not the failure.
            let internal = info
                .location()
                .is_some_and(|l| l.file().contains("/generator-"));
            if failure.is_none() && !internal {
                let payload = info.payload();
                let msg = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|m| m.to_string()))
                    .unwrap_or_else(|| info.to_string());
                *failure = Some(msg.lines().next().unwrap_or("").to_string());
            }
        }));
        *FAILURE.lock().unwrap() = None;
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| explore(variant)));
        std::panic::set_hook(hook);
        let what = FAILURE.lock().unwrap().take().unwrap_or_default();
        assert!(
            caught.is_err(),
            "loom {name}: the broken variant \"{broken_name}\" passed every execution"
        );
        found.push(format!(
            "\"{broken_name}\" found after {} executions ({what})",
            EXECUTIONS.load(std::sync::atomic::Ordering::SeqCst)
        ));
    }
    println!(
        "loom {name} [{mirrors}]: {executions} executions pass (preemption bound {}, {:.1}s); \
         broken: {}",
        preemptions(),
        took.as_secs_f64(),
        found.join("; ")
    );
}

// ---------------------------------------------------------------------------------------
// The counter: per-CPU slots and a baseline (src/zone.rs, src/baseline.rs).

/// One counter: a slot per CPU and its zero baseline.
struct Counter {
    slots: [AtomicU64; NCPUS],
    baseline: AtomicU64,
}

/// How `fetch_and_zero` is done.
#[derive(Clone, Copy, PartialEq)]
enum Zero {
    /// `Zone::fetch_and_zero`: the baseline compare-and-swap.
    Baseline,
    /// Broken: FreeBSD's zero without the IPI, a remote store of 0 into every slot.
    RemoteStore,
    /// Broken: the baseline replaced by a plain store instead of a compare-and-swap.
    BlindStore,
}

impl Counter {
    fn new() -> Self {
        Counter {
            slots: [AtomicU64::new(0), AtomicU64::new(0)],
            baseline: AtomicU64::new(0),
        }
    }

    /// The owner's add on `cpu` (x86_64: one `add gs:[off]`; nothing else writes the slot).
    fn add(&self, cpu: usize, v: u64) {
        let slot = &self.slots[cpu];
        slot.store(
            slot.load(Ordering::Relaxed).wrapping_add(v),
            Ordering::Relaxed,
        );
    }

    /// `Zone::sum`: the slots read one by one (`arch::load_slot`, relaxed).
    fn sum(&self) -> u64 {
        self.slots
            .iter()
            .fold(0u64, |a, s| a.wrapping_add(s.load(Ordering::Relaxed)))
    }

    /// `Zone::fetch`: the baseline (acquire, `baseline::load`) before the slots.
    fn fetch(&self) -> u64 {
        let b = self.baseline.load(Ordering::Acquire);
        self.sum().wrapping_sub(b)
    }

    /// `Zone::fetch_and_zero` (and `zero`, which is it with the result dropped).
    fn fetch_and_zero(&self, how: Zero) -> u64 {
        match how {
            Zero::Baseline => loop {
                let old = self.baseline.load(Ordering::Acquire);
                let sum = self.sum();
                // `baseline::replace`: AcqRel / Acquire.
                if self
                    .baseline
                    .compare_exchange(old, sum, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return sum.wrapping_sub(old);
                }
            },
            Zero::RemoteStore => {
                let old = self.baseline.load(Ordering::Acquire);
                let mut sum = 0u64;
                for s in &self.slots {
                    sum = sum.wrapping_add(s.load(Ordering::Relaxed));
                    s.store(0, Ordering::Relaxed);
                }
                sum.wrapping_sub(old)
            }
            Zero::BlindStore => {
                let old = self.baseline.load(Ordering::Acquire);
                let sum = self.sum();
                self.baseline.store(sum, Ordering::Release);
                sum.wrapping_sub(old)
            }
        }
    }
}

/// CPU 0 adds 1 and 2; CPU 1 adds 4 and runs `fetch_and_zero`; a third thread runs
/// `fetch_and_zero` too. The deltas plus the final fetch are exactly 7, and no delta is
/// negative.
fn zero_model(how: Zero) -> impl Fn() + Sync + Send + 'static {
    move || {
        let c = Arc::new(Counter::new());
        let c0 = c.clone();
        let cpu0 = thread::spawn(move || {
            c0.add(0, 1);
            c0.add(0, 2);
        });
        let c1 = c.clone();
        let cpu1 = thread::spawn(move || {
            c1.add(1, 4);
            c1.fetch_and_zero(how)
        });
        let d2 = c.fetch_and_zero(how);
        cpu0.join().unwrap();
        let d1 = cpu1.join().unwrap();
        for d in [d1, d2] {
            assert!(
                d as i64 >= 0 && d <= 7,
                "a negative or too large delta: {d}"
            );
        }
        let total = d1.wrapping_add(d2).wrapping_add(c.fetch());
        assert_eq!(
            total,
            7,
            "deltas {d1} + {d2} + final fetch {} != every add (7)",
            c.fetch()
        );
    }
}

#[test]
fn zero_and_fetch_and_zero_racing_adds_and_each_other() {
    check(
        "zero_race",
        "Zone::fetch_and_zero/zero/fetch; 3 threads: adders on CPUs 0 and 1, 2 fetch_and_zero",
        zero_model(Zero::Baseline),
        vec![
            ("remote store-zero", Box::new(zero_model(Zero::RemoteStore))),
            (
                "baseline stored without compare-and-swap",
                Box::new(zero_model(Zero::BlindStore)),
            ),
        ],
    );
}

// ---------------------------------------------------------------------------------------
// Early counters (src/early.rs).

/// Loom treats `SeqCst` loads, stores and read-modify-writes as `AcqRel` (its README,
/// "Limitations"), so the store-buffering pair the early protocol relies on (`init`: store
/// `live`, then load `early_adders`; an early add: bump `early_adders`, then load `live`)
/// would read as racy under loom although the C++/Rust model forbids it for `SeqCst`
/// accesses. Each side gets a `fence(SeqCst)` between its two accesses, which loom does
/// model, and which gives this pattern exactly the guarantee of the `SeqCst` accesses.
fn sc_fence() {
    loom::sync::atomic::fence(Ordering::SeqCst);
}

/// An `EarlyCounter` whose `init` already allocated its slot (a cleared `Counter`).
struct Early {
    live: AtomicBool,
    early_adders: AtomicUsize,
    /// The shared early word (`baseline::add` / `take` / `load`).
    word: AtomicU64,
    moving: AtomicUsize,
    /// `counter: spin::Once` completed and `zone` written (both before `init` sets `live`:
    /// an add that sees `live` must see them).
    published: AtomicBool,
    counter: Counter,
}

/// Which `init` and `fetch`.
#[derive(Clone, Copy, PartialEq)]
enum EarlyVariant {
    Real,
    /// Broken: `EarlyCounter::init_without_waiting` (the tests' broken `init`).
    InitWithoutWaiting,
    /// Broken: `fetch` without the `moving` re-check.
    FetchWithoutMovingCheck,
    /// Broken: `init` without the `fence(SeqCst)` after `moving = 1` (the code before the
    /// loom model found it).
    InitWithoutMovingFence,
}

impl Early {
    fn new() -> Self {
        Early {
            live: AtomicBool::new(false),
            early_adders: AtomicUsize::new(0),
            word: AtomicU64::new(0),
            moving: AtomicUsize::new(0),
            published: AtomicBool::new(false),
            counter: Counter::new(),
        }
    }

    /// `baseline::add`: a compare-and-swap loop on the word.
    fn word_add(&self, v: u64) {
        loop {
            let old = self.word.load(Ordering::Acquire);
            if self
                .word
                .compare_exchange(
                    old,
                    old.wrapping_add(v),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
            {
                return;
            }
        }
    }

    /// `baseline::take`.
    fn word_take(&self) -> u64 {
        loop {
            let old = self.word.load(Ordering::Acquire);
            if self
                .word
                .compare_exchange(old, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return old;
            }
        }
    }

    fn live_add(&self, cpu: usize, v: u64) {
        assert!(
            self.published.load(Ordering::Acquire),
            "early counter live without a slot"
        );
        self.counter.add(cpu, v);
    }

    /// `EarlyCounter::add` and `early_add` on `cpu`.
    fn add(&self, cpu: usize, v: u64) {
        if self.live.load(Ordering::Acquire) {
            return self.live_add(cpu, v);
        }
        self.early_adders.fetch_add(1, Ordering::SeqCst);
        sc_fence();
        if self.live.load(Ordering::SeqCst) {
            self.early_adders.fetch_sub(1, Ordering::SeqCst);
            return self.live_add(cpu, v);
        }
        self.word_add(v);
        self.early_adders.fetch_sub(1, Ordering::SeqCst);
    }

    /// `EarlyCounter::init_inner` on `cpu`, after `zone.alloc()`.
    fn init(&self, cpu: usize, variant: EarlyVariant) {
        let wait = variant != EarlyVariant::InitWithoutWaiting;
        self.published.store(true, Ordering::Release);
        if wait {
            self.live.store(true, Ordering::SeqCst);
            sc_fence();
            while self.early_adders.load(Ordering::SeqCst) != 0 {
                thread::yield_now();
            }
        }
        self.moving.store(1, Ordering::SeqCst);
        if variant != EarlyVariant::InitWithoutMovingFence {
            sc_fence();
        }
        let moved = self.word_take();
        self.live_add(cpu, moved);
        self.moving.store(2, Ordering::SeqCst);
        if !wait {
            self.live.store(true, Ordering::SeqCst);
        }
    }

    /// `EarlyCounter::fetch`.
    fn fetch(&self, variant: EarlyVariant) -> u64 {
        loop {
            let before = self.moving.load(Ordering::SeqCst);
            if before == 1 && variant != EarlyVariant::FetchWithoutMovingCheck {
                thread::yield_now();
                continue;
            }
            let word = self.word.load(Ordering::Acquire);
            let slots = if self.published.load(Ordering::Acquire) {
                self.counter.fetch()
            } else {
                0
            };
            loom::sync::atomic::fence(Ordering::SeqCst);
            if variant == EarlyVariant::FetchWithoutMovingCheck
                || self.moving.load(Ordering::SeqCst) == before
            {
                return slots.wrapping_add(word);
            }
        }
    }
}

/// CPU 1 adds 1 then 2 while CPU 0 runs `init` and a third thread fetches. Afterwards the
/// per-CPU slots hold exactly 3 and the word 0; the concurrent fetch read at most 3.
fn early_model(variant: EarlyVariant) -> impl Fn() + Sync + Send + 'static {
    move || {
        let e = Arc::new(Early::new());
        let e1 = e.clone();
        let adder = thread::spawn(move || {
            e1.add(1, 1);
            e1.add(1, 2);
        });
        let e2 = e.clone();
        let fetcher = thread::spawn(move || e2.fetch(variant));
        e.init(0, variant);
        adder.join().unwrap();
        let seen = fetcher.join().unwrap();
        assert!(seen <= 3, "a fetch during init counted {seen} of 3 adds");
        assert_eq!(
            (e.counter.fetch(), e.word.load(Ordering::Relaxed)),
            (3, 0),
            "after init the per-CPU slots must hold every early add"
        );
        assert_eq!(e.fetch(variant), 3);
    }
}

#[test]
fn early_init_racing_early_adds() {
    check(
        "early_init",
        "EarlyCounter::add/init/fetch; 3 threads: 2 adds on CPU 1, init on CPU 0, a fetch",
        early_model(EarlyVariant::Real),
        vec![
            (
                "init_without_waiting",
                Box::new(early_model(EarlyVariant::InitWithoutWaiting)),
            ),
            (
                "fetch without the moving re-check",
                Box::new(early_model(EarlyVariant::FetchWithoutMovingCheck)),
            ),
            (
                "init without fence(SeqCst) after moving = 1",
                Box::new(early_model(EarlyVariant::InitWithoutMovingFence)),
            ),
        ],
    );
}

// ---------------------------------------------------------------------------------------
// Slot allocation, free and reuse (src/zone.rs alloc_run / free_run, src/bitmap.rs).

/// A zone of one slot (so that the second allocation reuses the first's), its bitmap under a
/// mutex (`spin::Mutex<Bitmap>`).
struct Zone {
    used: Mutex<bool>,
    counter: Counter,
}

#[derive(Clone, Copy, PartialEq)]
enum Alloc {
    /// `Zone::alloc_run`: clear the slot on every CPU and its baseline.
    Real,
    /// Broken: clear only the allocating CPU's slot.
    ClearOwnCpuOnly,
    /// Broken: clear the slots but not the baseline.
    KeepBaseline,
}

impl Zone {
    /// `Zone::alloc` with `Wait::WaitOk` on `cpu`: first fit under the lock, then the clear.
    fn alloc(&self, cpu: usize, how: Alloc) {
        loop {
            let mut used = self.used.lock().unwrap();
            if !*used {
                *used = true;
                break;
            }
            drop(used);
            thread::yield_now();
        }
        for (c, slot) in self.counter.slots.iter().enumerate() {
            if how != Alloc::ClearOwnCpuOnly || c == cpu {
                slot.store(0, Ordering::Relaxed); // `arch::store_slot`
            }
        }
        if how != Alloc::KeepBaseline {
            self.counter.baseline.store(0, Ordering::Release); // `baseline::store`
        }
    }

    /// `Zone::free_run`.
    fn free(&self) {
        *self.used.lock().unwrap() = false;
    }
}

/// CPU `cpu` allocates the zone's one slot, checks that it reads 0 on every CPU and in
/// `fetch`, adds, zeroes part of it (a non-zero baseline), and frees it.
fn use_slot(z: &Zone, cpu: usize, how: Alloc) {
    z.alloc(cpu, how);
    for c in 0..NCPUS {
        let v = z.counter.slots[c].load(Ordering::Relaxed);
        assert_eq!(v, 0, "a reused slot reads {v} on CPU {c}");
    }
    assert_eq!(z.counter.fetch(), 0, "a new counter fetches non-zero");
    z.counter.add(cpu, 5);
    z.counter.fetch_and_zero(Zero::Baseline);
    z.counter.add(cpu, 2);
    assert_eq!(z.counter.fetch(), 2);
    z.free();
}

fn alloc_model(how: Alloc) -> impl Fn() + Sync + Send + 'static {
    move || {
        let z = Arc::new(Zone {
            used: Mutex::new(false),
            counter: Counter::new(),
        });
        let z1 = z.clone();
        let other = thread::spawn(move || use_slot(&z1, 1, how));
        use_slot(&z, 0, how);
        other.join().unwrap();
    }
}

#[test]
fn alloc_free_reuse_reads_zero_on_every_cpu() {
    check(
        "slot_reuse",
        "Zone::alloc_run/free_run; 2 threads on CPUs 0 and 1 sharing a one-slot zone",
        alloc_model(Alloc::Real),
        vec![
            (
                "clear only the allocating CPU's slot",
                Box::new(alloc_model(Alloc::ClearOwnCpuOnly)),
            ),
            (
                "baseline not reset on alloc",
                Box::new(alloc_model(Alloc::KeepBaseline)),
            ),
        ],
    );
}

// ---------------------------------------------------------------------------------------
// The ratecheck reset (src/ratecheck.rs RateState::check).

struct Rate {
    lock: AtomicI32,
    ticks: AtomicU32,
    over: AtomicI32,
    counter: Counter,
    /// Instrumentation: resets done, the deltas their `fetch_and_zero` took, and the value
    /// the last reset computed for the previous second.
    resets: AtomicUsize,
    taken: AtomicU64,
    last_val: AtomicI32,
    /// Instrumentation: events counted (calls that did not skip).
    counted: AtomicU64,
}

impl Rate {
    /// `RateState::check` on `cpu`; `recheck` false is the broken variant without the
    /// re-read of `ticks` under the reset lock.
    fn check(&self, cpu: usize, now: u32, hz: u32, limit: i64, recheck: bool) -> i64 {
        let mut val = i64::from(self.over.load(Ordering::Relaxed));
        if now.wrapping_sub(self.ticks.load(Ordering::Relaxed)) >= hz {
            let won = self.lock.load(Ordering::Relaxed) == 0
                && self
                    .lock
                    .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok();
            if !won {
                return val;
            }
            if !recheck || now.wrapping_sub(self.ticks.load(Ordering::Relaxed)) >= hz {
                let last = self.counter.fetch_and_zero(Zero::Baseline);
                self.resets.fetch_add(1, Ordering::Relaxed);
                self.taken.fetch_add(last, Ordering::Relaxed);
                self.over.store(0, Ordering::Relaxed);
                self.ticks.store(now, Ordering::Relaxed);
                val = if last as i64 <= limit { 0 } else { last as i64 };
                self.last_val.store(val as i32, Ordering::Relaxed);
            }
            self.lock.store(0, Ordering::Release);
        }
        self.counter.add(cpu, 1);
        self.counted.fetch_add(1, Ordering::Relaxed);
        if self.over.load(Ordering::Relaxed) != 0 {
            return -1;
        }
        if self.counter.fetch() as i64 > limit {
            self.over.store(-1, Ordering::Relaxed);
            val = -1;
        }
        val
    }
}

/// The last second (tick 0) counted 3 events on CPU 0, over the limit of 1; at tick 100
/// (hz 100: a new second) CPUs 0 and 1 each call `check`. Exactly one resets, it takes the
/// last second's 3, and the reset loses nothing: what it took plus the final fetch is every
/// event counted.
fn rate_model(recheck: bool) -> impl Fn() + Sync + Send + 'static {
    move || {
        let counter = Counter::new();
        counter.slots[0].store(3, Ordering::Relaxed);
        let r = Arc::new(Rate {
            lock: AtomicI32::new(0),
            ticks: AtomicU32::new(0),
            over: AtomicI32::new(-1),
            counter,
            resets: AtomicUsize::new(0),
            taken: AtomicU64::new(0),
            counted: AtomicU64::new(3),
            last_val: AtomicI32::new(0),
        });
        let r1 = r.clone();
        let other = thread::spawn(move || r1.check(1, 100, 100, 1, recheck));
        let v0 = r.check(0, 100, 100, 1, recheck);
        let v1 = other.join().unwrap();
        assert_eq!(
            r.resets.load(Ordering::Relaxed),
            1,
            "the new second was reset more than once (returned {v0}, {v1})"
        );
        // The winner's result is the last second's count, or -1 if the other CPU's event
        // already took this second over the limit (FreeBSD's contract: `cr_over` wins).
        assert_eq!(
            (
                r.last_val.load(Ordering::Relaxed),
                r.taken.load(Ordering::Relaxed)
            ),
            (3, 3),
            "the reset must take exactly the last second's 3 events"
        );
        for v in [v0, v1] {
            assert!(
                v == 3 || v == -1 || v == 0,
                "a result outside the contract: {v}"
            );
        }
        assert_eq!(
            r.taken.load(Ordering::Relaxed) + r.counter.fetch(),
            r.counted.load(Ordering::Relaxed),
            "the reset lost or doubled an event"
        );
    }
}

#[test]
fn ratecheck_reset() {
    check(
        "ratecheck_reset",
        "RateState::check; CPUs 0 and 1 at the first tick of a new second",
        rate_model(true),
        vec![(
            "no re-check of ticks under the reset lock",
            Box::new(rate_model(false)),
        )],
    );
}

// ---------------------------------------------------------------------------------------
// The arch's add against an interrupt on the same CPU (arch/*/mod.rs `add`).

#[derive(Clone, Copy, PartialEq, Debug)]
enum ArchAdd {
    /// x86_64 `add gs:[off]`, riscv64 `amoadd.d`, aarch64 LSE `ldadd`: one instruction, which
    /// an interrupt cannot split (a single indivisible read-modify-write).
    OneInstruction,
    /// aarch64 `ldxr/add/stxr/cbnz`, i386 non-locked `cmpxchg8b` loop: load, then a store
    /// that fails (and retries) if the slot changed since the load (an exception return
    /// clears the exclusive monitor; `cmpxchg8b` compares the whole 64-bit value).
    RetryLoop,
    /// The portable fallback and i386 without CX8: load, add, store under local protection
    /// (interrupts masked), modelled as a lock the interrupt handler also takes.
    Protected,
    /// Broken: load, add, store unprotected (the crate's `--cfg pcpu_counter_broken` values
    /// `portable_unprotected_add` and `riscv_plain_add`).
    Unprotected,
}

fn arch_add(slot: &AtomicU64, protection: &Mutex<()>, how: ArchAdd, v: u64) {
    match how {
        ArchAdd::OneInstruction => {
            slot.fetch_add(v, Ordering::Relaxed);
        }
        ArchAdd::RetryLoop => loop {
            let old = slot.load(Ordering::Relaxed);
            if slot
                .compare_exchange(
                    old,
                    old.wrapping_add(v),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                break;
            }
        },
        ArchAdd::Protected => {
            let _masked = protection.lock().unwrap();
            slot.store(
                slot.load(Ordering::Relaxed).wrapping_add(v),
                Ordering::Relaxed,
            );
        }
        ArchAdd::Unprotected => {
            slot.store(
                slot.load(Ordering::Relaxed).wrapping_add(v),
                Ordering::Relaxed,
            );
        }
    }
}

/// The thread on CPU 0 adds 1 twice; an interrupt handler on CPU 0 adds 10 (at any point of
/// the thread's adds: a second loom thread, which explores a superset of where an interrupt
/// can land). The slot ends at exactly 12.
fn arch_model(how: ArchAdd) -> impl Fn() + Sync + Send + 'static {
    move || {
        let slot = Arc::new(AtomicU64::new(0));
        let protection = Arc::new(Mutex::new(()));
        let (s, p) = (slot.clone(), protection.clone());
        let interrupt = thread::spawn(move || arch_add(&s, &p, how, 10));
        arch_add(&slot, &protection, how, 1);
        arch_add(&slot, &protection, how, 1);
        interrupt.join().unwrap();
        assert_eq!(slot.load(Ordering::Relaxed), 12, "{how:?}: an add was lost");
    }
}

#[test]
fn arch_add_against_an_interrupt() {
    for (how, mirrors) in [
        (
            ArchAdd::OneInstruction,
            "x86_64 add gs:, riscv64 amoadd.d, aarch64 ldadd",
        ),
        (
            ArchAdd::RetryLoop,
            "aarch64 ldxr/stxr, i386 cmpxchg8b fs: loop",
        ),
        (ArchAdd::Protected, "portable fallback, i386 without CX8"),
    ] {
        check(
            &format!("arch_add_{how:?}"),
            &format!("{mirrors}; a thread and an interrupt on one CPU"),
            arch_model(how),
            vec![(
                "unprotected load/add/store",
                Box::new(arch_model(ArchAdd::Unprotected)),
            )],
        );
    }
}

// ---------------------------------------------------------------------------------------
// The approximate counter's carry protocol (src/approx.rs).

/// The first level's unit: 16 in the crate (the slot's multiples of 16, which x86_64 reads
/// from the add's auxiliary carry flag), 2 here, so that small adds cross it.
const UNIT: u64 = 2;
/// The batch of the approximate models: 4 (two units).
const BATCH: u64 = 4;
/// `!(BATCH / UNIT - 1)`: the bits of a units slot that count whole batches.
const HIGH: u64 = !(BATCH / UNIT - 1);

/// How a carry reaches the shared word.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Carry {
    /// `ApproxCounter::add_total`: one atomic add (`AcqRel`), before the add returns.
    Atomic,
    /// Broken: a load and a store instead of one atomic add.
    LoadStore,
    /// Broken: the add reports itself done (returns) before its carry lands, as a lazily
    /// batched carry would.
    AfterReturn,
}

/// How `fetch_and_zero` moves the shared word.
#[derive(Clone, Copy, PartialEq, Debug)]
enum ApproxZero {
    /// `ApproxCounter::fetch_and_zero`: the baseline compare-and-swap, then one atomic add of
    /// minus the delta.
    Atomic,
    /// Broken: the shared word read, then written back less the delta.
    LoadStore,
}

/// An `ApproxCounter`: the plain counter (slots, baseline), the per-CPU units slots (the
/// crate's sixteens) and the shared word.
struct Approx {
    counter: Counter,
    units: [AtomicU64; NCPUS],
    total: AtomicU64,
    /// Per CPU, the adds that returned (published with `Release` after the add).
    returned: [AtomicU64; NCPUS],
}

impl Approx {
    fn new() -> Self {
        Approx {
            counter: Counter::new(),
            units: [AtomicU64::new(0), AtomicU64::new(0)],
            total: AtomicU64::new(0),
            returned: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    fn add_total(&self, v: u64, how: Carry) {
        if how == Carry::LoadStore {
            let t = self.total.load(Ordering::Acquire);
            self.total.store(t.wrapping_add(v), Ordering::Release);
        } else {
            self.total.fetch_add(v, Ordering::AcqRel);
        }
    }

    /// `ApproxCounter::add` on `cpu`: the owner's add to its slot with the units it crossed
    /// (x86_64: `add gs:[off]` and its AF flag; a relaxed load and store of its own slot, as
    /// `Counter::add`); if any, the owner's add to its units slot (`xadd`, the same), and the
    /// carry if that crossed a multiple of `BATCH / UNIT`; then the add has returned
    /// (`returned`, for the bound model).
    fn add(&self, cpu: usize, v: u64, how: Carry) {
        let slot = &self.counter.slots[cpu];
        let old = slot.load(Ordering::Relaxed);
        let new = old.wrapping_add(v);
        slot.store(new, Ordering::Relaxed);
        let c = (new / UNIT).wrapping_sub(old / UNIT);
        let (mut crossed, mut carry) = (false, 0);
        if c != 0 {
            let units = &self.units[cpu];
            let old = units.load(Ordering::Relaxed);
            let new = old.wrapping_add(c);
            units.store(new, Ordering::Relaxed);
            crossed = (old ^ new) & HIGH != 0;
            carry = (new & HIGH).wrapping_sub(old & HIGH).wrapping_mul(UNIT);
        }
        if crossed && how != Carry::AfterReturn {
            self.add_total(carry, how);
        }
        self.returned[cpu].fetch_add(v, Ordering::Release);
        if crossed && how == Carry::AfterReturn {
            self.add_total(carry, how);
        }
    }

    /// `ApproxCounter::approximate`: one `Acquire` load (`baseline::load`).
    fn approximate(&self) -> u64 {
        self.total.load(Ordering::Acquire)
    }

    /// `ApproxCounter::fetch_and_zero`.
    fn fetch_and_zero(&self, how: ApproxZero) -> u64 {
        let delta = self.counter.fetch_and_zero(Zero::Baseline);
        match how {
            ApproxZero::Atomic => self.add_total(delta.wrapping_neg(), Carry::Atomic),
            ApproxZero::LoadStore => {
                let t = self.total.load(Ordering::Acquire);
                self.total.store(t.wrapping_sub(delta), Ordering::Release);
            }
        }
        delta
    }

    /// What the approximate value lacks once nothing is in flight: `Σ slot & (BATCH - 1)`.
    fn remainders(&self) -> u64 {
        self.counter.slots.iter().fold(0, |a, s| {
            a.wrapping_add(s.load(Ordering::Relaxed) & (BATCH - 1))
        })
    }
}

/// CPU 0 adds 2 twice (the second crosses the batch of 4); CPU 1 adds 5 (a carry of 4) and
/// runs `fetch_and_zero`; a third thread runs `fetch_and_zero`. Carries race with each other
/// and with the zeroes' baseline swaps and subtractions. After the joins: the deltas plus the
/// final precise value are every add (9), and the approximate value is exactly the precise
/// value less the slots' remainders (no carry lost or doubled).
fn carry_model(carry: Carry, zero: ApproxZero) -> impl Fn() + Sync + Send + 'static {
    move || {
        let c = Arc::new(Approx::new());
        let c0 = c.clone();
        let cpu0 = thread::spawn(move || {
            c0.add(0, 2, carry);
            c0.add(0, 2, carry);
        });
        let c1 = c.clone();
        let cpu1 = thread::spawn(move || {
            c1.add(1, 5, carry);
            c1.fetch_and_zero(zero)
        });
        let d2 = c.fetch_and_zero(zero);
        cpu0.join().unwrap();
        let d1 = cpu1.join().unwrap();
        let precise = c.counter.fetch();
        assert_eq!(
            d1.wrapping_add(d2).wrapping_add(precise),
            9,
            "deltas {d1} + {d2} + final precise {precise} != every add (9)"
        );
        let (approx, rem) = (c.approximate(), c.remainders());
        assert_eq!(
            approx,
            precise.wrapping_sub(rem),
            "a carry lost or doubled: approximate {approx}, precise {precise}, remainders {rem}"
        );
    }
}

#[test]
fn approx_carries_racing_carries_and_zeroes() {
    check(
        "approx_carry",
        "ApproxCounter::add/fetch_and_zero; 3 threads: adders on CPUs 0 and 1 (2 carries), 2 fetch_and_zero",
        carry_model(Carry::Atomic, ApproxZero::Atomic),
        vec![
            (
                "carry as a load and a store",
                Box::new(carry_model(Carry::LoadStore, ApproxZero::Atomic)),
            ),
            (
                "zero subtracts by a load and a store",
                Box::new(carry_model(Carry::Atomic, ApproxZero::LoadStore)),
            ),
        ],
    );
}

/// CPU 0 adds 2 three times, CPU 1 adds 2 twice (batch 4: a carry each), while a reader
/// reads which adds returned (`Acquire`), then the approximate value. The bound of
/// `ApproxCounter::accuracy`: every add that returned before the read is counted up to the
/// slots' remainders, `approximate >= returned - NCPUS * (BATCH - 1)`, and (adds that only
/// grow, `over` is 0) the approximate value is never above the final precise value.
fn bound_model(carry: Carry) -> impl Fn() + Sync + Send + 'static {
    move || {
        let c = Arc::new(Approx::new());
        let c0 = c.clone();
        let cpu0 = thread::spawn(move || (0..3).for_each(|_| c0.add(0, 2, carry)));
        let c1 = c.clone();
        let cpu1 = thread::spawn(move || (0..2).for_each(|_| c1.add(1, 2, carry)));
        let returned: u64 = c.returned.iter().map(|r| r.load(Ordering::Acquire)).sum();
        let approx = c.approximate();
        cpu0.join().unwrap();
        cpu1.join().unwrap();
        let under = NCPUS as u64 * (BATCH - 1);
        assert!(
            approx + under >= returned,
            "approximate {approx} is more than {under} under the {returned} adds that returned"
        );
        assert!(
            approx <= c.counter.fetch(),
            "approximate {approx} over the final value"
        );
    }
}

#[test]
fn approx_bound_against_adds_in_flight() {
    check(
        "approx_bound",
        "ApproxCounter::approximate/accuracy; 3 threads: adders on CPUs 0 and 1, a reader",
        bound_model(Carry::Atomic),
        vec![(
            "the add returns before its carry lands",
            Box::new(bound_model(Carry::AfterReturn)),
        )],
    );
}

// ---------------------------------------------------------------------------------------
// Lazy counters (src/lazy.rs).

/// `state` as in src/lazy.rs: `SHARED` and `MOVING` bits while shared (no threshold: no adds
/// left above them), the slot's offset (a multiple of 8) once moved.
const LAZY_SHARED: usize = 1;
const LAZY_MOVING: usize = 2;
const LAZY_SLOT: usize = 8;

/// A `LazyCounter` without a threshold (only contention or a move call moves it) whose slot,
/// once allocated, is one that another counter used before: every CPU's copy and the
/// baseline hold that counter's 100 until `alloc_run` clears them.
struct Lazy {
    /// The shared word (`baseline::load` / `replace` / `take`).
    word: AtomicU64,
    state: AtomicUsize,
    counter: Counter,
}

/// Which move and `fetch`.
#[derive(Clone, Copy, PartialEq)]
enum LazyVariant {
    Real,
    /// Broken: `--cfg pcpu_counter_broken="lazy_move_takes_word"`: after publishing the slot
    /// the move takes the word into the mover's slot, and `fetch` reads the slots alone.
    TakesWord,
    /// Broken: the slot published with a relaxed store, so an add (or a fetch) that sees it
    /// live need not see `alloc_run`'s clearing.
    PublishRelaxed,
    /// Broken: a move that does not claim the state first, so two movers each allocate and
    /// clear (here: the same slot, as a zone with one free slot reuses the first mover's
    /// after the second frees it) and the second wipes adds made after the first published.
    NoClaim,
}

impl Lazy {
    fn new() -> Self {
        let counter = Counter::new();
        counter
            .slots
            .iter()
            .for_each(|s| s.store(100, Ordering::Relaxed));
        counter.baseline.store(100, Ordering::Relaxed);
        Lazy {
            word: AtomicU64::new(0),
            state: AtomicUsize::new(LAZY_SHARED),
            counter,
        }
    }

    /// `LazyCounter::add` and `shared_add` on `cpu` (no threshold).
    fn add(&self, cpu: usize, v: u64, variant: LazyVariant) {
        let mut s = self.state.load(Ordering::Acquire);
        let mut may_move = true;
        loop {
            if s & LAZY_SHARED == 0 {
                return self.counter.add(cpu, v);
            }
            let old = self.word.load(Ordering::Acquire);
            if self
                .word
                .compare_exchange(
                    old,
                    old.wrapping_add(v),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
            {
                return;
            }
            s = self.state.load(Ordering::Acquire);
            if may_move {
                // `contended`.
                may_move = false;
                if s & (LAZY_SHARED | LAZY_MOVING) == LAZY_SHARED {
                    self.move_from(cpu, s, variant);
                }
                s = self.state.load(Ordering::Acquire);
            }
        }
    }

    /// `LazyCounter::move_from` on `cpu`, the allocation always succeeding.
    fn move_from(&self, cpu: usize, s: usize, variant: LazyVariant) {
        if variant != LazyVariant::NoClaim
            && self
                .state
                .compare_exchange(s, s | LAZY_MOVING, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        // `Zone::alloc_run`: plain stores clear every CPU's copy, then the baseline.
        for slot in &self.counter.slots {
            slot.store(0, Ordering::Relaxed);
        }
        self.counter.baseline.store(0, Ordering::Release);
        let publish = match variant {
            LazyVariant::PublishRelaxed => Ordering::Relaxed,
            _ => Ordering::Release,
        };
        self.state.store(LAZY_SLOT, publish);
        if variant == LazyVariant::TakesWord {
            let moved = self.word.swap(0, Ordering::AcqRel);
            self.counter.add(cpu, moved);
        }
    }

    /// `LazyCounter::try_move` on `cpu`: waits for another mover.
    fn try_move(&self, cpu: usize, variant: LazyVariant) {
        loop {
            let s = self.state.load(Ordering::Acquire);
            if s & LAZY_SHARED == 0 {
                return;
            }
            if s & LAZY_MOVING != 0 {
                thread::yield_now();
                continue;
            }
            self.move_from(cpu, s, variant);
        }
    }

    /// `LazyCounter::fetch`.
    fn fetch(&self, variant: LazyVariant) -> u64 {
        let s = self.state.load(Ordering::Acquire);
        let live = s & LAZY_SHARED == 0;
        let word = if variant == LazyVariant::TakesWord && live {
            0
        } else {
            self.word.load(Ordering::Acquire)
        };
        if !live {
            return word;
        }
        word.wrapping_add(self.counter.fetch())
    }
}

/// CPU 0 adds 1 then 2; CPU 1 adds 4, moves the counter and adds 8 (an add that fails its
/// compare-and-swap moves it first); a third thread fetches twice. The fetches never go back
/// and never exceed 15; afterwards the counter reads exactly 15.
fn lazy_model(variant: LazyVariant) -> impl Fn() + Sync + Send + 'static {
    move || {
        let c = Arc::new(Lazy::new());
        let c0 = c.clone();
        let cpu0 = thread::spawn(move || {
            c0.add(0, 1, variant);
            c0.add(0, 2, variant);
        });
        let c1 = c.clone();
        let cpu1 = thread::spawn(move || {
            c1.add(1, 4, variant);
            c1.try_move(1, variant);
            c1.add(1, 8, variant);
        });
        let first = c.fetch(variant);
        let second = c.fetch(variant);
        assert!(
            first <= second && second <= 15,
            "fetches during the move read {first} then {second} (of 15)"
        );
        cpu0.join().unwrap();
        cpu1.join().unwrap();
        assert_eq!(c.fetch(variant), 15, "after the move: every add once");
    }
}

#[test]
fn lazy_move_racing_adds_and_fetches() {
    check(
        "lazy_move",
        "LazyCounter::add/try_move/fetch; 3 threads: 2 adds on CPU 0, an add, the move and an \
         add on CPU 1, 2 fetches",
        lazy_model(LazyVariant::Real),
        vec![
            (
                "lazy_move_takes_word",
                Box::new(lazy_model(LazyVariant::TakesWord)),
            ),
            (
                "slot published without release",
                Box::new(lazy_model(LazyVariant::PublishRelaxed)),
            ),
            (
                "move without claiming the state",
                Box::new(lazy_model(LazyVariant::NoClaim)),
            ),
        ],
    );
}
