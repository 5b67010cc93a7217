// SPDX-License-Identifier: BSD-2-Clause
//! What [`percpu_counter!`](crate::percpu_counter)'s expansion names in the user's crate: the
//! slot type, the marker traits, the initialisers and the per-arch add's helpers. Public only
//! because a macro expansion must name it; the crate root re-exports it as the one hidden
//! module `__private`, and nothing here is an API.

use core::cell::UnsafeCell;

use super::{StaticArray, StaticCounter};

/// One template slot: an 8-byte word in the per-CPU section, written through the per-CPU
/// register only (the macro's add) and read by `fetch`.
#[repr(C, align(8))]
pub struct Slot(UnsafeCell<u64>);

// SAFETY: the word is only written by the arch's per-CPU add (on the template, by the boot
// CPU alone, before its register is set) and read with the arch's non-tearing load.
unsafe impl Sync for Slot {}

impl Slot {
    /// A slot that reads 0.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Slot(UnsafeCell::new(0))
    }

    /// The slot's link-time address: its register-relative offset.
    #[inline(always)]
    pub fn offset(&self) -> usize {
        self.0.get() as usize
    }
}

/// What a counter's marker type gives its [`StaticCounter`]: the slot, and the adds compiled
/// against the slot's symbol (the arch's form, chosen by this crate's build). Implemented by
/// [`percpu_counter!`](crate::percpu_counter) only.
///
/// # Safety
/// `slot` is a [`Slot`] in the section `pcpu_counter_statics`, used by this type alone, and
/// `add`/`inc` add to the running CPU's copy of it through the per-CPU register.
pub unsafe trait StaticSlot {
    /// The template slot.
    fn slot() -> &'static Slot;
    /// Adds `v` to the running CPU's copy.
    fn add(v: i64);
    /// Adds 1 to the running CPU's copy, with an immediate operand.
    fn inc();
}

/// What an array's marker type gives its [`StaticArray`]: the first of its `N` adjacent
/// slots. Implemented by [`percpu_counter!`](crate::percpu_counter) only.
///
/// # Safety
/// `first` is the first of `N` adjacent [`Slot`]s (the array's length) in the section
/// `pcpu_counter_statics`, used by this type alone.
pub unsafe trait StaticSlots {
    /// The first template slot.
    fn first() -> &'static Slot;
}

/// A [`StaticCounter`] that reads 0: the macro's initialiser.
pub const fn static_counter<S>() -> StaticCounter<S> {
    StaticCounter::new()
}

/// A [`StaticArray`] that reads 0: the macro's initialiser.
pub const fn static_array<S, const N: usize>() -> StaticArray<S, N> {
    StaticArray::new()
}

/// The check before every static add: nothing in a kernel; under the host simulation, that
/// the thread holds a CPU of the machine whose blocks are installed (or, before any install,
/// holds none, and adds to the template).
#[inline(always)]
pub fn check() {
    #[cfg(pcpu_hosted_cpus)]
    {
        let area = super::AREA.load(crate::atomic::Ordering::Relaxed);
        crate::platform::check_static_add(area as usize);
    }
}

/// The register-based add of the slot at `off` to the running CPU's copy, for the arches
/// whose add takes an offset in a register (all but x86_64): the arch's own add primitive.
#[inline(always)]
pub fn add_at(off: usize, v: i64) {
    #[cfg(pcpu_no_cpu_register)]
    {
        let _ = (off, v);
        panic!("pcpu-counter: {}", crate::Error::NoCpuRegister)
    }
    #[cfg(not(pcpu_no_cpu_register))]
    {
        check();
        // SAFETY: `off` is a template slot's link-time address; the running CPU's register
        // holds its block minus the template's start (or 0: the template), per the `statics`
        // module's contract.
        unsafe { crate::arch::add(off, v) }
    }
}
