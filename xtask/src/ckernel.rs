//! The C-only test kernels (`testbeds/ckernel/`, its glue in `boot/<arch>/ckernel.c`): built
//! with the cross gcc and GNU ld against `libpcpu_counter.a` (`testbeds/capi-kernel/build.sh`)
//! and the header, with no Rust of their own, for `cargo xtask qemu c-x86_64 | c-aarch64 |
//! c-i386 | c-riscv64`. They boot through the Rust kernels' `entry.s` (x86_64 also
//! `vectors.s`) and `link.ld`, used from `testbeds/kernel/boot/<arch>/`, not copied; the
//! x86_64 and i386 glue share `boot/x86/pc.h` (COM1, exit, fw_cfg, the local APIC).
//!
//! Each arch also builds a broken kernel: the same sources with `-include
//! tests/c/broken_add.h`, whose `counter_u64_add` is a load, an add and a store. Its run must
//! fail the timer check; `qemu.rs` judges it so. x86_64 and riscv64 also build one with
//! `-DPCPU_TESTBED_BROKEN_GROW` (the kernel's chunk allocator ignores `align`), whose run must
//! fail the growth check.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::toolchain;

/// One C kernel build.
pub struct CBuild {
    /// Folder under `target/qemu/`.
    pub name: &'static str,
    /// The arch folder under `testbeds/ckernel/boot/` (the C glue) and under
    /// `testbeds/kernel/boot/` (the entry, interrupt stubs and linker script it shares).
    arch: &'static str,
    /// The Rust target `testbeds/capi-kernel/build.sh` builds the library for.
    lib_target: &'static str,
    /// The C compiler, the linker and the apt packages that have them.
    cc: (&'static str, &'static str),
    ld: (&'static str, &'static str),
    /// Arch code-generation flags (kernel ABI: no FP/SIMD registers, no red zone, ...).
    cflags: &'static [&'static str],
    /// Whether `counter_u64_add` is the broken one.
    pub broken: bool,
    /// A bring-up broken on purpose: main.c's `PCPU_TESTBED_BROKEN_BRINGUP_<VALUE>`
    /// (`NCPUS`: the zone made for one CPU; `SWAP`: CPUs 0 and 1 take each other's blocks).
    pub bringup: Option<&'static str>,
    /// Whether the kernel's chunk allocator ignores `align` (main.c's
    /// `PCPU_TESTBED_BROKEN_GROW`): the growth check must fail.
    pub broken_grow: bool,
}

impl CBuild {
    /// This build with its bring-up broken as `value` says, as the run `name`.
    pub fn with_bringup(self, name: &'static str, value: &'static str) -> CBuild {
        CBuild {
            name,
            bringup: Some(value),
            ..self
        }
    }

    /// This build with its chunk allocator broken (`-DPCPU_TESTBED_BROKEN_GROW`), as the run
    /// `name`.
    pub fn with_broken_grow(self, name: &'static str) -> CBuild {
        CBuild {
            name,
            broken_grow: true,
            ..self
        }
    }
}

/// Each CPU's stack in the C-only kernels: 1 << 12 = 4 KiB, as xv6's kernel stacks (the
/// library's calls must fit: docs/c.md, "Stack use"). The C glue sizes its AP stacks with it
/// (`-DCKERNEL_CPU_STACK`), the shared `entry.s` its boot and AP stacks (`--defsym
/// PCPU_CPU_STACK_SHIFT`), and main.c checks at the end that no CPU reached its stack's last
/// bytes.
const CPU_STACK_SHIFT: u32 = 12;

const COMMON_CFLAGS: &[&str] = &[
    "-std=c11",
    "-O2",
    "-ffreestanding",
    "-fno-pic",
    "-fno-pie",
    "-fno-stack-protector",
    "-fno-asynchronous-unwind-tables",
    // As xv6 and most teaching kernels build: the i386 CX8 loop must compile with ebp taken.
    "-fno-omit-frame-pointer",
    "-Wall",
    "-Wextra",
    "-Werror",
];

/// The portable sources, then the arch's glue.
const SOURCES: &[&str] = &[
    "testbeds/ckernel/main.c",
    "tests/c/freebsd_style.c",
    "tests/c/kernel_check.c",
];

