//! Finding a toolchain that can build for a target, and the tools that link and run it.
//!
//! [`cargo_for`] looks, in this order, for
//! 1. a rustup toolchain with the target's standard library installed (`rustup target add`),
//!    the default toolchain first;
//! 2. a rustup toolchain with the library source (`rustup component add rust-src`), used with
//!    `-Zbuild-std` and `RUSTC_BOOTSTRAP=1`;
//! 3. Debian's `/usr/bin/cargo` and `/usr/bin/rustc` with the library source under
//!    `/usr/lib/rustlib/src` (packages `cargo-web rustc-web rust-web-src`), used the same way
//!    with `/usr/bin` first on `PATH` (rustup's proxies usually come first).
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

    /// The sysroot this toolchain's `rustc` uses (the parent of its `bin`).
    pub fn sysroot(&self) -> PathBuf {
        self.bin_dir.parent().unwrap_or(&self.bin_dir).to_path_buf()
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

/// Finds a toolchain that can build for `target` (a triple or a JSON spec path), with the
/// target's linker configured. The error says what is missing and how to install it.
pub fn cargo_for(target: &str) -> Result<Toolchain, String> {
    let json = target.ends_with(".json");
    if json && !Path::new(target).is_file() {
        return Err(format!("target spec {target} does not exist"));
    }
    let candidates = candidates();
    let mut found = None;
    // Prebuilt standard libraries first: no -Zbuild-std, no RUSTC_BOOTSTRAP.
    if !json {
        found = candidates
            .iter()
            .find(|c| {
                c.sysroot
                    .join("lib/rustlib")
                    .join(target)
                    .join("lib")
                    .is_dir()
            })
            .map(|c| (c, false));
    }
    if found.is_none() {
        found = candidates
            .iter()
            .find(|c| has_library_source(&c.sysroot))
            .map(|c| (c, true));
    }
    let Some((candidate, build_std)) = found else {
        return Err(missing_toolchain(target, &candidates));
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
        bin_dir: candidate.sysroot.join("bin"),
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
/// the library source.
pub fn source_built_for(target: &str) -> Option<Toolchain> {
    let candidate = candidates()
        .into_iter()
        .find(|c| has_library_source(&c.sysroot))?;
    Some(Toolchain {
        target: target.to_string(),
        description: format!(
            "{} (standard library built from source with -Zbuild-std)",
            candidate.name
        ),
        bin_dir: candidate.sysroot.join("bin"),
        build_std: true,
        env: Vec::new(),
    })
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
#[derive(Debug)]
struct Candidate {
    /// For messages: `rustup toolchain stable-x86_64-unknown-linux-gnu` or `Debian /usr/bin`.
    name: String,
    /// The sysroot, holding `bin/{cargo,rustc}` and `lib/rustlib`.
    sysroot: PathBuf,
}

/// Every rustup toolchain (the default first) and Debian's `/usr`, each with a cargo.
fn candidates() -> Vec<Candidate> {
    let mut out: Vec<Candidate> = Vec::new();
    let mut push = |name: String, sysroot: PathBuf| {
        let usable = sysroot.join("bin/cargo").is_file() && sysroot.join("bin/rustc").is_file();
        if usable && !out.iter().any(|c| c.sysroot == sysroot) {
            out.push(Candidate { name, sysroot });
        }
    };
    for name in rustup_toolchains() {
        if let Some(sysroot) = rustup_sysroot(&name) {
            push(format!("rustup toolchain {name}"), sysroot);
        }
    }
    push(
        "Debian /usr/bin/cargo and /usr/bin/rustc".into(),
        "/usr".into(),
    );
    out
}

/// The names of the installed rustup toolchains, the default one first; empty without rustup.
fn rustup_toolchains() -> Vec<String> {
    let Ok(output) = Command::new("rustup").args(["toolchain", "list"]).output() else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let mut names: Vec<(bool, String)> = text
        .lines()
        .filter_map(|line| {
            let name = line.split_whitespace().next()?;
            Some((line.contains("default"), name.to_string()))
        })
        .collect();
    names.sort_by_key(|(default, _)| !*default);
    names.into_iter().map(|(_, name)| name).collect()
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

/// The error for a target no candidate can build: what was tried and how to fix it.
fn missing_toolchain(target: &str, candidates: &[Candidate]) -> String {
    let tried: Vec<&str> = candidates.iter().map(|c| c.name.as_str()).collect();
    let mut fixes = Vec::new();
    if !target.ends_with(".json") {
        fixes.push(format!(
            "`rustup target add {target}` (prebuilt standard library)"
        ));
    }
    fixes.push("`rustup component add rust-src` (library source for -Zbuild-std)".to_string());
    fixes.push(
        "`apt-get install rustc-web cargo-web rust-web-src` (Debian 12: rustc and cargo in \
         /usr/bin with the library source)"
            .to_string(),
    );
    format!(
        "no toolchain can build for {target}: tried {} (none has the target's standard \
         library or the library source). Install one of: {}",
        if tried.is_empty() {
            "nothing (no rustup, no /usr/bin/cargo)".to_string()
        } else {
            tried.join(", ")
        },
        fixes.join("; or ")
    )
}
