//! Finding a toolchain that can build for a target, and the tools that link and run it.
//!
//! [`cargo_for`] (and [`choose`], for builds that ask more) looks, in this order, for
//! 1. a rustup toolchain with the target's standard library installed (`rustup target add`),
//!    the default toolchain first;
//! 2. a rustup toolchain with the library source (`rustup component add rust-src`), used with
//!    `-Zbuild-std` and `RUSTC_BOOTSTRAP=1`;
//! 3. Debian's `/usr/bin/cargo` and `/usr/bin/rustc` with the library source under
//!    `/usr/lib/rustlib/src` (packages `cargo-web rustc-web rust-web-src`), used the same way
//!    with `/usr/bin` first on `PATH` (rustup's proxies usually come first);
//! 4. the default rustup toolchain after rustup adds the target or `rust-src`.
//!
//! Each is taken by what it can do, not by what it has: one whose `rustc` is older than the
//! crate's `rust-version`, whose cargo lacks a `-Z` flag the build passes (an old nightly with
//! `rust-src`, pinned by another project, knows no `-Zjson-target-spec`), or (for the C
//! library) whose prebuilt `compiler_builtins` holds C objects, is skipped with one line on
//! stderr that names it, what it lacks and the fix, and the next is tried:
//!
//! ```text
//! toolchain skipped: rustup toolchain nightly-2025-05-20-x86_64-unknown-linux-gnu for i586-unknown-none (its library source): its cargo 1.89.0-nightly (47c911e9e 2025-05-14) lacks -Zjson-target-spec; fix: `rustup component add rust-src --toolchain stable-x86_64-unknown-linux-gnu`
//! ```
//!
//! `testbeds/capi-kernel/build.sh` asks the same question through `cargo xtask toolchain`
//! ([`run`]), so the README's C build and `cargo xtask` choose alike.
//!
//! When none fits it returns an error that names what is missing and the command that installs
//! it. The returned [`Toolchain`] hands out a `cargo` [`Command`] with the environment set:
//! `PATH`, `RUSTC`, `RUSTDOC`, `RUSTC_BOOTSTRAP`, the `-Zbuild-std` arguments and the target's
//! linker (`CARGO_TARGET_<TRIPLE>_LINKER`). Runners (qemu-user) are added with
//! [`Toolchain::set_runner`] and [`qemu_user_runner`].
//!
//! The 32-bit x86 bare-metal target has no built-in spec: it is the custom JSON spec at
//! [`I386_BARE_METAL_SPEC`] (`arch/i386/i586-unknown-none.json`, a Pentium without MMX/SSE,
//! soft float, GNU `i686-linux-gnu-ld`, static). Pass [`i386_bare_metal_spec`] as the target;
//! it is always built with `-Zbuild-std` and `-Zjson-target-spec`. Cargo names its config keys
//! and output folder after the file stem, `i586-unknown-none`.
//!
//! Linkers set here: `aarch64-linux-gnu-gcc`, `i686-linux-gnu-gcc` and `riscv64-linux-gnu-gcc`
//! for the Linux targets, GNU `ld` / `aarch64-linux-gnu-ld` / `i686-linux-gnu-ld` /
//! `riscv64-linux-gnu-ld` for the bare-metal ones (rust-lld is
//! not installed on these machines). rustc infers the `ld` flavor from a linker named `ld` or
//! `*-ld`; a kernel may still pass `-C linker-flavor=ld` in its rustflags.
//!
//! `i686-unknown-linux-gnu` binaries also get `CARGO_TARGET_I686_UNKNOWN_LINUX_GNU_RUSTFLAGS`
//! naming the cross libc's loader and libraries (`/usr/i686-linux-gnu/lib`), so that they run
//! natively on an x86_64 host without a 32-bit libc installed, as well as under `qemu-i386`.
//! A caller that sets that variable itself must keep these flags.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The custom 32-bit x86 bare-metal target spec, relative to the repository root.
pub const I386_BARE_METAL_SPEC: &str = "arch/i386/i586-unknown-none.json";

/// The repository root (the folder above `xtask/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask/ has a parent folder")
        .to_path_buf()
}

/// The absolute path of [`I386_BARE_METAL_SPEC`], to pass as a `--target`.
pub fn i386_bare_metal_spec() -> PathBuf {
    repo_root().join(I386_BARE_METAL_SPEC)
}

