// SPDX-License-Identifier: BSD-2-Clause
//! The manuals, as the repository's `docs/` folder has them, rendered here so that they are
//! read where the crate is: on docs.rs (the README's links lead here). Their Rust examples are
//! doctests, compiled and run by `cargo test` with the rest. Only documentation builds
//! compile this module.
//!
//! The manuals are Markdown for people first: a table cell may name `Box<AtomicU64>` and a
//! formula may be an indented block, which rustdoc's lints for API docs would flag.
#![allow(rustdoc::invalid_html_tags, rustdoc::invalid_rust_codeblocks)]

/// Which counter: the ten counter types, and when to use each (`docs/counters.md`; also at
/// the end of the crate's front page).
pub mod counters {
    #![doc = include_str!(concat!(env!("OUT_DIR"), "/manual/counters.md"))]
}

/// A Rust kernel: zones, the per-CPU register, the hooks, counters, early counters, arrays,
/// ratecheck and the registry (`docs/kernel.md`).
pub mod kernel {
    #![doc = include_str!(concat!(env!("OUT_DIR"), "/manual/kernel.md"))]
}

/// A C kernel: the library, the header, the hooks, the linker set (`docs/c.md`).
pub mod c {
    #![doc = include_str!(concat!(env!("OUT_DIR"), "/manual/c.md"))]
}

/// Linux programs through rseq (`docs/linux.md`).
pub mod linux {
    #![doc = include_str!(concat!(env!("OUT_DIR"), "/manual/linux.md"))]
}

/// Cortex-M firmware (`docs/firmware.md`).
pub mod firmware {
    #![doc = include_str!(concat!(env!("OUT_DIR"), "/manual/firmware.md"))]
}

/// Reading counters: consistency, the approximate counter (`docs/reading.md`).
pub mod reading {
    #![doc = include_str!(concat!(env!("OUT_DIR"), "/manual/reading.md"))]
}

/// Group reads (`docs/group.md`).
pub mod group {
    #![doc = include_str!(concat!(env!("OUT_DIR"), "/manual/group.md"))]
}

/// The design, its arguments, and a map of the code (`docs/design.md`).
pub mod design {
    #![doc = include_str!(concat!(env!("OUT_DIR"), "/manual/design.md"))]
}

/// The simulation for your tests, and how this crate is verified (`docs/testing.md`).
pub mod testing {
    #![doc = include_str!(concat!(env!("OUT_DIR"), "/manual/testing.md"))]
}

/// Fuzzing (`docs/fuzzing.md`).
pub mod fuzzing {
    #![doc = include_str!(concat!(env!("OUT_DIR"), "/manual/fuzzing.md"))]
}

/// Mutation testing (`docs/mutation.md`).
pub mod mutation {
    #![doc = include_str!(concat!(env!("OUT_DIR"), "/manual/mutation.md"))]
}

/// The benchmarks against the crate's peers (`docs/BENCHMARKS.md`).
pub mod benchmarks {
    #![doc = include_str!(concat!(env!("OUT_DIR"), "/manual/benchmarks.md"))]
}

/// The changes, release by release (`CHANGELOG.md`).
pub mod changelog {
    #![doc = include_str!("../CHANGELOG.md")]
}

/// The license (`LICENSE`): BSD 2-Clause, as FreeBSD's counter(9).
pub mod license {
    #![doc = concat!("```text\n", include_str!("../LICENSE"), "```\n")]
}

/// The examples: a kernel's wiring and the same code on the simulation, a Linux program, a
/// demo, and a registry served to Prometheus (the repository's `examples/`).
pub mod examples {
    #![doc = concat!(
        "## `examples/kernel.rs`\n\n```rust,ignore\n",
        include_str!("../examples/kernel.rs"),
        "```\n\n## `examples/linux.rs`\n\n```rust,ignore\n",
        include_str!("../examples/linux.rs"),
        "```\n\n## `examples/demo.rs`\n\n```rust,ignore\n",
        include_str!("../examples/demo.rs"),
        "```\n\n## `examples/metrics.rs`\n\n```rust,ignore\n",
        include_str!("../examples/metrics.rs"),
        "```\n"
    )]
}
