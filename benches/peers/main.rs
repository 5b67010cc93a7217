//! The benchmarks against the peers (`cargo xtask bench` runs them and writes the report).
//!
//! A small harness of its own rather than criterion: the multi-writer rounds need threads
//! bound to simulated CPUs, a fixed-duration run with a stop flag (so that oversubscribed
//! writers all run for the whole window) and an exactness check after every round.
//!
//! Usage: `cargo bench --features sim --bench peers -- [--out FILE] [--quick]`; without
//! `--bench` (as under `cargo test --benches`) it runs the quick rounds. Every result
//! is one tab-separated line `section, name, parameter, value, unit` on stdout and in FILE.

mod alloc;
mod approx;
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod free_running;
mod handoff;
mod harness;
mod lazy;
mod memory;
mod reads;
mod single;
mod throughput;

use harness::Sink;

fn main() {
    let mut out = None;
    let mut quick = false;
    let mut bench = false;
    let mut reads_only = false;
    let mut alloc_only = false;
    let mut rseq_only = false;
    let mut lazy_only = false;
    let mut hot_only = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out = Some(args.next().expect("--out needs a file name")),
            "--quick" => quick = true,
            // Only the read rows (fetch, zero, group reads, alloc): for measuring them alone.
            "--reads-only" => reads_only = true,
            // Only alloc + free against the live count (benches/peers/alloc.rs).
            "--alloc-only" => alloc_only = true,
            // Only the Linux programs' section (the rseq counter and its peers).
            "--rseq-only" => rseq_only = true,
            // Only the lazy counter's rows (its memory, its add before and after the move).
            "--lazy-only" => lazy_only = true,
            // Only the hot paths' add rows against the plain add (the approximate counter's
            // add, the lazy counter's rows): `cargo xtask bench --hot-only`.
            "--hot-only" => hot_only = true,
            // `cargo bench` passes `--bench`; `cargo test --benches` does not, and then the
            // run is a quick smoke test (still asserting every count).
            "--bench" => bench = true,
            // Arguments meant for libtest (`cargo test -- --nocapture`, a name filter) are
            // not ours: say so and go on, so that a test run of every target still works.
            other => eprintln!("peers: ignoring argument {other:?}"),
        }
    }
    let quick = quick || !bench;
    let mut sink = Sink::new(out.as_deref());
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    sink.record("meta", "started", "-", started, "unix seconds");
    sink.record("meta", "load before", "-", load_average(), "");
    sink.record("meta", "arch", "-", pcpu_counter::arch::NAME, "");
    sink.record("meta", "quick", "-", quick, "");
    if reads_only {
        reads::run(&mut sink, quick);
        return;
    }
    if lazy_only {
        lazy::run(&mut sink, quick);
        return;
    }
    if hot_only {
        approx::run_add(&mut sink, quick);
        lazy::run(&mut sink, quick);
        return;
    }
    if alloc_only {
        alloc::run(&mut sink, quick);
        return;
    }
    if !rseq_only {
        run_core(&mut sink, quick);
    }
    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    free_running::run(&mut sink, quick);
    sink.record("meta", "load after", "-", load_average(), "");
}

/// The sections of the per-CPU core (simulated CPUs).
fn run_core(sink: &mut Sink, quick: bool) {
    throughput::run(sink, quick);
    handoff::run(sink, quick);
    single::run(sink, quick);
    reads::run(sink, quick);
    alloc::run(sink, quick);
    approx::run(sink, quick);
    lazy::run(sink, quick);
    memory::run(sink);
}

/// The 1, 5 and 15 minute load averages (Linux), to show what else was running.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".into(),
        |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}
