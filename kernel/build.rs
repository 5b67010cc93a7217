//! Passes the arch's linker script (`arch/<arch>/boot/link.ld`) to the linker.

fn main() {
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86_64",
        Ok("aarch64") => "aarch64",
        Ok("x86") => "i386",
        // Host `cargo check` and friends: nothing to link.
        _ => return,
    };
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let script = format!("{dir}/../arch/{arch}/boot/link.ld");
    println!("cargo:rustc-link-arg=-T{script}");
    println!("cargo:rerun-if-changed={script}");
    println!("cargo:rerun-if-changed=build.rs");
}
