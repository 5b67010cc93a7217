//! The Cortex-M firmware runs of `cargo xtask qemu` (`testbeds/firmware/`, boot code and
//! linker scripts in its `boot/`), on `qemu-system-arm`:
//!
//! | run | QEMU | image |
//! |---|---|---|
//! | `thumbv6m` | `-M microbit` (nRF51822: Cortex-M0, one core) | `thumbv6m-none-eabi` |
//! | `thumbv7em` | `-M mps2-an386` (Cortex-M4F, one core) | `thumbv7em-none-eabihf` |
//! | `thumbv8m-dual` | `-M mps2-an521 -smp 2` (SSE-200: two Cortex-M33) | `thumbv8m.main-none-eabihf` |
//! | `*-broken` | as above | the same with `--cfg pcpu_counter_broken="portable_unprotected_add"` in its rustflags (the crate's portable add without protection): must print `FAIL timer` |
//! | `thumbv8m-dual-bringup-ncpus` | as `thumbv8m-dual` | the firmware crate rebuilt with `PCPU_TESTBED_BROKEN_BRINGUP=ncpus` (its zone made for one CPU): the second core's bring-up check must stop it |
//!
//! Each kind (`cargo xtask qemu thumbv6m`, ...) builds and boots its image, then builds it
//! broken in a target folder of its own (`<kind>-broken`: its rustflags differ, and target
//! rustflags reach `core`, so a shared folder would rebuild both builds every run) and boots
//! that. Output is semihosting `SYS_WRITE0` on a stdio chardev; the exit status is the
//! semihosting `SYS_EXIT` reason (0 pass, 1 fail). Judged like the kernels' runs.

use std::path::PathBuf;

use super::{broken_cfg, Boot, LINK_FLAGS};
use crate::toolchain::{self, Std};

/// The kinds this module adds to `cargo xtask qemu`.
pub const KINDS: [&str; 3] = ["thumbv6m", "thumbv7em", "thumbv8m-dual"];

/// The GNU linker for every image, and its apt package.
const LINKER: (&str, &str) = ("arm-none-eabi-ld", "binutils-arm-none-eabi");

/// QEMU arguments of every M-profile run: no display, no serial, no monitor; semihosting on
/// (target=native: QEMU handles the calls itself) with its console on stdout.
pub const MACHINE_ARGS: &[&str] = &[
    "-display",
    "none",
    "-serial",
    "none",
    "-monitor",
    "none",
    "-chardev",
    "stdio,id=semihosting",
    "-semihosting-config",
    "enable=on,target=native,chardev=semihosting",
];

/// One firmware image build.
pub struct FirmwareBuild {
    pub name: &'static str,
    target: &'static str,
    /// Folder under `target/qemu/`: the run's name (the broken build has its own).
    dir: &'static str,
    /// Whether the image is built with `--cfg pcpu_counter_broken="portable_unprotected_add"`.
    broken: bool,
    /// A bring-up broken on purpose: `PCPU_TESTBED_BROKEN_BRINGUP` for the firmware crate
    /// alone (`ncpus`: the zone made for one CPU), sharing the normal build's folder.
    bringup: Option<&'static str>,
}

impl FirmwareBuild {
    pub fn require_tools(&self) -> Result<(), String> {
        toolchain::cargo_for(self.target)?;
        toolchain::require_tool(LINKER.0, LINKER.1)?;
        Ok(())
    }

