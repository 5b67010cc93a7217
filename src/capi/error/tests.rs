// SPDX-License-Identifier: BSD-2-Clause
//! The C codes everywhere they are written out, against `src/error.rs`'s table: the constants
//! of `src/capi/error.rs`, docs/c.md's table of codes and the header's defines (name and
//! number, both ways), and what `code` and `pcpu_strerror` give.

use std::borrow::ToOwned;
use std::string::{String, ToString};
use std::vec::Vec;
use std::{format, vec};

use super::*;
use crate::error::table::{CODES, ERRORS};
use crate::{AddressSpace, AreaShape, Error};

/// The environment variable that makes the checks of written-out text rewrite it instead.
const BLESS: &str = "PCPU_COUNTER_BLESS";

/// `path` (from the crate's root) as text.
fn read(path: &str) -> String {
    let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// Checks that the lines of `path` between the line that starts with `begin` and the one that
/// starts with `end` are `want`; with `PCPU_COUNTER_BLESS` set, writes `want` there instead.
fn check_block(path: &str, begin: &str, end: &str, want: &str) {
    let text = read(path);
    let start = text
        .find(begin)
        .unwrap_or_else(|| panic!("{path}: no {begin:?}"));
    let start = start + text[start..].find('\n').expect("a line after the marker") + 1;
    let stop = start
        + text[start..]
            .find(end)
            .unwrap_or_else(|| panic!("{path}: no {end:?}"));
    if std::env::var_os(BLESS).is_some() {
        let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
        let new = format!("{}{want}{}", &text[..start], &text[stop..]);
        std::fs::write(&full, new).unwrap_or_else(|e| panic!("{full}: {e}"));
        return;
    }
    assert!(
        text[start..stop] == *want,
        "{path} differs from src/error.rs's table between {begin:?} and {end:?}: rewrite it \
         with `{BLESS}=1 cargo test --lib capi::error`; the table says:\n{want}"
    );
}

/// The variants whose C code is `name`, in the table's order.
fn variants_of(name: &str) -> Vec<&'static str> {
    ERRORS
        .iter()
        .filter(|&&(_, code)| code == name)
        .map(|&(variant, _)| variant)
        .collect()
}

/// `words` joined by `sep` into lines of at most 100 characters, each led by `lead`.
fn wrap(lead: &str, words: &[String], sep: &str) -> String {
    let mut out = String::new();
    let mut line = lead.to_owned();
    for (i, word) in words.iter().enumerate() {
        let word = if i + 1 < words.len() {
            format!("{word}{sep}")
        } else {
            format!("{word}.")
        };
        if line.len() > lead.len() && line.len() + 1 + word.len() > 100 {
            out += line.trim_end();
            out += "\n";
            line = lead.to_owned();
        }
        line += &word;
        line += " ";
    }
    out += line.trim_end();
    out += "\n";
    out
}

/// The `PCPU_E*` constants of `src/capi/error.rs`: each code's doc lines, the variants that
/// return it, and its number.
fn constants() -> String {
    let mut out = String::new();
    for c in CODES {
        for line in c.doc {
            out += &format!("///{line}\n");
        }
        let variants: Vec<String> = variants_of(c.name)
            .iter()
            .map(|v| format!("[`Error::{v}`](crate::Error::{v})"))
            .collect();
        if !variants.is_empty() {
            out += "///\n";
            let mut words = vec!["Rust:".to_string()];
            words.extend(variants);
            out += &wrap("/// ", &words, ",").replacen("Rust:,", "Rust:", 1);
        }
        out += &format!("pub const {}: c_int = {};\n", c.name, c.number);
    }
    out
}

/// docs/c.md's table of codes.
fn docs_table() -> String {
    let mut out =
        String::from("| Code | Value | `pcpu_strerror` | Rust `Error` |\n|---|---|---|---|\n");
    for c in CODES {
        let variants: Vec<String> = variants_of(c.name)
            .iter()
            .map(|v| format!("`{v}`"))
            .collect();
        out += &format!(
            "| `{}` | {} | {} | {} |\n",
            c.name,
            c.number,
            c.text.to_str().expect("UTF-8"),
            variants.join(", ")
        );
    }
    out
}

#[test]
fn constants_follow_the_table() {
    check_block(
        "src/capi/error.rs",
        "// BEGIN PCPU_E*",
        "// END PCPU_E*",
        &constants(),
    );
}

#[test]
fn docs_table_follows_the_table() {
    check_block(
        "docs/c.md",
        "<!-- BEGIN error codes",
        "<!-- END error codes",
        &docs_table(),
    );
}

/// The header's codes: every `#define PCPU_* N` with `N <= 0`, and whether it is under
/// `#if defined(PCPU_COUNTER_SIM)`.
fn header_codes(header: &str) -> Vec<(String, i32, bool)> {
    let mut conditions: Vec<&str> = Vec::new();
    let mut codes = Vec::new();
    for line in header.lines() {
        if line.starts_with("#if") {
            conditions.push(line);
        } else if line.starts_with("#endif") {
            conditions.pop();
        } else if let Some(define) = line.strip_prefix("#define PCPU_") {
            let mut parts = define.split_whitespace();
            let (Some(name), Some(value), None) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            match value.parse::<i32>() {
                Ok(number) if number <= 0 => {
                    let sim = conditions.iter().any(|c| c.contains("PCPU_COUNTER_SIM"));
                    codes.push((format!("PCPU_{name}"), number, sim));
                }
                _ => {}
            }
        }
    }
    codes
}