/// Which standard library crates a build needs, when they are built from source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Std {
    /// `core` (and `compiler_builtins` with its `mem` functions): `no_std`.
    Core,
    /// `core` and `alloc`.
    Alloc,
    /// The whole `std` (host tests on a cross target; cargo adds `test` for test builds).
    Full,
}

/// A cargo/rustc pair that can build for one target.
#[derive(Clone, Debug)]
pub struct Toolchain {
    /// What `--target` gets: a triple, or the absolute path of a JSON spec.
    pub target: String,
    /// Which toolchain this is and how it gets the standard library, for messages.
    pub description: String,
    /// The folder holding this toolchain's `cargo`, `rustc` and `rustdoc`.
    bin_dir: PathBuf,
    /// The sysroot its `rustc` uses.
    sysroot: PathBuf,
    /// Whether the standard library is built from source (`-Zbuild-std`).
    build_std: bool,
    /// Extra environment for every cargo command (linker, runner).
    env: Vec<(String, String)>,
}

impl Toolchain {
    /// A `cargo <subcommand> --target <target>` command with this toolchain's environment and,
    /// when the library is built from source, the `-Zbuild-std` arguments for `std`.
    pub fn cargo(&self, subcommand: &str, std: Std) -> Command {
        let mut cmd = Command::new(self.bin_dir.join("cargo"));
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![self.bin_dir.clone()];
        dirs.extend(std::env::split_paths(&path));
        cmd.env(
            "PATH",
            std::env::join_paths(dirs).expect("PATH entries have no separator"),
        )
        .env("RUSTC", self.bin_dir.join("rustc"))
        .env("RUSTDOC", self.bin_dir.join("rustdoc"))
        // Set by rustup's proxies and by the cargo that runs the xtask: they would pick
        // another toolchain or wrap this one.
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("CARGO");
        for (key, value) in &self.env {
            cmd.env(key, value);
        }
        cmd.arg(subcommand).arg("--target").arg(&self.target);
        if self.build_std {
            cmd.env("RUSTC_BOOTSTRAP", "1");
            match std {
                Std::Core => cmd.arg("-Zbuild-std=core,compiler_builtins"),
                Std::Alloc => cmd.arg("-Zbuild-std=core,alloc,compiler_builtins"),
                Std::Full => cmd.arg("-Zbuild-std=std,panic_unwind"),
            };
            if std != Std::Full {
                cmd.arg("-Zbuild-std-features=compiler-builtins-mem");
            }
            if self.target.ends_with(".json") {
                cmd.arg("-Zjson-target-spec");
            }
        }
        cmd
    }

    /// This toolchain's `cargo`, for scripts that take it in `CARGO`.
    pub fn cargo_program(&self) -> PathBuf {
        self.bin_dir.join("cargo")
    }

    /// The sysroot this toolchain's `rustc` uses.
    pub fn sysroot(&self) -> PathBuf {
        self.sysroot.clone()
    }

    /// Whether the standard library is built from source.
    pub fn builds_std(&self) -> bool {
        self.build_std
    }

    /// The name cargo gives the target in config keys and in `target/<name>/`: the triple,
    /// or a JSON spec's file stem.
    pub fn target_name(&self) -> String {
        target_name(&self.target)
    }

    /// The environment variable for cargo's per-target config `key` (`LINKER`, `RUNNER`,
    /// `RUSTFLAGS`): `CARGO_TARGET_<TARGET>_<KEY>`.
    pub fn target_env(&self, key: &str) -> String {
        format!(
            "CARGO_TARGET_{}_{}",
            self.target_name().to_uppercase().replace(['-', '.'], "_"),
            key
        )
    }

    /// Adds `key=value` to every cargo command's environment.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_string(), value.to_string()));
    }

    /// Runs the target's test binaries with `runner` (words split on spaces, as cargo does);
    /// `None` runs them directly.
    pub fn set_runner(&mut self, runner: Option<&str>) {
        let key = self.target_env("RUNNER");
        self.env.retain(|(k, _)| *k != key);
        if let Some(runner) = runner {
            self.env.push((key, runner.to_string()));
        }
    }
}

/// The name cargo gives `target`: the triple, or a JSON spec's file stem.
fn target_name(target: &str) -> String {
    if target.ends_with(".json") {
        Path::new(target)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| target.to_string())
    } else {
        target.to_string()
    }
}

