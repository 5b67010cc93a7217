//! `cargo xtask verify`: the concurrency models, the sanitizers and the property tests.
//!
//! Steps (`--only <substring>` runs the steps whose name contains it):
//! - `loom`: `tests/loom.rs` under `RUSTFLAGS="--cfg loom"` (own target dir `target/loom`,
//!   release): every model exhaustively within its bound (preemption bound 4,
//!   `LOOM_MAX_PREEMPTIONS` overrides), then each of its broken variants, which loom must
//!   fail. Prints the test's one line per model.
//! - `broken`: the suites whose broken variant lives in the crate behind a `--cfg
//!   pcpu_counter_broken` value (never a feature), each test that must catch its variant
//!   ([`BROKEN`]: the binary, the test, the value and what it breaks); one build with every
//!   value (own target dir `target/broken`), and each test must pass by catching it.
//! - `property`: `cargo test` of the property tests ([`PROPERTY_TESTS`]; 256 cases per
//!   property).
//! - `fuzz`: the same property tests with `PROPTEST_CASES` cases (default 2000,
//!   `PCPU_FUZZ_CASES` overrides), reusing the same binaries.
//! - `tsan`: the host simulation suite (`--tests`) built with `-Zsanitizer=thread`, which
//!   needs the rustup `nightly`'s ThreadSanitizer runtime
//!   (`lib/rustlib/<host>/lib/librustc-nightly_rt.tsan.a`). The standard library is rebuilt
//!   instrumented (`-Zbuild-std`), and then every report but the intentionally racy broken
//!   counter's (`tests/common` `RacyShared`, the shared `+=` of `tests/counting.rs`, which must
//!   be reported) is a failure: from the nightly's `rust-src` where installed, else by a
//!   toolchain with the library source (Debian's rustc and `rust-web-src`) through a sysroot
//!   of links that gives it the nightly's runtime (`target/tsan/sysroot`). With neither, std
//!   stays uninstrumented (`-Cunsafe-allow-abi-mismatch=sanitizer`): TSan then cannot see the
//!   synchronisation inside std (`Arc` drops, scoped-thread joins, `Mutex`, the allocator) and
//!   reports races there that are not races, so the step only counts them. Skipped under TSan:
//!   `storm_catches_a_racy_per_cpu_add` (TSan defers signals to the next interceptor, so a
//!   simulated interrupt never lands inside the racy add that test needs it to split), for
//!   the same reason `tests/rseq.rs`'s `harness_catches_*` (broken rseq adds) and
//!   `tests/approx.rs`'s `interrupts_between_an_add_and_its_carry_lose_nothing`, and its
//!   `refused_memory_*` (its child's address-space limit leaves no room for TSan's shadow
//!   memory), and the tests of `sim::Machine::with_statics` (`tests/statics.rs`, the static
//!   add's pin in `tests/disasm.rs`: the copies' fixed addresses lie in TSan's shadow).
//! - `miri`: `cargo +nightly miri test` of the portable core (the lib's unit tests and
//!   [`PORTABLE_CORE`]) for `powerpc64le-unknown-linux-gnu` ([`MIRI_TARGET`]), a target with no
//!   arch module of its own, so the portable arch (a plain add under local protection) runs,
//!   not inline assembly that Miri cannot execute (own target dir `target/miri`; the sysroot
//!   is `cargo miri setup`'s, built once from the nightly's `rust-src`). Three runs, all with
//!   `-Zmiri-permissive-provenance` (slot addresses are numbers, a CPU's base plus an offset;
//!   Miri still checks each lies in a live, exposed allocation): every test under Stacked
//!   Borrows (seed 0); the same less the concurrent ones and the tests of safe code alone
//!   ([`TREE_BORROWS_SKIP`]: the C registry's UTF-8 check against `core`'s, over half the
//!   run's time, where Tree Borrows has no pointer to check) under Tree Borrows; the concurrent
//!   tests ([`MIRI_CONCURRENT`]) under seeds 1..=4 (`-Zmiri-many-seeds`, `PCPU_MIRI_SEEDS`
//!   overrides the 4). Prints each run's `MIRIFLAGS`, per test binary the tests passed,
//!   failed and ignored, and each ignored test with its reason. The tests run fewer
//!   iterations under `cfg(miri)` (in the test code). Under Miri the simulation has no
//!   interrupts (Miri has no signals): its local protection counts nesting instead of masking
//!   a signal (`cfg(miri)` in `src/sim` only), `interrupt_storm` panics, and the tests that
//!   need interrupts are not selected or are `ignore`d under Miri. Where the nightly, its
//!   `miri` or its `rust-src` component is missing it says which, with the `rustup` command,
//!   and runs the next best: the same tests in the dev profile (debug assertions and overflow
//!   checks) on the host arch. Findings so far are in docs/testing.md.
//!
//! A missing tool is reported and skipped, never a failure; a failing model, test or
//! sanitizer finding is.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::toolchain;

