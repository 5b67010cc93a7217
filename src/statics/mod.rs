// SPDX-License-Identifier: BSD-2-Clause
//! Per-CPU statics: counters declared as `static`s in any crate of the kernel, placed by the
//! linker in the per-CPU section `pcpu_counter_statics` (FreeBSD's `DPCPU_DEFINE`, Linux's
//! `DEFINE_PER_CPU`), with no run-time allocation and usable before any zone exists.
//!
//! ```ignore
//! pcpu_counter::percpu_counter!(pub static RX_PACKETS);
//! RX_PACKETS.inc(); // x86_64: add qword ptr gs:[rip + RX_PACKETS::SLOT], 1
//! ```
//!
//! # The section and the register
//!
//! Each counter is one 8-byte slot in the section (the *template*, between the linker's
//! `__start_pcpu_counter_statics` and `__stop_pcpu_counter_statics`). At bring-up the kernel
//! gives every CPU a copy of the section (a *block*, evenly spaced: block `i` is
//! `block_0 + i * stride`) and points CPU `i`'s per-CPU register at `block_i - start`
//! (wrapping), so that the register plus a slot's *link-time address* is CPU `i`'s copy of
//! it: the slot's address is its offset, and the add needs no handle. On x86_64 it is one
//! `add qword ptr gs:[rip + SLOT], v` (GS base plus the slot's rip-relative address), valid in
//! static and position-independent builds, as Linux's `this_cpu_add` since 6.x; on aarch64
//! `adrp; add; mrs tpidr_el1; add; ldadd` (or the LL/SC loop), on riscv64 `auipc; addi; add;
//! amoadd.d` off `tp` (or `gp`), on i386 the `cmpxchg8b fs:` loop, elsewhere the platform's
//! base plus the slot under protection.
//!
//! The registers are `base + i * stride` with `base = block_0 - start`: an area's shape
//! ([`AreaShape`]). [`install_section`] tells the crate that shape and carves the template's range
//! (`start..stop`, register-relative) out of the kernel's [`Area`], so that a zone that would
//! need other register values ([`Error::AreaMismatch`]), or whose counter area some CPU's
//! copy would overlap ([`Error::ZoneOverlap`]), is refused, and the other way round.
//!
//! # Before install
//!
//! While a CPU's register still holds 0 (the reset value of GS base and `TPIDR_EL1`), its
//! add reaches the template itself: a static counts from the first instruction of the
//! kernel, on the boot CPU, before any zone or block exists. [`install_section`] does not copy the
//! template into the blocks (a copy made after adds would count them once per CPU): it clears
//! every block, and [`StaticCounter::fetch`] sums the template with the blocks, so the early
//! counts are kept, once. A kernel may also make CPU 0's block the template itself
//! (`base = 0`); the template is then summed as that CPU's block, not twice. Only the boot
//! CPU may add through register 0 (two CPUs adding to the template at once could lose adds):
//! every other CPU's register holds its block before it adds.
//!
//! # Fetch and zero
//!
//! A static's baseline word lives in the `static` itself (not in the per-CPU section), and
//! `fetch`/`zero`/`fetch_and_zero` are the zone's lossless protocol over the template and the
//! installed blocks.

mod array;
mod macros;
pub(crate) mod private;

pub use array::StaticArray;
use private::{Slot, StaticSlot};

use core::cell::UnsafeCell;
use core::marker::PhantomData;

use crate::area::Area;
use crate::atomic::{AtomicPtr, Ordering};
use crate::{arch, baseline, AddressSpace, AreaShape, Error};

/// The name of the per-CPU section, a C identifier so that the linker defines its bounds.
pub const SECTION: &str = "pcpu_counter_statics";

// The section is ELF's (a named section whose bounds GNU ld and lld define): on Mach-O,
// COFF and wasm hosts, which run no kernel and have no per-CPU register (no add runs there),
// the slots are plain statics and the template is empty.
#[cfg(not(any(target_vendor = "apple", target_os = "windows", target_family = "wasm")))]
extern "C" {
    /// The template's bounds, defined by the linker (or the kernel's linker script).
    static __start_pcpu_counter_statics: [u8; 0];
    static __stop_pcpu_counter_statics: [u8; 0];
}

