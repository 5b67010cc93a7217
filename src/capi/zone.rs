// SPDX-License-Identifier: BSD-2-Clause
//! The C ABI's zone: which zone it is ([`current_zone`]), what a `counter_u64_t` names in it
//! ([`target`], [`resolve`]), what it holds, and the per-CPU register setup from C. Making
//! the zone is `init.rs`. The other C ABI files look the zone and their counters up here; of
//! them this file imports only `slot` (a leaf), `early` (an early counter's word) and `error`.

use core::ffi::c_int;

use crate::atomic::{AtomicUsize, Ordering};

use super::early;
use super::error::{code, PCPU_ECPU, PCPU_EINVAL, PCPU_ENOTINSTALLED, PCPU_OK};
use super::slot::{self, counter_u64_t, Target};
// i386 cannot load its FS base here (pcpu_set_cpu_base), so it needs no arch call.
#[cfg(not(target_arch = "x86"))]
use crate::arch;
use crate::zone::global;
use crate::Zone;

/// The zone the C ABI allocates from: the global zone (`pcpu_zone_init`'s; in the host
/// simulation `pcpu_sim_machine_new`'s).
pub(crate) fn current_zone() -> Option<&'static Zone<'static>> {
    global::global_zone().ok()
}

/// Where an add, fetch or zero of `c` goes; aborts as [`resolve`] once a zone exists.
pub(crate) fn target(c: counter_u64_t) -> Target {
    if current_zone().is_none() && !c.is_null() {
        // SAFETY (of later uses): before any zone exists, only `COUNTER_U64_DEFINE_EARLY`
        // makes counters, and their values are their words' addresses less the early base.
        return Target::Early(early::word(c));
    }
    let (zone, off) = resolve(c);
    Target::Slot(zone, off)
}

/// The zone and offset behind a handle of the C zone; aborts with a message (through the
/// panic, which cannot unwind into C) when `c` is no slot of it.
pub(crate) fn resolve(c: counter_u64_t) -> (&'static Zone<'static>, usize) {
    // Fixed messages: the C kernel library reports them without `core::fmt`.
    let off = c as usize;
    let zone = current_zone()
        .unwrap_or_else(|| panic!("pcpu-counter: counter used before any zone exists"));
    // SAFETY: a handle the C caller vouches for (every C call's contract).
    if off == 0 || !unsafe { zone.holds_handle(off) } {
        slot::not_a_counter();
    }
    (zone, off)
}

/// Where a zone's per-CPU memory lies (Rust: `ZoneLayout`).
///
/// `ncpus` blocks `stride` bytes apart from `base`, each with `len` bytes of counter area at `offset`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pcpu_zone_layout {
    /// The per-CPU register value of CPU 0: the start of CPU 0's block.
    pub base: usize,
    /// Bytes from one CPU's block to the next.
    pub stride: usize,
    /// Offset of the counter area inside each block.
    pub offset: usize,
    /// Bytes of counter area in each block: 8 per counter.
    pub len: usize,
    /// Number of possible CPUs.
    pub ncpus: usize,
}

/// Stores in `*base` the value CPU `cpu`'s per-CPU register must hold.
///
/// Returns 0, `PCPU_EINVAL` (NULL `base`), `PCPU_ENOTINSTALLED` or `PCPU_ECPU`.
///
/// # Safety
/// `base` is NULL or valid for a write.
///
/// ```
/// use pcpu_counter::{capi::*, sim::capi::*};
/// assert_eq!(pcpu_sim_machine_new(2, 64), 0);
/// let mut base = 0usize;
/// assert_eq!(unsafe { pcpu_zone_cpu_base(1, &mut base) }, 0);
/// assert_eq!(unsafe { pcpu_zone_cpu_base(2, &mut base) }, PCPU_ECPU);
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_zone_cpu_base(cpu: usize, base: *mut usize) -> c_int {
    if base.is_null() {
        return PCPU_EINVAL;
    }
    let Some(zone) = current_zone() else {
        return PCPU_ENOTINSTALLED;
    };
    match zone.cpu_base(cpu) {
        Ok(b) => {
            // SAFETY: non-null and writable per the contract.
            unsafe { *base = b };
            PCPU_OK
        }
        Err(e) => code(e),
    }
}