pub fn x86_64(broken: bool) -> CBuild {
    CBuild {
        name: if broken {
            "c-x86_64-broken"
        } else {
            "c-x86_64"
        },
        arch: "x86_64",
        lib_target: "x86_64-unknown-none",
        cc: ("gcc", "gcc"),
        ld: ("ld", "binutils"),
        cflags: &["-mno-red-zone", "-mgeneral-regs-only", "-mcmodel=small"],
        broken,
        bringup: None,
        broken_grow: false,
    }
}

pub fn aarch64(broken: bool) -> CBuild {
    CBuild {
        name: if broken {
            "c-aarch64-broken"
        } else {
            "c-aarch64"
        },
        arch: "aarch64",
        lib_target: "aarch64-unknown-none-softfloat",
        cc: ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu"),
        ld: ("aarch64-linux-gnu-ld", "binutils-aarch64-linux-gnu"),
        // MMU off: Device memory, so no unaligned accesses; atomics inline, not libgcc's.
        cflags: &[
            "-mgeneral-regs-only",
            "-mstrict-align",
            "-mno-outline-atomics",
        ],
        broken,
        bringup: None,
        broken_grow: false,
    }
}

pub fn i386(broken: bool) -> CBuild {
    CBuild {
        name: if broken { "c-i386-broken" } else { "c-i386" },
        arch: "i386",
        // The JSON spec arch/i386/i586-unknown-none.json (build.sh maps the name).
        lib_target: "i586-unknown-none",
        cc: ("i686-linux-gnu-gcc", "gcc-i686-linux-gnu"),
        ld: ("i686-linux-gnu-ld", "binutils-i686-linux-gnu"),
        // i486: the kernel's own code must run on a 486 (a 64-bit __atomic would be a call
        // that does not link, not a cmpxchg8b that faults); the header's loop is asm, gated
        // by pcpu_cx8 at run time.
        cflags: &["-march=i486", "-mgeneral-regs-only"],
        broken,
        bringup: None,
        broken_grow: false,
    }
}

/// riscv64: the library for `riscv64imac-unknown-none-elf` (lp64, soft float, the Rust
/// riscv64 kernel's target; no FP instruction anywhere, so the FPU can stay off), the C
/// compiled to match (`-march=rv64imac_zicsr_zifencei -mabi=lp64`: gcc 12 wants the CSR extension named; the lp64d `riscv64gc` library would need
/// `-march=rv64gc -mabi=lp64d`), medany for a kernel linked at 0x80200000.
pub fn riscv64(broken: bool) -> CBuild {
    CBuild {
        name: if broken {
            "c-riscv64-broken"
        } else {
            "c-riscv64"
        },
        arch: "riscv64",
        lib_target: "riscv64imac-unknown-none-elf",
        cc: ("riscv64-linux-gnu-gcc", "gcc-riscv64-linux-gnu"),
        ld: ("riscv64-linux-gnu-ld", "binutils-riscv64-linux-gnu"),
        cflags: &[
            "-march=rv64imac_zicsr_zifencei",
            "-mabi=lp64",
            "-mcmodel=medany",
        ],
        broken,
        bringup: None,
        broken_grow: false,
    }
}

impl CBuild {
    /// The tools, checked before anything is built.
    pub fn require_tools(&self) -> Result<(), String> {
        toolchain::require_tool(self.cc.0, self.cc.1)?;
        toolchain::require_tool(self.ld.0, self.ld.1)?;
        toolchain::require_tool("bash", "bash")?;
        Ok(())
    }