/// What a build asks of a toolchain beyond the target.
#[derive(Clone, Debug, Default)]
pub struct Needs {
    /// `Some(true)`: `core` from source (`-Zbuild-std`) even where a prebuilt one is
    /// installed; `Some(false)`: the prebuilt one only; `None`: prebuilt first.
    pub build_std: Option<bool>,
    /// A static library for kernels written in C (`testbeds/capi-kernel/build.sh`): a prebuilt
    /// `core` is fit only if its `compiler_builtins` holds nothing but what rustc compiled for
    /// the target. rustup's hold compiler-rt's C objects, built by a C compiler for another
    /// float ABI than the bare-metal target's (riscv64gc: soft-float objects that GNU ld
    /// refuses beside lp64d ones; x86_64-unknown-none and aarch64-unknown-none-softfloat:
    /// complex-number helpers that pass `double`s in FP registers).
    pub c_library: bool,
    /// This cargo only (with the `rustc` beside it), as `$CARGO` names it to build.sh.
    pub cargo: Option<PathBuf>,
    /// Whether rustup may add what is missing to the default toolchain when no installed one
    /// fits (`rustup target add`, `rustup component add rust-src`), as a last candidate.
    pub install: bool,
}

/// Finds a toolchain that can build for `target` (a triple or a JSON spec path), with the
/// target's linker configured: [`choose`] with the prebuilt `core` first and rustup allowed to
/// add what is missing. The error says what is missing and how to install it.
pub fn cargo_for(target: &str) -> Result<Toolchain, String> {
    choose(
        target,
        &Needs {
            install: true,
            ..Needs::default()
        },
    )
}

/// Finds the first candidate that can do what `needs` asks for `target`: every candidate with
/// the target's prebuilt standard library (unless `needs.build_std` says otherwise), then every
/// one with the library source, then (`needs.install`) the default rustup toolchain after
/// rustup adds the target or `rust-src`. A candidate that has what the build takes but cannot
/// do the job is skipped with one line on stderr (printed once per process) that names it,
/// what it lacks and the command that fixes it:
/// - its `rustc` is older than the crate's `rust-version` (the library source is the
///   toolchain's own, so this also covers a `core` source older than the crate needs);
/// - with `-Zbuild-std`, its cargo does not know a `-Z` flag the build passes (`build-std`,
///   `build-std-features`, and `json-target-spec` for a JSON spec), as `cargo -Z help` lists
///   them;
/// - for a C library ([`Needs::c_library`]), its prebuilt `compiler_builtins` holds C objects.
pub fn choose(target: &str, needs: &Needs) -> Result<Toolchain, String> {
    let json = target.ends_with(".json");
    if json && !Path::new(target).is_file() {
        return Err(format!("target spec {target} does not exist"));
    }
    let candidates = match &needs.cargo {
        Some(cargo) => vec![Candidate::of_cargo(cargo)?],
        None => candidates(),
    };
    let modes: &[bool] = match needs.build_std {
        Some(true) => &[true],
        Some(false) => &[false],
        None => &[false, true],
    };
    let mut found = None;
    'search: for &build_std in modes {
        for candidate in &candidates {
            match fitness(candidate, target, build_std, needs) {
                Fit::Yes => {
                    found = Some((candidate.clone(), build_std));
                    break 'search;
                }
                Fit::Lacks => {}
                Fit::Unfit(why) => skipped(&why),
            }
        }
    }
    if found.is_none() && needs.install && needs.cargo.is_none() {
        found = install_for(target, needs);
    }
    let Some((candidate, build_std)) = found else {
        return Err(missing_toolchain(target, &candidates, needs));
    };
    let mut toolchain = Toolchain {
        target: target.to_string(),
        description: format!(
            "{} ({})",
            candidate.name,
            if build_std {
                "standard library built from source with -Zbuild-std"
            } else {
                "prebuilt standard library"
            }
        ),
        bin_dir: candidate.bin_dir.clone(),
        sysroot: candidate.sysroot.clone(),
        build_std,
        env: Vec::new(),
    };
    if let Some((linker, package)) = linker_for(&toolchain.target_name()) {
        let path = require_tool(linker, package)?;
        let key = toolchain.target_env("LINKER");
        toolchain.set_env(&key, &path.to_string_lossy());
    }
    if toolchain.target_name() == "i686-unknown-linux-gnu" {
        // Native runs: this x86_64 host has no /lib/ld-linux.so.2, so the binaries name the
        // cross libc's loader and libraries (qemu-i386 -L finds them the same way).
        require_path(Path::new(I686_LOADER), "libc6-dev-i386-cross")?;
        let key = toolchain.target_env("RUSTFLAGS");
        let flags = format!(
            "-C link-arg=-Wl,--dynamic-linker={I686_LOADER} -C link-arg=-Wl,-rpath,{I686_LIBS}"
        );
        toolchain.set_env(&key, &flags);
    }
    Ok(toolchain)
}

