//! `cargo xtask cross`: the host test suite on aarch64, riscv64 and i686, and `no_std` builds for the
//! bare-metal targets.
//!
//! Steps (each with the toolchain [`toolchain::cargo_for`] finds; the library is built from
//! source where rustup lacks the target):
//! - `aarch64-unknown-linux-gnu` under `qemu-aarch64 -L /usr/aarch64-linux-gnu`: the whole
//!   suite (`cargo test --all-features --tests`), then the tests that add (`LSE_TESTS`)
//!   with `-C target-feature=+lse` (the `ldadd` path); then `tests/arch_aarch64.rs` again under
//!   `qemu-aarch64 -singlestep`, because qemu delivers signals only between translation
//!   blocks and only one instruction per block lets them land inside the LL/SC loop.
//! - `i686-unknown-linux-gnu` natively, with CX8 and with `PCPU_COUNTER_FORCE_NO_CX8=1`
//!   (every add on the no-CX8 path); then on the CX8 path under
//!   `qemu-i386 -L /usr/i686-linux-gnu`, skipping the tests that take simulated interrupts
//!   (signals, [`SIGNAL_TESTS`]). Natively a bind uses the thread's own GDT TLS entry
//!   (`set_thread_area`); under qemu-i386 the probe in `arch/i386/mod.rs` finds the TLS
//!   descriptors shared and binds through the LDT, so the runs cover both ways of setting
//!   `%fs`. Both add paths go through `%fs` alike, whichever table its descriptor is in, so
//!   the no-CX8 path is not run again under qemu-i386 (it was the slowest run of this part,
//!   90 s); the i386 QEMU kernels run it (`i386-486`, `c-i386-486`).
//!
//!   Why the signal tests cannot run under qemu-i386 7.2 (a QEMU bug, reproduced by
//!   `tests/qemu-i386/sigreturn_gs.c`): its linux-user emulation keeps one GDT for the whole
//!   process, so the TLS descriptor that `clone(CLONE_SETTLS)` writes for every new thread
//!   (glibc's `%gs`, selector 0x33) holds the TLS base of the thread created last, and
//!   `sigreturn` reloads `%gs` from that descriptor. After its first handler returns, a
//!   thread runs with another thread's thread-locals: in `interrupt_storm` that is the raiser
//!   thread it has just spawned, whose `BINDING` (`src/sim/mod.rs`) is empty. (Checked: a
//!   test that binds, runs one `interrupt_storm` and reads a thread-local before and after
//!   fails under qemu-i386 already at joining the raiser, with `EDEADLK`, glibc's answer to
//!   a thread joining itself: the storm's thread runs on the raiser's TLS.) Hence the two
//!   failures seen: handlers in `tests/interrupts.rs` found another thread's binding, and
//!   the masking test in `src/sim/interrupt.rs` waited forever for a handler to count (its
//!   handler saw no CPU, so the interrupts went to `missed_interrupts`). `%fs` reloads from
//!   an LDT entry, which is right only while the thread's own: with another thread's
//!   thread-locals (`ENTRY` in `arch/i386/mod.rs`) two threads end up sharing one entry,
//!   and a handler's add then finds another block's tag at `fs:[0]`. (Earlier small C
//!   programs presumably behaved because no thread was created after the one taking
//!   signals.) Loading a private LDT copy of the TLS into `%gs` would dodge it, but glibc's
//!   `pthread_create` derives the new thread's GDT entry from the `%gs` selector, so threads
//!   could no longer be created. The tests that need a signal between two instructions
//!   (`interrupts_inside_the_cmpxchg8b_loop_are_retried_exactly`,
//!   `the_storm_catches_a_racy_split_add`) would also need `-singlestep`. All of them pass
//!   natively on i686 (both paths) and under qemu-aarch64 and qemu-riscv64.
//! - `i686-unknown-linux-gnu` natively, `tests/arch_i386.rs`
//!   `remote_reads_racing_adds_lose_nothing` built with
//!   `--cfg pcpu_counter_broken="i386_unlocked_read"` (the remote read as `cmpxchg8b` without
//!   `lock`) in `target/cross/broken`: the step passes only if the test fails with
//!   `remote reads lost` (a loss counted), and prints that line.
//! - `riscv64gc-unknown-linux-gnu` under `qemu-riscv64 -L /usr/riscv64-linux-gnu`: the whole
//!   suite, then `tests/arch_riscv64.rs` under `qemu-riscv64 -singlestep`, where a signal can
//!   land between the `ld` and the `sd` of the racy add that test must catch, with this crate
//!   built as release builds it (opt-level 3, no debug assertions: the test pins the
//!   optimised add's disassembly) on the first step's debug `std`, so `std` is built once.
//!   (The whole suite in release would also need one `std` build, but there the writers of
//!   `tests/zero.rs` can finish before its reader took enough deltas on 2 loaded cores.)
//! - `cargo build --lib --no-default-features` and `--features alloc` for
//!   `x86_64-unknown-none`, `aarch64-unknown-none` (with and without `+lse`), the i386
//!   bare-metal spec ([`toolchain::I386_BARE_METAL_SPEC`]), `riscv64gc-unknown-none-elf`
//!   (with and without `riscv-gp`), `thumbv6m-none-eabi` (Cortex-M0, no compare-and-swap) and
//!   `thumbv7em-none-eabihf` (Cortex-M4F).
//!
//! - `pins <target> <profile>`: `cargo xtask pins` for one pair: testbeds/pins built for the
//!   bare-metal target in that profile (release, dev at opt-level 3 with incremental on, each
//!   with and without debug info, whatever the shell sets) and its add paths' instructions
//!   checked (x86_64 in all four, aarch64 and riscv64 in the incremental dev one with debug
//!   info).
//!
//! Doctests are not run cross (rustdoc cannot run them through a runner with `-Zbuild-std`):
//! the host's `cargo test` runs them. The disassembly checks are tests in
//! `tests/arch_i386.rs`, `tests/arch_aarch64.rs` and `tests/arch_riscv64.rs`. Prints the test counts per step and a
//! summary; exits non-zero if any step fails or a tool is missing.
//!
//! Options: `--only <substring>` runs the steps whose name contains it; `--windows` runs
//! instead the window tests alone (the tests whose event is an interrupt inside a window, or a
//! broken add or read caught: [`window_steps`]), which `.ci/cross.sh` runs beside busy loops.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use crate::toolchain::{self, Std, Toolchain};

