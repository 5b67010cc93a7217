//! docs/c.md's table of the C API's codes, for the models of the C API (`tests/capi.rs`,
//! `tests/config_fuzz.rs`, the `capi` fuzz target): the code and `pcpu_strerror` text a C
//! caller is told to expect, per `Error` variant. The crate's tests hold that table to
//! src/error.rs's, from which the codes are made.
#![allow(dead_code)] // Each test file uses part of it.

use std::ffi::c_int;
use std::sync::LazyLock;

/// One row: a code, its number, `pcpu_strerror`'s text and the variants that return it.
pub struct Code {
    pub name: &'static str,
    pub number: c_int,
    pub text: &'static str,
    pub variants: Vec<&'static str>,
}

/// The rows of docs/c.md's table, in its order.
pub static CODES: LazyLock<Vec<Code>> = LazyLock::new(|| {
    let docs = include_str!("../../docs/c.md");
    let table = docs
        .split_once("<!-- BEGIN error codes")
        .and_then(|(_, rest)| rest.split_once("<!-- END error codes"))
        .expect("docs/c.md has the table of codes")
        .0;
    table
        .lines()
        .filter(|line| line.starts_with("| `PCPU_"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            let [name, number, text, variants] = cells[..] else {
                panic!("docs/c.md: a row of four cells: {line}");
            };
            Code {
                name: name.trim_matches('`'),
                number: number.parse().expect("a number"),
                text,
                variants: variants
                    .split(", ")
                    .map(|v| v.trim_matches('`'))
                    .filter(|v| !v.is_empty())
                    .collect(),
            }
        })
        .collect()
});

/// The documented code of `e`: its variant's row.
pub fn code_of(e: &pcpu_counter::Error) -> c_int {
    let debug = format!("{e:?}");
    let variant = debug
        .split(|ch: char| !ch.is_alphanumeric())
        .next()
        .unwrap();
    let row = CODES.iter().find(|c| c.variants.contains(&variant));
    row.unwrap_or_else(|| panic!("docs/c.md gives {variant} no code"))
        .number
}

/// The documented `pcpu_strerror` text of `code`, `None` for a number that is no code.
pub fn text_of(code: c_int) -> Option<&'static str> {
    CODES.iter().find(|c| c.number == code).map(|c| c.text)
}