/// The library's own slot, so that the section (and its bounds) exists in every program.
#[used]
#[cfg_attr(
    not(any(target_vendor = "apple", target_os = "windows", target_family = "wasm")),
    unsafe(link_section = "pcpu_counter_statics")
)]
static SENTINEL: Slot = Slot::new();

/// The template's register-relative range: `start..stop`.
pub fn template() -> (usize, usize) {
    // Only the addresses of the linker's symbols are taken; reading the sentinel keeps the
    // object that holds it linked.
    let sentinel = SENTINEL.offset();
    cfg_if::cfg_if! {
        if #[cfg(not(any(target_vendor = "apple", target_os = "windows", target_family = "wasm")))] {
            let _ = sentinel;
            let start = core::ptr::addr_of!(__start_pcpu_counter_statics) as usize;
            let stop = core::ptr::addr_of!(__stop_pcpu_counter_statics) as usize;
            (start, stop)
        } else {
            (sentinel, sentinel)
        }
    }
}

/// A per-CPU counter declared as a `static` with [`percpu_counter!`](crate::percpu_counter).
///
/// Its slot is in the per-CPU section; the `static` itself holds the zero baseline. `add`
/// and `inc` reach the running CPU's copy of the slot through the per-CPU register and the
/// slot's link-time address, with no load of a handle; `fetch` sums the template and every
/// installed CPU's copy (see the module's docs). The consistency rules are
/// [`Counter`](crate::Counter)'s.
pub struct StaticCounter<S> {
    baseline: UnsafeCell<u64>,
    _slot: PhantomData<S>,
}

// SAFETY: the baseline is only accessed through `baseline`'s atomic (or locked) functions.
unsafe impl<S> Sync for StaticCounter<S> {}

impl<S> StaticCounter<S> {
    /// A counter that reads 0 (the macro's initialiser, [`private::static_counter`]).
    pub(super) const fn new() -> Self {
        StaticCounter {
            baseline: UnsafeCell::new(0),
            _slot: PhantomData,
        }
    }
}

impl<S: StaticSlot> StaticCounter<S> {
    /// Adds `v` (which may be negative) to the running CPU's copy: on x86_64 one
    /// `add qword ptr gs:[rip + SLOT], v`.
    #[inline(always)]
    pub fn add(&self, v: i64) {
        S::add(v)
    }

    /// Adds 1: on x86_64 one `add qword ptr gs:[rip + SLOT], 1`.
    #[inline(always)]
    pub fn inc(&self) {
        S::inc()
    }

    /// The slot's register-relative offset (its link-time address): what C's
    /// `pcpu_static_fetch` takes.
    pub fn offset(&self) -> usize {
        S::slot().offset()
    }

    /// The sum over the template and every installed CPU since the last zero.
    pub fn fetch(&self) -> u64 {
        // SAFETY: the counter's own baseline word.
        unsafe { fetch_at(self.offset(), self.baseline.get()) }
    }

    /// Returns the count since the last zero and zeroes it, as one step (the zone's lossless
    /// protocol: the baseline moves, no CPU's copy is written).
    pub fn fetch_and_zero(&self) -> u64 {
        // SAFETY: the counter's own baseline word.
        unsafe { fetch_and_zero_at(self.offset(), self.baseline.get()) }
    }

    /// Resets the counter to 0 without writing any CPU's copy.
    pub fn zero(&self) {
        self.fetch_and_zero();
    }

    /// The raw value of CPU `cpu`'s copy (not adjusted by zeroes): [`Error::NotInstalled`]
    /// before [`install_section`], [`Error::CpuOutOfRange`] past the installed CPUs.
    pub fn cpu_slot(&self, cpu: usize) -> Result<u64, Error> {
        let shape = installed().ok_or(Error::NotInstalled)?;
        if cpu >= shape.ncpus {
            return Err(Error::CpuOutOfRange {
                cpu,
                ncpus: shape.ncpus,
            });
        }
        // SAFETY: an installed CPU's copy of a template slot.
        Ok(unsafe { arch::load_slot(copy(shape, cpu, self.offset())) })
    }
}

impl<S: StaticSlot> core::fmt::Debug for StaticCounter<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StaticCounter")
            .field("offset", &self.offset())
            .field("value", &self.fetch())
            .finish()
    }
}

/// The area [`install_section`] carved the template from (null before): its lock-free register
/// values are the installed shape.
static AREA: AtomicPtr<Area> = AtomicPtr::new(core::ptr::null_mut());