/// Tests that take simulated interrupts, skipped under qemu-i386: its `sigreturn` restores
/// another thread's TLS (see the module docs and `tests/qemu-i386/`).
const SIGNAL_TESTS: &[&str] = &["interrupt", "handler_adds", "storm"];
/// Tests that need signals inside a loop body (or between two instructions of an add): under
/// qemu-aarch64 and qemu-riscv64 only with `-singlestep`.
const SINGLESTEP_TESTS: &[&str] = &[
    "inside_the_llsc_loop",
    "racy_load_add_store",
    "racy_ld_add_sd",
];

/// The test binaries run again with `+lse` on aarch64: those whose adds go through the arch
/// primitive (directly, under interrupts, racing zeroes, in arrays and through the C ABI).
const LSE_TESTS: &[&str] = &[
    "--test",
    "arch_aarch64",
    "--test",
    "counting",
    "--test",
    "interrupts",
    "--test",
    "zero",
    "--test",
    "array",
    "--test",
    "capi",
];

/// Makes a step's command, or says what is missing.
type MakeStep = Box<dyn Fn() -> Result<Command, String>>;

/// One step's outcome.
struct Outcome {
    name: String,
    ok: bool,
    /// passed, failed, ignored, filtered out (summed over the test binaries); `None` for
    /// builds.
    tests: Option<(u64, u64, u64, u64)>,
    seconds: f64,
    /// One `FAIL [cross <step>] ...` line per thing that failed.
    failures: Vec<String>,
}

