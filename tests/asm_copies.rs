//! The tests' instrumented copies of product assembly are the product's, but for the lines
//! each copy declares as its instrumentation: a change to the product's add that a copy does
//! not follow fails here, on every host, instead of leaving a test that measures code the
//! crate no longer runs.
//!
//! | copy | product | what the copy adds |
//! |---|---|---|
//! | `tests/arch_aarch64.rs` `add_counting_retries` | `arch/aarch64/mod.rs` `atomic_add` (LL/SC) | a count of failed `stxr`s |
//! | `tests/arch_i386.rs` `add_counting_retries` | `arch/i386/mod.rs` `fetch_add_cx8` | a count of failed `cmpxchg8b`s |
//! | `tests/rseq.rs` `giving_up_add` | `arch/x86_64/rseq.rs` `try_add` | an abort handler that gives up; its own arming, index read and result |
//!
//! Each template is read from the source (the string literals that open an `asm!`), its lines
//! trimmed. A copy matches when the product without its `product_only` lines and the copy
//! without its `copy_only` lines are the same sequence, and every listed line is still there
//! (so a list cannot go stale).

use std::fs;
use std::path::PathBuf;

/// One copy of product assembly: where each template is, and the lines only one side has.
struct Copy {
    product: (&'static str, &'static str),
    copy: (&'static str, &'static str),
    /// Lines of the product the copy leaves out or replaces.
    product_only: &'static [&'static str],
    /// Lines of the copy the product has not: its instrumentation.
    copy_only: &'static [&'static str],
}

const COPIES: [Copy; 3] = [
    Copy {
        product: ("arch/aarch64/mod.rs", "atomic_add"),
        copy: ("tests/arch_aarch64.rs", "add_counting_retries"),
        product_only: &[],
        copy_only: &["mov {r:w}, #0", "b 3f", "add {r:w}, {r:w}, #1", "3:"],
    },
    Copy {
        product: ("arch/i386/mod.rs", "fetch_add_cx8"),
        copy: ("tests/arch_i386.rs", "add_counting_retries"),
        product_only: &["jnz 2b"],
        copy_only: &[
            "push 0",
            "je 3f",
            "inc dword ptr [esp + 8]",
            "jmp 2b",
            "3:",
            "pop ecx",
        ],
    },
    // The rseq ABI the test relies on is shared: the section from `2:` to `4:`, the
    // descriptor (`__rseq_cs`), the signature before the abort handler (`__rseq_failure`).
    Copy {
        product: ("arch/x86_64/rseq.rs", "try_add"),
        copy: ("tests/rseq.rs", "giving_up_add"),
        product_only: &[
            "6:",
            "lea rdx, [rip + 3f]",
            "mov qword ptr fs:[{at} + {cs}], rdx",
            ".if {check}",
            "cmp dword ptr fs:[{at} + {cpu}], 0",
            "jl {fail}",
            ".endif",
            "mov edx, dword ptr fs:[{at}]",
            "cmp rdx, {n}",
            "jae {fail}",
            "shl rdx, cl",
            "add qword ptr [rdx + {slot0}], {v}",
            "jmp 6b",
        ],
        copy_only: &[
            "lea rcx, [rip + 3f]",
            "mov rax, qword ptr fs:[0]",
            "add rax, {roff}",
            "mov qword ptr [rax + 8], rcx",
            "mov ecx, dword ptr [rax + 4]",
            "cmp rcx, {n}",
            "jae 8f",
            "imul rcx, {stride}",
            "add qword ptr [rcx + {slot0}], {v}",
            "mov ecx, 1",
            "jmp 9f",
            "8:",
            "xor ecx, ecx",
            "9:",
            "mov ecx, 1",
            "jmp 9b",
        ],
    },
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `asm!` templates of a source, each with the function it is in: the string literals
/// that open the macro's arguments, one line each, unescaped and trimmed.
fn templates(source: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut function = String::new();
    let mut rest = source;
    loop {
        let next_fn = rest.find("fn ");
        let next_asm = rest.find("asm!(");
        match (next_fn, next_asm) {
            (Some(f), a) if a.is_none_or(|a| f < a) => {
                let after = &rest[f + 3..];
                function = after
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                rest = after;
            }
            (_, Some(a)) => {
                let (lines, after) = string_literals(&rest[a + "asm!(".len()..]);
                out.push((function.clone(), lines));
                rest = after;
            }
            _ => return out,
        }
    }
}

/// The string literals at the start of `text` (separated by commas and white space), and the
/// text after them.
fn string_literals(mut text: &str) -> (Vec<String>, &str) {
    let mut lines = Vec::new();
    loop {
        let trimmed = text.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
        let Some(body) = trimmed.strip_prefix('"') else {
            return (lines, trimmed);
        };
        let mut line = String::new();
        let mut chars = body.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => {
                    if let Some((_, c)) = chars.next() {
                        line.push(c);
                    }
                }
                Some((i, '"')) => break i,
                Some((_, c)) => line.push(c),
                None => panic!("unterminated string in an asm! template"),
            }
        };
        lines.push(line.trim().to_string());
        text = &body[end + 1..];
    }
}