/// A toolchain that builds `target`'s standard library from source (`-Zbuild-std`) even where
/// a prebuilt one exists: for instrumented builds (ThreadSanitizer), whose standard library
/// must be compiled with the same flags as the code under test. `None` when no candidate has
/// a library source it can build (the skipped ones say why).
pub fn source_built_for(target: &str) -> Option<Toolchain> {
    let needs = Needs {
        build_std: Some(true),
        ..Needs::default()
    };
    let mut toolchain = choose(target, &needs).ok()?;
    // The callers set the environment they need (runtime, sanitizer flags): no linker.
    toolchain.env.clear();
    Some(toolchain)
}

/// `cargo xtask toolchain [--c-library] [--build-std | --prebuilt] [--cargo <path>] <target>`:
/// the choice [`choose`] makes (rustup may add what is missing), for scripts
/// (`testbeds/capi-kernel/build.sh`), as three lines on stdout: `cargo=<path>`,
/// `build_std=<0|1>`, `description=<which toolchain, how it gets core>`. Skipped candidates
/// are reported on stderr.
pub fn run(args: &[String]) -> Result<(), String> {
    let usage = "usage: cargo xtask toolchain [--c-library] [--build-std | --prebuilt] \
                 [--cargo <path>] <target triple or JSON spec>";
    let mut needs = Needs {
        install: true,
        ..Needs::default()
    };
    let mut target = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--c-library" => needs.c_library = true,
            "--build-std" => needs.build_std = Some(true),
            "--prebuilt" => needs.build_std = Some(false),
            "--cargo" => needs.cargo = Some(args.next().ok_or(usage)?.into()),
            other if !other.starts_with('-') && target.is_none() => target = Some(other),
            other => return Err(format!("unknown argument `{other}`; {usage}")),
        }
    }
    let target = target.ok_or(usage)?;
    let toolchain = choose(target, &needs)?;
    println!("cargo={}", toolchain.cargo_program().display());
    println!("build_std={}", u8::from(toolchain.build_std));
    println!("description={}", toolchain.description);
    Ok(())
}

/// The cross libc's loader and library folder for i686 binaries run natively.
const I686_LOADER: &str = "/usr/i686-linux-gnu/lib/ld-linux.so.2";
const I686_LIBS: &str = "/usr/i686-linux-gnu/lib";

/// The linker (and its Debian package) for the targets this project builds.
fn linker_for(target_name: &str) -> Option<(&'static str, &'static str)> {
    match target_name {
        "aarch64-unknown-linux-gnu" => Some(("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu")),
        "i686-unknown-linux-gnu" => Some(("i686-linux-gnu-gcc", "gcc-i686-linux-gnu")),
        "riscv64gc-unknown-linux-gnu" => Some(("riscv64-linux-gnu-gcc", "gcc-riscv64-linux-gnu")),
        "x86_64-unknown-none" => Some(("ld", "binutils")),
        "aarch64-unknown-none" => Some(("aarch64-linux-gnu-ld", "binutils-aarch64-linux-gnu")),
        "i586-unknown-none" => Some(("i686-linux-gnu-ld", "binutils-i686-linux-gnu")),
        "riscv64gc-unknown-none-elf" => {
            Some(("riscv64-linux-gnu-ld", "binutils-riscv64-linux-gnu"))
        }
        _ => None,
    }
}

/// The qemu-user runner for a Linux cross target, checked to exist with its guest libraries:
/// `qemu-aarch64 -L /usr/aarch64-linux-gnu`, `qemu-i386 -L /usr/i686-linux-gnu` or
/// `qemu-riscv64 -L /usr/riscv64-linux-gnu`.
pub fn qemu_user_runner(target: &str) -> Result<String, String> {
    let (qemu, sysroot, loader, libc_package) = match target {
        "aarch64-unknown-linux-gnu" => (
            "qemu-aarch64",
            "/usr/aarch64-linux-gnu",
            "lib/ld-linux-aarch64.so.1",
            "libc6-dev-arm64-cross",
        ),
        "i686-unknown-linux-gnu" => (
            "qemu-i386",
            "/usr/i686-linux-gnu",
            "lib/ld-linux.so.2",
            "libc6-dev-i386-cross",
        ),
        "riscv64gc-unknown-linux-gnu" => (
            "qemu-riscv64",
            "/usr/riscv64-linux-gnu",
            "lib/ld-linux-riscv64-lp64d.so.1",
            "libc6-dev-riscv64-cross",
        ),
        _ => return Err(format!("no qemu-user runner known for {target}")),
    };
    let qemu = require_tool(qemu, "qemu-user")?;
    require_path(&Path::new(sysroot).join(loader), libc_package)?;
    Ok(format!("{} -L {sysroot}", qemu.display()))
}