    /// Builds the image and returns the path of its ELF.
    pub fn build(&self) -> Result<PathBuf, String> {
        let root = toolchain::repo_root();
        let mut tc = toolchain::cargo_for(self.target)?;
        let linker = toolchain::require_tool(LINKER.0, LINKER.1)?;
        let key = tc.target_env("LINKER");
        tc.set_env(&key, &linker.to_string_lossy());
        let target_dir = root.join("target/qemu").join(self.dir);
        let broken = if self.broken {
            broken_cfg("portable_unprotected_add")
        } else {
            String::new()
        };
        let mut cmd = tc.cargo("build", Std::Core);
        cmd.arg("--release")
            .arg("--manifest-path")
            .arg(root.join("testbeds/firmware/Cargo.toml"))
            .env("CARGO_TARGET_DIR", &target_dir)
            .env_remove("PCPU_TESTBED_BROKEN_BRINGUP")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env(tc.target_env("RUSTFLAGS"), format!("{LINK_FLAGS} {broken}"));
        if let Some(value) = self.bringup {
            cmd.env("PCPU_TESTBED_BROKEN_BRINGUP", value);
        }
        println!(
            "[{}] building firmware for {}{} with {}",
            self.name,
            self.target,
            if self.broken {
                format!(" ({broken})")
            } else {
                String::new()
            },
            tc.description
        );
        let status = cmd
            .status()
            .map_err(|e| format!("cannot run cargo for the {} firmware: {e}", self.name))?;
        if !status.success() {
            return Err(format!(
                "building the {} firmware failed ({status})",
                self.name
            ));
        }
        Ok(target_dir.join(self.target).join("release/firmware"))
    }
}

/// The builds and boots of one kind: the image, then the broken image.
pub fn plan(kind: &str) -> Vec<(FirmwareBuild, Vec<Boot>)> {
    let (target, machine, banner, cpus): (_, &'static [&'static str], _, _) = match kind {
        "thumbv6m" => (
            "thumbv6m-none-eabi",
            &["-M", "microbit"],
            "microbit (nRF51822, Cortex-M0)",
            1,
        ),
        "thumbv7em" => (
            "thumbv7em-none-eabihf",
            &["-M", "mps2-an386"],
            "mps2-an386 (Cortex-M4F)",
            1,
        ),
        _ => (
            "thumbv8m.main-none-eabihf",
            &["-M", "mps2-an521", "-smp", "2"],
            "mps2-an521 (SSE-200, two Cortex-M33)",
            2,
        ),
    };
    let (name, broken_name, expect, broken_expect): (&'static str, &'static str, _, _) = match kind
    {
        "thumbv6m" => (
            "thumbv6m",
            "thumbv6m-broken",
            "on microbit (nRF51822, Cortex-M0): portable (plain add under local protection)",
            "on microbit (nRF51822, Cortex-M0): portable (plain add WITHOUT protection",
        ),
        "thumbv7em" => (
            "thumbv7em",
            "thumbv7em-broken",
            "on mps2-an386 (Cortex-M4F): portable (plain add under local protection)",
            "on mps2-an386 (Cortex-M4F): portable (plain add WITHOUT protection",
        ),
        _ => (
            "thumbv8m-dual",
            "thumbv8m-dual-broken",
            "on mps2-an521 (SSE-200, two Cortex-M33): portable (plain add under local protection)",
            "on mps2-an521 (SSE-200, two Cortex-M33): portable (plain add WITHOUT protection",
        ),
    };
    debug_assert!(expect.contains(banner) && broken_expect.contains(banner));
    let boot = |name, expect, must_fail| Boot {
        name,
        qemu: "qemu-system-arm",
        package: "qemu-system-arm",
        args: machine,
        pass_status: 0,
        cpus,
        expect,
        must_fail,
    };
    let mut plan = vec![
        (
            FirmwareBuild {
                name,
                target,
                dir: name,
                broken: false,
                bringup: None,
            },
            vec![boot(name, expect, None)],
        ),
        (
            FirmwareBuild {
                name: broken_name,
                target,
                dir: broken_name,
                broken: true,
                bringup: None,
            },
            vec![boot(broken_name, broken_expect, Some("FAIL timer"))],
        ),
    ];
    if cpus == 2 {
        // The dual-core image with its zone made for one CPU: the second core's bring-up
        // check must stop it.
        let run = "thumbv8m-dual-bringup-ncpus";
        plan.push((
            FirmwareBuild {
                name: run,
                target,
                dir: name,
                broken: false,
                bringup: Some("ncpus"),
            },
            vec![boot(
                run,
                expect,
                Some("FAIL bring-up: CPU 1 is brought up, but the zone was made for 1 CPUs"),
            )],
        ));
    }
    plan
}
