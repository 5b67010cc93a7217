//! Passes the arch's linker script (`boot/<arch>/link.ld`, in this bed) to the linker; with
//! the feature `percpu-crate`, a copy with `boot/percpu.ld` (the `percpu` crate's `.percpu`
//! section) at its `PERCPU` marker. Names, once, the builds that run the growth check
//! (`cfg(pcpu_testbed_grow)`).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(pcpu_testbed_grow)");
    if grows() {
        println!("cargo:rustc-cfg=pcpu_testbed_grow");
    }
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86_64",
        Ok("aarch64") => "aarch64",
        Ok("x86") => "i386",
        Ok("riscv64") => "riscv64",
        // Host `cargo check` and friends: nothing to link.
        _ => return,
    };
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let script = format!("{dir}/boot/{arch}/link.ld");
    println!("cargo:rerun-if-changed={script}");
    println!("cargo:rerun-if-changed=build.rs");
    // src/main.rs reads it with `option_env!` (a bring-up broken on purpose).
    println!("cargo:rerun-if-env-changed=PCPU_TESTBED_BROKEN_BRINGUP");
    let script = if std::env::var_os("CARGO_FEATURE_PERCPU_CRATE").is_some() {
        with_percpu_section(&dir, &script)
    } else {
        script
    };
    println!("cargo:rustc-link-arg=-T{script}");
    if arch == "x86_64" {
        compile_c_check(&dir);
    }
}

/// Whether this build runs the growth check (`src/grow.rs`): x86_64 and riscv64, not with
/// `percpu-crate` (those runs check percpu's areas) nor `riscv-gp` (the tp build's check on
/// another register) nor `platform-base` (its own check), nor in the builds broken for another
/// check (it would only make those
/// boots longer).
fn grows() -> bool {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let arch = var("CARGO_CFG_TARGET_ARCH");
    let broken = var("CARGO_CFG_PCPU_COUNTER_BROKEN");
    matches!(arch.as_str(), "x86_64" | "riscv64")
        && std::env::var_os("CARGO_FEATURE_PERCPU_CRATE").is_none()
        && std::env::var_os("CARGO_FEATURE_RISCV_GP").is_none()
        && std::env::var_os("CARGO_FEATURE_PLATFORM_BASE").is_none()
        && !broken
            .split(',')
            .any(|b| b == "static_shared_add" || b == "riscv_plain_add")
}

/// Compiles `tests/c/kernel_check.c` (the C API counted from every CPU) freestanding, with
/// kernel flags, and links it into the x86_64 kernel.
fn compile_c_check(dir: &str) {
    let out = std::env::var("OUT_DIR").expect("set by cargo");
    let obj = format!("{out}/kernel_check.o");
    let source = format!("{dir}/../../tests/c/kernel_check.c");
    let status = std::process::Command::new("gcc")
        .args([
            "-std=c11",
            "-c",
            "-ffreestanding",
            "-fno-pic",
            "-mno-red-zone",
        ])
        .args([
            "-mcmodel=kernel",
            "-mno-sse",
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
        ])
        .arg(format!("-I{dir}/../../include"))
        .arg(&source)
        .arg("-o")
        .arg(&obj)
        .status()
        .expect("gcc (apt-get install gcc) compiles tests/c/kernel_check.c");
    assert!(status.success(), "gcc failed on {source}");
    println!("cargo:rustc-link-arg={obj}");
    println!("cargo:rerun-if-changed={source}");
    println!("cargo:rerun-if-changed={dir}/../../include/pcpu_counter.h");
}

/// Writes `script` with `boot/percpu.ld` in place of its `PERCPU` marker line into `OUT_DIR`;
/// returns the copy's path.
fn with_percpu_section(dir: &str, script: &str) -> String {
    let percpu = format!("{dir}/boot/percpu.ld");
    println!("cargo:rerun-if-changed={percpu}");
    let section = std::fs::read_to_string(&percpu).expect("boot/percpu.ld");
    let text = std::fs::read_to_string(script).expect("the arch's link.ld");
    let marker = text
        .lines()
        .find(|line| line.trim_start().starts_with("/* PERCPU:"))
        .unwrap_or_else(|| panic!("{script} has no `/* PERCPU:` marker line"));
    let out = format!(
        "{}/link.ld",
        std::env::var("OUT_DIR").expect("set by cargo")
    );
    std::fs::write(&out, text.replacen(marker, &section, 1)).expect("OUT_DIR is writable");
    out
}