pub fn run(args: &[String]) -> Result<(), String> {
    let usage = "usage: cargo xtask cross [--windows] [--only <step name substring>]";
    let (mut only, mut windows) = (None, false);
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--only" => only = Some(rest.next().ok_or(usage)?.as_str()),
            "--windows" => windows = true,
            _ => return Err(usage.into()),
        }
    }
    let started = Instant::now();
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| toolchain::repo_root().join("target/cross"));
    let mut steps: Vec<(String, MakeStep)> = Vec::new();
    // Steps that must fail (a broken variant the tests must catch), with the text their
    // output must contain.
    let mut must_fail: Vec<(String, &'static str)> = Vec::new();
    if windows {
        window_steps(&target_dir, &mut steps, &mut must_fail);
    }

    // aarch64 Linux under qemu-aarch64.
    let a64 = "aarch64-unknown-linux-gnu";
    for lse in [false, true] {
        let dir = target_dir.join(if lse { "lse" } else { "base" });
        let tag = if lse { " +lse" } else { "" };
        let d = dir.clone();
        steps.push((
            format!("test {a64}{tag} (qemu-aarch64)"),
            Box::new(move || {
                let mut tc = toolchain::cargo_for(a64)?;
                tc.set_runner(Some(&toolchain::qemu_user_runner(a64)?));
                lse_flags(&mut tc, lse);
                // `+lse` changes only the add instruction: the tests that add run again,
                // not the whole suite (the setup, registry and property tests are the same
                // code with or without it).
                let extra: &[&str] = if lse { LSE_TESTS } else { &[] };
                Ok(test_command(&tc, &d, SINGLESTEP_TESTS, extra))
            }),
        ));
        steps.push((
            format!("test {a64}{tag} arch_aarch64 (qemu-aarch64 -singlestep)"),
            Box::new(move || {
                let mut tc = toolchain::cargo_for(a64)?;
                let runner = toolchain::qemu_user_runner(a64)?;
                let runner = runner.replacen(" -L", " -singlestep -L", 1);
                tc.set_runner(Some(&runner));
                lse_flags(&mut tc, lse);
                Ok(test_command(&tc, &dir, &[], &["--test", "arch_aarch64"]))
            }),
        ));
    }

    // riscv64 Linux under qemu-riscv64: the suite, then the arch tests again with one
    // instruction per block, so that a signal can land between the `ld` and the `sd` of the
    // racy add the storm must catch. That second run builds this crate (and its tests) as
    // release does, opt-level 3 without debug assertions, for the pinned disassembly of the
    // optimised add, but keeps the debug `std` of the first (one `std` build, not two).
    let rv64 = "riscv64gc-unknown-linux-gnu";
    for singlestep in [false, true] {
        let dir = target_dir.join("base");
        let name = if singlestep {
            format!("test {rv64} arch_riscv64 optimised (qemu-riscv64 -singlestep)")
        } else {
            format!("test {rv64} (qemu-riscv64)")
        };
        steps.push((
            name,
            Box::new(move || {
                let mut tc = toolchain::cargo_for(rv64)?;
                let runner = toolchain::qemu_user_runner(rv64)?;
                if singlestep {
                    tc.set_runner(Some(&runner.replacen(" -L", " -singlestep -L", 1)));
                    let mut extra = riscv_optimised_config();
                    extra.extend(["--test", "arch_riscv64"].map(String::from));
                    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
                    Ok(test_command(&tc, &dir, &[], &extra))
                } else {
                    tc.set_runner(Some(&runner));
                    Ok(test_command(&tc, &dir, SINGLESTEP_TESTS, &[]))
                }
            }),
        ));
    }

    // i686 Linux natively, with CX8 and forced without; under qemu-i386 with CX8.
    let i686 = "i686-unknown-linux-gnu";
    for (qemu, no_cx8) in [(false, false), (false, true), (true, false)] {
        let dir = target_dir.join("base");
        let name = format!(
            "test {i686} {} ({})",
            if no_cx8 { "no-CX8 path" } else { "CX8 path" },
            if qemu { "qemu-i386" } else { "native" }
        );
        steps.push((
            name,
            Box::new(move || {
                let mut tc = toolchain::cargo_for(i686)?;
                if qemu {
                    tc.set_runner(Some(&toolchain::qemu_user_runner(i686)?));
                }
                let skip = if qemu { SIGNAL_TESTS } else { &[] };
                let mut cmd = test_command(&tc, &dir, skip, &[]);
                if no_cx8 {
                    cmd.env("PCPU_COUNTER_FORCE_NO_CX8", "1");
                } else {
                    cmd.env_remove("PCPU_COUNTER_FORCE_NO_CX8");
                }
                Ok(cmd)
            }),
        ));
    }

    // no_std builds for the bare-metal targets.
    let i386_spec = toolchain::i386_bare_metal_spec().display().to_string();
    // (label, target, +lse, an extra crate feature)
    let bare: Vec<(String, String, bool, Option<&str>)> = vec![
        (
            "x86_64-unknown-none".into(),
            "x86_64-unknown-none".into(),
            false,
            None,
        ),
        (
            "aarch64-unknown-none".into(),
            "aarch64-unknown-none".into(),
            false,
            None,
        ),
        (
            "aarch64-unknown-none +lse".into(),
            "aarch64-unknown-none".into(),
            true,
            None,
        ),
        (
            "i586-unknown-none (arch/i386 spec)".into(),
            i386_spec,
            false,
            None,
        ),
        (
            "riscv64gc-unknown-none-elf".into(),
            "riscv64gc-unknown-none-elf".into(),
            false,
            None,
        ),
        (
            "riscv64gc-unknown-none-elf riscv-gp".into(),
            "riscv64gc-unknown-none-elf".into(),
            false,
            Some("riscv-gp"),
        ),
        // The base from `Platform::cpu_base` instead of the register.
        (
            "aarch64-unknown-none platform-base".into(),
            "aarch64-unknown-none".into(),
            false,
            Some("platform-base"),
        ),
        (
            "riscv64gc-unknown-none-elf platform-base".into(),
            "riscv64gc-unknown-none-elf".into(),
            false,
            Some("platform-base"),
        ),
        // Cortex-M: M0/M0+ (no compare-and-swap: portable-atomic over critical-section) and
        // M4F (32-bit atomics only: the portable fallback's add under local protection).
        (
            "thumbv6m-none-eabi".into(),
            "thumbv6m-none-eabi".into(),
            false,
            None,
        ),
        (
            "thumbv7em-none-eabihf".into(),
            "thumbv7em-none-eabihf".into(),
            false,
            None,
        ),
    ];
    for (label, target, lse, feature) in bare {
        for alloc in [false, true] {
            let dir = target_dir.join(if lse { "lse" } else { "base" });
            let target = target.clone();
            steps.push((
                format!(
                    "build {label} {}",
                    if alloc { "no_std + alloc" } else { "no_std" }
                ),
                Box::new(move || {
                    let mut tc = toolchain::cargo_for(&target)?;
                    lse_flags(&mut tc, lse);
                    let std = if alloc { Std::Alloc } else { Std::Core };
                    let mut cmd = tc.cargo("build", std);
                    cmd.args(["--lib", "--no-default-features"]);
                    let features: Vec<&str> = alloc
                        .then_some("alloc")
                        .into_iter()
                        .chain(feature)
                        .collect();
                    if !features.is_empty() {
                        cmd.args(["--features", &features.join(",")]);
                    }
                    cmd.env("CARGO_TARGET_DIR", &dir);
                    Ok(cmd)
                }),
            ));
        }
    }

    // The add paths' pins in every profile a kernel builds with (`pins`): one build of the
    // small pin crate each.
    for (target, profile) in crate::pins::pairs() {
        steps.push((
            format!("pins {target} {}", profile.name),
            Box::new(move || crate::pins::command(target, profile)),
        ));
    }

    // The native i686 suite's broken run: the remote read as an unlocked `cmpxchg8b`.
    if !windows {
        let (name, make) = i686_broken_step(&target_dir);
        must_fail.push((name.clone(), BROKEN_READ_CAUGHT));
        steps.push((name, make));
    }

    let mut outcomes = Vec::new();
    for (name, make) in &steps {
        if only.is_some_and(|o| !name.contains(o)) {
            continue;
        }
        if windows && !name.starts_with("windows") {
            continue;
        }
        println!("==> {name}");
        let step_started = Instant::now();
        let outcome = match make() {
            Err(missing) => {
                println!("    cannot run: {missing}");
                let failure = format!("FAIL [cross {name}] cannot run: {missing}");
                println!("{failure}");
                Outcome {
                    name: name.clone(),
                    ok: false,
                    tests: None,
                    seconds: 0.0,
                    failures: vec![failure],
                }
            }
            Ok(cmd) => {
                let expected = must_fail.iter().find(|(n, _)| n == name).map(|(_, m)| *m);
                run_step(name, cmd, step_started, expected)
            }
        };
        outcomes.push(outcome);
    }

    println!("\n==> cargo xtask cross: summary");
    for o in &outcomes {
        let tests = match o.tests {
            Some((passed, failed, ignored, filtered)) => {
                format!("{passed} passed, {failed} failed, {ignored} ignored, {filtered} skipped")
            }
            None if o.name.starts_with("build") => "build".to_string(),
            None if o.name.starts_with("pins") => "build and disassembly".to_string(),
            None => "tests not run".to_string(),
        };
        println!(
            "    {:4} {:7.1}s  {:70} {tests}",
            if o.ok { "ok" } else { "FAIL" },
            o.seconds,
            o.name
        );
    }
    println!("    total {:.1}s", started.elapsed().as_secs_f64());
    // The failures again, last in the log: one line each, naming the step and the test.
    for line in outcomes.iter().flat_map(|o| &o.failures) {
        println!("{line}");
    }
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.ok)
        .map(|o| o.name.as_str())
        .collect();
    if outcomes.is_empty() {
        return Err("no step matched".into());
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} step(s) failed: {}",
            failed.len(),
            failed.join("; ")
        ))
    }
}