/// The template of `function` in `file`: the first of its `asm!`s (a function of that name
/// that has none is skipped, as the LSE `atomic_add`, whose template is one `ldadd`, is not
/// the loop) that has more than one line.
fn template_of(file: &str, function: &str) -> Vec<String> {
    let source = fs::read_to_string(root().join(file)).unwrap();
    templates(&source)
        .into_iter()
        .find(|(f, lines)| f == function && lines.len() > 1)
        .map(|(_, lines)| lines)
        .unwrap_or_else(|| panic!("{file}: no asm! template of several lines in `{function}`"))
}

/// Whether `copy` is `product` but for the listed lines: `Err` says where they part.
fn compare(
    product: &[String],
    copy: &[String],
    product_only: &[&str],
    copy_only: &[&str],
) -> Result<(), String> {
    for (side, lines, listed) in [
        ("product", product, product_only),
        ("copy", copy, copy_only),
    ] {
        for line in listed {
            if !lines.iter().any(|l| l == line) {
                return Err(format!("the {side} has no line `{line}` any more"));
            }
        }
    }
    let shared = |lines: &[String], only: &[&str]| -> Vec<String> {
        lines
            .iter()
            .filter(|l| !only.contains(&l.as_str()))
            .cloned()
            .collect()
    };
    let (p, c) = (shared(product, product_only), shared(copy, copy_only));
    if p == c {
        return Ok(());
    }
    let at = p.iter().zip(&c).take_while(|(a, b)| a == b).count();
    Err(format!(
        "they part at shared line {at}: product `{}`, copy `{}`",
        p.get(at).map_or("(end)", String::as_str),
        c.get(at).map_or("(end)", String::as_str)
    ))
}

#[test]
fn each_instrumented_copy_is_the_product_but_for_its_instrumentation() {
    for copy in COPIES {
        let product = template_of(copy.product.0, copy.product.1);
        let instrumented = template_of(copy.copy.0, copy.copy.1);
        if let Err(why) = compare(&product, &instrumented, copy.product_only, copy.copy_only) {
            panic!(
                "{} `{}` is no longer a copy of {} `{}`: {why}",
                copy.copy.0, copy.copy.1, copy.product.0, copy.product.1
            );
        }
    }
}

#[test]
fn the_templates_are_read_whole() {
    let source = r#"
fn a() { unsafe { asm!("2:", "ldxr {t}, [{slot}]", "cbnz {s:w}, 2b", slot = in(reg) p) } }
fn b() {
    core::arch::asm!(
        ".pushsection __rseq_cs, \"aw\"",
        "nop",
        options(nostack),
    );
}
"#;
    let found = templates(source);
    let lines = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        found,
        [
            (
                "a".to_string(),
                lines(&["2:", "ldxr {t}, [{slot}]", "cbnz {s:w}, 2b"])
            ),
            (
                "b".to_string(),
                lines(&[".pushsection __rseq_cs, \"aw\"", "nop"])
            ),
        ]
    );
}

#[test]
fn a_product_change_the_copy_does_not_follow_is_found() {
    let lines = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let product = lines(&[
        "2:",
        "ldxr {t}, [{slot}]",
        "add {t}, {t}, {v}",
        "cbnz {s:w}, 2b",
    ]);
    let copy = lines(&[
        "3:",
        "2:",
        "ldxr {t}, [{slot}]",
        "add {t}, {t}, {v}",
        "cbnz {s:w}, 2b",
    ]);
    assert_eq!(compare(&product, &copy, &[], &["3:"]), Ok(()));
    // The product moves to an acquire load; the copy does not follow.
    let acquire = lines(&[
        "2:",
        "ldaxr {t}, [{slot}]",
        "add {t}, {t}, {v}",
        "cbnz {s:w}, 2b",
    ]);
    assert_eq!(
        compare(&acquire, &copy, &[], &["3:"]),
        Err(
            "they part at shared line 1: product `ldaxr {t}, [{slot}]`, copy `ldxr {t}, [{slot}]`"
                .to_string()
        )
    );
    // A listed line the copy no longer has.
    assert_eq!(
        compare(&product, &copy, &[], &["3:", "b 3f"]),
        Err("the copy has no line `b 3f` any more".to_string())
    );
}
