#![doc = include_str!("../README.md")]
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(
    missing_docs,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]

// The crate's table of contents. Which parts a build compiles is decided once, in build.rs, as
// named cfgs; each module's file says which it needs in its first line (`#![cfg(..)]`), so
// that this list is the whole map and tools that walk the module tree find every file:
//
// - `pcpu_core`: the arch primitives and the zone (where the kernel API is offered, and for
//   `rseq`'s zones);
// - `pcpu_kernel_api`: the kernel API (bare-metal targets, and anywhere under `sim`: an
//   ordinary thread of a hosted program has no per-CPU register, so there a Linux program
//   uses `rseq`).

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

// Plain data, everywhere.
mod error;
pub mod export;
mod layout;
mod shape;
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
mod group;
mod memory;
pub mod platform;
mod zone;

// The kernel API: counters, counter(9)'s names, and what is built on them.
mod approx;
pub mod array;
mod counter;
pub mod early;
pub mod freebsd;
mod protect;
pub mod ratecheck;
pub mod registry;
#[cfg(pcpu_kernel_api)]
pub use {
    approx::ApproxCounter, area::Area, counter::Counter, memory::ZoneMemory, platform::Platform,
    protect::Protected, zone::Zone,
};

// The other faces: C kernels, Linux programs, and the host simulation the tests run on.
#[cfg(feature = "capi")]
#[cfg_attr(docsrs, doc(cfg(feature = "capi")))]
pub mod capi;
#[cfg(pcpu_rseq)]
#[cfg_attr(docsrs, doc(cfg(all(feature = "rseq", target_os = "linux"))))]
pub mod rseq;
#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub mod sim;
