// SPDX-License-Identifier: BSD-2-Clause
//! A named registry of counters, the analogue of FreeBSD's `SYSCTL_COUNTER_U64` and
//! `SYSCTL_COUNTER_U64_ARRAY`: read is fetch, write is zero.
//!
//! A [`Registry`] is fixed-size (`N` entries, no allocation), can be a `static`, and is read
//! with [`Registry::snapshot`], an iterator of [`Stat`] items that allocates nothing: a
//! kernel's stats dump or a `/proc`-like file formats them as it goes.
//!
//! One concept per file: `statistic.rs`, what a registry can name ([`Statistic`], its
//! impls and the [`Slots`] a group read takes); `table.rs`, the registry's table (registration, lookup, zero by name,
//! [`RegistryError`]); `read.rs`, reading the values ([`Snapshot`], the group reads and their
//! [`Values`], the C ABI's walk). The imports run one way: `read` uses `table` and
//! `statistic`, `table` uses `statistic`.

mod read;
mod statistic;
mod table;

pub use read::{Snapshot, Stat, Values};
pub use statistic::{Slots, Statistic};
pub use table::{Registry, RegistryError};

#[cfg(test)]
mod fixture;
