//! `cargo xtask cross` (being written): for now, `cargo xtask cross toolchains` prints the
//! toolchain found for every cross target.

use crate::toolchain::{self, Std};

/// The targets `cargo xtask cross` builds for.
fn targets() -> Vec<String> {
    vec![
        "aarch64-unknown-linux-gnu".into(),
        "i686-unknown-linux-gnu".into(),
        "x86_64-unknown-none".into(),
        "aarch64-unknown-none".into(),
        toolchain::i386_bare_metal_spec().display().to_string(),
    ]
}

pub fn run(_args: &[String]) -> Result<(), String> {
    for target in targets() {
        let tc = toolchain::cargo_for(&target)?;
        println!("{target}: {}", tc.description);
        println!("  {:?}", tc.cargo("build", Std::Core));
    }
    for t in ["aarch64-unknown-linux-gnu", "i686-unknown-linux-gnu"] {
        println!("{t} runner: {}", toolchain::qemu_user_runner(t)?);
    }
    Ok(())
}