    /// Builds the library (once per target), compiles and links the kernel; returns its ELF.
    pub fn build(&self) -> Result<PathBuf, String> {
        let root = toolchain::repo_root();
        println!(
            "[{}] building libpcpu_counter.a for {}",
            self.name, self.lib_target
        );
        // build.sh always builds core from source (-Zbuild-std, with compiler-builtins' mem
        // functions), so it needs a toolchain with the library source even where a prebuilt
        // core for the target is installed.
        // build.sh's own default (Debian's cargo) where it has the library source: the one
        // .ci/capi.sh builds with, so that CI builds each library (and its core) once.
        let cargo = if Path::new(DEBIAN_CARGO).is_file() && Path::new(DEBIAN_CORE_SOURCE).is_file()
        {
            PathBuf::from(DEBIAN_CARGO)
        } else {
            toolchain::source_built_for(self.lib_target)
                .ok_or_else(|| {
                    format!(
                        "no toolchain has the library source to build core for {}: \
                         apt-get install rustc-web cargo-web rust-web-src",
                        self.lib_target
                    )
                })?
                .cargo_program()
        };
        run(Command::new("bash")
            .arg(root.join("testbeds/capi-kernel/build.sh"))
            .arg(self.lib_target)
            .env("CARGO", cargo)
            .env_remove("RUSTUP_TOOLCHAIN")
            .env_remove("RUSTC")
            .env_remove("RUSTC_WRAPPER"))?;
        let lib = root
            .join("target/capi-lib")
            .join(self.lib_target)
            .join("libpcpu_counter.a");
        let out = root.join("target/qemu").join(self.name);
        std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        // The C glue is this bed's; the entry, stubs and linker script are the Rust kernels'.
        let glue = root
            .join("testbeds/ckernel/boot")
            .join(self.arch)
            .join("ckernel.c");
        let boot = root.join("testbeds/kernel/boot").join(self.arch);
        let mut objects = Vec::new();
        let sources = SOURCES.iter().map(|s| root.join(s)).chain([glue]);
        for source in sources {
            let object = out.join(object_name(&source));
            let mut cc = Command::new(self.cc.0);
            cc.args(COMMON_CFLAGS).args(self.cflags);
            // testbeds/protocol: protocol.h, the check protocol the Rust beds run too.
            for dir in [
                "include",
                "testbeds/ckernel",
                "testbeds/protocol",
                "tests/c",
            ] {
                cc.arg("-I").arg(root.join(dir));
            }
            if self.broken {
                cc.arg("-include").arg(root.join("tests/c/broken_add.h"));
            }
            if let Some(value) = self.bringup {
                cc.arg(format!(
                    "-DPCPU_TESTBED_BROKEN_BRINGUP_{}",
                    value.to_uppercase()
                ));
            }
            if self.broken_grow {
                cc.arg("-DPCPU_TESTBED_BROKEN_GROW");
            }
            cc.arg(format!("-DCKERNEL_CPU_STACK={}", 1u32 << CPU_STACK_SHIFT));
            run(cc.arg("-c").arg(&source).arg("-o").arg(&object))?;
            objects.push(object);
        }
        // The Rust kernel's own assembly: the boot entry (and x86_64's interrupt stubs).
        for asm in ["entry.s", "vectors.s"] {
            let source = boot.join(asm);
            if source.exists() {
                let object = out.join(object_name(&source));
                run(Command::new(self.cc.0)
                    .args(self.cflags)
                    .arg(format!("-Wa,--defsym,PCPU_CPU_STACK_SHIFT={CPU_STACK_SHIFT}"))
                    .arg("-c")
                    .arg(&source)
                    .arg("-o")
                    .arg(&object))?;
                objects.push(object);
            }
        }
        let kernel = out.join("kernel");
        run(Command::new(self.ld.0)
            .args([
                "-nostdlib",
                "-static",
                "-z",
                "max-page-size=0x1000",
                "-z",
                "noexecstack",
            ])
            .arg("--no-warn-rwx-segments")
            .arg("-T")
            .arg(boot.join("link.ld"))
            .arg("-o")
            .arg(&kernel)
            .args(&objects)
            .arg(&lib))?;
        Ok(kernel)
    }
}

/// `testbeds/capi-kernel/build.sh`'s default cargo, and the library source it needs.
const DEBIAN_CARGO: &str = "/usr/bin/cargo";
const DEBIAN_CORE_SOURCE: &str = "/usr/lib/rustlib/src/rust/library/core/src/lib.rs";

/// `dir_file.o`, so that two sources with one file name do not collide.
fn object_name(source: &Path) -> String {
    let dir = source
        .parent()
        .and_then(Path::file_name)
        .map_or(String::new(), |d| d.to_string_lossy().into_owned());
    let stem = source
        .file_stem()
        .map_or(String::new(), |s| s.to_string_lossy().into_owned());
    format!("{dir}_{stem}.o")
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed ({status})"))
    }
}