/// Kernel only: points this CPU's per-CPU register at CPU `cpu`'s block.
///
/// The block is CPU `cpu`'s in the global zone ([`arch::set_cpu_base`]: the GS base MSR on x86_64). Kernel only: call it once on each
/// CPU, at CPL 0 / EL1, before that CPU adds.
///
/// Returns 0, `PCPU_ENOTINSTALLED`, `PCPU_ECPU`, or `PCPU_EINVAL` if the arch rejects the
/// address, and always on i386, whose FS base is a descriptor in the kernel's own GDT (point
/// the kernel's per-CPU data segment at `pcpu_zone_cpu_base(cpu)` instead).
///
/// # Safety
/// As [`arch::set_cpu_base`]: runs in the kernel, on CPU `cpu`, and nothing else on it
/// relies on the register's previous value.
///
/// ```no_run
/// // In a kernel, on CPU 3 (in user space this faults):
/// assert_eq!(unsafe { pcpu_counter::capi::pcpu_set_cpu_base(3) }, 0);
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_set_cpu_base(cpu: usize) -> c_int {
    let Some(zone) = current_zone() else {
        return PCPU_ENOTINSTALLED;
    };
    let Ok(base) = zone.cpu_base(cpu) else {
        return PCPU_ECPU;
    };
    // i386's FS base is a descriptor in the kernel's own GDT, which this call cannot find: a
    // C kernel writes `pcpu_zone_cpu_base(cpu)` into its per-CPU data segment itself.
    #[cfg(target_arch = "x86")]
    let set: Result<(), crate::Error> = Err(crate::Error::BadCpuBase { base });
    // SAFETY: the caller's contract.
    #[cfg(not(target_arch = "x86"))]
    let set = unsafe { arch::set_cpu_base(base) };
    match set {
        Ok(()) => PCPU_OK,
        Err(_) => PCPU_EINVAL,
    }
}

/// The bring-up check: 0 when CPU `cpu`'s adds land in its own block, else what is wrong.
///
/// [`Zone::check_cpu`] from C: run once on CPU `cpu`, after its per-CPU register is set and
/// before it adds. 0 proves that this CPU's adds land in its own block of the installed zone;
/// otherwise the code names what is wrong:
///
/// | code | what is wrong |
/// |---|---|
/// | `PCPU_ENOTINZONE` | `cpu` is not below the zone's `ncpus`: the zone was made for fewer CPUs than run |
/// | `PCPU_ECPUINDEX` | the platform's current CPU (`_pcpu_counter_0_1_current_cpu`) is not `cpu` (the portable add) |
/// | `PCPU_EREGUNSET` | the register holds 0: never set on this CPU |
/// | `PCPU_EREGFOREIGN` | it holds another CPU's block: two CPUs' bases swapped, or `cpu` is not this CPU's index |
/// | `PCPU_EREGWRONG` | riscv64: the block is in the other register (`tp` vs `gp`) |
/// | `PCPU_EREGOUTSIDE` | it holds no CPU's block: the zone's base or stride is not the kernel's |
/// | `PCPU_ESEGLIMIT` | i386, a zone with chunk hooks (`pcpu_zone_grow`): the `%fs` segment does not span 4 GiB |
///
/// and `PCPU_ENOTINSTALLED` before `pcpu_zone_init`. It reads registers and writes nothing
/// but the first failure, which `pcpu_cpu_check_first_failure` returns later (for a kernel
/// that checks before its console exists).
///
/// # Safety
/// Kernel only: runs on CPU `cpu`, at the privilege the add runs at (CPL 0 / EL1 / S-mode).
///
/// ```
/// use pcpu_counter::{capi::*, sim::capi::*};
/// assert_eq!(pcpu_sim_machine_new(2, 64), 0);
/// assert_eq!(pcpu_sim_bind(1), 0);
/// assert_eq!(unsafe { pcpu_cpu_check(1) }, 0);
/// assert_eq!(unsafe { pcpu_cpu_check(0) }, PCPU_EREGFOREIGN);
/// assert_eq!(unsafe { pcpu_cpu_check(2) }, PCPU_ENOTINZONE);
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_cpu_check(cpu: usize) -> c_int {
    let Some(zone) = current_zone() else {
        return PCPU_ENOTINSTALLED;
    };
    match zone.check_cpu_unkept(cpu) {
        Ok(()) => PCPU_OK,
        Err(e) => {
            let rc = code(e);
            // The first failure, in one word: the CPU above the code's 6 bits (a CPU index
            // that does not fit is kept as the largest that does).
            let cpu = cpu.min(usize::MAX >> CODE_BITS);
            let word = cpu << CODE_BITS | rc.unsigned_abs() as usize;
            let _ = FIRST_FAILURE.compare_exchange(0, word, Ordering::AcqRel, Ordering::Relaxed);
            rc
        }
    }
}

