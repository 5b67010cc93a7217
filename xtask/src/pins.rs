//! `cargo xtask pins [TARGET PROFILE]`: the add paths' instructions in every profile a
//! kernel builds with.
//!
//! Builds `testbeds/pins` (each hot path alone in a function: `Counter::add` and `inc`,
//! `EarlyCounter::inc`, `LazyCounter::add`, `ApproxCounter::inc`), a crate that depends on
//! this one as a kernel does, for a bare-metal target, disassembles it and checks each
//! function's hot path (its instructions up to the first `ret`). The profiles set their own
//! environment, whatever the calling shell has (`CARGO_INCREMENTAL`, `CARGO_PROFILE_*`): a
//! non-generic function that is not `#[inline]` is not inlined into another crate when that
//! crate builds incrementally (Cargo's dev default), and once left a call on the add path
//! that only a shell without CI's `CARGO_INCREMENTAL=0` showed.
//!
//! Without arguments it checks every target in every profile of [`PROFILES`]; `cargo xtask
//! cross` runs one step per pair ([`pairs`]). One build of the small crate each (about 8 s);
//! `cargo xtask pins TARGET PROFILE` checks any target in any profile of [`PROFILES`].

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::toolchain::{self, Std};

/// A profile a kernel builds with: its name, whether it is `--release`, and its environment.
pub struct Profile {
    pub name: &'static str,
    release: bool,
    env: &'static [(&'static str, &'static str)],
}

/// Release with and without debug info; dev at `opt-level = 3` with incremental compilation
/// on (Cargo's default for dev), with and without debug info.
pub const PROFILES: [Profile; 4] = [
    Profile {
        name: "release",
        release: true,
        env: &[("CARGO_PROFILE_RELEASE_DEBUG", "0")],
    },
    Profile {
        name: "release+debug",
        release: true,
        env: &[("CARGO_PROFILE_RELEASE_DEBUG", "2")],
    },
    Profile {
        name: "dev-o3-incremental",
        release: false,
        env: &[
            ("CARGO_PROFILE_DEV_OPT_LEVEL", "3"),
            ("CARGO_INCREMENTAL", "1"),
            ("CARGO_PROFILE_DEV_DEBUG", "0"),
        ],
    },
    Profile {
        name: "dev-o3-incremental+debug",
        release: false,
        env: &[
            ("CARGO_PROFILE_DEV_OPT_LEVEL", "3"),
            ("CARGO_INCREMENTAL", "1"),
            ("CARGO_PROFILE_DEV_DEBUG", "2"),
        ],
    },
];

/// The variables a shell (CI's included) may set that change a profile; each profile sets its
/// own.
const PROFILE_VARS: [&str; 8] = [
    "CARGO_INCREMENTAL",
    "CARGO_PROFILE_DEV_DEBUG",
    "CARGO_PROFILE_DEV_OPT_LEVEL",
    "CARGO_PROFILE_DEV_CODEGEN_UNITS",
    "CARGO_PROFILE_RELEASE_DEBUG",
    "CARGO_PROFILE_RELEASE_OPT_LEVEL",
    "CARGO_PROFILE_RELEASE_CODEGEN_UNITS",
    "CARGO_PROFILE_RELEASE_INCREMENTAL",
];

/// The targets: x86_64 in every profile (its add is pinned to one instruction in each);
/// aarch64 and riscv64 in the incremental dev profile with debug info (no call on the add
/// path), the profile that once called `Zone::area`: their optimised non-incremental add is
/// pinned by `tests/arch_aarch64.rs` and `tests/arch_riscv64.rs`. Six builds of about 8 s,
/// to keep `cargo xtask cross` short.
pub fn pairs() -> Vec<(&'static str, &'static Profile)> {
    let mut pairs: Vec<_> = PROFILES
        .iter()
        .map(|p| ("x86_64-unknown-none", p))
        .collect();
    for target in ["aarch64-unknown-none", "riscv64gc-unknown-none-elf"] {
        pairs.push((target, &PROFILES[3]));
    }
    pairs
}

pub fn run(args: &[String]) -> Result<(), String> {
    let chosen: Vec<(&str, &Profile)> = match args {
        [] => pairs(),
        [target, profile] => {
            let p = PROFILES
                .iter()
                .find(|p| p.name == profile)
                .ok_or_else(|| format!("no profile {profile:?}"))?;
            vec![(target.as_str(), p)]
        }
        _ => return Err("usage: cargo xtask pins [TARGET PROFILE]".into()),
    };
    let mut failed = Vec::new();
    for (target, profile) in chosen {
        println!("==> pins {target} {}", profile.name);
        match check(target, profile) {
            Ok(report) => print!("{report}"),
            Err(e) => {
                println!("FAIL [pins {target} {}] {e}", profile.name);
                failed.push(format!("{target} {}", profile.name));
            }
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("pins failed: {}", failed.join("; ")))
    }
}

