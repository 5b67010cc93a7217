// SPDX-License-Identifier: BSD-2-Clause
//! Arrays of per-CPU statics: `percpu_counter!(pub static RX: [8])`, `N` adjacent slots of
//! the per-CPU section, each a counter with its own baseline.

use core::cell::UnsafeCell;
use core::marker::PhantomData;

use super::private::{add_at, StaticSlots};
use super::{copy, fetch_and_zero_at, fetch_at, installed};
use crate::{arch, Error};

/// `N` per-CPU counters declared as one `static` with
/// [`percpu_counter!`](crate::percpu_counter)`(static NAME: [N])`: adjacent slots of the
/// per-CPU section. An element's add is the register plus its slot's address (on x86_64
/// `lea` of the first slot, then one `add qword ptr gs:[reg + 8 * i], v`). An index out of
/// range panics with the index and the length.
pub struct StaticArray<S, const N: usize> {
    baselines: [UnsafeCell<u64>; N],
    _slots: PhantomData<S>,
}

// SAFETY: the baselines are only accessed through `baseline`'s atomic (or locked) functions.
unsafe impl<S, const N: usize> Sync for StaticArray<S, N> {}

impl<S, const N: usize> StaticArray<S, N> {
    /// An array that reads 0 (the macro's initialiser, [`static_array`](super::private::static_array)).
    pub(super) const fn new() -> Self {
        StaticArray {
            baselines: [const { UnsafeCell::new(0) }; N],
            _slots: PhantomData,
        }
    }
}

impl<S: StaticSlots, const N: usize> StaticArray<S, N> {
    /// Number of counters.
    pub const fn len(&self) -> usize {
        N
    }

    /// Whether the array has no counters.
    pub const fn is_empty(&self) -> bool {
        N == 0
    }

    /// Element `i`'s slot offset (its link-time address).
    fn offset(&self, i: usize) -> usize {
        assert!(
            i < N,
            "index {i} out of range for an array of {N} per-CPU statics"
        );
        S::first().offset() + 8 * i
    }

    /// Adds `v` to element `i` on the running CPU.
    #[inline(always)]
    pub fn add(&self, i: usize, v: i64) {
        add_at(self.offset(i), v)
    }

    /// Adds 1 to element `i` on the running CPU.
    #[inline(always)]
    pub fn inc(&self, i: usize) {
        self.add(i, 1)
    }

    /// Element `i`'s sum over the template and every installed CPU since its last zero.
    pub fn fetch(&self, i: usize) -> u64 {
        let off = self.offset(i);
        // SAFETY: element `i`'s own baseline word.
        unsafe { fetch_at(off, self.baselines[i].get()) }
    }

    /// Element `i`'s count since its last zero, zeroed as one step (lossless).
    pub fn fetch_and_zero(&self, i: usize) -> u64 {
        let off = self.offset(i);
        // SAFETY: element `i`'s own baseline word.
        unsafe { fetch_and_zero_at(off, self.baselines[i].get()) }
    }

    /// Every element's value into `out`.
    pub fn fetch_all(&self, out: &mut [u64; N]) {
        for (i, v) in out.iter_mut().enumerate() {
            *v = self.fetch(i);
        }
    }

    /// Every element's count since its last zero into `out`, each zeroed as one step.
    pub fn fetch_and_zero_all(&self, out: &mut [u64; N]) {
        for (i, v) in out.iter_mut().enumerate() {
            *v = self.fetch_and_zero(i);
        }
    }

    /// Zeroes every element, losslessly.
    pub fn zero_all(&self) {
        (0..N).for_each(|i| {
            self.fetch_and_zero(i);
        });
    }

    /// The raw value of element `i` on CPU `cpu` (not adjusted by zeroes):
    /// [`Error::NotInstalled`] before [`install_section`](super::install_section), [`Error::CpuOutOfRange`] past its CPUs.
    pub fn cpu_slot(&self, i: usize, cpu: usize) -> Result<u64, Error> {
        let off = self.offset(i);
        let shape = installed().ok_or(Error::NotInstalled)?;
        if cpu >= shape.ncpus {
            return Err(Error::CpuOutOfRange {
                cpu,
                ncpus: shape.ncpus,
            });
        }
        // SAFETY: an installed CPU's copy of a template slot.
        Ok(unsafe { arch::load_slot(copy(shape, cpu, off)) })
    }
}