/// Bits of a kept failure's word that hold its code (negated: every `PCPU_E*` is above -64).
const CODE_BITS: u32 = 6;

/// The first failed `pcpu_cpu_check`: 0, or its CPU and negated code (see `pcpu_cpu_check`),
/// set once by a compare-and-swap: lock-free, and a later failure never replaces it.
static FIRST_FAILURE: AtomicUsize = AtomicUsize::new(0);

/// The first `pcpu_cpu_check` that failed: its code (0: none), its CPU stored in `*cpu`.
///
/// `*cpu` is left alone when none failed. (The C twin of [`Zone::first_failed_check`], which
/// keeps the Rust checks' failures.)
///
/// For a kernel that runs `pcpu_cpu_check` before its console exists: once it can print, it
/// calls this, and reports and stops on a nonzero code (`pcpu_strerror` names it). The first
/// failure is kept once, lock-free; a later one never replaces it.
///
/// # Safety
/// `cpu` is NULL (the CPU is not wanted) or valid for a write.
///
/// ```
/// use pcpu_counter::{capi::*, sim::capi::*};
/// assert_eq!(pcpu_sim_machine_new(2, 64), 0);
/// let mut cpu = usize::MAX;
/// assert_eq!(unsafe { pcpu_cpu_check_first_failure(&mut cpu) }, 0);
/// assert_eq!(pcpu_sim_bind(1), 0);
/// assert_eq!(unsafe { pcpu_cpu_check(0) }, PCPU_EREGFOREIGN); // early: no console yet
/// assert_eq!(unsafe { pcpu_cpu_check(2) }, PCPU_ENOTINZONE);  // a later failure
/// assert_eq!(unsafe { pcpu_cpu_check_first_failure(&mut cpu) }, PCPU_EREGFOREIGN);
/// assert_eq!(cpu, 0);
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_cpu_check_first_failure(cpu: *mut usize) -> c_int {
    let word = FIRST_FAILURE.load(Ordering::Acquire);
    if word == 0 {
        return PCPU_OK;
    }
    if !cpu.is_null() {
        // SAFETY: non-null and writable per the contract.
        unsafe { *cpu = word >> CODE_BITS };
    }
    -((word & ((1 << CODE_BITS) - 1)) as c_int)
}

/// Counters the installed zone holds at once (0 when none is installed).
///
/// Its first blocks and, in a zone that grows, the chunks it uses; not the emptied chunk it
/// keeps as a spare (`pcpu_zone_spare`, given back by `pcpu_zone_trim`).
///
/// ```
/// use pcpu_counter::{capi::*, sim::capi::*};
/// assert_eq!(pcpu_sim_machine_new(2, 64), 0);
/// assert_eq!(pcpu_zone_capacity(), 64);
/// ```
#[no_mangle]
pub extern "C" fn pcpu_zone_capacity() -> usize {
    current_zone().map_or(0, Zone::capacity)
}

/// Slots of the installed zone in use now (0 when none is installed).
///
/// ```
/// use pcpu_counter::{capi::*, sim::capi::*};
/// assert_eq!(pcpu_sim_machine_new(2, 64), 0);
/// let c = counter_u64_alloc(M_NOWAIT);
/// assert_eq!(pcpu_zone_in_use(), 1);
/// unsafe { counter_u64_free(c) };
/// assert_eq!(pcpu_zone_in_use(), 0);
/// ```
#[no_mangle]
pub extern "C" fn pcpu_zone_in_use() -> usize {
    current_zone().map_or(0, Zone::in_use)
}

/// The number of CPUs of the installed zone (0 when none is installed).
///
/// ```
/// use pcpu_counter::{capi::*, sim::capi::*};
/// assert_eq!(pcpu_sim_machine_new(3, 64), 0);
/// assert_eq!(pcpu_zone_ncpus(), 3);
/// ```
#[no_mangle]
pub extern "C" fn pcpu_zone_ncpus() -> usize {
    current_zone().map_or(0, Zone::ncpus)
}