/// Finds `name` on `PATH`, or says which Debian package provides it.
pub fn require_tool(name: &str, apt_package: &str) -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!("`{name}` is not on PATH: install it with `apt-get install {apt_package}`")
        })
}

/// Checks that `path` exists, or says which Debian package provides it.
pub fn require_path(path: &Path, apt_package: &str) -> Result<PathBuf, String> {
    if path.exists() {
        Ok(path.to_path_buf())
    } else {
        Err(format!(
            "{} is missing: install it with `apt-get install {apt_package}`",
            path.display()
        ))
    }
}

/// A rustc installation that might build a target.
#[derive(Clone, Debug)]
struct Candidate {
    /// For messages: `rustup toolchain stable-x86_64-unknown-linux-gnu` or `Debian /usr/bin`.
    name: String,
    /// The rustup toolchain's name, for the commands that fix it; `None` for the others.
    rustup: Option<String>,
    /// The folder holding its `cargo` and `rustc`.
    bin_dir: PathBuf,
    /// The sysroot, holding `lib/rustlib`.
    sysroot: PathBuf,
}

impl Candidate {
    /// The cargo at `cargo` (`$CARGO`) with the `rustc` beside it.
    fn of_cargo(cargo: &Path) -> Result<Candidate, String> {
        let bin_dir = cargo.parent().unwrap_or(Path::new(".")).to_path_buf();
        if !cargo.is_file() || !bin_dir.join("rustc").is_file() {
            return Err(format!(
                "CARGO={} is not a cargo with a rustc beside it",
                cargo.display()
            ));
        }
        let output = tool_command(&bin_dir.join("rustc"))
            .args(["--print", "sysroot"])
            .output()
            .map_err(|e| format!("{}/rustc: {e}", bin_dir.display()))?;
        let sysroot = String::from_utf8_lossy(&output.stdout).trim().to_string();
        Ok(Candidate {
            name: format!("CARGO={}", cargo.display()),
            rustup: None,
            bin_dir,
            sysroot: sysroot.into(),
        })
    }

    /// The command that gives this candidate the library source.
    fn add_source(&self) -> String {
        match &self.rustup {
            Some(name) => format!("rustup component add rust-src --toolchain {name}"),
            None => DEBIAN_FIX.to_string(),
        }
    }
}

/// Debian 12's packages for a rustc and cargo (1.96 in bookworm-security) with the library
/// source.
const DEBIAN_FIX: &str = "apt-get install rustc-web cargo-web rust-web-src";

/// Every rustup toolchain (the default first) and Debian's `/usr`, each with a cargo.
fn candidates() -> Vec<Candidate> {
    let mut out: Vec<Candidate> = Vec::new();
    let mut push = |name: String, rustup: Option<String>, sysroot: PathBuf| {
        let bin_dir = sysroot.join("bin");
        let usable = bin_dir.join("cargo").is_file() && bin_dir.join("rustc").is_file();
        if usable && !out.iter().any(|c| c.sysroot == sysroot) {
            out.push(Candidate {
                name,
                rustup,
                bin_dir,
                sysroot,
            });
        }
    };
    for (name, _) in rustup_toolchains() {
        if let Some(sysroot) = rustup_sysroot(&name) {
            push(format!("rustup toolchain {name}"), Some(name), sysroot);
        }
    }
    push(
        "Debian /usr/bin/cargo and /usr/bin/rustc".into(),
        None,
        "/usr".into(),
    );
    out
}

/// The installed rustup toolchains, the default one first (`true`); empty without rustup.
fn rustup_toolchains() -> Vec<(String, bool)> {
    let Ok(output) = Command::new("rustup")
        .args(["toolchain", "list"])
        .env_remove("RUSTUP_TOOLCHAIN")
        .output()
    else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let mut names: Vec<(String, bool)> = text
        .lines()
        .filter_map(|line| {
            let name = line.split_whitespace().next()?;
            Some((name.to_string(), line.contains("default")))
        })
        .collect();
    names.sort_by_key(|(_, default)| !*default);
    names
}

