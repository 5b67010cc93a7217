// SPDX-License-Identifier: BSD-2-Clause
//! The per-arch primitives, one folder per arch, and nothing else: this layer depends on no
//! type of the crate above it (no zone, no counter), only on the platform's hooks
//! (`src/platform.rs`) where an arch has no per-CPU register of its own.
//!
//! It lives in the top-level `arch/` folder, beside `src/`, so that the layout shows each
//! arch's code apart from the portable core; `src/lib.rs` reaches it through one
//! `#[path = "../arch/mod.rs"]`, and below that it is an ordinary module tree.
//!
//! Every arch provides the same crate-internal set, each taking a register-relative offset
//! and a value and nothing else:
//!
//! | primitive | what it does |
//! |---|---|
//! | `add(off, v)`, `add_protected(off, v)` | add `v` to the current CPU's slot at `off` |
//! | `inc(off)` | add 1, with an immediate operand on x86_64 |
//! | `fetch_add(off, v)` | the same, returning the slot's value before the add |
//! | `add_crossings16(off, v)` | the same, returning how many multiples of 16 the slot crossed |
//! | `needs_protection()` | whether `counter_enter` must enter local protection |
//! | `load_slot(p)`, `store_slot(p, v)` | read any CPU's slot without tearing; clear a slot no CPU uses |
//!
//! The public part is [`set_cpu_base`], which a kernel calls once on each CPU, and [`NAME`].
//!
//! | arch | add | per-CPU register |
//! |---|---|---|
//! | x86_64 | one `add qword ptr gs:[off], v` | GS base |
//! | x86 (i386) | `cmpxchg8b fs:[off]` loop with CX8; plain add under protection without | FS segment base (`set_cpu_base(gdt_entry, selector, base)`) |
//! | aarch64 | `ldxr/add/stxr/cbnz` loop, or one `ldadd` with `lse` | `TPIDR_EL1` |
//! | riscv64 | one `amoadd.d zero, v, (base + off)` | `tp` (`gp` with feature `riscv-gp`) |
//! | others | plain add under local protection | none: the platform's current CPU in `Area::global()` |

// Plain `#[cfg]`s, not `cfg_if!`: tools that walk the module tree without expanding macros
// (rustfmt, cargo-mutants) must find each arch's files.
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64"
))]
mod atomic_slots;

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
pub(crate) use imp::{add, add_protected, fetch_add, load_slot, needs_protection, store_slot};
pub(crate) use imp::{current_base, BASE_FROM_PLATFORM};
pub use imp::{set_cpu_base, NAME};

/// The other register a kernel may keep its per-CPU pointer in, with its value, where an
/// arch has two candidates (riscv64: `tp` and `gp`); `None` elsewhere. For the bring-up
/// check's message.
#[cfg(target_arch = "riscv64")]
pub(crate) use imp::other_register;

/// As above: no arch but riscv64 has a second candidate.
#[cfg(not(target_arch = "riscv64"))]
pub(crate) fn other_register() -> Option<(&'static str, usize)> {
    None
}

/// The byte limit of the segment the add goes through, where the add has one (i386: the
/// `%fs` segment); `None` elsewhere. A zone that grows reaches chunks at offsets anywhere in
/// the address space, so that segment must span it all.
#[cfg(target_arch = "x86")]
pub(crate) use imp::segment_limit;

/// As above: only i386 adds through a segment with a limit.
#[cfg(not(target_arch = "x86"))]
pub(crate) fn segment_limit() -> Option<usize> {
    None
}

/// Adds 1 to the current CPU's slot at `off`: x86_64's own `add qword ptr gs:[off], 1` (an
/// immediate operand), elsewhere the arch's `add(off, 1)`.
///
/// # Safety
/// As the arch's `add`.
#[inline(always)]
pub(crate) unsafe fn inc(off: usize) {
    cfg_if::cfg_if! {
        if #[cfg(target_arch = "x86_64")] {
            // SAFETY: per the caller.
            unsafe { imp::inc(off) }
        } else {
            // SAFETY: per the caller.
            unsafe { add(off, 1) }
        }
    }
}

/// Adds `v` to the current CPU's slot at `off` and returns how many multiples of 16 the slot
/// crossed, signed and wrapping: `((old + v) >> 4) - (old >> 4)` modulo 2^60, written as
/// `(v >> 4) + carry out of the low 4 bits` (the [`ApproxCounter`](crate::ApproxCounter)'s
/// add). x86_64 reads it from the plain add's auxiliary carry flag; elsewhere it is computed
/// from `fetch_add`'s old value.
///
/// # Safety
/// As the arch's `add`.
#[inline(always)]
pub(crate) unsafe fn add_crossings16(off: usize, v: i64) -> u64 {
    cfg_if::cfg_if! {
        if #[cfg(target_arch = "x86_64")] {
            // SAFETY: per the caller.
            unsafe { imp::add_crossings16(off, v) }
        } else {
            // SAFETY: per the caller.
            let old = unsafe { fetch_add(off, v) };
            ((v >> 4) as u64).wrapping_add(((old & 15) + (v as u64 & 15)) >> 4)
        }
    }
}
