// SPDX-License-Identifier: BSD-2-Clause
//! The bring-up check: proof, on each CPU, that its adds land in its own block of a zone.
//!
//! A wrong set-up counts silently: a zone made for fewer CPUs than run (its `fetch` then
//! sums only some of them), two CPUs whose registers were swapped, a base or stride that is
//! not the kernel's, a riscv64 kernel whose per-CPU pointer is in `gp` while the crate adds
//! through `tp`. [`Zone::check_cpu`], called once by each CPU after its register is set, reads
//! back what the add will use as this CPU's base (x86_64 the GS base MSR, aarch64
//! `TPIDR_EL1`, riscv64 `tp` or `gp`, i386 the base of the `%fs` descriptor in this CPU's GDT,
//! elsewhere the platform's [`cpu_base`](crate::Platform::cpu_base) hook) and compares it
//! with the zone's block for the CPU, naming what is wrong.

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;

use crate::atomic::{AtomicU8, Ordering};
use crate::{arch, platform, Error, Zone, ZoneLayout};

impl Zone<'_> {
    /// The bring-up check: run once on CPU `cpu`, after its per-CPU register is set (by
    /// [`arch::set_cpu_base`] or by the kernel itself) and before it adds. `Ok(())` proves
    /// that this CPU's adds land in its own block of the zone; each wrong set-up has its
    /// error:
    ///
    /// | error | what is wrong |
    /// |---|---|
    /// | [`Error::CpuNotInZone`] | `cpu` is not below the zone's `ncpus`: the zone was made for fewer CPUs than run |
    /// | [`Error::CpuIndexMismatch`] | the platform's [`current_cpu`](crate::Platform::current_cpu) is not `cpu` (where the add asks it) |
    /// | [`Error::CpuRegisterUnset`] | the register holds 0: never set on this CPU |
    /// | [`Error::CpuRegisterForeign`] | the register holds another CPU's block: two CPUs' bases swapped, or `cpu` is not this CPU's index |
    /// | [`Error::CpuRegisterWrong`] | riscv64: this CPU's block is in the other register (`tp` vs `gp`, feature `riscv-gp`) |
    /// | [`Error::CpuRegisterOutside`] | the register holds no CPU's block of the zone: the zone's base or stride is not the kernel's |
    /// | [`Error::SegmentTooShort`] | i386, a zone that grows ([`grow_from`](Zone::grow_from)): the `%fs` segment does not span 4 GiB, so counters in chunks would fault |
    ///
    /// It reads registers only and writes nothing. Where the add reads the register at EL1 or
    /// CPL 0 (x86_64, aarch64, i386, riscv64 kernels) so does this call: run it in the kernel.
    ///
    /// ```
    /// use pcpu_counter::{sim::Machine, Error};
    /// let machine = Machine::new(2);
    /// let zone = machine.zone();
    /// assert_eq!(machine.run_on(1, || zone.check_cpu(1)), Ok(()));
    /// assert_eq!(machine.run_on(1, || zone.check_cpu(0)),
    ///            Err(Error::CpuRegisterForeign { cpu: 0, other: 1, register: pcpu_counter::arch::REGISTER }));
    /// assert!(matches!(machine.run_on(1, || zone.check_cpu(2)), Err(Error::CpuNotInZone { cpu: 2, ncpus: 2 })));
    /// ```
    pub fn check_cpu(&self, cpu: usize) -> Result<(), Error> {
        let checked = self.check_cpu_unkept(cpu);
        if let Err(e) = checked {
            FIRST_FAILURE.keep(cpu, e);
        }
        checked
    }

    /// [`check_cpu`](Zone::check_cpu) without keeping a failure: the C ABI keeps its own, as
    /// a code (`pcpu_cpu_check_first_failure`), in one word.
    pub(crate) fn check_cpu_unkept(&self, cpu: usize) -> Result<(), Error> {
        check(self.layout(), cpu)?;
        // A zone that grows: its chunks' offsets reach the whole address space.
        if self.grows() && platform::simulated_register().is_none() {
            if let Some(limit) = arch::segment_limit() {
                if limit != usize::MAX {
                    return Err(Error::SegmentTooShort { cpu, limit });
                }
            }
        }
        Ok(())
    }

    /// The first bring-up check that failed in this program, if any: the CPU it ran for and
    /// its error, kept by [`check_cpu`](Zone::check_cpu) (of any zone) for a kernel that
    /// checks before its console exists. Such a kernel runs the check where the docs place
    /// it (each CPU's per-CPU init), and once its console is up reports this and stops:
    ///
    /// ```
    /// use pcpu_counter::{sim::Machine, Error, Zone};
    /// let machine = Machine::new(2);
    /// let zone = machine.zone();
    /// // Early, no console: the result cannot be printed yet.
    /// let _ = machine.run_on(1, || zone.check_cpu(0));
    /// // Later, with a console:
    /// if let Some((cpu, e)) = Zone::first_failed_check() {
    ///     println!("bring-up check failed on CPU {cpu}: {e}");
    /// #   assert_eq!(e, Error::CpuRegisterForeign { cpu: 0, other: 1, register: pcpu_counter::arch::REGISTER });
    /// }
    /// ```
    ///
    /// Lock-free: the first failure is written once, by the CPU that records it (a CPU that
    /// fails at the same moment keeps nothing and does not wait); a later failure never
    /// replaces it. `None` while none failed (or while the first one is being written). C's
    /// `pcpu_cpu_check` keeps its own first failure, as a code
    /// (`pcpu_cpu_check_first_failure`).
    pub fn first_failed_check() -> Option<(usize, Error)> {
        FIRST_FAILURE.get()
    }
}