/// The installed area, if any.
fn installed_area() -> Option<&'static Area> {
    // SAFETY: an installed area outlives its install (`install_in`'s contract), and only
    // the simulation's `uninstall`, when no fetch runs, ends one.
    unsafe { AREA.load(Ordering::Acquire).as_ref() }
}

/// The shape [`install_section`] recorded, if any.
pub fn installed() -> Option<AreaShape> {
    installed_area().and_then(Area::shape)
}

/// CPU `cpu`'s copy of the slot at `off`.
fn copy(shape: AreaShape, cpu: usize, off: usize) -> *mut u64 {
    shape
        .base
        .wrapping_add(cpu.wrapping_mul(shape.stride))
        .wrapping_add(off) as *mut u64
}

/// The wrapping sum of the slot at `off`: the template, and every installed CPU's copy (the
/// template once, where a CPU's block is the template itself).
fn sum(off: usize) -> u64 {
    let mut total = 0u64;
    let mut template_is_a_block = false;
    if let Some(area) = installed_area() {
        let mut cpu = 0;
        while let Ok(register) = area.register(cpu) {
            let p = register.wrapping_add(off);
            template_is_a_block |= p == off;
            // SAFETY: an installed CPU's copy of a template slot.
            total = total.wrapping_add(unsafe { arch::load_slot(p as *mut u64) });
            cpu += 1;
        }
    }
    if !template_is_a_block {
        // SAFETY: the template slot itself, in the image for ever.
        total = total.wrapping_add(unsafe { arch::load_slot(off as *mut u64) });
    }
    total
}

/// The count of the slot at `off` since its last zero: the sum less the baseline at `word`.
///
/// # Safety
/// `off` is a template slot; `word` is its aligned baseline word, live and only accessed
/// through `baseline`.
pub(crate) unsafe fn fetch_at(off: usize, word: *mut u64) -> u64 {
    // SAFETY: per the caller.
    let b = unsafe { baseline::load(word) };
    sum(off).wrapping_sub(b)
}

/// The count of the slot at `off` since its last zero, zeroed as one step: the zone's
/// lossless protocol (read the baseline, then the slots, and move the baseline by CAS).
///
/// # Safety
/// As [`fetch_at`].
pub(crate) unsafe fn fetch_and_zero_at(off: usize, word: *mut u64) -> u64 {
    loop {
        // SAFETY: per the caller.
        let old = unsafe { baseline::load(word) };
        let s = sum(off);
        // SAFETY: as above.
        if unsafe { baseline::replace(word, old, s) } {
            return s.wrapping_sub(old);
        }
    }
}

/// Tells the crate where every CPU's copy of the per-CPU section lies: CPU `i`'s register
/// holds `shape.base + i * shape.stride` (wrapping), and its block is that plus the
/// template's start. Carves the template's range from `area` (the kernel's
/// [`Area::global`]), clears every block that is not the template itself, and records the
/// shape for `fetch`. Call it once, on the boot CPU, before any CPU's register holds its
/// block.
///
/// Fails, writing nothing and changing nothing, with [`Error::AlreadyInstalled`] (a second
/// call), [`Error::NoCpus`], [`Error::StrideNotMultipleOf8`], [`Error::Misaligned`] (the
/// base), [`Error::StrideTooSmall`] (a stride below the template's length: two CPUs' copies
/// would overlap), the copies the CPU cannot write, each naming the first such CPU and its
/// copy's address ([`Error::Unaddressable`]: an address the target cannot have, such as a
/// non-canonical one on x86_64, [`AddressSpace::TARGET`]; [`Error::WrapsAround`]: a copy
/// past the end of the address space; [`Error::CopyOverlapsTemplate`]: a copy over part of
/// the template), or the area's [`Error::AreaMismatch`], [`Error::ZoneOverlap`] and
/// [`Error::TooManyZones`].
///
/// # Safety
/// For every CPU `i`, the bytes from `shape.base + i * shape.stride + start` to `+ (stop -
/// start)` (wrapping) are valid for reads and writes for ever and used by nothing else; no
/// CPU adds to them yet.
pub unsafe fn install_section(area: &'static Area, shape: AreaShape) -> Result<(), Error> {
    // SAFETY: the caller's contract; the area lives for ever.
    unsafe { install_in(area, shape) }
}

