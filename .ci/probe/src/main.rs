//! The probe: counts from ordinary threads with whatever API the enabled features offer, and
//! asserts exact sums. Run by .ci/package.sh against the unpacked package (see Cargo.toml).
//!
//! - `rseq` (Linux): `pcpu_counter::rseq` zones and the process-wide zone.
//! - `sim`: the kernel-style `Zone`/`Counter` on a simulated machine, threads binding its
//!   CPUs; and an add from a thread that holds no CPU of the counter's machine panics (in
//!   release too) instead of crashing or counting elsewhere.
//! - Neither: nothing counts on a hosted target. The kernel-style API compiles there but
//!   makes no zone: `driver.rs` proves it (package.sh runs it).

// The helpers are for the counting checks; a feature set with none leaves them unused.
#![cfg_attr(not(any(feature = "rseq", feature = "sim")), allow(dead_code))]

use std::process::ExitCode;

/// Threads that add at once, and the adds each makes.
const THREADS: u64 = 8;
const ADDS: u64 = 100_000;

fn main() -> ExitCode {
    let features: Vec<&str> = [
        (cfg!(feature = "alloc"), "alloc"),
        (cfg!(feature = "std"), "std"),
        (cfg!(feature = "rseq"), "rseq"),
        (cfg!(feature = "capi"), "capi"),
        (cfg!(feature = "custom-protection"), "custom-protection"),
        (cfg!(feature = "riscv-gp"), "riscv-gp"),
        (cfg!(feature = "platform-base"), "platform-base"),
        (cfg!(feature = "sim"), "sim"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!("probe [{}] ({profile})", features.join(","));

    // `Error` is offered everywhere; with `std` it is a `std::error::Error`.
    let _ = core::mem::size_of::<pcpu_counter::Error>();
    #[cfg(feature = "std")]
    {
        fn is_std_error<E: std::error::Error>() {}
        is_std_error::<pcpu_counter::Error>();
    }

    #[cfg(all(feature = "rseq", target_os = "linux"))]
    rseq::run();
    #[cfg(feature = "sim")]
    sim::run();
    if !cfg!(any(
        all(feature = "rseq", target_os = "linux"),
        feature = "sim"
    )) {
        println!("  no counting API on this target with these features (driver.rs proves it)");
    }
    println!("probe: ok");
    ExitCode::SUCCESS
}

/// Adds 1 to `a` and 2 to `b`, `ADDS` times, from each of `THREADS` threads started at once;
/// `each` wraps every thread's work (binding a simulated CPU, or nothing).
fn hammer<C: Sync>(
    a: &C,
    b: &C,
    add: impl Fn(&C, i64) + Sync,
    each: impl Fn(u64, &dyn Fn()) + Sync,
) {
    let barrier = std::sync::Barrier::new(THREADS as usize);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (barrier, add, each) = (&barrier, &add, &each);
            s.spawn(move || {
                barrier.wait();
                each(t, &|| {
                    for _ in 0..ADDS {
                        add(a, 1);
                        add(b, 2);
                    }
                });
            });
        }
    });
}

fn expect(what: &str, got: u64, want: u64) {
    assert_eq!(got, want, "{what}: got {got}, want {want}");
    println!("  {what}: {got}");
}

#[cfg(all(feature = "rseq", target_os = "linux"))]
mod rseq {
    use super::{expect, hammer, ADDS, THREADS};
    use pcpu_counter::rseq;

