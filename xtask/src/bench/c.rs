//! The C fast path (`benches/c/c_add.c`): built with `gcc -O2` against the host C library
//! (`testbeds/capi-host/`, release) and run after the Rust bench; its result lines (section `c`) join the
//! same results file, so the report sets it next to this run's Rust figures.

use std::path::Path;
use std::process::Command;

/// Builds and runs the C bench; returns its result lines.
pub fn run(root: &Path, quick: bool) -> Result<String, String> {
    let target = root.join("target/capi");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "--release", "--manifest-path"])
        .arg(root.join("testbeds/capi-host/Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .map_err(|e| format!("run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building testbeds/capi-host/ failed ({status})"));
    }
    let exe = target.join("c_add");
    let status = Command::new("gcc")
        .args([
            "-std=c11",
            "-O2",
            "-D_GNU_SOURCE",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-I",
        ])
        .arg(root.join("include"))
        .arg(root.join("benches/c/c_add.c"))
        .arg(target.join("release/libpcpu_counter_capi.a"))
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .status()
        .map_err(|e| format!("gcc (apt-get install gcc) for benches/c/c_add.c: {e}"))?;
    if !status.success() {
        return Err(format!("gcc failed on benches/c/c_add.c ({status})"));
    }
    let mut cmd = Command::new(&exe);
    if quick {
        cmd.arg("--quick");
    }
    let out = cmd
        .output()
        .map_err(|e| format!("run {}: {e}", exe.display()))?;
    if !out.status.success() {
        return Err(format!(
            "benches/c/c_add.c failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
