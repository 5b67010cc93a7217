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
//! let machine = Machine::new(4); // host simulation: 4 CPUs (feature `std`)
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
//! The FreeBSD names ([`counter_u64_alloc`], [`counter_u64_add`], [`counter_enter`], ...)
//! work on the global zone a kernel [`install`]s. How a kernel wires the crate up (per-CPU
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

pub mod arch;
mod area;
mod array;
mod atomic;
mod baseline;
mod bitmap;
#[cfg(feature = "capi")]
pub mod capi;
mod counter;
mod early;
mod error;
mod global;
mod layout;
mod memory;
pub mod platform;
mod protect;
mod ratecheck;
pub mod registry;
#[cfg(all(
    feature = "rseq",
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub mod rseq;
#[cfg(feature = "sim")]
pub mod sim;
mod zone;

pub use area::{Area, AreaShape, MAX_ZONES};
pub use array::{counter_array_alloc, CounterArray};
pub use counter::Counter;
pub use early::EarlyCounter;
pub use error::Error;
pub use global::{
    counter_u64_add, counter_u64_alloc, counter_u64_fetch, counter_u64_free, counter_u64_zero,
    global_zone, install, CounterU64, Wait,
};
pub use layout::{meta_words, ZoneLayout};
pub use memory::ZoneMemory;
pub use platform::Platform;
pub use protect::{counter_enter, counter_exit, counter_u64_add_protected, Protected};
pub use ratecheck::{counter_ratecheck, Clock, CounterRate};
pub use zone::Zone;
