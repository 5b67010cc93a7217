// SPDX-License-Identifier: BSD-2-Clause
//! The per-arch primitives, one folder per arch, and nothing else: this layer depends on no
//! type of the crate above it (no zone, no counter), only on the platform's hooks
//! (`src/platform/`) where an arch has no per-CPU register of its own.
//!
//! It lives in the top-level `arch/` folder, beside `src/`, so that the layout shows each
//! arch's code apart from the portable core; `src/lib.rs` reaches it through one
//! `#[path = "../arch/mod.rs"]`, and below that it is an ordinary module tree.
//!
//! Every arch provides the same crate-internal set, each taking a register-relative offset
//! and a value and nothing else. An arch file states only what differs from the defaults
//! (`defaults.rs`, which says which arch replaces which):
//!
//! | primitive | what it does |
//! |---|---|
//! | `add(off, v)`, `add_protected(off, v)` | add `v` to the current CPU's slot at `off` |
//! | `inc(off)` | add 1, with an immediate operand on x86_64 |
//! | `fetch_add(off, v)` | the same, returning the slot's value before the add |
//! | `add_crossings16(off, v)` | the same, returning how many multiples of 16 the slot crossed |
//! | `needs_protection()` | whether `counter_enter` must enter local protection |
//! | `load_slot(p)`, `store_slot(p, v)` | read any CPU's slot without tearing; clear a slot no CPU uses |
//! | `BASE_FROM_PLATFORM`, `current_base()`, `other_register()`, `segment_limit()` | for the bring-up check: where the add's base comes from, what it is now, the other candidate register, the segment's limit |
//!
//! The public part is [`set_cpu_base`], which a kernel calls once on each CPU, [`NAME`] and
//! [`REGISTER`].
//!
//! | arch | add | per-CPU register |
//! |---|---|---|
//! | x86_64 | one `add qword ptr gs:[off], v` | GS base |
//! | x86 (i386) | `cmpxchg8b fs:[off]` loop with CX8; plain add under protection without | FS segment base (`set_cpu_base(gdt_entry, selector, base)`) |
//! | aarch64 | `ldxr/add/stxr/cbnz` loop, or one `ldadd` with `lse` | `TPIDR_EL1` |
//! | riscv64 | one `amoadd.d zero, v, (base + off)` | `tp` (`gp` with feature `riscv-gp`) |
//! | others | plain add under local protection | none: the platform's current CPU in `Area::global()` |

// What an arch file need not state: each glob-imports it and shadows what differs.
mod defaults;

// Plain `#[cfg]`s, not `cfg_if!`: tools that walk the module tree without expanding macros
// (rustfmt, cargo-mutants) must find each arch's files.
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_64;
#[cfg(target_arch = "x86_64")]
pub(crate) use self::x86_64 as imp;

#[cfg(target_arch = "x86")]
pub(crate) mod i386;
#[cfg(target_arch = "x86")]
pub(crate) use self::i386 as imp;
#[cfg(target_arch = "x86")]
pub use self::i386::{gdt_data_descriptor, has_cx8, load_fs};

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "aarch64")]
pub(crate) use self::aarch64 as imp;

#[cfg(target_arch = "riscv64")]
pub(crate) mod riscv64;
#[cfg(target_arch = "riscv64")]
pub(crate) use self::riscv64 as imp;

#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "riscv64"
)))]
pub(crate) mod portable;
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "riscv64"
)))]
pub(crate) use self::portable as imp;

pub use imp::REGISTER;
pub(crate) use imp::{add, add_crossings16, add_protected, fetch_add, inc, needs_protection};
pub(crate) use imp::{current_base, other_register, segment_limit, BASE_FROM_PLATFORM};
pub(crate) use imp::{load_slot, store_slot};
pub use imp::{set_cpu_base, NAME};