/// What the broken i686 run's test prints for the adds it caught lost
/// (`tests/arch_i386.rs` `remote_reads_racing_adds_lose_nothing`).
const BROKEN_READ_CAUGHT: &str = "remote reads lost";

/// The native i686 CX8 suite's test of remote reads racing adds, built with
/// `--cfg pcpu_counter_broken="i386_unlocked_read"` (the remote read as `cmpxchg8b` without
/// `lock`, FreeBSD's old bug) in a target folder of its own, so the real builds stay built. The
/// test must fail on lost adds.
fn i686_broken_step(target_dir: &std::path::Path) -> (String, MakeStep) {
    let i686 = "i686-unknown-linux-gnu";
    let dir = target_dir.join("broken");
    (
        format!(
            "test {i686} arch_i386 broken: remote read by unlocked cmpxchg8b (native, must fail)"
        ),
        Box::new(move || {
            let tc = toolchain::cargo_for(i686)?;
            let mut cmd = test_command(
                &tc,
                &dir,
                &[],
                &[
                    "--test",
                    "arch_i386",
                    "--",
                    "--exact",
                    "remote_reads_racing_adds_lose_nothing",
                ],
            );
            broken_cfg(&tc, &mut cmd, "i386_unlocked_read");
            cmd.env_remove("PCPU_COUNTER_FORCE_NO_CX8");
            Ok(cmd)
        }),
    )
}