/// A rustup toolchain's sysroot.
fn rustup_sysroot(name: &str) -> Option<PathBuf> {
    let output = Command::new("rustup")
        .args(["run", name, "rustc", "--print", "sysroot"])
        .env_remove("RUSTUP_TOOLCHAIN")
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim().to_string()))
}

/// Whether `sysroot` has the standard library's source, as `-Zbuild-std` needs.
fn has_library_source(sysroot: &Path) -> bool {
    let library = sysroot.join("lib/rustlib/src/rust/library");
    library.join("core/src/lib.rs").is_file() && library.join("std/src/lib.rs").is_file()
}

/// What a candidate can do for one build.
enum Fit {
    /// It can.
    Yes,
    /// It lacks what the build takes (the target's library, or the library source): not a
    /// candidate for this build, nothing to say.
    Lacks,
    /// It has what the build takes but cannot do the job: the skip line, saying why.
    Unfit(String),
}

/// Whether `candidate` can build `target` with a prebuilt `core` (`build_std` false) or with
/// `core` from its library source.
fn fitness(candidate: &Candidate, target: &str, build_std: bool, needs: &Needs) -> Fit {
    let json = target.ends_with(".json");
    let prebuilt = candidate
        .sysroot
        .join("lib/rustlib")
        .join(target)
        .join("lib");
    let has = if build_std {
        has_library_source(&candidate.sysroot)
    } else {
        !json && prebuilt.is_dir()
    };
    if !has {
        return Fit::Lacks;
    }
    match unfit(candidate, target, build_std, needs) {
        Some(why) => Fit::Unfit(why),
        None => Fit::Yes,
    }
}

/// Why `candidate`, given the library it takes, cannot build `target`: the skip line; `None`
/// when it can.
fn unfit(candidate: &Candidate, target: &str, build_std: bool, needs: &Needs) -> Option<String> {
    let json = target.ends_with(".json");
    let name = target_name(target);
    let prebuilt = candidate
        .sysroot
        .join("lib/rustlib")
        .join(target)
        .join("lib");
    let what = if build_std {
        "its library source"
    } else {
        "its prebuilt core"
    };
    let skip = |lacks: String, fix: String| {
        Some(format!(
            "{} for {name} ({what}): {lacks}; fix: `{fix}`",
            candidate.name
        ))
    };
    // The crate's rust-version: the oldest rustc (and, its source being the toolchain's own,
    // the oldest core source) the crate builds with.
    let rustc = rustc_version(&candidate.bin_dir);
    if let (Some(have), Some(need)) = (rustc.as_ref(), crate_rust_version()) {
        if !have.at_least(&need) {
            return skip(
                format!(
                    "its rustc {} is older than the crate's rust-version {}",
                    have.text, need.text
                ),
                better_toolchain(candidate),
            );
        }
    }
    if build_std {
        let known = unstable_flags(&candidate.bin_dir);
        let mut wanted = vec!["build-std", "build-std-features"];
        if json {
            wanted.push("json-target-spec");
        }
        if let Some(flag) = wanted.into_iter().find(|f| !known.iter().any(|k| k == f)) {
            let version = tool_version(&candidate.bin_dir.join("cargo"));
            return skip(
                format!("its {version} lacks -Z{flag}"),
                better_toolchain(candidate),
            );
        }
    } else if needs.c_library {
        let foreign = foreign_builtins(&prebuilt);
        if foreign > 0 {
            return skip(
                format!(
                    "its compiler_builtins holds {foreign} compiler-rt C objects not built for \
                     the target's float ABI"
                ),
                candidate.add_source(),
            );
        }
    }
    None
}

/// The command that gets a toolchain newer than `candidate`: the library source for the
/// default rustup toolchain when that one can build from it, else a current nightly with it.
fn better_toolchain(candidate: &Candidate) -> String {
    if candidate.name.starts_with("CARGO=") {
        return "unset CARGO".to_string();
    }
    if candidate.rustup.is_none() {
        return DEBIAN_FIX.to_string();
    }
    let default = rustup_toolchains().into_iter().find(|(_, d)| *d);
    if let Some((name, _)) = default.filter(|(n, _)| Some(n) != candidate.rustup.as_ref()) {
        if let Some(sysroot) = rustup_sysroot(&name) {
            let bin = sysroot.join("bin");
            let new_enough = match (rustc_version(&bin), crate_rust_version()) {
                (Some(have), Some(need)) => have.at_least(&need),
                _ => true,
            };
            let flags = unstable_flags(&bin);
            if new_enough && flags.iter().any(|f| f == "json-target-spec") {
                return format!("rustup component add rust-src --toolchain {name}");
            }
        }
    }
    "rustup toolchain install nightly --profile minimal --component rust-src".to_string()
}