#[test]
fn header_defines_follow_the_table() {
    let header = header_codes(&read("include/pcpu_counter.h"));
    let product: Vec<(String, i32)> = header
        .iter()
        .filter(|&&(_, _, sim)| !sim)
        .map(|(name, number, _)| (name.clone(), *number))
        .collect();
    let table: Vec<(String, i32)> = CODES
        .iter()
        .map(|c| (c.name.to_string(), c.number))
        .collect();
    assert_eq!(
        product, table,
        "include/pcpu_counter.h's codes differ from src/error.rs's table: write the constants \
         (`{BLESS}=1 cargo test --lib capi::error`), then the header: cbindgen --config \
         cbindgen.toml --crate pcpu-counter --output include/pcpu_counter.h"
    );
    // The simulation's one code, declared for simulated builds only, is no product code.
    let sim: Vec<(String, i32)> = header
        .iter()
        .filter(|&&(_, _, sim)| sim)
        .map(|(name, number, _)| (name.clone(), *number))
        .collect();
    assert_eq!(sim, [("PCPU_EBOUND".to_string(), -13)]);
    assert!(CODES.iter().all(|c| c.number != -13));
}

/// The header check reads the defines it must: a table of two codes against a header that
/// has them, one more, one other number, and the simulation's.
#[test]
fn header_codes_reads_every_code() {
    let header = "#ifndef PCPU_COUNTER_H\n#define PCPU_OK 0\n// doc\n#define PCPU_ENOCPUS -1\n\
                  #define PCPU_EXPORT_DELTAS 1\n#if defined(PCPU_COUNTER_SIM)\n\
                  #define PCPU_EBOUND -13\n#endif\n#define PCPU_EUNADDR -35\n#endif\n";
    let codes = header_codes(header);
    let want = [
        ("PCPU_OK", 0, false),
        ("PCPU_ENOCPUS", -1, false),
        ("PCPU_EBOUND", -13, true),
        ("PCPU_EUNADDR", -35, false),
    ];
    let want: Vec<(String, i32, bool)> = want
        .iter()
        .map(|&(n, v, s)| (n.to_string(), v, s))
        .collect();
    assert_eq!(codes, want);
}

#[test]
fn codes_and_names_are_distinct() {
    let mut numbers: Vec<i32> = CODES.iter().map(|c| c.number).collect();
    let mut names: Vec<&str> = CODES.iter().map(|c| c.name).collect();
    numbers.sort_unstable();
    numbers.dedup();
    names.sort_unstable();
    names.dedup();
    assert_eq!(numbers.len(), CODES.len(), "two codes share a number");
    assert_eq!(names.len(), CODES.len(), "two codes share a name");
    assert!(CODES
        .iter()
        .all(|c| c.number <= 0 && c.name.starts_with("PCPU_")));
}

#[test]
fn strerror_gives_each_codes_text() {
    for c in CODES {
        // SAFETY: `pcpu_strerror` returns a static NUL-terminated string.
        let text = unsafe { core::ffi::CStr::from_ptr(pcpu_strerror(c.number)) };
        assert_eq!(text, c.text, "{}", c.name);
        assert_ne!(text.to_str(), Ok("unknown error"), "{}", c.name);
    }
    let below_lowest = CODES.iter().map(|c| c.number).min().unwrap() - 1;
    for unknown in [1, -13, below_lowest, c_int::MIN, c_int::MAX] {
        // SAFETY: as above.
        let text = unsafe { core::ffi::CStr::from_ptr(pcpu_strerror(unknown)) };
        assert_eq!(text.to_str(), Ok("unknown error"), "{unknown}");
    }
}

/// The variant's name, from its `Debug` form.
fn variant_name(e: &Error) -> String {
    let debug = format!("{e:?}");
    debug
        .split(|ch: char| !ch.is_alphanumeric())
        .next()
        .expect("a name")
        .to_string()
}

/// `code` gives each variant its row's code: one of each shape (no fields, fields, a code
/// shared with other variants, `PCPU_EOTHER`), and the numbers C callers compare with.
#[test]
fn each_error_has_its_rows_code() {
    let shape = AreaShape {
        base: 0,
        stride: 64,
        ncpus: 1,
    };
    let cases = [
        (Error::NoCpus, -1),
        (Error::StrideNotMultipleOf8 { stride: 12 }, -2),
        (
            Error::AreaMismatch {
                in_force: shape,
                needed: AreaShape { ncpus: 2, ..shape },
            },
            -16,
        ),
        (Error::RunTooLong { len: 9, max: 8 }, -9),
        (Error::NotInZone { offset: 8, len: 2 }, -14),
        (Error::BadBatch { batch: 3 }, -14),
        (
            Error::WrapsAround {
                what: "statics",
                cpu: 1,
                addr: 8,
                len: 16,
            },
            -7,
        ),
        (
            Error::CopyOverlapsTemplate {
                cpu: 0,
                addr: 0x1008,
                template: 0x1000,
                len: 16,
            },
            -17,
        ),
        (
            Error::Unaddressable {
                what: "zone",
                cpu: 1,
                addr: usize::MAX,
                space: AddressSpace::X86_64,
            },
            -34,
        ),
        (
            Error::CapacityTooLarge {
                counters: 2,
                max: 1,
            },
            PCPU_EOTHER,
        ),
        (Error::AlreadyBound, PCPU_EOTHER),
    ];
    for (e, want) in cases {
        assert_eq!(code(e), want, "{e:?}");
        let name = variant_name(&e);
        let row = ERRORS.iter().find(|&&(v, _)| v == name).expect("a row");
        let number = CODES
            .iter()
            .find(|c| c.name == row.1)
            .expect("a code")
            .number;
        assert_eq!(code(e), number, "{e:?}");
    }
}