/// The first failed bring-up check: written once, lock-free (see
/// [`Zone::first_failed_check`]).
struct FirstFailure {
    /// `EMPTY`, `WRITING` (one CPU won the right to write), then `KEPT`.
    state: AtomicU8,
    failure: UnsafeCell<MaybeUninit<(usize, Error)>>,
}

const EMPTY: u8 = 0;
const WRITING: u8 = 1;
const KEPT: u8 = 2;

// SAFETY: `failure` is written only by the one CPU that moved `state` from EMPTY to WRITING,
// before it publishes KEPT (release); it is read only after KEPT is seen (acquire), and
// never written again.
unsafe impl Sync for FirstFailure {}

static FIRST_FAILURE: FirstFailure = FirstFailure {
    state: AtomicU8::new(EMPTY),
    failure: UnsafeCell::new(MaybeUninit::uninit()),
};

impl FirstFailure {
    /// Keeps `(cpu, e)` if no failure was kept before; never waits.
    fn keep(&self, cpu: usize, e: Error) {
        if self
            .state
            .compare_exchange(EMPTY, WRITING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: this CPU alone moved EMPTY to WRITING: nobody else writes or reads it.
            unsafe { (*self.failure.get()).write((cpu, e)) };
            self.state.store(KEPT, Ordering::Release);
        }
    }

    /// The kept failure, once written.
    fn get(&self) -> Option<(usize, Error)> {
        if self.state.load(Ordering::Acquire) != KEPT {
            return None;
        }
        // SAFETY: KEPT (acquire) follows the one write, and nothing writes it again.
        Some(unsafe { (*self.failure.get()).assume_init() })
    }
}

/// [`Zone::check_cpu`] on a layout.
pub(crate) fn check(layout: &ZoneLayout, cpu: usize) -> Result<(), Error> {
    let ncpus = layout.ncpus;
    if cpu >= ncpus {
        return Err(Error::CpuNotInZone { cpu, ncpus });
    }
    if asks_current_cpu() {
        let current = platform::current_cpu();
        if current != cpu {
            return Err(Error::CpuIndexMismatch { cpu, current });
        }
    }
    let expected = layout.cpu_base(cpu)?;
    let found = register()?;
    if found == expected {
        return Ok(());
    }
    Err(diagnose(layout, cpu, found, expected))
}

/// The CPU whose block of `layout` the running CPU's register holds: what an add through it
/// reaches. The early counters ask it before they move their counts through the register.
pub(crate) fn register_cpu(layout: &ZoneLayout) -> Result<usize, Error> {
    let found = register()?;
    match block_of(layout, found) {
        Some(cpu) => Ok(cpu),
        // Named as if CPU 0 were meant: the message shows what the register holds.
        None => Err(diagnose(layout, 0, found, layout.base)),
    }
}

