//! `cargo xtask stack --rust`: the Rust registry's streaming read (`Registry::snapshot`
//! iterated to its end) as a kernel builds it, checked against the C library's bound.
//!
//! `testbeds/pins` (a crate that depends on this one as a kernel does) is built in release
//! for each of [`TARGETS`], as `cargo xtask pins` builds it, and its static library is
//! analysed by the same code as the C library: every function named [`PREFIX`]`*`, callees
//! included (core's, the `Statistic` methods of the counter kinds it registers), at most
//! [`CALL_LIMIT`](super::CALL_LIMIT) bytes.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::pins;

/// The bare-metal targets a Rust kernel builds for, one per 64-bit arch.
pub const TARGETS: &[&str] = &[
    "x86_64-unknown-none",
    "aarch64-unknown-none",
    "riscv64gc-unknown-none-elf",
];

/// The probes' names: `extern "C"` functions of `testbeds/pins` that call the reads.
pub const PREFIX: &str = "pcpu_pin_registry_";

/// Whether `name` is one of the probes.
pub fn is_probe(name: &str) -> bool {
    name.starts_with(PREFIX)
}

/// Builds `testbeds/pins` for `target` in release; returns its static library.
pub fn build(target: &str) -> Result<PathBuf, String> {
    let release = pins::PROFILES
        .iter()
        .find(|p| p.name == "release")
        .expect("pins has a release profile");
    pins::build(target, release)
}

/// Whether a function whose address the library's data holds may be reached by a call
/// through a pointer on the probes' paths: the registry's reads call through a pointer only
/// a `&dyn Statistic`'s methods (the vtables of the kinds the probes register), so the
/// other vtables of the static library (core's, the `Debug` impls') are left out.
pub fn is_statistic_method(name: &str) -> bool {
    name.contains("Statistic") && !name.contains("fmt")
}

/// `objdump <args>` of every member of the static library `lib`, one by one, into one text;
/// a member this objdump cannot read (a compiler_builtins object with a relocation it does
/// not know) is left out: a call into it is then a call of an undefined symbol, an error.
pub fn objdump_members(objdump: &str, args: &[&str], lib: &Path) -> Result<String, String> {
    let dir = lib.with_extension("members");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let status = Command::new("ar")
        .arg("x")
        .arg(lib)
        .current_dir(&dir)
        .status()
        .map_err(|e| format!("ar: {e}"))?;
    if !status.success() {
        return Err(format!("ar x {}: {status}", lib.display()));
    }
    let mut members: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| Some(e.ok()?.path()))
        .collect();
    members.sort();
    let mut text = String::new();
    for member in members {
        let out = Command::new(objdump)
            .args(args)
            .arg(&member)
            .output()
            .map_err(|e| format!("{objdump}: {e}"))?;
        if out.status.success() {
            text.push_str(&String::from_utf8_lossy(&out.stdout));
        }
    }
    Ok(text)
}
