//! `cargo xtask verify`: the concurrency models, the sanitizers and the property tests.
//!
//! Steps (`--only <substring>` runs the steps whose name contains it):
//! - `loom`: `tests/loom.rs` under `RUSTFLAGS="--cfg loom"` (own target dir `target/loom`,
//!   release): every model exhaustively within its bound (preemption bound 4,
//!   `LOOM_MAX_PREEMPTIONS` overrides), then each of its broken variants, which loom must
//!   fail. Prints the test's one line per model.
//! - `broken`: the suites whose broken variant lives in the crate behind a `--cfg
//!   pcpu_counter_broken` value (never a feature): `tests/early.rs` with
//!   `pcpu_counter_broken="early_init_without_waiting"` (an `init` that does not wait for
//!   early adds in flight), whose test must catch the lost adds, and `tests/approx.rs` with
//!   `pcpu_counter_broken="approx_racy_carry"` (the approximate counter's carry as a load and
//!   a store), whose carry race must catch a lost carry, and `tests/rseq.rs` with
//!   `pcpu_counter_broken="static_first_use_keeps_own_slot"` (a static counter's first use
//!   whose loser adds to its own, freed slot), whose first-use race must catch a lost add,
//!   and `tests/lazy.rs` with `pcpu_counter_broken="lazy_move_takes_word"` (a lazy counter's
//!   move that takes the shared word into its slot without waiting for adds in flight), whose
//!   race must catch a lost add or a fetch that goes back, `tests/statics.rs` with
//!   `pcpu_counter_broken="static_shared_add"` (a per-CPU static's add without `gs:`, to the
//!   shared template), whose harness must catch lost adds, and `tests/slots.rs` with
//!   `pcpu_counter_broken="slot_summary_stale"` (a free that leaves a full word's summary bit
//!   set), whose model test must find a slot never handed out again, and `tests/grow.rs` and
//!   `tests/rseq.rs` with `pcpu_counter_broken="chunk_slot_not_cleared"` (a reused chunk slot
//!   that keeps its old count), whose chunk churns must see a wrong sum; one build with all
//!   seven (own target dir `target/broken`).
//! - `property`: `cargo test --test model --test config_fuzz --test approx --test slots
//!   --test grow` (256 cases per property).
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
//! - `miri`: `cargo +nightly miri test` of the portable core ([`PORTABLE_CORE`]: the lib's unit
//!   tests, `tests/zone.rs`, `area.rs`, `array.rs`, `early.rs`, `ratecheck.rs`,
//!   `registry.rs`, `grow.rs`) for `powerpc64le-unknown-linux-gnu` ([`MIRI_TARGET`]), a target with no
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

/// The portable-core test selection (Miri, and its fallback): the lib's unit tests (bitmap,
/// the C API's protection nesting), the zone (layout, baselines, bitmap, static memory, a
/// kernel's own blocks), areas, arrays, early counters, ratecheck and the registry.
const PORTABLE_CORE: &[&str] = &[
    "--lib",
    "--test",
    "zone",
    "--test",
    "array",
    "--test",
    "registry",
    "--test",
    "early",
    "--test",
    "area",
    "--test",
    "ratecheck",
    "--test",
    "grow",
];

/// The concurrent tests of [`PORTABLE_CORE`] (libtest name filters) that Miri reruns with
/// several scheduler seeds.
const MIRI_CONCURRENT: &[&str] = &[
    "alloc_free_reuse_under_concurrency",
    "exact_sums_from_migrating_threads",
    "fetch_and_zero_all_is_lossless_under_concurrent_adds",
    "the_same_check_catches_a_two_step_fetch_then_zero",
    "counts_before_init_move_into_the_initialising_cpus_slot",
    "init_racing_with_adds_loses_and_doubles_nothing",
    "fetch_never_goes_back_during_init",
    "concurrent_events_within_a_second_are_all_counted",
    "the_limit_holds_at_every_batch",
    "one_cpu_wins_each_reset",
    "the_same_check_catches_a_reset_without_the_lock",
    "snapshots_while_cpus_add_are_monotonic_and_end_exact",
];

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