    pub fn run() {
        println!("  rseq: path {}", rseq::path());
        let zone = rseq::RseqZone::new(16).expect("rseq::RseqZone::new(16)");
        let a = zone.alloc().expect("alloc a");
        let b = zone.alloc().expect("alloc b");
        hammer(&a, &b, |c, v| c.add(v), |_, work| work());
        expect(
            "rseq a (8 threads x 100000 x +1)",
            a.fetch(),
            THREADS * ADDS,
        );
        expect(
            "rseq b (8 threads x 100000 x +2)",
            b.fetch(),
            2 * THREADS * ADDS,
        );

        // Negative adds, fetch_and_zero, zero.
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| (0..1000).for_each(|_| a.add(-1)));
            }
        });
        expect("rseq a after 8000 x -1", a.fetch(), THREADS * ADDS - 8000);
        expect(
            "rseq a fetch_and_zero",
            a.fetch_and_zero(),
            THREADS * ADDS - 8000,
        );
        expect("rseq a after fetch_and_zero", a.fetch(), 0);
        b.zero();
        expect("rseq b after zero", b.fetch(), 0);
        a.add(5);
        expect("rseq a counts again", a.fetch(), 5);

        // Freed slots come back cleared.
        let in_use = zone.in_use();
        drop(a);
        drop(b);
        assert_eq!(
            zone.in_use(),
            in_use - 2,
            "dropping counters frees their slots"
        );
        let c = zone.alloc().expect("alloc c");
        expect("rseq new counter starts at", c.fetch(), 0);

        // The process-wide zone, while the program's own zone lives (as when a library
        // counts in the global zone and the program in a zone of its own).
        let why = "rseq::alloc() (the process-wide zone) while another rseq::RseqZone lives";
        let g = rseq::alloc().expect(why);
        let h = rseq::alloc().expect(why);
        hammer(&g, &h, |c, v| c.add(v), |_, work| work());
        expect("rseq global a", g.fetch(), THREADS * ADDS);
        expect("rseq global b", h.fetch(), 2 * THREADS * ADDS);
    }
}

#[cfg(feature = "sim")]
mod sim {
    use super::{expect, hammer, ADDS, THREADS};
    use pcpu_counter::sim::Machine;
    use std::panic::{catch_unwind, AssertUnwindSafe};

    /// Simulated CPUs: fewer than the threads, so threads wait for and share CPUs.
    const NCPUS: usize = 4;

    pub fn run() {
        let machine = Machine::with_capacity(NCPUS, 16).expect("Machine::with_capacity");
        let a = machine.alloc().expect("alloc a");
        let b = machine.alloc().expect("alloc b");
        // Each thread holds a CPU for a while, then moves on (run_on, bind).
        hammer(
            &a,
            &b,
            |c, v| c.add(v),
            |t, work| {
                let cpu = t as usize % NCPUS;
                if t % 2 == 0 {
                    machine.run_on(cpu, work);
                } else {
                    let bound = machine.bind(cpu).expect("bind");
                    work();
                    drop(bound);
                }
            },
        );
        expect("sim a (8 threads x 100000 x +1)", a.fetch(), THREADS * ADDS);
        expect(
            "sim b (8 threads x 100000 x +2)",
            b.fetch(),
            2 * THREADS * ADDS,
        );
        let per_cpu: u64 = (0..NCPUS)
            .map(|cpu| a.cpu_slot(cpu).expect("cpu_slot"))
            .sum();
        expect("sim a, sum of the CPUs' slots", per_cpu, THREADS * ADDS);

        machine.run_on(1, || a.add(-7));
        expect("sim a after -7", a.fetch(), THREADS * ADDS - 7);
        expect(
            "sim a fetch_and_zero",
            a.fetch_and_zero(),
            THREADS * ADDS - 7,
        );
        expect("sim a after fetch_and_zero", a.fetch(), 0);
        b.zero();
        expect("sim b after zero", b.fetch(), 0);

        // Safe calls in the wrong place: a clear panic, nothing counted, nothing crashed.
        let unbound = caught_panic(|| a.add(1))
            .expect("an add from a thread holding no simulated CPU must panic");
        println!("  unbound add panicked: {unbound}");
        assert!(
            unbound.contains("simulated CPU"),
            "the unbound add's panic should say to bind a simulated CPU: {unbound:?}"
        );
        let other = Machine::with_capacity(2, 4).expect("second machine");
        let wrong = other.run_on(0, || caught_panic(|| a.add(1)));
        let wrong = wrong.expect("an add on a CPU of another machine must panic");
        println!("  add on another machine's CPU panicked: {wrong}");
        let from_thread = std::thread::scope(|s| s.spawn(|| caught_panic(|| a.add(1))).join());
        let from_thread = from_thread
            .expect("the thread itself must not die")
            .expect("an add from an unbound spawned thread must panic");
        assert_eq!(from_thread, unbound, "the same message from another thread");
        expect("sim a after the refused adds", a.fetch(), 0);
        machine.run_on(0, || a.add(3));
        expect("sim a counts again", a.fetch(), 3);
    }

    /// Runs `f`; `Some(message)` if it panicked. The default hook's report is kept quiet.
    fn caught_panic(f: impl FnOnce()) -> Option<String> {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let result = catch_unwind(AssertUnwindSafe(f));
        std::panic::set_hook(hook);
        let payload = result.err()?;
        Some(
            payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "(a panic without a message)".to_string()),
        )
    }
}
