//! Checks `protocol.h` (the C kernels' copy of the protocol's numbers) against this crate:
//! writes `$OUT_DIR/protocol_h.rs`, one compile-time assertion per `#define PROTO_<NAME>
//! <number>` of the header, which `src/lib.rs` includes. `PROTO_KERNEL_<FIELD>` and
//! `PROTO_FIRMWARE_<FIELD>` are the fields of the `KERNEL` and `FIRMWARE` profiles, any other
//! `PROTO_<NAME>` is the constant `<NAME>`: a number that differs fails the build, and a name
//! with no Rust counterpart fails it too (no such field or constant).

use std::fmt::Write;

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let header = format!("{dir}/protocol.h");
    println!("cargo:rerun-if-changed={header}");
    println!("cargo:rerun-if-changed=build.rs");
    let text = std::fs::read_to_string(&header).expect("testbeds/protocol/protocol.h");
    let mut out = String::new();
    let mut checked = 0;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some("#define"), Some(name), Some(value), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            continue;
        };
        // Only plain numbers: the function-like macros (`PROTO_SUM0(n, adds)`) are formulas.
        let (Some(name), Ok(value)) = (name.strip_prefix("PROTO_"), value.parse::<u64>()) else {
            continue;
        };
        let rust = match name.split_once('_') {
            Some((profile @ ("KERNEL" | "FIRMWARE"), field)) => {
                format!("{profile}.{}", field.to_lowercase())
            }
            _ => name.to_string(),
        };
        writeln!(
            out,
            "const _: () = assert!({rust} == {value}, \
             \"protocol.h: PROTO_{name} is {value}, but src/lib.rs's {rust} is not\");"
        )
        .unwrap();
        checked += 1;
    }
    assert!(
        checked > 0,
        "no `#define PROTO_<NAME> <number>` in {header}"
    );
    let path = format!(
        "{}/protocol_h.rs",
        std::env::var("OUT_DIR").expect("set by cargo")
    );
    std::fs::write(path, out).expect("write $OUT_DIR/protocol_h.rs");
}