fn broken(root: &Path) -> (bool, String) {
    let mut cmd = cargo(root);
    // Both broken variants in one build (a cfg may hold several values), each suite running
    // only its test that must catch its variant.
    cmd.args(["test", "--test", "early", "--test", "approx"])
        .args(["--test", "rseq", "--test", "lazy", "--test", "statics", "--test", "slots"])
        .args(["--test", "grow", "--"])
        .args([
            "init_that_does_not_wait",
            "carry_that_is_not_atomic",
            "loser_that_keeps_its_slot",
            "move_that_takes_the_word",
            "harness_catches_a_shared_static_add",
            "catches_a_stale_summary",
            "chunk_churn_catches_an_uncleared_slot",
            "churn_catches_a_chunk_slot_not_cleared",
        ])
        .env(
            "RUSTFLAGS",
            r#"--cfg pcpu_counter_broken="early_init_without_waiting" --cfg pcpu_counter_broken="approx_racy_carry" --cfg pcpu_counter_broken="static_first_use_keeps_own_slot" --cfg pcpu_counter_broken="lazy_move_takes_word" --cfg pcpu_counter_broken="static_shared_add" --cfg pcpu_counter_broken="slot_summary_stale" --cfg pcpu_counter_broken="chunk_slot_not_cleared""#,
        )
        .env("CARGO_TARGET_DIR", root.join("target/broken"));
    let (ok, text) = capture(cmd, false);
    let (passed, failed) = test_counts(&text);
    (
        ok && passed == 8,
        format!("tests/early.rs against the init that does not wait, tests/approx.rs against the carry that is not atomic, tests/rseq.rs against a static counter's first use that keeps the loser's slot, tests/lazy.rs against the move that takes the word, tests/statics.rs against a per-CPU static's add without gs:, tests/slots.rs against a free that leaves a full word's summary bit set, tests/rseq.rs's and tests/grow.rs's chunk churns against a reused chunk slot not cleared: {passed} passed (each test caught its variant), {failed} failed"),
    )
}

/// The property tests' binaries, run by `property` and again by `fuzz` with more cases.
const PROPERTY_TESTS: [&str; 11] = [
    "test",
    "--test",
    "model",
    "--test",
    "config_fuzz",
    "--test",
    "approx",
    "--test",
    "slots",
    "--test",
    "grow",
];

fn property(root: &Path) -> (bool, String) {
    let mut cmd = cargo(root);
    cmd.args(PROPERTY_TESTS);
    let (ok, text) = capture(cmd, false);
    let (passed, failed) = test_counts(&text);
    (ok, format!("tests/model.rs + tests/config_fuzz.rs + tests/approx.rs + tests/slots.rs: {passed} passed, {failed} failed (256 cases per property)"))
}

fn fuzz(root: &Path) -> (bool, String) {
    let cases = std::env::var("PCPU_FUZZ_CASES").unwrap_or_else(|_| "2000".into());
    let mut cmd = cargo(root);
    cmd.args(PROPERTY_TESTS).env("PROPTEST_CASES", &cases);
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
fn miri_test(root: &Path, miriflags: &str, tests: &[&str], args: &[&str]) -> (bool, String) {
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
    cmd.arg("test").args(PORTABLE_CORE);
    let (ok, text) = capture(cmd, false);
    let (passed, failed) = test_counts(&text);
    (
        ok,
        format!(
            "Miri NOT run: missing {}; next best: the portable-core tests (lib, zone, array, \
             registry, early, area, ratecheck) with debug assertions and overflow checks on the \
             host arch: {passed} passed, {failed} failed (the protocols themselves: the loom \
             models)",
            missing.join(" and ")
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
    let skip_for_tree_borrows: Vec<&str> = MIRI_CONCURRENT
        .iter()
        .chain(TREE_BORROWS_SKIP)
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
        let (ok, text) = miri_test(root, &flags, PORTABLE_CORE, args);
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
            for name in MIRI_CONCURRENT {
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
    let with_concurrent = [
        "--test",
        "zone",
        "--test",
        "array",
        "--test",
        "registry",
        "--test",
        "early",
        "--test",
        "ratecheck",
    ];
    let (ok, text) = miri_test(root, &flags, &with_concurrent, MIRI_CONCURRENT);
    all_ok &= ok;
    // The seeds' outputs interleave: count the markers, not lines.
    let tried = text.matches("Trying seed:").count();
    println!(
        "  miri Stacked Borrows, seeds 1..={seeds} (MIRIFLAGS=\"{flags}\"): {} ({tried} runs of a \
         test binary under a seed, {:.0} s), the concurrent tests:",
        if ok { "all passed" } else { "FAILED" },
        t.elapsed().as_secs_f64()
    );
    for name in MIRI_CONCURRENT {
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
            "cargo miri test, portable arch ({MIRI_TARGET}; lib, zone, array, registry, early, \
             area, ratecheck): {}",
            summary.join("; ")
        ),
    )
}