/// The command `cargo xtask cross`'s step runs: this program's `pins TARGET PROFILE`.
pub fn command(target: &str, profile: &Profile) -> Result<Command, String> {
    let exe = std::env::current_exe().map_err(|e| format!("xtask's own path: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.args(["pins", target, profile.name]);
    Ok(cmd)
}

/// Builds the pins for `target` in `profile` and checks every function; returns the
/// instructions read.
fn check(target: &str, profile: &Profile) -> Result<String, String> {
    let lib = build(target, profile)?;
    let mut report = String::new();
    for (function, check) in checks(target)? {
        let insns = disassemble(target, &lib, function)?;
        let hot = hot_path(&insns).map_err(|e| format!("{function}: {e}"))?;
        check(hot).map_err(|e| format!("{function}: {e}\n    {}", insns.join("\n    ")))?;
        report.push_str(&format!("    {function}: {}\n", hot.join("; ")));
    }
    Ok(report)
}

/// `cargo build` of testbeds/pins for `target` in `profile`, in a target folder per profile
/// (so that each keeps its incremental state); returns the static library.
pub fn build(target: &str, profile: &Profile) -> Result<PathBuf, String> {
    let root = toolchain::repo_root();
    let tc = toolchain::cargo_for(target)?;
    let mut cmd = tc.cargo("build", Std::Core);
    let dir = root.join("target/pins").join(profile.name);
    cmd.current_dir(root.join("testbeds/pins"))
        .env("CARGO_TARGET_DIR", &dir)
        .arg("--quiet");
    if profile.release {
        cmd.arg("--release");
    }
    for var in PROFILE_VARS {
        cmd.env_remove(var);
    }
    for (k, v) in profile.env {
        cmd.env(k, v);
    }
    let status = cmd.status().map_err(|e| format!("cargo build: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build failed ({status})"));
    }
    let folder = if profile.release { "release" } else { "debug" };
    Ok(dir
        .join(tc.target_name())
        .join(folder)
        .join("libpcpu_counter_pins.a"))
}

/// The instructions of `function` in `lib`, without addresses (as `tests/common`'s).
fn disassemble(target: &str, lib: &Path, function: &str) -> Result<Vec<String>, String> {
    let (objdumps, extra): (&[&str], &[&str]) = match target {
        t if t.starts_with("x86_64") => (&["objdump"], &["-M", "intel"]),
        t if t.starts_with("aarch64") => (&["aarch64-linux-gnu-objdump", "llvm-objdump"], &[]),
        _ => (&["riscv64-linux-gnu-objdump", "llvm-objdump"], &[]),
    };
    let objdump = objdumps
        .iter()
        .find(|o| Command::new(o).arg("--version").output().is_ok())
        .ok_or_else(|| format!("one of {objdumps:?} is needed"))?;
    let out = Command::new(objdump)
        .args(["-d", "--no-show-raw-insn"])
        .args(extra)
        .arg(format!("--disassemble={function}"))
        .arg(lib)
        .output()
        .map_err(|e| format!("{objdump}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{objdump} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let insns: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(' ') && l.contains(":\t"))
        .map(|l| l.split_once(":\t").unwrap().1.trim().to_string())
        .collect();
    if insns.is_empty() {
        return Err(format!("{function} not found in {}", lib.display()));
    }
    Ok(insns)
}

/// The instructions before the first `ret`.
fn hot_path(insns: &[String]) -> Result<&[String], String> {
    let end = insns
        .iter()
        .position(|i| mnemonic(i) == "ret")
        .ok_or("no ret")?;
    Ok(&insns[..end])
}

fn mnemonic(insn: &str) -> &str {
    insn.split_whitespace().next().unwrap_or("")
}

/// A check of one function's hot path: what is wrong, if anything.
type Check = fn(&[String]) -> Result<(), String>;

/// The pinned functions of `target` and their checks.
fn checks(target: &str) -> Result<Vec<(&'static str, Check)>, String> {
    Ok(match target {
        t if t.starts_with("x86_64") => vec![
            ("pcpu_pin_counter_add", x86::counter_add),
            ("pcpu_pin_counter_inc", x86::counter_inc),
            ("pcpu_pin_early_inc", x86::early_inc),
            ("pcpu_pin_lazy_add", x86::lazy_add),
            ("pcpu_pin_approx_inc", x86::approx_inc),
        ],
        t if t.starts_with("aarch64") || t.starts_with("riscv64") => {
            let no_call: Check = if t.starts_with("aarch64") {
                other::aarch64_no_call
            } else {
                other::riscv64_no_call
            };
            [
                "pcpu_pin_counter_add",
                "pcpu_pin_counter_inc",
                "pcpu_pin_early_inc",
                "pcpu_pin_lazy_add",
            ]
            .into_iter()
            .map(|f| (f, no_call))
            .collect()
        }
        _ => return Err(format!("no pins for {target}")),
    })
}

/// x86_64: the adds' exact shapes.
mod x86 {
    use super::mnemonic;

    /// The gs-relative adds of `hot`.
    fn gs_adds(hot: &[String]) -> Vec<&String> {
        hot.iter()
            .filter(|i| mnemonic(i) == "add" && i.contains("gs:"))
            .collect()
    }

    /// One non-locked 64-bit gs-relative add, no call, no jump out, no other gs access, and
    /// at most `max` instructions; with `immediate`, the add's operand is the immediate 1.
    fn one_add(hot: &[String], max: usize, immediate: bool) -> Result<(), String> {
        let adds = gs_adds(hot);
        if adds.len() != 1 || !adds[0].starts_with("add    QWORD PTR gs:[") {
            return Err(format!("not one 64-bit gs-relative add: {adds:?}"));
        }
        if hot.iter().filter(|i| i.contains("gs:")).count() != 1 {
            return Err("another gs-relative access".into());
        }
        if let Some(bad) = hot
            .iter()
            .find(|i| matches!(mnemonic(i), "call" | "jmp" | "lock"))
        {
            return Err(format!("{bad} on the add path"));
        }
        if immediate && !adds[0].ends_with("],0x1") {
            return Err(format!("not the immediate 1: {}", adds[0]));
        }
        if hot.len() > max {
            return Err(format!(
                "{} instructions before the ret, at most {max}",
                hot.len()
            ));
        }
        Ok(())
    }

    /// The handle's offset loaded, then the one add: `mov; add gs:[off], v`.
    pub fn counter_add(hot: &[String]) -> Result<(), String> {
        one_add(hot, 2, false)
    }

    /// As [`counter_add`], the operand the immediate 1.
    pub fn counter_inc(hot: &[String]) -> Result<(), String> {
        one_add(hot, 2, true)
    }

    /// One test of the state (the slot's offset or "not yet"): its load, a compare and a
    /// branch, then the immediate add.
    pub fn early_inc(hot: &[String]) -> Result<(), String> {
        one_test(hot)?;
        one_add(hot, 4, true)
    }

    /// One test of the state's shared bit (its load, a `test`, a branch), then the add (one
    /// register move for the operand at most).
    pub fn lazy_add(hot: &[String]) -> Result<(), String> {
        one_test(hot)?;
        one_add(hot, 5, false)
    }

    /// Exactly one compare or test, before the add, followed by the branch.
    fn one_test(hot: &[String]) -> Result<(), String> {
        let tests: Vec<usize> = (0..hot.len())
            .filter(|&k| matches!(mnemonic(&hot[k]), "test" | "cmp"))
            .collect();
        let add = hot.iter().position(|i| i.contains("gs:"));
        match (tests.as_slice(), add) {
            ([t], Some(a)) if *t < a && mnemonic(&hot[t + 1]).starts_with('j') => Ok(()),
            _ => Err(format!("not one test and branch before the add: {hot:?}")),
        }
    }

    /// The plain add, then `lahf; test ah, 0x10; jne` on its carry out of the low 4 bits; no
    /// lock and no `xadd` on the hot path.
    pub fn approx_inc(hot: &[String]) -> Result<(), String> {
        let k = hot
            .iter()
            .position(|i| i.starts_with("add    QWORD PTR gs:["))
            .ok_or("no gs-relative add")?;
        let next: Vec<&str> = hot[k + 1..].iter().take(3).map(|i| mnemonic(i)).collect();
        if next != ["lahf", "test", "jne"] || !hot[k + 2].starts_with("test   ah,0x10") {
            return Err(format!(
                "the add is not followed by lahf; test ah,0x10; jne: {next:?}"
            ));
        }
        if let Some(bad) = hot
            .iter()
            .find(|i| matches!(mnemonic(i), "lock" | "xadd" | "call"))
        {
            return Err(format!("{bad} on the hot path"));
        }
        Ok(())
    }
}

/// aarch64 and riscv64: no call on the add path.
mod other {
    use super::mnemonic;

    /// No `bl`, `blr` or `br` (a call or a tail call) before the `ret`, and one add to the slot
    /// (the `ldxr`/`stxr` loop's `stxr`, or `ldadd`).
    pub fn aarch64_no_call(hot: &[String]) -> Result<(), String> {
        if let Some(bad) = hot
            .iter()
            .find(|i| matches!(mnemonic(i), "bl" | "blr" | "br"))
        {
            return Err(format!("{bad} on the add path"));
        }
        let adds = hot
            .iter()
            .filter(|i| matches!(mnemonic(i), "stxr" | "ldadd"))
            .count();
        if adds != 1 {
            return Err(format!("{adds} stxr/ldadd on the add path"));
        }
        Ok(())
    }

    /// No `jal`, `jalr` or `jr` (a call or a tail call) before the `ret`, and one
    /// `amoadd.d zero, ...` (the old value discarded).
    pub fn riscv64_no_call(hot: &[String]) -> Result<(), String> {
        if let Some(bad) = hot
            .iter()
            .find(|i| matches!(mnemonic(i), "jal" | "jalr" | "jr" | "call" | "tail"))
        {
            return Err(format!("{bad} on the add path"));
        }
        let adds = hot
            .iter()
            .filter(|i| mnemonic(i) == "amoadd.d" && i.contains("zero,"))
            .count();
        if adds != 1 {
            return Err(format!("{adds} amoadd.d zero on the add path"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn the_x86_checks_take_the_one_add_and_reject_a_call() {
        let good = s(&[
            "mov    rax,QWORD PTR [rdi+0x8]",
            "add    QWORD PTR gs:[rax],rsi",
        ]);
        assert_eq!(x86::counter_add(&good), Ok(()));
        assert!(x86::counter_inc(&good).is_err(), "a register operand");
        // What an incremental dev build made before `Zone::area` was `#[inline]`.
        let called = s(&[
            "push   r14",
            "push   rbx",
            "push   rax",
            "mov    rbx,rsi",
            "mov    rax,QWORD PTR [rdi]",
            "mov    r14,QWORD PTR [rdi+0x8]",
            "mov    rdi,rax",
            "call   QWORD PTR [rip+0x0]",
            "add    QWORD PTR gs:[r14],rbx",
            "add    rsp,0x8",
            "pop    rbx",
            "pop    r14",
        ]);
        assert!(x86::counter_add(&called).is_err());
        let locked = s(&[
            "mov    rax,QWORD PTR [rdi+0x8]",
            "lock add QWORD PTR gs:[rax],rsi",
        ]);
        assert!(x86::counter_add(&locked).is_err());
    }

    #[test]
    fn the_early_check_wants_one_test_and_the_immediate() {
        let good = s(&[
            "mov    rax,QWORD PTR [rdi]",
            "cmp    rax,0xffffffffffffffff",
            "je     f <pcpu_pin_early_inc+0xf>",
            "add    QWORD PTR gs:[rax],0x1",
        ]);
        assert_eq!(x86::early_inc(&good), Ok(()));
        // The form before: a second test (of the `Once`) and the 1 in a register.
        let before = s(&[
            "movzx  eax,BYTE PTR [rdi+0x30]",
            "test   al,al",
            "je     1e <pin_early_inc+0x1e>",
            "mov    rax,QWORD PTR [rdi+0x8]",
            "mov    ecx,0x1",
            "add    QWORD PTR gs:[rax],rcx",
        ]);
        assert!(x86::early_inc(&before).is_err());
    }

    #[test]
    fn the_riscv_and_aarch64_checks_reject_calls() {
        let good = s(&[
            "ld\ta0, 8(a0)",
            "mv\ta2, tp",
            "add\ta0, a0, a2",
            "amoadd.d\tzero, a1, (a0)",
        ]);
        assert_eq!(other::riscv64_no_call(&good), Ok(()));
        let called = s(&["auipc\tra, 0", "jalr\tra", "amoadd.d\tzero, a1, (a0)"]);
        assert!(other::riscv64_no_call(&called).is_err());
        let good = s(&[
            "ldr\tx8, [x0, #8]",
            "mrs\tx9, TPIDR_EL1",
            "ldadd\tx1, x8, [x8]",
        ]);
        assert_eq!(other::aarch64_no_call(&good), Ok(()));
        let called = s(&["bl\t0 <_ZN4area>", "ldadd\tx1, x8, [x8]"]);
        assert!(other::aarch64_no_call(&called).is_err());
    }

    #[test]
    fn every_pair_names_a_profile_and_x86_has_all() {
        let x86: Vec<&str> = pairs()
            .iter()
            .filter(|(t, _)| t.starts_with("x86_64"))
            .map(|(_, p)| p.name)
            .collect();
        assert_eq!(x86, PROFILES.map(|p| p.name));
    }
}