/// Prints a skip line once per process (a run asks for one target many times).
fn skipped(why: &str) {
    static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if !seen.iter().any(|s| s == why) {
        eprintln!("toolchain skipped: {why}");
        seen.push(why.to_string());
    }
}

/// The last candidate: the default rustup toolchain after rustup adds the target's prebuilt
/// library (where the build may take it and rustup ships the target) or the library source.
fn install_for(target: &str, needs: &Needs) -> Option<(Candidate, bool)> {
    let (name, _) = rustup_toolchains().into_iter().find(|(_, d)| *d)?;
    let sysroot = rustup_sysroot(&name)?;
    let candidate = Candidate {
        name: format!("rustup toolchain {name}"),
        rustup: Some(name.clone()),
        bin_dir: sysroot.join("bin"),
        sysroot,
    };
    let rustup = |args: &[&str], why: &str| {
        eprintln!("toolchain: rustup {} ({why})", args.join(" "));
        Command::new("rustup")
            .args(args)
            .env_remove("RUSTUP_TOOLCHAIN")
            .status()
            .is_ok_and(|s| s.success())
    };
    let name_of = target_name(target);
    if needs.build_std != Some(true) && !needs.c_library && !target.ends_with(".json") {
        let shipped = Command::new("rustup")
            .args(["target", "list", "--toolchain", &name])
            .env_remove("RUSTUP_TOOLCHAIN")
            .output()
            .is_ok_and(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .any(|l| l.split_whitespace().next() == Some(target))
            });
        if shipped
            && rustup(
                &["target", "add", target, "--toolchain", &name],
                &format!("the prebuilt core for {name_of}"),
            )
        {
            if let Fit::Yes = fitness(&candidate, target, false, needs) {
                return Some((candidate, false));
            }
        }
    }
    if needs.build_std == Some(false) {
        return None;
    }
    // Only where the toolchain can use the source: its version and -Z flags first.
    if let Some(why) = unfit(&candidate, target, true, needs) {
        skipped(&why);
        return None;
    }
    if has_library_source(&candidate.sysroot)
        || !rustup(
            &["component", "add", "rust-src", "--toolchain", &name],
            &format!("the library source, to build core for {name_of} with -Zbuild-std"),
        )
    {
        return None;
    }
    match fitness(&candidate, target, true, needs) {
        Fit::Yes => Some((candidate, true)),
        Fit::Unfit(why) => {
            skipped(&why);
            None
        }
        Fit::Lacks => None,
    }
}

/// A `major.minor.patch` version, `pre` when a nightly or beta of it.
#[derive(Debug)]
struct Version {
    numbers: [u32; 3],
    pre: bool,
    text: String,
}

impl Version {
    /// `1.89.0-nightly` from `rustc 1.89.0-nightly (60dabef95 2025-05-19)`, or `1.87`.
    fn parse(text: &str) -> Option<Version> {
        let (numbers_text, pre) = match text.split_once('-') {
            Some((n, _)) => (n, true),
            None => (text, false),
        };
        let mut numbers = [0; 3];
        for (i, part) in numbers_text.split('.').enumerate() {
            *numbers.get_mut(i)? = part.parse().ok()?;
        }
        Some(Version {
            numbers,
            pre,
            text: text.to_string(),
        })
    }

    /// Whether this is `need` or later; a nightly or beta of `need` is not (it may predate
    /// what `need` stabilised).
    fn at_least(&self, need: &Version) -> bool {
        self.numbers > need.numbers || (self.numbers == need.numbers && !self.pre)
    }
}

/// The version of the `rustc` in `bin`.
fn rustc_version(bin: &Path) -> Option<Version> {
    let text = tool_version(&bin.join("rustc"));
    Version::parse(text.split_whitespace().nth(1)?)
}

/// The crate's `rust-version` (its Cargo.toml), the oldest rustc it builds with.
fn crate_rust_version() -> Option<Version> {
    let manifest = std::fs::read_to_string(repo_root().join("Cargo.toml")).ok()?;
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("rust-version"))?;
    Version::parse(line.split('"').nth(1)?)
}

