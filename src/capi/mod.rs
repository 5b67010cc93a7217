// SPDX-License-Identifier: BSD-2-Clause
//! The C ABI (feature `capi`): counter(9) with FreeBSD's names, for kernels written in C.
//!
//! The header is `include/pcpu_counter.h`, generated from these items by `cbindgen` (and
//! checked against them in CI: `.ci/capi.sh`). A C kernel links the `no_std` library that
//! `testbeds/capi-kernel/build.sh` builds; host C test programs link the one from
//! `testbeds/capi-host/` (features `capi` and `sim`); a Rust kernel enables `capi` on its own
//! dependency and links C objects into itself.
//!
//! | C | Rust |
//! |---|---|
//! | `counter_u64_alloc(M_WAITOK \| M_NOWAIT)`, `counter_u64_free` (NULL is fine) | [`crate::freebsd::counter_u64_alloc`], [`crate::freebsd::counter_u64_free`] |
//! | `counter_u64_add` (inline in the header; out of line `pcpu_counter_add`), `counter_u64_fetch`, `counter_u64_zero` | [`crate::Counter`] |
//! | `counter_enter`, `counter_u64_add_protected`, `counter_exit` | [`crate::freebsd::counter_enter`], ... |
//! | `counter_u64_array_alloc/free/zero/copy` and the `COUNTER_ARRAY_*` macros | [`crate::array::CounterArray`] |
//! | `struct counter_rate`, `counter_ratecheck`, `pcpu_set_ticks` | [`crate::ratecheck::CounterRate`] |
//! | `struct pcpu_approx`, `pcpu_approx_init/add/read/precise/accuracy/compare/fetch_and_zero/free` | [`crate::ApproxCounter`] |
//! | `pcpu_zone_init`, `pcpu_zone_cpu_base`, `pcpu_set_cpu_base` | [`crate::freebsd::install`], [`crate::Zone::cpu_base`], [`crate::arch::set_cpu_base`] |
//! | `pcpu_sysctl_add_counter`, `pcpu_sysctl_add_counter_array` (FreeBSD's `SYSCTL_ADD_COUNTER_U64[_ARRAY]`), `pcpu_sysctl_remove`, `pcpu_sysctl_zero`, `pcpu_sysctl_walk` | [`crate::registry::Registry`] |
//! | `PCPU_COUNTER_DEFINE/DECLARE/ADD/INC` (header), `pcpu_statics_install`, `pcpu_static_fetch/fetch_and_zero/zero` | [`crate::statics`] |
//! | `pcpu_sim_machine_new`, `pcpu_sim_bind`, `pcpu_sim_unbind` (feature `sim`: `pcpu_counter::sim::capi`) | [`crate::sim`] |
//!
//! A counter is its slot: a `counter_u64_t` is the slot's offset from the per-CPU register,
//! so the C ABI needs no handle table and no allocator. Functions that can fail return
//! 0 or a negative `PCPU_E*` code ([`pcpu_strerror`] names it). A panic inside the library
//! (a handle not from `counter_u64_alloc`, say) aborts: it cannot unwind into C.
//!
//! `counter_enter()` and `counter_exit()` take no arguments, as FreeBSD's: the nesting is kept
//! per CPU. `pcpu_counter_enter_state()` / `pcpu_counter_exit_state()` hand the state to the
//! caller instead.
#![allow(non_camel_case_types)]

mod approx;
mod counter;
mod early;
mod error;
mod group;
mod grow;
mod init;
mod protect;
mod rate;
mod registry;
mod slot;
mod statics;
mod zone;

pub use approx::*;
pub use counter::*;
pub use error::*;
pub use group::*;
pub use grow::*;
pub use init::*;
pub use protect::*;
pub use rate::*;
pub use registry::*;
pub use slot::{counter_u64_t, CounterSlot};
pub use statics::*;
pub use zone::*;
