//! Per-CPU 64-bit statistics counters for kernels and firmware: a `no_std` port of
//! FreeBSD's [counter(9)].
//!
//! A counter is one private 8-byte slot on every CPU. [`Counter::add`] touches only the
//! current CPU's slot, with no lock prefix and no shared cache line (on x86_64 it is one
//! `add qword ptr gs:[off], v`); [`Counter::fetch`] sums the slots. Counters live in a
//! [`Zone`]: `ncpus` per-CPU blocks of dense slots, on static memory ([`ZoneMemory`]),
//! memory a kernel describes ([`ZoneLayout`]), or the heap (feature `alloc`).
//!
//! ```
//! use pcpu_counter::sim::Machine;
//!
//! let machine = Machine::new(4); // host simulation: 4 CPUs (feature `sim`)
//! let packets = machine.alloc().unwrap();
//! std::thread::scope(|s| {
//!     for cpu in 0..4 {
//!         let (machine, packets) = (&machine, &packets);
//!         s.spawn(move || machine.run_on(cpu, || (0..1000).for_each(|_| packets.inc())));
//!     }
//! });
//! assert_eq!(packets.fetch(), 4000);
//! assert_eq!(packets.cpu_slot(3), Ok(1000));
//! ```
//!
//! The FreeBSD names ([`freebsd::counter_u64_alloc`], [`freebsd::counter_u64_add`],
//! [`freebsd::counter_enter`], ...) work on the global zone a kernel
//! [`install`](freebsd::install)s. How a kernel wires the crate up (per-CPU
//! register, zone memory, hooks) is in the README and in [`platform`].
//!
//! [counter(9)]: https://man.freebsd.org/cgi/man.cgi?query=counter&sektion=9
#![no_std]
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

/// The core's internals, also used by [`rseq`] for its zones: compiled where the kernel API is
/// offered or with `rseq`.
macro_rules! core_internals {
    ($($item:item)*) => {
        $(
            #[cfg(any(feature = "sim", feature = "rseq", doc, not(any(unix, windows))))]
            #[cfg_attr(not(any(feature = "sim", doc, not(any(unix, windows)))), allow(dead_code, unused_imports))]
            $item
        )*
    };
}

// Plain data everywhere: `Error` names an `AreaShape`, and `rseq::Zone` a `ZoneLayout`.
#[cfg_attr(
    not(any(feature = "sim", doc, not(any(unix, windows)))),
    allow(dead_code)
)]
mod area;
mod error;
#[cfg_attr(
    not(any(feature = "sim", doc, not(any(unix, windows)))),
    allow(dead_code)
)]
mod layout;
pub use area::AreaShape;
pub use error::Error;
pub use layout::ZoneLayout;

core_internals! {
    pub mod arch;
    mod atomic;
    mod baseline;
    mod bitmap;
    mod counter;
    mod memory;
    mod protect;
    mod zone;
    pub mod platform;
}

// Declared outside the macros: it defines a `macro_export` macro, which `freebsd` re-exports.
#[cfg(any(feature = "sim", doc, not(any(unix, windows))))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "sim", not(any(unix, windows))))))]
pub mod early;

kernel_api! {
    pub mod array;
    pub mod freebsd;
    pub mod ratecheck;
    pub mod registry;

    pub use area::Area;
    pub use counter::Counter;
    pub use memory::ZoneMemory;
    pub use platform::Platform;
    pub use protect::Protected;
    pub use zone::Zone;
}

// The same names inside the crate where only `rseq` uses the core.
#[cfg(all(
    feature = "rseq",
    not(any(feature = "sim", doc, not(any(unix, windows))))
))]
#[allow(unused_imports)]
pub(crate) use {
    area::Area, counter::Counter, memory::ZoneMemory, platform::Platform, protect::Protected,
    zone::Zone,
};

#[cfg(all(feature = "capi", any(feature = "sim", doc, not(any(unix, windows)))))]
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