/// Whether the add asks the platform for the current CPU (the portable fallback, which has
/// no register of its own): then its answer must be the CPU being brought up.
fn asks_current_cpu() -> bool {
    arch::BASE_FROM_PLATFORM && platform::simulated_register().is_none()
}

/// What the add will use as this CPU's base now.
fn register() -> Result<usize, Error> {
    if let Some(base) = platform::simulated_register() {
        return Ok(base);
    }
    // SAFETY: a kernel's bring-up runs at the privilege its add runs at (the caller's
    // contract, as documented on `check_cpu`); the reads have no side effects.
    unsafe { arch::current_base() }
}

/// The index of the CPU whose block `register` is, if any.
fn block_of(layout: &ZoneLayout, register: usize) -> Option<usize> {
    let delta = register.wrapping_sub(layout.base);
    if layout.stride == 0 || !delta.is_multiple_of(layout.stride) {
        return None;
    }
    let cpu = delta / layout.stride;
    (cpu < layout.ncpus).then_some(cpu)
}

/// Names what is wrong when CPU `cpu`'s register holds `found` instead of `expected`.
fn diagnose(layout: &ZoneLayout, cpu: usize, found: usize, expected: usize) -> Error {
    let register = arch::REGISTER;
    // First: a kernel that keeps its per-CPU pointer in the other register may leave the one
    // the add reads at 0.
    if let Some((other, value)) = arch::other_register() {
        if value == expected {
            return Error::CpuRegisterWrong {
                cpu,
                holds_block: other,
                add_reads: register,
            };
        }
    }
    if found == 0 {
        return Error::CpuRegisterUnset { cpu, register };
    }
    match block_of(layout, found) {
        Some(other) => Error::CpuRegisterForeign {
            cpu,
            other,
            register,
        },
        None => Error::CpuRegisterOutside {
            cpu,
            register,
            found,
            expected,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> ZoneLayout {
        ZoneLayout {
            base: 0x10_0000,
            stride: 0x1000,
            offset: 64,
            len: 512,
            ncpus: 4,
        }
    }

    #[test]
    fn block_of_finds_each_cpu_and_nothing_else() {
        let l = layout();
        for cpu in 0..4 {
            assert_eq!(block_of(&l, l.base + cpu * l.stride), Some(cpu));
        }
        assert_eq!(
            block_of(&l, l.base + 4 * l.stride),
            None,
            "past the last CPU"
        );
        assert_eq!(
            block_of(&l, l.base + 8),
            None,
            "inside a block, not at its start"
        );
        assert_eq!(block_of(&l, l.base - l.stride), None, "below CPU 0");
    }

    #[test]
    fn diagnose_names_each_wrong_register() {
        let l = layout();
        let register = arch::REGISTER;
        assert_eq!(
            diagnose(&l, 1, 0, l.base + l.stride),
            Error::CpuRegisterUnset { cpu: 1, register }
        );
        assert_eq!(
            diagnose(&l, 1, l.base, l.base + l.stride),
            Error::CpuRegisterForeign {
                cpu: 1,
                other: 0,
                register
            }
        );
        // A kernel whose blocks are 0x2000 apart while the zone says 0x1000.
        assert_eq!(
            diagnose(&l, 3, l.base + 3 * 0x2000, l.base + 3 * l.stride),
            Error::CpuRegisterOutside {
                cpu: 3,
                register,
                found: l.base + 3 * 0x2000,
                expected: l.base + 3 * l.stride
            }
        );
    }

    /// On the simulation: a CPU checks its own index, another CPU's index (swapped bases),
    /// and an index the zone lacks (ncpus too small).
    #[test]
    fn check_on_simulated_cpus() {
        let machine = crate::sim::Machine::new(3);
        let zone = machine.zone();
        for cpu in 0..3 {
            assert_eq!(machine.run_on(cpu, || zone.check_cpu(cpu)), Ok(()));
            assert_eq!(machine.run_on(cpu, || register_cpu(zone.layout())), Ok(cpu));
        }
        assert_eq!(
            machine.run_on(2, || zone.check_cpu(1)),
            Err(Error::CpuRegisterForeign {
                cpu: 1,
                other: 2,
                register: arch::REGISTER
            })
        );
        assert_eq!(
            machine.run_on(0, || zone.check_cpu(3)),
            Err(Error::CpuNotInZone { cpu: 3, ncpus: 3 })
        );
    }
}