/// The portable-core test binaries (Miri, and its fallback), run with the lib's unit tests
/// (bitmap, the C API's protection nesting): the zone (layout, baselines, bitmap, static
/// memory, a kernel's own blocks), arrays, the registry, early counters, areas, ratecheck and
/// growth.
const PORTABLE_CORE: [&str; 7] = [
    "zone",
    "array",
    "registry",
    "early",
    "area",
    "ratecheck",
    "grow",
];

/// The concurrent tests of [`PORTABLE_CORE`] that Miri reruns with several scheduler seeds:
/// (test binary, libtest name filter). The seeds run starts only these binaries.
const MIRI_CONCURRENT: [(&str, &str); 12] = [
    ("zone", "alloc_free_reuse_under_concurrency"),
    ("array", "exact_sums_from_migrating_threads"),
    (
        "array",
        "fetch_and_zero_all_is_lossless_under_concurrent_adds",
    ),
    ("array", "the_same_check_catches_a_two_step_fetch_then_zero"),
    (
        "early",
        "counts_before_init_move_into_the_initialising_cpus_slot",
    ),
    ("early", "init_racing_with_adds_loses_and_doubles_nothing"),
    ("early", "fetch_never_goes_back_during_init"),
    (
        "ratecheck",
        "concurrent_events_within_a_second_are_all_counted",
    ),
    ("ratecheck", "the_limit_holds_at_every_batch"),
    ("ratecheck", "one_cpu_wins_each_reset"),
    (
        "ratecheck",
        "the_same_check_catches_a_reset_without_the_lock",
    ),
    (
        "registry",
        "snapshots_while_cpus_add_are_monotonic_and_end_exact",
    ),
];

/// Cargo's arguments that select test binaries: `--lib` where `lib`, then `--test <name>` for
/// each binary (once, in order).
fn test_args(lib: bool, binaries: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = if lib {
        vec!["--lib".into()]
    } else {
        Vec::new()
    };
    let mut seen: Vec<&str> = Vec::new();
    for binary in binaries {
        if !seen.contains(binary) {
            seen.push(binary);
            args.extend(["--test".to_string(), binary.to_string()]);
        }
    }
    args
}

/// The portable core's selection: the lib's unit tests and [`PORTABLE_CORE`].
fn portable_core_args() -> Vec<String> {
    test_args(true, &PORTABLE_CORE)
}

/// The binaries of [`MIRI_CONCURRENT`], each once.
fn miri_concurrent_args() -> Vec<String> {
    let binaries: Vec<&str> = MIRI_CONCURRENT.iter().map(|(binary, _)| *binary).collect();
    test_args(false, &binaries)
}

/// The names of [`MIRI_CONCURRENT`]'s tests.
fn miri_concurrent_names() -> impl Iterator<Item = &'static str> {
    MIRI_CONCURRENT.iter().map(|(_, name)| *name)
}

/// Tests of [`PORTABLE_CORE`] (libtest name filters) that Tree Borrows leaves out, for time:
/// tests of safe code alone (no `unsafe`, no raw pointer, no reference into shared memory),
/// where Tree Borrows, which differs from Stacked Borrows only in the aliasing rules of
/// references and raw pointers, has nothing to check that Stacked Borrows does not.
/// `capi::registry`'s `is_utf8_agrees_with_core` compares the C registry's UTF-8 check (plain
/// byte arithmetic on a slice) with `core::str::from_utf8` on every 1- to 3-byte string
/// (nearly 200,000 calls): more than half of a Miri run's time. Stacked Borrows runs it.
const TREE_BORROWS_SKIP: &[&str] = &["is_utf8_agrees_with_core"];

/// The target Miri interprets: one with no arch module of its own, so that the portable arch
/// (a plain add under local protection) runs, not inline assembly Miri cannot execute.
const MIRI_TARGET: &str = "powerpc64le-unknown-linux-gnu";

const HOST: &str = "x86_64-unknown-linux-gnu";

struct Outcome {
    name: &'static str,
    ok: bool,
    line: String,
    seconds: f64,
}

