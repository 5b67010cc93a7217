// SPDX-License-Identifier: BSD-2-Clause
#![doc = include_str!("../README.md")]
#![doc = include_str!(concat!(env!("OUT_DIR"), "/manual/counters.md"))]
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(
    missing_docs,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]

// The crate's table of contents. Build conditions are named once, in build.rs, as cfgs:
// `pcpu_c_abi` (the C ABI), `pcpu_rseq` (Linux programs), and, inside the modules, what a
// hosted program without the simulation gets (`pcpu_no_cpu_register`: the kernel API
// compiles and documents, but no zone can be made there, so no add can run).

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

// Plain data, everywhere.
mod address;
mod error;
pub mod export;
mod layout;
mod shape;
pub use address::AddressSpace;
pub use error::Error;
pub use layout::ZoneLayout;
pub use shape::AreaShape;

// The core, from the bottom up: the arch primitives (the top-level `arch/` folder, one
// `#[path]`: each arch's code stands beside `src/`, not inside it), the area, the platform's
// hooks, the atomics and baseline words, the slot allocator, the zone and its group reads.
#[path = "../arch/mod.rs"]
pub mod arch;
mod area;
mod atomic;
mod baseline;
mod bitmap;
mod bringup;
mod chunk;
mod group;
mod memory;
pub mod platform;
mod zone;

// The kernel API: counters, counter(9)'s names, and what is built on them (arrays, histograms).
mod approx;
pub mod array;
mod counter;
pub mod early;
pub mod freebsd;
pub mod histogram;
mod lazy;
mod protect;
pub mod ratecheck;
pub mod registry;
pub mod statics;
pub use {
    approx::ApproxCounter,
    area::Area,
    chunk::{ChunkSource, Wait},
    counter::Counter,
    lazy::LazyCounter,
    memory::{ZoneMemory, ZoneMeta},
    platform::Platform,
    protect::Protected,
    statics::StaticCounter,
    zone::Zone,
};

#[cfg(feature = "alloc")]
pub use chunk::HeapChunks;

// The other faces: C kernels, Linux programs, and the host simulation the tests run on.
#[cfg(pcpu_c_abi)]
#[cfg_attr(docsrs, doc(cfg(feature = "capi")))]
pub mod capi;
#[cfg(pcpu_rseq)]
#[cfg_attr(docsrs, doc(cfg(all(feature = "rseq", target_os = "linux"))))]
pub mod rseq;
#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub mod sim;

// What the statics' macros name in the user's crate (the slot, the marker traits, the
// initialisers, the add's helpers): public only so that an expansion can name it, in this one
// hidden module; not an API. (The per-arch add that the expansion needs as a macro is
// `macro_export`ed, so it sits at the root, hidden: `__pcpu_static_add`.)
#[doc(hidden)]
pub mod __private {
    pub use crate::statics::private::*;
}

// The manuals, where the crate's docs are read (docs.rs), their Rust examples doctests.
#[cfg(any(doc, doctest))]
pub mod manual;
