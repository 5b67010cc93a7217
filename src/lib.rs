#![doc = include_str!("../README.md")]
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
// A hosted build without the simulation compiles only the plain data and, with `rseq`, the
// core's internals that `rseq` uses: the rest of them is unused there, not dead.
#![cfg_attr(
    all(any(unix, windows), not(feature = "sim"), not(doc)),
    allow(dead_code, unused_imports)
)]
#![warn(
    missing_docs,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

/// Items of the kernel-style API ([`Zone`], [`Counter`], [`freebsd`], ...): offered on targets
/// that are not hosted (bare metal: `target_os = "none"`, UEFI, a kernel's own target spec)
/// and anywhere under the simulation (feature `sim`). On Linux, macOS or Windows without
/// `sim` an ordinary thread has no per-CPU register for the add to use, so they are configured
/// out (a Linux program uses [`rseq`]) and rustc says so where one is named.
macro_rules! kernel_api {
    ($($item:item)*) => {
        $(
            #[cfg(any(feature = "sim", doc, not(any(unix, windows))))]
            #[cfg_attr(docsrs, doc(cfg(any(feature = "sim", not(any(unix, windows))))))]
            $item
        )*
    };
}

// Plain data everywhere: `Error` names an `AreaShape`, and `rseq::Zone` a `ZoneLayout`.
mod area;
mod error;
mod layout;
pub use area::AreaShape;
pub use error::Error;
pub use layout::ZoneLayout;

// The core's internals, also used by `rseq` for its zones: compiled where the kernel API is
// offered or with `rseq` (where `rseq` alone uses part of them, the crate-level `allow`
// above keeps the rest quiet). Modules are declared with plain `#[cfg]`s, never inside a
// macro, so that tools that walk the module tree without expanding macros (rustfmt,
// cargo-mutants) find their files.
#[cfg(any(feature = "sim", feature = "rseq", doc, not(any(unix, windows))))]
pub mod arch;
#[cfg(any(feature = "sim", feature = "rseq", doc, not(any(unix, windows))))]
mod atomic;
#[cfg(any(feature = "sim", feature = "rseq", doc, not(any(unix, windows))))]
mod baseline;
#[cfg(any(feature = "sim", feature = "rseq", doc, not(any(unix, windows))))]
mod bitmap;
#[cfg(any(feature = "sim", feature = "rseq", doc, not(any(unix, windows))))]
mod counter;
#[cfg(any(feature = "sim", feature = "rseq", doc, not(any(unix, windows))))]
mod group;
#[cfg(any(feature = "sim", feature = "rseq", doc, not(any(unix, windows))))]
mod memory;
#[cfg(any(feature = "sim", feature = "rseq", doc, not(any(unix, windows))))]
pub mod platform;
#[cfg(any(feature = "sim", feature = "rseq", doc, not(any(unix, windows))))]
mod protect;
#[cfg(any(feature = "sim", feature = "rseq", doc, not(any(unix, windows))))]
mod zone;

#[cfg(any(feature = "sim", doc, not(any(unix, windows))))]
mod approx;

// Declared outside the macros: it defines a `macro_export` macro, which `freebsd` re-exports.
#[cfg(any(feature = "sim", doc, not(any(unix, windows))))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "sim", not(any(unix, windows))))))]
pub mod early;

#[cfg(any(feature = "sim", doc, not(any(unix, windows))))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "sim", not(any(unix, windows))))))]
pub mod array;
#[cfg(any(feature = "sim", doc, not(any(unix, windows))))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "sim", not(any(unix, windows))))))]
pub mod freebsd;
#[cfg(any(feature = "sim", doc, not(any(unix, windows))))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "sim", not(any(unix, windows))))))]
pub mod ratecheck;
#[cfg(any(feature = "sim", doc, not(any(unix, windows))))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "sim", not(any(unix, windows))))))]
pub mod registry;

pub mod export;

kernel_api! {
    pub use approx::ApproxCounter;
    pub use area::Area;
    pub use counter::Counter;
    pub use memory::ZoneMemory;
    pub use platform::Platform;
    pub use protect::Protected;
    pub use zone::Zone;
}

// Also gated like the kernel API, by an inner attribute in capi/mod.rs (where cbindgen, which
// writes include/pcpu_counter.h from it, does not read it as a condition on the C API).
#[cfg(feature = "capi")]
#[cfg_attr(docsrs, doc(cfg(feature = "capi")))]
pub mod capi;
#[cfg(all(
    feature = "rseq",
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "rseq", target_os = "linux"))))]
pub mod rseq;
#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub mod sim;