pub fn run(args: &[String]) -> Result<(), String> {
    let only = match args {
        [] => None,
        [flag, filter] if flag == "--only" => Some(filter.as_str()),
        _ => return Err("usage: cargo xtask verify [--only <step name substring>]".into()),
    };
    let started = Instant::now();
    let root = toolchain::repo_root();
    type Step = fn(&Path) -> (bool, String);
    let steps: [(&'static str, Step); 6] = [
        ("loom", loom),
        ("broken", broken),
        ("property", property),
        ("fuzz", fuzz),
        ("tsan", tsan),
        ("miri", miri),
    ];
    let mut outcomes = Vec::new();
    for (name, step) in steps {
        if only.is_some_and(|o| !name.contains(o)) {
            continue;
        }
        println!("== verify {name}");
        let t = Instant::now();
        let (ok, line) = step(&root);
        let outcome = Outcome {
            name,
            ok,
            line,
            seconds: t.elapsed().as_secs_f64(),
        };
        println!(
            "{} {}: {} ({:.0} s)",
            if ok { "ok  " } else { "FAIL" },
            outcome.name,
            outcome.line,
            outcome.seconds
        );
        outcomes.push(outcome);
    }
    println!(
        "== verify summary ({:.0} s)",
        started.elapsed().as_secs_f64()
    );
    for o in &outcomes {
        println!(
            "{} {:<8} {:>4.0} s  {}",
            if o.ok { "ok  " } else { "FAIL" },
            o.name,
            o.seconds,
            o.line
        );
    }
    let failed: Vec<_> = outcomes.iter().filter(|o| !o.ok).map(|o| o.name).collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("failed: {}", failed.join(", ")))
    }
}

/// Runs `cmd`, echoing its output; returns success and the combined output.
fn capture(mut cmd: Command, echo: bool) -> (bool, String) {
    eprintln!("+ {cmd:?}");
    match cmd.output() {
        Ok(out) => {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            if echo || !out.status.success() {
                print!("{text}");
            }
            (out.status.success(), text)
        }
        Err(e) => (false, format!("cannot run {cmd:?}: {e}")),
    }
}

/// The rustup `nightly` cargo (through `rustup run`: `cargo +nightly` needs the rustup proxy,
/// and the xtask runs under the toolchain's own cargo).
fn nightly_cargo(root: &Path) -> Command {
    let mut cmd = Command::new("rustup");
    cmd.args(["run", "nightly", "cargo"])
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC")
        .env_remove("CARGO")
        .current_dir(root);
    cmd
}

fn cargo(root: &Path) -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root);
    cmd
}

/// Passed and failed test counts summed over every `test result:` line.
fn test_counts(text: &str) -> (u64, u64) {
    let mut passed = 0;
    let mut failed = 0;
    for line in text.lines().filter(|l| l.starts_with("test result:")) {
        let num = |word: &str| {
            line.split(';')
                .find(|p| p.trim_end().ends_with(word))
                .and_then(|p| p.split_whitespace().rev().nth(1))
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        };
        passed += num("passed");
        failed += num("failed");
    }
    (passed, failed)
}

fn loom(root: &Path) -> (bool, String) {
    let mut cmd = cargo(root);
    cmd.args(["test", "--release", "--test", "loom", "--"])
        .args(["--nocapture", "--test-threads=1"])
        .env("RUSTFLAGS", "--cfg loom")
        .env("CARGO_TARGET_DIR", root.join("target/loom"));
    let (ok, text) = capture(cmd, false);
    let models: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once("loom "))
        .map(|(_, m)| m)
        .collect();
    for m in &models {
        println!("  loom {m}");
    }
    let (passed, failed) = test_counts(&text);
    (
        ok && !models.is_empty(),
        format!(
            "{} models, each with its broken variants found; {passed} tests passed, {failed} failed",
            models.len()
        ),
    )
}