/// Renamed [`install_section`] (`freebsd::install` installs the global zone).
///
/// # Safety
/// As [`install_section`].
#[deprecated(
    note = "renamed to `statics::install_section` (`freebsd::install` installs the global zone)"
)]
pub unsafe fn install(area: &'static Area, shape: AreaShape) -> Result<(), Error> {
    // SAFETY: the caller's contract is `install_section`'s.
    unsafe { install_section(area, shape) }
}

/// As [`install_section`], in an area that [`uninstall`] is called for before it goes (the
/// simulation's machines).
///
/// # Safety
/// As [`install_section`], for as long as installed; `area` outlives the install.
pub(crate) unsafe fn install_in(area: &Area, shape: AreaShape) -> Result<(), Error> {
    let (start, stop) = template();
    let len = stop - start;
    if !AREA.load(Ordering::Relaxed).is_null() {
        return Err(Error::AlreadyInstalled);
    }
    let AreaShape {
        base,
        stride,
        ncpus,
    } = shape;
    if ncpus == 0 {
        return Err(Error::NoCpus);
    }
    if !stride.is_multiple_of(8) {
        return Err(Error::StrideNotMultipleOf8 { stride });
    }
    if !base.is_multiple_of(8) {
        return Err(Error::Misaligned { addr: base });
    }
    if stride < len {
        return Err(Error::StrideTooSmall {
            stride,
            needed: len,
        });
    }
    // Every check before the first write: CPU i's copy is `base + i * stride + start`
    // (wrapping: the registers are blocks less the template's start), and every byte of it
    // must be one the CPU can write.
    AddressSpace::TARGET.check_copies(
        "statics",
        base.wrapping_add(start),
        0,
        stride,
        len,
        ncpus,
    )?;
    if let Some((cpu, copy)) = overlaps_template(shape, start, len) {
        return Err(Error::CopyOverlapsTemplate {
            cpu,
            addr: copy,
            template: start,
            len,
        });
    }
    area.carve_range(shape, (start, stop))?;
    for cpu in 0..ncpus {
        let block = copy(shape, cpu, start);
        if block as usize != start {
            // SAFETY: the caller's contract: the block is this install's, and no CPU adds to
            // it yet.
            unsafe { core::ptr::write_bytes(block.cast::<u8>(), 0, len) };
        }
    }
    let area = core::ptr::from_ref(area).cast_mut();
    if AREA
        .compare_exchange(
            core::ptr::null_mut(),
            area,
            Ordering::AcqRel,
            Ordering::Relaxed,
        )
        .is_err()
    {
        // Another install won meanwhile.
        // SAFETY: `area` is the caller's, alive.
        unsafe { &*area }.release_range((start, stop));
        return Err(Error::AlreadyInstalled);
    }
    Ok(())
}

/// The CPU whose copy of the template (`len` bytes from `start`) overlaps the template itself
/// without being it, with the copy's address, if any: clearing that copy would erase early
/// counts, and its adds would land in the template's slots, which `fetch` also sums. (A copy
/// that is the template exactly is summed once, and is not cleared.) The copies rise by
/// `stride >= len` without wrapping (checked before), so only the first copy that ends past
/// the template's start can overlap it.
fn overlaps_template(shape: AreaShape, start: usize, len: usize) -> Option<(usize, usize)> {
    if len == 0 {
        return None;
    }
    let first = shape.base.wrapping_add(start);
    let cpu = match first.checked_add(len) {
        // (A stride of 0 has only CPU 0, refused before unless `len` is 0.)
        Some(end) if end <= start => (start - end)
            .checked_div(shape.stride)
            .map_or(usize::MAX, |k| k + 1),
        _ => 0,
    };
    let copy = first.wrapping_add(cpu.wrapping_mul(shape.stride));
    (cpu < shape.ncpus && copy != start && copy < start.wrapping_add(len)).then_some((cpu, copy))
}

/// Forgets the install (the simulation's machine, when it goes): the area's range is
/// released, and adds and fetches reach the template alone again.
///
/// # Safety
/// No CPU adds through a block of the install any more.
#[cfg(feature = "sim")]
pub(crate) unsafe fn uninstall() {
    let area = AREA.swap(core::ptr::null_mut(), Ordering::AcqRel);
    if !area.is_null() {
        // SAFETY: `install_in`'s caller keeps the area alive while installed.
        unsafe { &*area }.release_range(template());
    }
}
