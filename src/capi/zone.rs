//! The C ABI's zone: which zone it is ([`current_zone`]), what a `counter_u64_t` names in it
//! ([`target`], [`resolve`]), its setup and the per-CPU register setup from C.
//!
//! Zone setup moves the `COUNTER_U64_DEFINE_EARLY` counters into the zone (`early`, which
//! only this file and the simulated machine's setup use). The other C ABI files look the
//! zone and their counters up here; of them this file imports only `slot` (a leaf), `early`,
//! `error` and `protect`.

use core::ffi::c_int;

use super::error::{
    code, PCPU_ECPU, PCPU_EFULL, PCPU_EINSTALLED, PCPU_EINVAL, PCPU_ENOTINSTALLED, PCPU_OK,
};
use super::slot::{self, counter_u64_t, Target};
use super::{early, protect};
// i386 cannot load its FS base here (pcpu_set_cpu_base), so it needs no arch call.
#[cfg(not(target_arch = "x86"))]
use crate::arch;
use crate::{freebsd, Zone, ZoneLayout};

/// The zone the C ABI allocates from: the global zone (`pcpu_zone_init`'s; in the host
/// simulation `pcpu_sim_machine_new`'s).
pub(crate) fn current_zone() -> Option<&'static Zone<'static>> {
    freebsd::global_zone().ok()
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
    if off == 0 || !zone.holds_offset(off) {
        slot::not_a_counter();
    }
    (zone, off)
}

/// Where a zone's per-CPU memory lies (the C form of [`ZoneLayout`]).
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

/// Installs the global zone on the memory `layout` describes (once), and gives every
/// `COUNTER_U64_DEFINE_EARLY` counter of the program a slot, with its early count.
///
/// `meta` (`meta_words` 64-bit words: a zero baseline per counter and a bitmap bit per
/// counter, `len / 8 + len / 8 / 64` rounded up) is the zone's metadata.
///
/// Returns 0, `PCPU_EINVAL` (NULL pointer), `PCPU_EINSTALLED`, the code of the first
/// broken layout rule (`PCPU_ENOCPUS`, `PCPU_ESTRIDE`, `PCPU_EMISALIGNED`, ...),
/// `PCPU_EFULL` (no room for the early counters) or `PCPU_ECPU` (more than
/// `PCPU_NEST_CPUS` CPUs where the arch needs protection). On failure nothing changed.
/// Call it before other CPUs start: it moves the early counts, which adds must not race.
///
/// # Safety
/// As [`Zone::from_raw_parts`]: every CPU's counter area is valid memory used by nothing
/// else for the rest of the program, and so is the metadata.
///
/// ```
/// use pcpu_counter::capi::{pcpu_zone_init, pcpu_zone_layout, PCPU_ENOCPUS};
/// let bad = pcpu_zone_layout { base: 0x1000, stride: 64, offset: 0, len: 64, ncpus: 0 };
/// let mut meta = [0u64; 1];
/// assert_eq!(unsafe { pcpu_zone_init(&bad, meta.as_mut_ptr(), 1) }, PCPU_ENOCPUS);
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_zone_init(
    layout: *const pcpu_zone_layout,
    meta: *mut u64,
    meta_words: usize,
) -> c_int {
    if layout.is_null() || meta.is_null() {
        return PCPU_EINVAL;
    }
    // SAFETY: non-null and readable per the contract.
    let l = unsafe { *layout };
    let layout = ZoneLayout {
        base: l.base,
        stride: l.stride,
        offset: l.offset,
        len: l.len,
        ncpus: l.ncpus,
    };
    // SAFETY: the metadata is valid for `meta_words` words for ever, per the contract.
    let meta = unsafe { core::slice::from_raw_parts_mut(meta, meta_words) };
    // SAFETY: the memory contract is the caller's, as documented.
    let zone = match unsafe { Zone::from_raw_parts(layout, meta) } {
        Ok(zone) => zone,
        Err(e) => return code(e),
    };
    if let Err(e) = fits_c(&zone) {
        return e;
    }
    match freebsd::install(zone) {
        Ok(zone) => {
            early::move_into(zone);
            PCPU_OK
        }
        Err(e) => code(e),
    }
}

/// Says what the boot CPU's per-CPU register holds until `pcpu_zone_init`, so that early
/// counters are right whatever it holds.
///
/// The inline `counter_u64_add` adds at register + `name`; an early counter's `name` starts
/// as its word's address, right while the register is 0. A kernel whose register holds
/// something else before the zone exists (a hart id in `tp`, a per-CPU pointer set at reset;
/// on i386 the base of the segment in `%fs`) calls this with that value on the boot CPU,
/// before the first add to an early counter and again after each change of the register
/// until `pcpu_zone_init`; the library rewrites every early `name` to word - `base`.
///
/// Returns 0, `PCPU_EINSTALLED` once a zone exists (early counters are slots then), or
/// `PCPU_EINVAL` when an early counter would read as NULL (`base` is its word's address).
/// On failure nothing changed.
///
/// # Safety
/// Runs on the boot CPU before other CPUs start, with nothing adding to an early counter
/// meanwhile (interrupts off), and from this call until the next one (or `pcpu_zone_init`)
/// the boot CPU's per-CPU register holds `base`.
///
/// ```
/// use pcpu_counter::capi::*;
/// assert_eq!(pcpu_sim_machine_new(1, 64), 0);
/// assert_eq!(unsafe { pcpu_early_base(0x8000) }, PCPU_EINSTALLED);
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_early_base(base: usize) -> c_int {
    if current_zone().is_some() {
        return PCPU_EINSTALLED;
    }
    if early::rebase(base) {
        PCPU_OK
    } else {
        PCPU_EINVAL
    }
}

/// What a zone for the C ABI must hold beyond its layout rules: a slot for every
/// `COUNTER_U64_DEFINE_EARLY` counter (`PCPU_EFULL`), and no more CPUs than the nullary
/// `counter_enter()` keeps nesting for where the arch needs protection (`PCPU_ECPU`).
pub(crate) fn fits_c(zone: &Zone<'_>) -> Result<(), c_int> {
    if !protect::nest_fits(zone.ncpus()) {
        return Err(PCPU_ECPU);
    }
    if !early::fit(zone) {
        return Err(PCPU_EFULL);
    }
    Ok(())
}

/// Stores in `*base` the value CPU `cpu`'s per-CPU register must hold.
///
/// Returns 0, `PCPU_EINVAL` (NULL `base`), `PCPU_ENOTINSTALLED` or `PCPU_ECPU`.
///
/// # Safety
/// `base` is NULL or valid for a write.
///
/// ```
/// use pcpu_counter::capi::*;
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

/// Counters the installed zone holds at once (0 when none is installed).
///
/// ```
/// use pcpu_counter::capi::*;
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
/// use pcpu_counter::capi::*;
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
/// use pcpu_counter::capi::*;
/// assert_eq!(pcpu_sim_machine_new(3, 64), 0);
/// assert_eq!(pcpu_zone_ncpus(), 3);
/// ```
#[no_mangle]
pub extern "C" fn pcpu_zone_ncpus() -> usize {
    current_zone().map_or(0, Zone::ncpus)
}