/// The broken variants the crate holds and the test that must catch each: (test binary, test
/// name, `pcpu_counter_broken` value, what the variant breaks and how the test sees it).
const BROKEN: [(&str, &str, &str, &str); 10] = [
    (
        "early",
        "init_that_does_not_wait",
        "early_init_without_waiting",
        "an early counter's `init` that does not wait for adds in flight: lost adds",
    ),
    (
        "approx",
        "carry_that_is_not_atomic",
        "approx_racy_carry",
        "the approximate counter's carry as a load and a store: a lost carry",
    ),
    (
        "rseq",
        "loser_that_keeps_its_slot",
        "static_first_use_keeps_own_slot",
        "a static counter's first use whose loser adds to its own, freed slot: a lost add",
    ),
    (
        "lazy",
        "move_that_takes_the_word",
        "lazy_move_takes_word",
        "a lazy counter's move that takes the shared word into its slot: a lost add or a \
         fetch that goes back",
    ),
    (
        "statics",
        "harness_catches_a_shared_static_add",
        "static_shared_add",
        "a per-CPU static's add without `gs:`, to the shared template: lost adds",
    ),
    (
        "slots",
        "catches_a_stale_summary",
        "slot_summary_stale",
        "a free that leaves a full word's summary bit set: a slot never handed out again",
    ),
    (
        "rseq",
        "chunk_churn_catches_an_uncleared_slot",
        "chunk_slot_not_cleared",
        "a reused chunk slot that keeps its old count: a wrong sum",
    ),
    (
        "grow",
        "churn_catches_a_chunk_slot_not_cleared",
        "chunk_slot_not_cleared",
        "a reused chunk slot that keeps its old count: a wrong sum",
    ),
    (
        "grow",
        "short_chunk_test_catches_a_short_chunk_accepted",
        "short_chunk_accepted",
        "a chunk shorter than asked used by the zone: the grow succeeds",
    ),
    (
        "histogram",
        "consistency_check_catches_a_stored_count",
        "histogram_stored_count",
        "a histogram count kept in a slot of its own, added after the bucket: a read whose \
         count is not its +Inf bucket",
    ),
];

/// `RUSTFLAGS` with each of [`BROKEN`]'s values once (a cfg may hold several values).
fn broken_rustflags() -> String {
    let mut values: Vec<&str> = BROKEN.iter().map(|(_, _, value, _)| *value).collect();
    values.sort_unstable();
    values.dedup();
    values
        .iter()
        .map(|v| format!("--cfg pcpu_counter_broken=\"{v}\""))
        .collect::<Vec<_>>()
        .join(" ")
}

fn broken(root: &Path) -> (bool, String) {
    let binaries: Vec<&str> = BROKEN.iter().map(|(binary, ..)| *binary).collect();
    let mut cmd = cargo(root);
    // Every broken variant in one build, each suite running only its test that must catch
    // its variant.
    cmd.arg("test")
        .args(test_args(false, &binaries))
        .arg("--")
        .args(BROKEN.iter().map(|(_, test, ..)| *test))
        .env("RUSTFLAGS", broken_rustflags())
        .env("CARGO_TARGET_DIR", root.join("target/broken"));
    let (ok, text) = capture(cmd, false);
    let (passed, failed) = test_counts(&text);
    let caught: Vec<String> = BROKEN
        .iter()
        .map(|(binary, test, value, _)| format!("tests/{binary}.rs {test} ({value})"))
        .collect();
    (
        ok && passed == BROKEN.len() as u64,
        format!(
            "{}: {passed} passed (each test caught its variant), {failed} failed",
            caught.join(", ")
        ),
    )
}

/// The property tests' binaries, run by `property` and again by `fuzz` with more cases.
const PROPERTY_TESTS: [&str; 5] = ["model", "config_fuzz", "approx", "slots", "grow"];

fn property(root: &Path) -> (bool, String) {
    let mut cmd = cargo(root);
    cmd.arg("test").args(test_args(false, &PROPERTY_TESTS));
    let (ok, text) = capture(cmd, false);
    let (passed, failed) = test_counts(&text);
    let binaries: Vec<String> = PROPERTY_TESTS.map(|t| format!("tests/{t}.rs")).to_vec();
    (
        ok,
        format!(
            "{}: {passed} passed, {failed} failed (256 cases per property)",
            binaries.join(" + ")
        ),
    )
}

fn fuzz(root: &Path) -> (bool, String) {
    let cases = std::env::var("PCPU_FUZZ_CASES").unwrap_or_else(|_| "2000".into());
    let mut cmd = cargo(root);
    cmd.arg("test")
        .args(test_args(false, &PROPERTY_TESTS))
        .env("PROPTEST_CASES", &cases);
    let (ok, text) = capture(cmd, false);
    let (passed, failed) = test_counts(&text);
    (
        ok,
        format!("PROPTEST_CASES={cases}: {passed} properties passed, {failed} failed"),
    )
}