/// Adds `--cfg pcpu_counter_broken="<value>"` to the target's rustflags in `cmd`, keeping
/// those the toolchain set (the i686 loader and library paths).
fn broken_cfg(tc: &Toolchain, cmd: &mut Command, value: &str) {
    let key = tc.target_env("RUSTFLAGS");
    let set = cmd
        .get_envs()
        .find(|(k, _)| *k == key.as_str())
        .and_then(|(_, v)| v)
        .map(|v| v.to_string_lossy().into_owned())
        .unwrap_or_default();
    let flags = format!("{set} --cfg pcpu_counter_broken=\"{value}\"");
    cmd.env(key, flags.trim_start());
}

/// The window tests (`cargo xtask cross --windows`): the tests whose event is an interrupt
/// inside a window, or a broken add or read caught losing adds, again on their own, with the
/// builds of a full run. `.ci/cross.sh` runs them with busy loops beside them, as `.ci/run`
/// loads the host suite: they wait for their event by count, so load may slow them, not fail
/// them.
fn window_steps(
    target_dir: &std::path::Path,
    steps: &mut Vec<(String, MakeStep)>,
    must_fail: &mut Vec<(String, &'static str)>,
) {
    let i686 = "i686-unknown-linux-gnu";
    for no_cx8 in [false, true] {
        let dir = target_dir.join("base");
        let path = if no_cx8 { "no-CX8 path" } else { "CX8 path" };
        steps.push((
            format!("windows {i686} arch_i386 {path} (native)"),
            Box::new(move || {
                let tc = toolchain::cargo_for(i686)?;
                // The real read's race is no event wait (it counts close races, then checks
                // the sums): the normal runs have it, the broken run below is the event.
                let tests = ["interrupts_inside", "racy_split_add"];
                let mut cmd = test_command(&tc, &dir, &[], &["--test", "arch_i386"]);
                cmd.args(["--"]).args(tests);
                if no_cx8 {
                    cmd.env("PCPU_COUNTER_FORCE_NO_CX8", "1");
                } else {
                    cmd.env_remove("PCPU_COUNTER_FORCE_NO_CX8");
                }
                Ok(cmd)
            }),
        ));
    }
    let (name, make) = i686_broken_step(target_dir);
    let name = format!("windows {}", name.trim_start_matches("test "));
    must_fail.push((name.clone(), BROKEN_READ_CAUGHT));
    steps.push((name, make));

    let a64 = "aarch64-unknown-linux-gnu";
    let dir = target_dir.join("base");
    steps.push((
        format!("windows {a64} arch_aarch64 (qemu-aarch64 -singlestep)"),
        Box::new(move || {
            let mut tc = toolchain::cargo_for(a64)?;
            let runner = toolchain::qemu_user_runner(a64)?;
            tc.set_runner(Some(&runner.replacen(" -L", " -singlestep -L", 1)));
            let mut cmd = test_command(&tc, &dir, &[], &["--test", "arch_aarch64"]);
            cmd.args(["--", "inside_the_llsc_loop", "racy_load_add_store"]);
            Ok(cmd)
        }),
    ));

    let rv64 = "riscv64gc-unknown-linux-gnu";
    let dir = target_dir.join("base");
    steps.push((
        format!("windows {rv64} arch_riscv64 optimised (qemu-riscv64 -singlestep)"),
        Box::new(move || {
            let mut tc = toolchain::cargo_for(rv64)?;
            let runner = toolchain::qemu_user_runner(rv64)?;
            tc.set_runner(Some(&runner.replacen(" -L", " -singlestep -L", 1)));
            let mut extra = riscv_optimised_config();
            extra.extend(["--test", "arch_riscv64"].map(String::from));
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            let mut cmd = test_command(&tc, &dir, &[], &extra);
            cmd.args(["--", "interrupt_storm", "racy_ld_add_sd"]);
            Ok(cmd)
        }),
    ));
}

/// The `--config` arguments that build this crate as release builds it (opt-level 3, no debug
/// assertions or overflow checks) on the dev profile's `std`: the riscv64 `-singlestep` run.
fn riscv_optimised_config() -> Vec<String> {
    let profile = "profile.dev.package.pcpu-counter";
    [
        format!("{profile}.opt-level=3"),
        format!("{profile}.debug-assertions=false"),
        format!("{profile}.overflow-checks=false"),
    ]
    .into_iter()
    .flat_map(|c| ["--config".to_string(), c])
    .collect()
}

/// Adds `-C target-feature=+lse` to the target's rustflags (keeping any the toolchain set).
fn lse_flags(tc: &mut Toolchain, lse: bool) {
    if lse {
        let key = tc.target_env("RUSTFLAGS");
        tc.set_env(&key, "-C target-feature=+lse");
    }
}

/// `cargo test --all-features --tests --no-fail-fast` in `dir`, skipping `skip`.
fn test_command(tc: &Toolchain, dir: &PathBuf, skip: &[&str], extra: &[&str]) -> Command {
    println!(
        "    toolchain: {}{}",
        tc.description,
        if tc.builds_std() {
            "; doctests left to the host run"
        } else {
            ""
        }
    );
    let mut cmd = tc.cargo("test", Std::Full);
    cmd.args(["--all-features", "--no-fail-fast"]);
    if extra.is_empty() {
        cmd.arg("--tests");
    } else {
        cmd.args(extra);
    }
    cmd.env("CARGO_TARGET_DIR", dir);
    if !skip.is_empty() {
        cmd.arg("--");
        for s in skip {
            cmd.args(["--skip", s]);
        }
    }
    cmd
}

/// Runs one step, prints its test results, and on failure all its output, then one
/// `FAIL [cross <step>] <test binary> <test>` line per failed test (or per test binary that
/// crashed, or for a build that failed), so that one line of a log says what broke.
///
/// With `must_fail` (a broken variant's run) the step passes only if the command fails and its
/// output contains `must_fail` (the test's message for the loss it caught): it prints that
/// line as `caught, as it must be: ...`; a pass, or a failure for another reason, is the
/// step's failure (`FAIL [cross <step>] not caught: ...`).
fn run_step(name: &str, mut cmd: Command, started: Instant, must_fail: Option<&str>) -> Outcome {
    cmd.current_dir(toolchain::repo_root());
    // stdout and stderr into one file, in order: cargo names each test binary on stderr
    // (`Running tests/x.rs`) before the binary's results on stdout.
    let log = std::env::temp_dir().join(format!("xtask-cross-{}.log", std::process::id()));
    let output = std::fs::File::create(&log).and_then(|file| {
        cmd.stdout(file.try_clone()?).stderr(file);
        cmd.status()
    });
    let seconds = started.elapsed().as_secs_f64();
    let (ok, text) = match output {
        Ok(status) => (
            status.success(),
            String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default()).into_owned(),
        ),
        Err(e) => (false, format!("could not start {cmd:?}: {e}")),
    };
    let _ = std::fs::remove_file(&log);
    let is_test = text.contains("test result:");
    let mut totals = (0, 0, 0, 0);
    for line in text.lines().filter(|l| l.starts_with("test result:")) {
        let field = |word: &str| -> u64 {
            line.split(';')
                .find(|part| part.trim_end().ends_with(word))
                .and_then(|part| part.split_whitespace().find_map(|w| w.parse().ok()))
                .unwrap_or(0)
        };
        totals.0 += field("passed");
        totals.1 += field("failed");
        totals.2 += field("ignored");
        totals.3 += field("filtered out");
    }
    if let Some(must) = must_fail {
        let (ok, failures) = match caught(ok, &text, must) {
            Ok(line) => {
                println!("    caught, as it must be, in {seconds:.1}s: {line}");
                (true, Vec::new())
            }
            Err(why) => {
                println!("    NOT CAUGHT in {seconds:.1}s ({why}); output:\n{text}");
                let failure = format!("FAIL [cross {name}] not caught: {why}");
                println!("{failure}");
                (false, vec![failure])
            }
        };
        return Outcome {
            name: name.to_string(),
            ok,
            tests: is_test.then_some(totals),
            seconds,
            failures,
        };
    }
    let mut failures = Vec::new();
    if ok {
        if is_test {
            println!(
                "    ok in {seconds:.1}s: {} passed, {} failed, {} ignored, {} skipped",
                totals.0, totals.1, totals.2, totals.3
            );
        } else {
            println!("    ok in {seconds:.1}s");
        }
    } else {
        println!("    FAILED in {seconds:.1}s; output:\n{text}");
        failures = failed_tests(&text)
            .into_iter()
            .map(|what| format!("FAIL [cross {name}] {what}"))
            .collect();
        for line in &failures {
            println!("{line}");
        }
    }
    Outcome {
        name: name.to_string(),
        ok,
        tests: is_test.then_some(totals),
        seconds,
        failures,
    }
}

