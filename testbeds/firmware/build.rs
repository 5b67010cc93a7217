//! Passes the machine's linker script (`boot/<machine>.ld`, in this bed) to the linker: one
//! machine per target.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(fw_dual)");
    // src/main.rs reads it with `option_env!` (a bring-up broken on purpose).
    println!("cargo:rerun-if-env-changed=PCPU_TESTBED_BROKEN_BRINGUP");
    println!(
        "cargo::rustc-check-cfg=cfg(fw_machine, values(\"microbit\", \"mps2-an386\", \"mps2-an521\"))"
    );
    let target = std::env::var("TARGET").unwrap_or_default();
    let machine = match target.as_str() {
        "thumbv6m-none-eabi" => "microbit",
        "thumbv7em-none-eabihf" => "mps2-an386",
        "thumbv8m.main-none-eabihf" => "mps2-an521",
        // Host `cargo check` and friends: nothing to link.
        _ => return,
    };
    println!("cargo:rustc-cfg=fw_machine=\"{machine}\"");
    if machine == "mps2-an521" {
        println!("cargo:rustc-cfg=fw_dual");
    }
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let script = format!("{dir}/boot/{machine}.ld");
    // -L first: the machine's script INCLUDEs common.ld from there.
    println!("cargo:rustc-link-arg=-L{dir}/boot");
    println!("cargo:rustc-link-arg=-T{script}");
    println!("cargo:rerun-if-changed={script}");
    println!("cargo:rerun-if-changed={dir}/boot/common.ld");
    println!("cargo:rerun-if-changed=build.rs");
}