/// The rustup nightly sysroot, if there is one.
fn nightly_sysroot() -> Option<PathBuf> {
    let out = Command::new("rustup")
        .args(["run", "nightly", "rustc", "--print", "sysroot"])
        .env_remove("RUSTUP_TOOLCHAIN")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

fn has_rust_src(sysroot: &Path) -> bool {
    sysroot
        .join("lib/rustlib/src/rust/library/std/Cargo.toml")
        .exists()
}

fn tsan(root: &Path) -> (bool, String) {
    let Some(sysroot) = nightly_sysroot() else {
        return (
            true,
            "not run: missing the rustup `nightly` toolchain (`rustup toolchain install nightly`)"
                .into(),
        );
    };
    let runtime = sysroot.join(format!("lib/rustlib/{HOST}/lib/librustc-nightly_rt.tsan.a"));
    if !runtime.exists() {
        return (
            true,
            format!(
                "not run: missing the ThreadSanitizer runtime {}",
                runtime.display()
            ),
        );
    }
    let target_dir = root.join("target/tsan");
    let logs = target_dir.join("logs");
    let _ = std::fs::remove_dir_all(&logs);
    if let Err(e) = std::fs::create_dir_all(&logs) {
        return (false, format!("cannot create {}: {e}", logs.display()));
    }
    // The standard library instrumented where its source can be had, best first.
    let mut flags = String::from("-Zsanitizer=thread");
    let (mut cmd, std_kind, instrumented_std) = if has_rust_src(&sysroot) {
        let mut cmd = nightly_cargo(root);
        cmd.args(["test", "--target", HOST, "-Zbuild-std"]);
        let kind = "instrumented std (nightly rust-src, -Zbuild-std)".to_string();
        (cmd, kind, true)
    } else if let Some(tc) = toolchain::source_built_for(HOST) {
        // Another toolchain's library source (Debian's rustc with `rust-web-src`), linked
        // with the nightly's runtime through a sysroot of links.
        let farm = target_dir.join("sysroot");
        if let Err(e) = runtime_sysroot(&farm, &tc.sysroot(), &runtime) {
            return (false, e);
        }
        flags.push_str(&format!(" --sysroot {}", farm.display()));
        let mut cmd = tc.cargo("test", toolchain::Std::Full);
        cmd.current_dir(root);
        let kind = format!(
            "instrumented std: built by {} from its library source, linked with the \
             nightly's TSan runtime (the nightly has no rust-src)",
            tc.description
        );
        (cmd, kind, true)
    } else {
        flags.push_str(" -Cunsafe-allow-abi-mismatch=sanitizer");
        let mut cmd = nightly_cargo(root);
        cmd.args(["test", "--target", HOST]);
        let kind = "uninstrumented std: no library source for -Zbuild-std (`rustup component \
                    add rust-src --toolchain nightly`, or Debian's `rust-web-src`)"
            .to_string();
        (cmd, kind, false)
    };
    cmd.args(["--no-fail-fast", "--tests"]);
    // TSan delivers a signal only at the thread's next interceptor or synchronisation, never
    // between two plain instructions, so the storm can never split the racy load/add/store
    // it must catch (it ran 3 minutes and failed): skipped here, it runs in `cargo test`.
    // For the same reason rseq's `broken::harness_catches_*` (a broken rseq add that only a
    // signal or a preemption between two of its plain instructions exposes) may see no loss
    // in its bounded attempts (one failed so in CI): they run in `cargo test` and
    // `.ci/rseq.sh`.
    // `refused_memory` limits its child's address space (RLIMIT_AS) to make mmap fail, which
    // leaves no room for TSan's shadow memory: it too runs in `cargo test` only.
    cmd.args([
        "--",
        "--skip",
        "storm_catches",
        "--skip",
        "broken::harness_catches",
    ]);
    cmd.args(["--skip", "refused_memory"]);
    // tests/approx.rs's storm waits for 1000 interrupts taken inside loops of adds, which make
    // no interceptor call for TSan to deliver them at: it runs in `cargo test` only.
    cmd.args(["--skip", "interrupts_between_an_add_and_its_carry"]);
    // `sim::Machine::with_statics` maps the CPUs' copies of the statics' section at the
    // address the template's place fixes (block = register + link address), which TSan's
    // shadow memory has reserved (`OutOfMemory`): tests/statics.rs and the static add's
    // disassembly pin run in `cargo test` only.
    for name in [
        "a_static_registers_as_a_counter",
        "an_add_off_the_machine_is_refused",
        "an_array_counts_each_element",
        "early_adds_are_kept_once",
        "fetch_and_zero_moves_the_baseline",
        "many_cpus_sum_exactly",
        "the_c_abi_adds_fetches_and_zeroes",
        "the_install_is_checked",
        "static_add_is_one_rip_relative_gs_add",
    ] {
        cmd.args(["--skip", name]);
    }
    cmd.env("RUSTFLAGS", flags)
        .env("CARGO_TARGET_DIR", &target_dir)
        .env(
            "TSAN_OPTIONS",
            format!(
                "halt_on_error=0 exitcode=0 report_signal_unsafe=0 log_path={}",
                logs.join("tsan").display()
            ),
        );
    let (ok, text) = capture(cmd, false);
    let (passed, failed) = test_counts(&text);
    // Classify the reports: one per "WARNING: ThreadSanitizer" block.
    let mut broken = 0;
    let mut other = Vec::new();
    for entry in std::fs::read_dir(&logs).into_iter().flatten().flatten() {
        let log = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for report in log.split("WARNING: ThreadSanitizer").skip(1) {
            if report.contains("RacyShared") {
                broken += 1;
            } else {
                other.push(first_own_frame(report));
            }
        }
    }
    let found_broken = broken > 0;
    let clean = !instrumented_std || other.is_empty();
    if instrumented_std && !other.is_empty() {
        println!("ThreadSanitizer reports (first frame in this repository):");
        for frame in &other {
            println!("  {frame}");
        }
    }
    (
        ok && found_broken && clean,
        format!(
            "simulation suite, {std_kind}: {passed} passed, {failed} failed; broken racy counter \
             {}({broken} reports); {} other reports{}; logs in target/tsan/logs",
            if found_broken { "found " } else { "NOT found " },
            other.len(),
            if instrumented_std {
                " (each one a failure)"
            } else {
                " (std is uninstrumented, so TSan misses its synchronisation: not triaged, not a gate)"
            }
        ),
    )
}

/// A sysroot for `-Zsanitizer=thread` with a toolchain that ships no TSan runtime: links to
/// `toolchain_sysroot`'s library source and host libraries, and the nightly's runtime under
/// the names rustc looks for (`librustc-<channel>_rt.tsan.a`), made at `farm`.
fn runtime_sysroot(farm: &Path, toolchain_sysroot: &Path, runtime: &Path) -> Result<(), String> {
    use std::os::unix::fs::symlink;
    let fail =
        |what: &str, e: std::io::Error| format!("cannot make the TSan sysroot ({what}): {e}");
    let _ = std::fs::remove_dir_all(farm);
    let rustlib = farm.join("lib/rustlib");
    let libs = rustlib.join(HOST).join("lib");
    std::fs::create_dir_all(&libs).map_err(|e| fail("folders", e))?;
    let theirs = toolchain_sysroot.join("lib/rustlib");
    symlink(theirs.join("src"), rustlib.join("src")).map_err(|e| fail("src", e))?;
    for entry in std::fs::read_dir(theirs.join(HOST).join("lib"))
        .map_err(|e| fail("library folder", e))?
        .flatten()
    {
        symlink(entry.path(), libs.join(entry.file_name())).map_err(|e| fail("library", e))?;
    }
    for channel in ["-stable", "-beta", "-nightly", ""] {
        let name = libs.join(format!("librustc{channel}_rt.tsan.a"));
        if !name.exists() {
            symlink(runtime, &name).map_err(|e| fail("runtime", e))?;
        }
    }
    Ok(())
}

/// The first stack frame of a TSan report that names a file of this repository (else the
/// report's first line), to print with the failure.
fn first_own_frame(report: &str) -> String {
    let root = toolchain::repo_root();
    let root = root.to_string_lossy();
    report
        .lines()
        .find(|l| l.trim_start().starts_with('#') && l.contains(root.as_ref()))
        .or_else(|| report.lines().next())
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Per test binary (`Running <path>` of cargo), the last `test result:` line's counts:
/// `(binary, passed, failed, ignored)`.
fn per_binary(text: &str) -> Vec<(String, u64, u64, u64)> {
    let mut out: Vec<(String, u64, u64, u64)> = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        if let Some(rest) = line.strip_prefix("Running ") {
            let name = rest.split_whitespace().next().unwrap_or(rest);
            out.push((name.to_string(), 0, 0, 0));
        } else if line.starts_with("test result:") {
            if let Some(last) = out.last_mut() {
                let (p, f) = test_counts(line);
                let ignored = line
                    .split(';')
                    .find(|p| p.trim_end().ends_with("ignored"))
                    .and_then(|p| p.split_whitespace().rev().nth(1))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                (last.1, last.2, last.3) = (p, f, ignored);
            }
        }
    }
    out
}

/// `cargo miri test` of `tests` for [`MIRI_TARGET`] with `miriflags` and libtest `args`;
/// returns success and the output, cargo's stderr and the tests' stdout interleaved as they
/// were written (one file for both), so that each `test result:` follows its `Running` line.
fn miri_test(root: &Path, miriflags: &str, tests: &[String], args: &[&str]) -> (bool, String) {
    let log = root.join("target/miri/last-run.log");
    let file = std::fs::create_dir_all(root.join("target/miri"))
        .and_then(|()| std::fs::File::create(&log))
        .and_then(|f| Ok((f.try_clone()?, f)));
    let (out, err) = match file {
        Ok(pair) => pair,
        Err(e) => return (false, format!("cannot create {}: {e}", log.display())),
    };
    let mut cmd = nightly_cargo(root);
    cmd.args(["miri", "test", "--target", MIRI_TARGET])
        .args(tests)
        .arg("--")
        .args(args)
        .env("MIRIFLAGS", miriflags)
        .env("CARGO_TARGET_DIR", root.join("target/miri"))
        .stdout(out)
        .stderr(err);
    eprintln!("+ MIRIFLAGS=\"{miriflags}\" {cmd:?}");
    let ok = cmd.status().is_ok_and(|s| s.success());
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    if !ok {
        print!("{text}");
    }
    (ok, text)
}

fn miri(root: &Path) -> (bool, String) {
    let has_miri = nightly_cargo(root)
        .args(["miri", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    let has_src = nightly_sysroot().is_some_and(|s| has_rust_src(&s));
    if has_miri && has_src {
        return run_miri(root);
    }
    let mut missing = Vec::new();
    if nightly_sysroot().is_none() {
        missing.push(
            "the rustup `nightly` toolchain (`rustup toolchain install nightly`)".to_string(),
        );
    } else {
        if !has_miri {
            missing.push(
                "the nightly's `miri` component (cargo-miri: `rustup component add --toolchain \
                 nightly miri`)"
                    .to_string(),
            );
        }
        if !has_src {
            missing.push(
                "the nightly's `rust-src` component, which Miri builds its standard library \
                 from (`rustup component add --toolchain nightly rust-src`)"
                    .to_string(),
            );
        }
    }
    let mut cmd = cargo(root);
    cmd.arg("test").args(portable_core_args());
    let (ok, text) = capture(cmd, false);
    let (passed, failed) = test_counts(&text);
    (
        ok,
        format!(
            "Miri NOT run: missing {}; next best: the portable-core tests (lib, {}) with debug \
             assertions and overflow checks on the host arch: {passed} passed, {failed} failed \
             (the protocols themselves: the loom models)",
            missing.join(" and "),
            PORTABLE_CORE.join(", ")
        ),
    )
}

/// The Miri runs: every portable-core test under Stacked Borrows and under Tree Borrows, then
/// the concurrent ones under more scheduler seeds. Integer-to-pointer casts are permitted
/// (`-Zmiri-permissive-provenance`): a zone's slot address is a number, the CPU's base plus
/// an offset, as a per-CPU register holds it; Miri still checks that each such address lies
/// in a live allocation whose address was exposed.
fn run_miri(root: &Path) -> (bool, String) {
    let seeds: u32 = std::env::var("PCPU_MIRI_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(4);
    // The sysroot Miri interprets (built once from the nightly's rust-src, then cached).
    let t = Instant::now();
    let mut setup = nightly_cargo(root);
    setup.args(["miri", "setup", "--target", MIRI_TARGET]);
    let (ok, _) = capture(setup, false);
    if !ok {
        return (
            false,
            format!("cargo miri setup --target {MIRI_TARGET} failed"),
        );
    }
    println!(
        "  miri sysroot for {MIRI_TARGET} ready ({:.0} s)",
        t.elapsed().as_secs_f64()
    );

    let base = "-Zmiri-permissive-provenance";
    let mut all_ok = true;
    let mut summary = Vec::new();
    // Tree Borrows leaves out the concurrent tests, for time: they run the same pointer code
    // as the others (zone, slots, baselines), which it does check; and the tests of safe code
    // alone ([`TREE_BORROWS_SKIP`]), where it has nothing to check.
    let skip_for_tree_borrows: Vec<&str> = miri_concurrent_names()
        .chain(TREE_BORROWS_SKIP.iter().copied())
        .flat_map(|name| ["--skip", name])
        .collect();
    for (model, flags, args) in [
        ("Stacked Borrows", base.to_string(), &[][..]),
        (
            "Tree Borrows (all but the concurrent tests and the tests of safe code alone)",
            format!("{base} -Zmiri-tree-borrows"),
            &skip_for_tree_borrows[..],
        ),
    ] {
        let t = Instant::now();
        let (ok, text) = miri_test(root, &flags, &portable_core_args(), args);
        all_ok &= ok;
        let (passed, failed) = test_counts(&text);
        println!(
            "  miri {model}, seed 0 (MIRIFLAGS=\"{flags}\"): {passed} passed, {failed} failed ({:.0} s)",
            t.elapsed().as_secs_f64()
        );
        for (binary, p, f, i) in per_binary(&text) {
            println!("    {binary}: {p} passed, {f} failed, {i} ignored");
        }
        for line in text.lines().filter(|l| l.contains("... ignored")) {
            println!("    ignored: {}", line.trim_start_matches("test ").trim());
        }
        summary.push(format!("{model}: {passed} passed"));
        all_ok &= failed == 0 && passed > 0;
        if args.is_empty() {
            // Every name the seeds run filters on is a test that passed here (a renamed test
            // would otherwise drop out of the seeds run unseen).
            for name in miri_concurrent_names() {
                if !text.contains(&format!("test {name} ... ok")) {
                    println!("    FAIL: concurrent test {name} did not pass (or does not exist)");
                    all_ok = false;
                }
            }
            // Likewise every name Tree Borrows skips (a renamed test would otherwise run
            // there again, unseen).
            for name in TREE_BORROWS_SKIP {
                if text.matches(&format!("{name} ... ok")).count() != 1 {
                    println!(
                        "    FAIL: the test Tree Borrows skips, {name}, did not pass here once \
                         (or does not exist)"
                    );
                    all_ok = false;
                }
            }
        }
    }

    // The concurrent tests under seeds 1..=seeds: each seed another interleaving of the
    // threads (Miri's scheduler preempts at random points) and other weak-memory outcomes.
    // `-Zmiri-many-seeds` runs the seeds of each binary in parallel and stops at a failure.
    let t = Instant::now();
    let flags = format!("{base} -Zmiri-many-seeds=1..{}", seeds + 1);
    // Only the binaries that have concurrent tests (each seed starts every binary again).
    let names: Vec<&str> = miri_concurrent_names().collect();
    let (ok, text) = miri_test(root, &flags, &miri_concurrent_args(), &names);
    all_ok &= ok;
    // The seeds' outputs interleave: count the markers, not lines.
    let tried = text.matches("Trying seed:").count();
    println!(
        "  miri Stacked Borrows, seeds 1..={seeds} (MIRIFLAGS=\"{flags}\"): {} ({tried} runs of a \
         test binary under a seed, {:.0} s), the concurrent tests:",
        if ok { "all passed" } else { "FAILED" },
        t.elapsed().as_secs_f64()
    );
    for name in miri_concurrent_names() {
        println!("    {name}");
    }
    summary.push(format!(
        "{} concurrent tests under seeds 1..={seeds} {}",
        MIRI_CONCURRENT.len(),
        if ok { "passed" } else { "FAILED" }
    ));
    (
        all_ok,
        format!(
            "cargo miri test, portable arch ({MIRI_TARGET}; lib, {}): {}",
            PORTABLE_CORE.join(", "),
            summary.join("; ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crate_file(path: &str) -> String {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// Whether `tests/<binary>.rs` has a function whose name contains `filter` (libtest's
    /// filters match a part of the name).
    fn defines(binary: &str, filter: &str) -> bool {
        crate_file(&format!("tests/{binary}.rs"))
            .split("fn ")
            .skip(1)
            .filter_map(|rest| rest.split_once('(').map(|(name, _)| name))
            .any(|name| name.contains(filter))
    }

    #[test]
    fn each_named_test_is_in_its_binary() {
        for binary in PORTABLE_CORE.iter().chain(&PROPERTY_TESTS) {
            crate_file(&format!("tests/{binary}.rs"));
        }
        for (binary, name) in MIRI_CONCURRENT {
            assert!(
                PORTABLE_CORE.contains(&binary),
                "{binary} is not portable core"
            );
            assert!(
                defines(binary, name),
                "tests/{binary}.rs has no test {name}"
            );
        }
        let check_cfg = crate_file("Cargo.toml");
        for (binary, name, value, _) in BROKEN {
            assert!(
                defines(binary, name),
                "tests/{binary}.rs has no test {name}"
            );
            assert!(
                check_cfg.contains(&format!("\"{value}\"")),
                "Cargo.toml's check-cfg lacks pcpu_counter_broken=\"{value}\""
            );
        }
    }

    #[test]
    fn the_selections_name_each_binary_once() {
        assert_eq!(
            test_args(true, &["zone", "array", "zone"]),
            ["--lib", "--test", "zone", "--test", "array"]
        );
        assert_eq!(
            miri_concurrent_args(),
            [
                "--test",
                "zone",
                "--test",
                "array",
                "--test",
                "early",
                "--test",
                "ratecheck",
                "--test",
                "registry"
            ]
        );
        assert_eq!(
            broken_rustflags().matches("chunk_slot_not_cleared").count(),
            1
        );
        assert_eq!(broken_rustflags().matches("--cfg").count(), 9);
    }
}