/// `<tool> --version`'s first line, or what went wrong.
fn tool_version(tool: &Path) -> String {
    match tool_command(tool).arg("--version").output() {
        Ok(o) => String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap_or("no version")
            .to_string(),
        Err(e) => format!("{}: {e}", tool.display()),
    }
}

/// The `-Z` flags the cargo in `bin` knows, as `cargo -Z help` lists them (with
/// `RUSTC_BOOTSTRAP=1`, as the builds run it).
fn unstable_flags(bin: &Path) -> Vec<String> {
    let Ok(output) = tool_command(&bin.join("cargo"))
        .args(["-Z", "help"])
        .env("RUSTC_BOOTSTRAP", "1")
        .output()
    else {
        return Vec::new();
    };
    flags_listed(&String::from_utf8_lossy(&output.stdout))
}

/// The flags in `cargo -Z help`'s list (`    -Z build-std   Enable Cargo to ...`).
fn flags_listed(help: &str) -> Vec<String> {
    help.lines()
        .filter_map(|l| l.trim_start().strip_prefix("-Z "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// How many members of the prebuilt `compiler_builtins` in `lib` rustc did not compile (its
/// objects are `*.rcgu.o`; compiler-rt's C objects are named after their source file).
fn foreign_builtins(lib: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(lib) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libcompiler_builtins-"))
        })
        .filter_map(|rlib| Command::new("ar").arg("t").arg(rlib).output().ok())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|m| m.ends_with(".o") && !m.ends_with(".rcgu.o"))
                .count()
        })
        .sum()
}

/// A command for a toolchain's own binary, without the variables that would make a rustup
/// proxy or the outer cargo pick another toolchain.
fn tool_command(tool: &Path) -> Command {
    let mut cmd = Command::new(tool);
    cmd.env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("CARGO");
    cmd
}

/// The error for a target no candidate can build: what was tried and how to fix it.
fn missing_toolchain(target: &str, candidates: &[Candidate], needs: &Needs) -> String {
    let tried: Vec<&str> = candidates.iter().map(|c| c.name.as_str()).collect();
    let mut fixes = Vec::new();
    if !target.ends_with(".json") && needs.build_std != Some(true) && !needs.c_library {
        fixes.push(format!(
            "`rustup target add {target}` (prebuilt standard library)"
        ));
    }
    if needs.build_std == Some(false) {
        fixes.push(
            "core built from source instead (no --prebuilt; build.sh: no BUILD_STD=0)".to_string(),
        );
    } else {
        fixes.push("`rustup component add rust-src` (library source for -Zbuild-std)".to_string());
    }
    fixes.push(format!(
        "`{DEBIAN_FIX}` (Debian 12: rustc and cargo in /usr/bin with the library source)"
    ));
    format!(
        "no toolchain can build for {target}: tried {} (none has {} it can use; skipped ones \
         are named above). Install one of: {}",
        if tried.is_empty() {
            "nothing (no rustup, no /usr/bin/cargo)".to_string()
        } else {
            tried.join(", ")
        },
        if needs.build_std == Some(false) {
            "the target's prebuilt standard library"
        } else if needs.build_std == Some(true) || needs.c_library || target.ends_with(".json") {
            "the library source"
        } else {
            "the target's standard library or the library source"
        },
        fixes.join("; or ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nightly_of_the_rust_version_is_older_than_it() {
        let need = Version::parse("1.87").unwrap();
        assert!(Version::parse("1.89.0-nightly").unwrap().at_least(&need));
        assert!(Version::parse("1.87.0").unwrap().at_least(&need));
        assert!(Version::parse("1.87.1").unwrap().at_least(&need));
        assert!(!Version::parse("1.87.0-nightly").unwrap().at_least(&need));
        assert!(!Version::parse("1.86.0").unwrap().at_least(&need));
        assert!(Version::parse("x.y").is_none());
    }

    #[test]
    fn the_flags_are_read_from_cargo_z_help() {
        let help = "Available unstable (nightly-only) flags:\n\n    -Z build-std                   \
                    Enable Cargo to compile the standard library\n    -Z json-target-spec            \
                    Enable `.json` target spec files\n\nRun with `cargo -Z [FLAG] [COMMAND]`\n";
        assert_eq!(flags_listed(help), ["build-std", "json-target-spec"]);
    }

    #[test]
    fn the_crate_names_its_rust_version() {
        assert!(crate_rust_version().is_some());
    }
}
