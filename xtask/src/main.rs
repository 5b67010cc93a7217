//! `cargo xtask <command>`: the project's build and test tooling, in plain stable Rust.
//!
//! - `cargo xtask cross [--only <step>]`: the host suite on aarch64, riscv64 and i686 (under
//!   qemu-user), and no_std builds for the bare-metal targets.
//! - `cargo xtask qemu [<kernel>|all]`: builds and boots the QEMU test kernels (Rust, C-only
//!   with the C library, and the Cortex-M firmware), each with its broken builds; the usage
//!   line lists the kernels (`qemu::usage`).
//! - `cargo xtask bench [--quick] [--from FILE] [--docs DIR]`: runs the benchmarks and fills
//!   docs/BENCHMARKS.md's generated blocks (and docs/throughput.svg).
//! - `cargo xtask stack [--markdown] [target ...]`: the worst-case stack of every function of
//!   the C libraries under `target/capi-lib/`, callees included, against the stated bounds.
//! - `cargo xtask verify [--only <step>]`: the loom models (each against its broken variants),
//!   ThreadSanitizer on the simulation suite, Miri on the portable core (or the next best),
//!   and the property tests and their longer fuzz run.
//! - `cargo xtask pins [TARGET PROFILE]`: the add paths' instructions, built as a kernel
//!   builds them in every profile it uses (release; dev at opt-level 3, incremental; each with
//!   and without debug info) for the bare-metal targets (`cargo xtask cross` runs each pair).
//! - `cargo xtask toolchain [--c-library] [--build-std|--prebuilt] [--cargo <path>] <target>`:
//!   the toolchain that builds for a target, for scripts (`testbeds/capi-kernel/build.sh`).

mod bench;
mod ckernel;
mod cross;
mod pins;
mod qemu;
mod stack;
mod toolchain;
mod verify;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (command, rest) = match args.split_first() {
        Some((c, rest)) => (c.as_str(), rest),
        None => ("help", &[][..]),
    };
    let result = match command {
        "cross" => cross::run(rest),
        "qemu" => qemu::run(rest),
        "bench" => bench::run(rest),
        "verify" => verify::run(rest),
        "stack" => stack::run(rest),
        "pins" => pins::run(rest),
        "toolchain" => toolchain::run(rest),
        _ => {
            eprintln!(
                "usage: cargo xtask <cross [--only <step>] | {} | bench [--quick] [--from FILE] [--docs DIR] | verify [--only <step>] | \
                 stack [--markdown] [target ...] | pins [TARGET PROFILE] | toolchain [--c-library] [--build-std|--prebuilt] \
                 [--cargo <path>] <target>>",
                qemu::usage()
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask {command}: {message}");
            ExitCode::FAILURE
        }
    }
}