/// Whether a broken variant's run caught it: the command failed (`ok` false) and its output
/// has a line containing `must`, which is returned; else why not.
fn caught<'t>(ok: bool, text: &'t str, must: &str) -> Result<&'t str, String> {
    match text.lines().find(|l| l.contains(must)) {
        Some(line) if !ok => Ok(line.trim()),
        _ if ok => Err("the tests passed".to_string()),
        _ => Err(format!(
            "no `{must}` line: {}",
            failed_tests(text).join("; ")
        )),
    }
}

/// What failed, from a step's output in order: `<test binary> <test>` for each `test ...
/// FAILED` line (the binary as cargo's `Running` line names it, e.g. `tests/approx.rs`),
/// `<test binary> crashed: ...` for a binary that died without a verdict, or the first
/// build error; else the step's last line.
fn failed_tests(text: &str) -> Vec<String> {
    let mut binary = "?";
    let mut verdicts = 0;
    let mut failed = Vec::new();
    for line in text.lines() {
        let line = line.trim_end();
        if let Some(rest) = line.trim_start().strip_prefix("Running ") {
            // `Running tests/x.rs (target/...)` or `Running unittests src/lib.rs (...)`.
            let rest = rest.strip_prefix("unittests ").unwrap_or(rest);
            binary = rest.split(" (").next().unwrap_or(rest);
            verdicts = 0;
        } else if let Some(test) = line
            .strip_prefix("test ")
            .and_then(|l| l.strip_suffix(" ... FAILED"))
        {
            failed.push(format!("{binary} {test}"));
            verdicts += 1;
        } else if line.starts_with("test result:") {
            verdicts += 1;
        } else if line.contains("process didn't exit successfully") && verdicts == 0 {
            failed.push(format!("{binary} crashed: {}", line.trim_start()));
        } else if (line.starts_with("error[") || line.starts_with("error: could not compile"))
            && failed.is_empty()
        {
            failed.push(format!("build: {line}"));
        }
    }
    if failed.is_empty() {
        let last = text
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no output");
        failed.push(format!("(no failed test named) {}", last.trim()));
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::{caught, failed_tests};

    #[test]
    fn a_broken_run_passes_only_when_it_fails_on_the_loss() {
        let lost = "test remote_reads_racing_adds_lose_nothing ... FAILED\n  \
                    assertion failed: remote reads lost 4 adds of 10489856 on CPU 0\n";
        assert_eq!(
            caught(false, lost, "remote reads lost"),
            Ok("assertion failed: remote reads lost 4 adds of 10489856 on CPU 0")
        );
        assert_eq!(
            caught(true, "test result: ok. 1 passed", "remote reads lost"),
            Err("the tests passed".to_string())
        );
        let other = "test remote_reads_racing_adds_lose_nothing ... FAILED\n\
                     the unlocked cmpxchg8b read lost no add\n";
        assert_eq!(
            caught(false, other, "remote reads lost"),
            Err("no `remote reads lost` line: ? remote_reads_racing_adds_lose_nothing".to_string())
        );
    }

    #[test]
    fn failures_are_named_by_binary_and_test() {
        let text = "\
     Running unittests src/lib.rs (target/x/deps/pcpu_counter-1)
test result: ok. 3 passed; 0 failed
     Running tests/arch_aarch64.rs (target/x/deps/arch_aarch64-2)
test interrupts_inside_the_llsc_loop_are_retried_exactly ... FAILED
test the_storm_catches_a_racy_load_add_store ... ok
test result: FAILED. 1 passed; 1 failed
     Running tests/zero.rs (target/x/deps/zero-3)
error: test failed, to rerun pass `--test zero`
Caused by:
  process didn't exit successfully: `qemu-aarch64 zero-3` (signal: 11, SIGSEGV: invalid memory reference)
";
        assert_eq!(
            failed_tests(text),
            [
                "tests/arch_aarch64.rs interrupts_inside_the_llsc_loop_are_retried_exactly",
                "tests/zero.rs crashed: process didn't exit successfully: `qemu-aarch64 zero-3` \
                 (signal: 11, SIGSEGV: invalid memory reference)",
            ]
        );
        assert_eq!(
            failed_tests("error[E0425]: cannot find value `x`\nerror: could not compile"),
            ["build: error[E0425]: cannot find value `x`"]
        );
    }
}
