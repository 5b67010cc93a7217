//! The per-arch primitives, one folder per arch under the top-level `arch/`.
//!
//! Every arch provides the same crate-internal set: `add` and `add_protected` (add to the
//! current CPU's slot at a register-relative offset), `needs_protection` (whether
//! `counter_enter` must enter local protection), `load_slot` (read any CPU's slot without
//! tearing), `store_slot` (clear a slot no CPU uses) and, for the host simulation,
//! `host_bind`/`host_unbind` (point this thread's per-CPU register at a block). The public
//! part is [`set_cpu_base`], which a kernel calls once on each CPU, and [`NAME`].

cfg_if::cfg_if! {
    if #[cfg(target_arch = "x86_64")] {
        #[path = "../arch/x86_64/mod.rs"]
        mod imp;
    } else {
        #[path = "../arch/portable/mod.rs"]
        mod imp;
    }
}

pub(crate) use imp::{add, add_protected, load_slot, needs_protection, store_slot};
#[cfg(feature = "std")]
pub(crate) use imp::{host_bind, host_unbind};
pub use imp::{set_cpu_base, NAME};
