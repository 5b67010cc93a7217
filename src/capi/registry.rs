// SPDX-License-Identifier: BSD-2-Clause
//! The counter registry from C: FreeBSD's `SYSCTL_ADD_COUNTER_U64` and
//! `SYSCTL_ADD_COUNTER_U64_ARRAY`, read by a walk (a sysctl read) and zeroed by name (a
//! sysctl write).
//!
//! Storage: one static [`Registry`] of [`PCPU_SYSCTL_MAX`] names and as many static cells
//! that hold what each name counts (the first slot and the number of slots), behind `spin`
//! locks: no allocator, so it works in a `no_std` kernel.
//!
//! Strings are **borrowed, not copied**, as FreeBSD's `SYSCTL_*` macros borrow theirs: the
//! name and description must stay valid and unchanged until `pcpu_sysctl_remove` of the
//! name returns (string literals always do). The removal waits for the walks and zeroes in
//! progress, so the strings may be freed once it returns.
//!
//! Invariant: every name and description in the table is the `str` of a NUL-terminated C
//! string starting at the same address (checked UTF-8 by [`c_str`]), so the walk hands
//! C the pointers it was given.

use crate::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::ffi::{c_char, c_int, c_void};

use super::error::{
    PCPU_ECLASH, PCPU_EEXIST, PCPU_EINVAL, PCPU_ENAME, PCPU_ENOENT, PCPU_ENOSPC,
    PCPU_ENOTINSTALLED, PCPU_EREGFULL, PCPU_OK,
};
use super::slot::{self, counter_u64_t};
use super::zone::{self, current_zone};
use crate::registry::{Registry, RegistryError, Slots, Statistic};

/// Names the registry holds at once.
///
/// ```
/// assert_eq!(pcpu_counter::capi::PCPU_SYSCTL_MAX, 64);
/// ```
pub const PCPU_SYSCTL_MAX: usize = 64;

/// Longest name, in bytes (without the NUL).
///
/// ```
/// assert_eq!(pcpu_counter::capi::PCPU_SYSCTL_NAME_MAX, 63);
/// ```
pub const PCPU_SYSCTL_NAME_MAX: usize = 63;

/// Longest description, in bytes (without the NUL).
///
/// ```
/// assert_eq!(pcpu_counter::capi::PCPU_SYSCTL_DESCR_MAX, 255);
/// ```
pub const PCPU_SYSCTL_DESCR_MAX: usize = 255;

/// Most counters under one name (an array); the walk reads them into a stack buffer.
///
/// ```
/// assert_eq!(pcpu_counter::capi::PCPU_SYSCTL_ARRAY_MAX, 64);
/// ```
pub const PCPU_SYSCTL_ARRAY_MAX: usize = 64;

/// What one registered name counts: `len` adjacent slots from offset `first`.
struct Cell {
    /// Whether an entry (or a registration in progress) owns the cell.
    claimed: AtomicBool,
    first: AtomicUsize,
    len: AtomicUsize,
    array: AtomicBool,
}

static CELLS: [Cell; PCPU_SYSCTL_MAX] = [const { Cell::free() }; PCPU_SYSCTL_MAX];

static REGISTRY: Registry<'static, PCPU_SYSCTL_MAX> = Registry::new();

/// Held shared by walks and zeroes (which use an entry's cell and strings after the
/// registry's lock is dropped) and exclusively by removals (which free both).
static LIVE: spin::RwLock<()> = spin::RwLock::new(());

impl Cell {
    /// An unclaimed cell.
    const fn free() -> Cell {
        Cell {
            claimed: AtomicBool::new(false),
            first: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            array: AtomicBool::new(false),
        }
    }

    /// The offset of value `i`, resolved against the C zone (aborts if it is gone).
    fn slot(&self, i: usize) -> (&'static crate::Zone<'static>, usize) {
        let off = self.first.load(Ordering::Relaxed) + 8 * i;
        zone::resolve(slot::handle(off))
    }
}

// The registry publishes a cell under its mutex after the cell's fields are stored, and a
// cell is only reset under `LIVE`'s exclusive lock: `Relaxed` loads see the stored values.
impl Statistic for Cell {
    fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
    fn value(&self, i: usize) -> u64 {
        let (zone, off) = self.slot(i);
        zone.fetch(off)
    }
    fn zero_value(&self, i: usize) {
        let (zone, off) = self.slot(i);
        zone.fetch_and_zero(off);
    }
    fn is_array(&self) -> bool {
        self.array.load(Ordering::Relaxed)
    }
    /// The cell's run of counters: slots a C caller named as counters (`counter_u64_t`).
    fn slots(&self) -> Option<Slots<'_>> {
        let (zone, off) = self.slot(0);
        Some(Slots { zone, off })
    }
}

/// The C code of a registry error.
fn code(e: RegistryError<'_>) -> c_int {
    match e {
        RegistryError::Full { .. } => PCPU_EREGFULL,
        RegistryError::Duplicate => PCPU_EEXIST,
        RegistryError::BadName { .. } => PCPU_ENAME,
        RegistryError::Clash { .. } => PCPU_ECLASH,
        RegistryError::NotFound => PCPU_ENOENT,
        RegistryError::BufferTooSmall { .. } => PCPU_ENOSPC,
    }
}

/// The `str` of the NUL-terminated `s`: `PCPU_EINVAL` if `s` is NULL, `PCPU_ENAME` if it is
/// longer than `max` bytes or not UTF-8. The `str` starts at `s`, so it is still the C string.
///
/// # Safety
/// `s` is NULL or readable up to its NUL or its first `max + 1` bytes, whichever comes first,
/// and stays valid and unchanged for `'s`.
unsafe fn c_str<'s>(s: *const c_char, max: usize) -> Result<&'s str, c_int> {
    if s.is_null() {
        return Err(PCPU_EINVAL);
    }
    let mut len = 0;
    // SAFETY: bytes up to the NUL or `max + 1` bytes are readable (the caller's contract);
    // the loop stops at whichever comes first.
    while unsafe { *s.add(len) } != 0 {
        if len == max {
            return Err(PCPU_ENAME);
        }
        len += 1;
    }
    // SAFETY: the `len` bytes before the NUL were just read, and stay valid for `'s`.
    let bytes = unsafe { core::slice::from_raw_parts(s.cast::<u8>(), len) };
    if !is_utf8(bytes) {
        return Err(PCPU_ENAME);
    }
    // SAFETY: just checked to be UTF-8.
    Ok(unsafe { core::str::from_utf8_unchecked(bytes) })
}

/// Whether `b` is UTF-8, as `core::str::from_utf8` decides it (no overlong form, no surrogate,
/// nothing above U+10FFFF), in one small loop: `core`'s fast validator is about 460 bytes of a
/// kernel's library (`tests/c/footprint.sh`), and names and descriptions are short.
fn is_utf8(b: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&lead) = b.get(i) {
        // Continuation bytes, and the smallest code point that needs them.
        let (more, min) = match lead {
            0x00..=0x7f => (0, 0),
            0xc2..=0xdf => (1, 0x80),
            0xe0..=0xef => (2, 0x800),
            0xf0..=0xf4 => (3, 0x1_0000),
            _ => return false,
        };
        let mut cp = u32::from(lead) & (0x7f >> more);
        for k in 1..=more {
            match b.get(i + k) {
                Some(&c) if c & 0xc0 == 0x80 => cp = (cp << 6) + u32::from(c & 0x3f),
                _ => return false,
            }
        }
        if cp < min || cp > 0x10_ffff || (0xd800..=0xdfff).contains(&cp) {
            return false;
        }
        i += 1 + more;
    }
    true
}

/// A name to look up: a C string of 1 to `PCPU_SYSCTL_NAME_MAX` bytes of UTF-8.
///
/// # Safety
/// As [`c_str`].
unsafe fn c_name<'s>(name: *const c_char) -> Result<&'s str, c_int> {
    // SAFETY: the caller's contract.
    match unsafe { c_str(name, PCPU_SYSCTL_NAME_MAX) }? {
        "" => Err(PCPU_ENAME),
        name => Ok(name),
    }
}

/// Registers `len` adjacent slots from `first` under `name`.
///
/// # Safety
/// `name` and `descr` are NULL or NUL-terminated, valid and unchanged until the name is
/// removed.
unsafe fn add(
    name: *const c_char,
    descr: *const c_char,
    first: usize,
    len: usize,
    array: bool,
) -> c_int {
    // SAFETY: the strings live until the name is removed (the caller's contract), and the
    // table drops them before that removal returns: `'static` is never outlived in use.
    let strings = unsafe {
        c_name(name).and_then(|name| {
            let descr = if descr.is_null() { c"".as_ptr() } else { descr };
            Ok((name, c_str(descr, PCPU_SYSCTL_DESCR_MAX)?))
        })
    };
    let (name, descr): (&'static str, &'static str) = match strings {
        Ok(strings) => strings,
        Err(e) => return e,
    };
    // The registry checks it too; here it comes before the table, as the other name checks.
    if !crate::export::name_is_valid(name) {
        return PCPU_ENAME;
    }
    let Some(cell) = CELLS.iter().find(|c| {
        c.claimed
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }) else {
        return PCPU_EREGFULL;
    };
    cell.first.store(first, Ordering::Relaxed);
    cell.len.store(len, Ordering::Relaxed);
    cell.array.store(array, Ordering::Relaxed);
    match REGISTRY.register(name, descr, cell) {
        Ok(()) => PCPU_OK,
        Err(e) => {
            cell.claimed.store(false, Ordering::Release);
            code(e)
        }
    }
}

/// The slot offset of `c` after checking it is a slot of the C zone.
fn slot_of(c: counter_u64_t) -> Result<usize, c_int> {
    let zone = current_zone().ok_or(PCPU_ENOTINSTALLED)?;
    let off = c as usize;
    // SAFETY: a handle the C caller vouches for (the registration's contract).
    if off == 0 || !unsafe { zone.holds_handle(off) } {
        return Err(PCPU_EINVAL);
    }
    Ok(off)
}

/// `SYSCTL_ADD_COUNTER_U64`: registers counter `c` as `name`, described by `descr`.
///
/// `name` (1 to `PCPU_SYSCTL_NAME_MAX` bytes of UTF-8, starting with an ASCII letter) and
/// `descr` (up to `PCPU_SYSCTL_DESCR_MAX` bytes of UTF-8; NULL is "") are borrowed, not
/// copied: keep them
/// valid and unchanged until `pcpu_sysctl_remove(name)` returns (string literals are). A
/// counter may be registered under several names; remove its names before freeing it.
///
/// Returns 0, `PCPU_EINVAL` (NULL `name`, `c` NULL or not a counter of the zone),
/// `PCPU_ENOTINSTALLED`, `PCPU_ENAME` (the strings' rules above), `PCPU_EREGFULL`
/// (`PCPU_SYSCTL_MAX` names are registered), `PCPU_EEXIST` (the name is taken) or
/// `PCPU_ECLASH` (its metric name clashes with a registered name's: `a.b` and `a_b`, `x`
/// and `x_total` or `x_created`; see the crate's `export::names_clash`).
///
/// # Safety
/// `name` and `descr` are NULL or NUL-terminated strings, valid as above.
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(1, 64), 0);
/// let c = counter_u64_alloc(M_WAITOK);
/// unsafe {
///     assert_eq!(pcpu_sysctl_add_counter(c"rx".as_ptr(), c"packets".as_ptr(), c), 0);
///     assert_eq!(pcpu_sysctl_add_counter(c"rx".as_ptr(), c"again".as_ptr(), c), PCPU_EEXIST);
///     assert_eq!(pcpu_sysctl_add_counter(c"".as_ptr(), c"empty".as_ptr(), c), PCPU_ENAME);
///     assert_eq!(pcpu_sysctl_add_counter(c"9x".as_ptr(), c"digit".as_ptr(), c), PCPU_ENAME);
///     assert_eq!(pcpu_sysctl_add_counter(c"rx_total".as_ptr(), c"".as_ptr(), c), PCPU_ECLASH);
///     assert_eq!(pcpu_sysctl_remove(c"rx".as_ptr()), 0);
///     counter_u64_free(c);
/// }
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_sysctl_add_counter(
    name: *const c_char,
    descr: *const c_char,
    c: counter_u64_t,
) -> c_int {
    match slot_of(c) {
        // SAFETY: the caller's contract.
        Ok(off) => unsafe { add(name, descr, off, 1, false) },
        Err(e) => e,
    }
}

/// `SYSCTL_ADD_COUNTER_U64_ARRAY`: registers the `n` counters of `a` as `name`.
///
/// The counters are one run of adjacent slots, as `counter_u64_array_alloc` makes them;
/// the run (first slot and `n`) is copied, so `a` itself may go once this returns. The
/// strings are borrowed as for [`pcpu_sysctl_add_counter`].
///
/// Returns 0, `PCPU_EINVAL` (NULL `a` or `name`, `n` 0 or over `PCPU_SYSCTL_ARRAY_MAX`, a
/// handle NULL, not of the zone or not adjacent to the one before), `PCPU_ENOTINSTALLED`,
/// `PCPU_ENAME`, `PCPU_EREGFULL`, `PCPU_EEXIST` or `PCPU_ECLASH`, as
/// [`pcpu_sysctl_add_counter`].
///
/// # Safety
/// `a` is NULL or valid for reading `n` handles; the strings as for
/// [`pcpu_sysctl_add_counter`].
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(1, 64), 0);
/// let mut a = [core::ptr::null_mut(); 3];
/// unsafe {
///     assert_eq!(counter_u64_array_alloc(a.as_mut_ptr(), 3, M_WAITOK), 0);
///     assert_eq!(pcpu_sysctl_add_counter_array(c"errs".as_ptr(), c"by kind".as_ptr(), a.as_ptr(), 3), 0);
///     assert_eq!(pcpu_sysctl_add_counter_array(c"none".as_ptr(), c"".as_ptr(), a.as_ptr(), 0), PCPU_EINVAL);
///     a.swap(0, 1);
///     assert_eq!(pcpu_sysctl_add_counter_array(c"mixed".as_ptr(), c"".as_ptr(), a.as_ptr(), 3), PCPU_EINVAL);
///     assert_eq!(pcpu_sysctl_remove(c"errs".as_ptr()), 0);
///     counter_u64_array_free(a.as_mut_ptr(), 3);
/// }
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_sysctl_add_counter_array(
    name: *const c_char,
    descr: *const c_char,
    a: *const counter_u64_t,
    n: usize,
) -> c_int {
    if a.is_null() || n == 0 || n > PCPU_SYSCTL_ARRAY_MAX {
        return PCPU_EINVAL;
    }
    // SAFETY: `a` is valid for `n` reads (the caller's contract) and not NULL.
    let a = unsafe { core::slice::from_raw_parts(a, n) };
    let first = match slot_of(a[0]) {
        Ok(first) => first,
        Err(e) => return e,
    };
    for (i, &c) in a.iter().enumerate() {
        match slot_of(c) {
            Ok(off) if off == first + 8 * i => {}
            Ok(_) => return PCPU_EINVAL,
            Err(e) => return e,
        }
    }
    // SAFETY: the caller's contract.
    unsafe { add(name, descr, first, n, true) }
}

/// Removes `name` (FreeBSD's `sysctl_remove_oid`); its counters stay allocated.
///
/// Waits for the walks and zeroes in progress, so when it returns the name's strings are no
/// longer used. Calling it from a walk's callback deadlocks.
///
/// Returns 0, `PCPU_EINVAL` (NULL `name`), `PCPU_ENAME` or `PCPU_ENOENT`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(1, 64), 0);
/// let c = counter_u64_alloc(M_WAITOK);
/// unsafe {
///     assert_eq!(pcpu_sysctl_add_counter(c"tx".as_ptr(), c"sent".as_ptr(), c), 0);
///     assert_eq!(pcpu_sysctl_remove(c"tx".as_ptr()), 0);
///     assert_eq!(pcpu_sysctl_remove(c"tx".as_ptr()), PCPU_ENOENT);
///     assert_eq!(pcpu_sysctl_add_counter(c"tx".as_ptr(), c"sent".as_ptr(), c), 0);
/// #   assert_eq!(pcpu_sysctl_remove(c"tx".as_ptr()), 0);
/// #   counter_u64_free(c);
/// }
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_sysctl_remove(name: *const c_char) -> c_int {
    // SAFETY: `name` is only used during the call.
    let name = match unsafe { c_name(name) } {
        Ok(name) => name,
        Err(e) => return e,
    };
    let _exclusive = LIVE.write();
    let Some(stat) = REGISTRY.get(name) else {
        return PCPU_ENOENT;
    };
    if let Err(e) = REGISTRY.unregister(name) {
        return code(e);
    }
    // Only this module registers, and only cells: the entry's statistic is one of them.
    if let Some(cell) = CELLS
        .iter()
        .find(|c| core::ptr::addr_eq(*c as *const Cell, stat as *const dyn Statistic))
    {
        cell.len.store(0, Ordering::Relaxed);
        cell.claimed.store(false, Ordering::Release);
    }
    PCPU_OK
}

/// Zeroes every counter registered as `name` (a sysctl write), losslessly.
///
/// Returns 0, `PCPU_EINVAL` (NULL `name`), `PCPU_ENAME` or `PCPU_ENOENT`. May be called
/// from a walk's callback.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(1, 64), 0);
/// let c = counter_u64_alloc(M_WAITOK);
/// assert_eq!(pcpu_sim_bind(0), 0);
/// unsafe { pcpu_counter_add(c, 7) };
/// pcpu_sim_unbind();
/// unsafe {
///     assert_eq!(pcpu_sysctl_add_counter(c"drops".as_ptr(), c"dropped".as_ptr(), c), 0);
///     assert_eq!(pcpu_sysctl_zero(c"drops".as_ptr()), 0);
///     assert_eq!(counter_u64_fetch(c), 0);
///     assert_eq!(pcpu_sysctl_zero(c"nope".as_ptr()), PCPU_ENOENT);
/// #   assert_eq!(pcpu_sysctl_remove(c"drops".as_ptr()), 0);
/// #   counter_u64_free(c);
/// }
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_sysctl_zero(name: *const c_char) -> c_int {
    // SAFETY: `name` is only used during the call.
    let name = match unsafe { c_name(name) } {
        Ok(name) => name,
        Err(e) => return e,
    };
    let _shared = LIVE.read();
    REGISTRY.zero(name).map_or_else(code, |()| PCPU_OK)
}

/// The callback of `pcpu_sysctl_walk`, called once per name; nonzero stops the walk.
///
/// It gets one registered name, its description, its `n` values (1 for a counter) and the
/// walk's `arg`. The pointers are valid only during the call.
///
/// ```
/// use core::ffi::{c_char, c_int, c_void};
/// unsafe extern "C" fn count(_: *const c_char, _: *const c_char, _: *const u64, n: usize, arg: *mut c_void) -> c_int {
///     unsafe { *arg.cast::<usize>() += n };
///     0
/// }
/// let cb: pcpu_counter::capi::pcpu_sysctl_walk_fn = Some(count);
/// # assert!(cb.is_some());
/// ```
pub type pcpu_sysctl_walk_fn = Option<
    unsafe extern "C" fn(
        name: *const c_char,
        descr: *const c_char,
        values: *const u64,
        n: usize,
        arg: *mut c_void,
    ) -> c_int,
>;

/// Calls `cb` for each registered name, in table order, with its values read just before.
///
/// A nonzero return of `cb` stops the walk and is returned; otherwise 0 (`PCPU_EINVAL` for
/// a NULL `cb`). The callback may call `pcpu_sysctl_zero` and `pcpu_sysctl_add_*`, not
/// `pcpu_sysctl_remove` (which waits for the walk: a deadlock).
///
/// # Safety
/// `cb` is safe to call with the pointers described at [`pcpu_sysctl_walk_fn`] and `arg`.
///
/// ```
/// use core::ffi::{c_char, c_int, c_void, CStr};
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// unsafe extern "C" fn collect(name: *const c_char, _: *const c_char, v: *const u64, n: usize, arg: *mut c_void) -> c_int {
///     let out = unsafe { &mut *arg.cast::<Vec<(String, Vec<u64>)>>() };
///     let name = unsafe { CStr::from_ptr(name) }.to_str().unwrap().to_owned();
///     out.push((name, unsafe { core::slice::from_raw_parts(v, n) }.to_vec()));
///     0
/// }
/// # assert_eq!(pcpu_sim_machine_new(2, 64), 0);
/// let c = counter_u64_alloc(M_WAITOK);
/// let mut a = [core::ptr::null_mut(); 2];
/// assert_eq!(unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 2, M_WAITOK) }, 0);
/// assert_eq!(pcpu_sim_bind(1), 0);
/// unsafe { pcpu_counter_add(c, 3); pcpu_counter_add(a[1], 5) };
/// pcpu_sim_unbind();
/// unsafe {
///     assert_eq!(pcpu_sysctl_add_counter(c"rx".as_ptr(), c"received".as_ptr(), c), 0);
///     assert_eq!(pcpu_sysctl_add_counter_array(c"err".as_ptr(), c"errors".as_ptr(), a.as_ptr(), 2), 0);
/// }
/// let mut got: Vec<(String, Vec<u64>)> = Vec::new();
/// assert_eq!(unsafe { pcpu_sysctl_walk(Some(collect), (&mut got as *mut Vec<_>).cast()) }, 0);
/// assert_eq!(got, [("rx".into(), vec![3]), ("err".into(), vec![0, 5])]);
/// # unsafe { pcpu_sysctl_remove(c"rx".as_ptr()); pcpu_sysctl_remove(c"err".as_ptr()) };
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_sysctl_walk(cb: pcpu_sysctl_walk_fn, arg: *mut c_void) -> c_int {
    let Some(cb) = cb else {
        return PCPU_EINVAL;
    };
    let _shared = LIVE.read();
    // Entry by entry, each entry's values read as one group read (CPU by CPU) just before
    // its call.
    let rc = REGISTRY.table().for_each(|name, descr, values, _array| {
        // SAFETY: `name` and `descr` start NUL-terminated C strings (the module's invariant),
        // kept alive by `LIVE`; `values` holds `values.len()` values; `cb` per the caller's
        // contract.
        let rc = unsafe {
            cb(
                name.as_ptr().cast(),
                descr.as_ptr().cast(),
                values.as_ptr(),
                values.len(),
                arg,
            )
        };
        (rc != 0).then_some(rc)
    });
    rc.unwrap_or(PCPU_OK)
}

/// `pcpu_sysctl_export` flag: the counts since the last zero, each zeroed with its read.
///
/// Each counter is zeroed as one step with its read (lossless, no IPI), so successive delta
/// exports add up to every add made; without the flag the counts are cumulative.
pub const PCPU_EXPORT_DELTAS: c_int = 1;
/// `pcpu_sysctl_export` flag: OpenMetrics 1.0 text (ending in `# EOF`), not Prometheus 0.0.4.
pub const PCPU_EXPORT_OPENMETRICS: c_int = 2;

/// A `fmt::Write` into a C buffer of `cap` bytes (the text, not the NUL).
struct CBuf {
    buf: *mut u8,
    cap: usize,
    at: usize,
}

impl core::fmt::Write for CBuf {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.at.checked_add(s.len()).ok_or(core::fmt::Error)?;
        if end > self.cap {
            return Err(core::fmt::Error);
        }
        // SAFETY: `buf` is valid for `cap` bytes (the caller of `pcpu_sysctl_export`) and
        // `at + s.len() <= cap`.
        unsafe { core::ptr::copy_nonoverlapping(s.as_ptr(), self.buf.add(self.at), s.len()) };
        self.at = end;
        Ok(())
    }
}

/// Writes the registry into `buf` as Prometheus text; never loses a delta to a short buffer.
///
/// Prometheus text format 0.0.4 (or OpenMetrics with `PCPU_EXPORT_OPENMETRICS`),
/// NUL-terminated: `# HELP`, `# TYPE name_total
/// counter` and `name_total value` (arrays as `name_total{index="i"}` series), names
/// escaped as described in the crate's `export` module. The values are read name by name,
/// in group reads of up to 16 values; with `PCPU_EXPORT_DELTAS` each value is the
/// count since the last zero, zeroed as one step with its read (lossless, no IPI).
///
/// `*len` holds the buffer's size on entry; on success, the text's length (without the NUL).
/// If the buffer could be too small for the text (the check assumes every value has 20
/// digits), nothing is read and nothing is zeroed: `PCPU_ENOSPC` is returned with `*len` set
/// to the size that is always enough for the names registered now. So no delta is ever
/// lost to a short buffer.
///
/// Returns 0, `PCPU_EINVAL` (NULL `len`, NULL `buf` with a nonzero `*len`, unknown
/// flags) or `PCPU_ENOSPC`. Waits for `pcpu_sysctl_remove` in progress.
///
/// # Safety
/// `len` is NULL or valid for reading and writing; `buf` is valid for writing `*len` bytes.
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(2, 64), 0);
/// let c = counter_u64_alloc(M_WAITOK);
/// assert_eq!(pcpu_sim_bind(1), 0);
/// unsafe { pcpu_counter_add(c, 7) };
/// pcpu_sim_unbind();
/// unsafe { assert_eq!(pcpu_sysctl_add_counter(c"tcp.rcvd".as_ptr(), c"segments".as_ptr(), c), 0) };
/// let mut len = 0;
/// assert_eq!(unsafe { pcpu_sysctl_export(core::ptr::null_mut(), &mut len, 0) }, PCPU_ENOSPC);
/// let mut buf = vec![0u8; len];
/// assert_eq!(unsafe { pcpu_sysctl_export(buf.as_mut_ptr().cast(), &mut len, PCPU_EXPORT_DELTAS) }, 0);
/// assert_eq!(
///     std::str::from_utf8(&buf[..len]).unwrap(),
///     "# HELP tcp_rcvd_total segments\n# TYPE tcp_rcvd_total counter\ntcp_rcvd_total 7\n"
/// );
/// assert_eq!(buf[len], 0);
/// assert_eq!(unsafe { counter_u64_fetch(c) }, 0); // taken by the delta export
/// # unsafe { pcpu_sysctl_remove(c"tcp.rcvd".as_ptr()); counter_u64_free(c) };
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_sysctl_export(
    buf: *mut c_char,
    len: *mut usize,
    flags: c_int,
) -> c_int {
    if len.is_null() || flags & !(PCPU_EXPORT_DELTAS | PCPU_EXPORT_OPENMETRICS) != 0 {
        return PCPU_EINVAL;
    }
    // SAFETY: `len` is valid for reads (the caller's contract) and not NULL.
    let cap = unsafe { *len };
    if buf.is_null() && cap != 0 {
        return PCPU_EINVAL;
    }
    let format = if flags & PCPU_EXPORT_OPENMETRICS != 0 {
        crate::export::Format::OpenMetrics
    } else {
        crate::export::Format::Prometheus
    };
    let _shared = LIVE.read();
    // One set of the names registered now for the size check and the export, so a name
    // registered in between cannot make the text outgrow the checked size.
    let table = REGISTRY.table();
    let needed = table.bound(format) + 1;
    if cap < needed {
        // SAFETY: as above.
        unsafe { *len = needed };
        return PCPU_ENOSPC;
    }
    let mut w = CBuf {
        buf: buf.cast(),
        cap: cap - 1,
        at: 0,
    };
    table
        .export(&mut w, format, flags & PCPU_EXPORT_DELTAS != 0)
        .expect("pcpu-counter: export text longer than its bound");
    // SAFETY: `at <= cap - 1`, inside the buffer; `len` as above.
    unsafe {
        buf.add(w.at).write(0);
        *len = w.at;
    }
    PCPU_OK
}

#[cfg(test)]
mod tests {
    /// `is_utf8` decides as `core::str::from_utf8` does: every 1- and 2-byte string, 3-byte
    /// ones across every lead byte class, and the edges of the 4-byte forms.
    #[test]
    fn is_utf8_agrees_with_core() {
        let agree = |b: &[u8]| {
            assert_eq!(super::is_utf8(b), core::str::from_utf8(b).is_ok(), "{b:x?}");
        };
        // Under Miri (the test checks safe byte arithmetic, which Miri has nothing to add to
        // but time) the second byte is every fifteenth value and the class edges.
        let second =
            |y: &u8| !cfg!(miri) || y.is_multiple_of(15) || [0x7f, 0x80, 0xbf, 0xc0].contains(y);
        for x in 0..=255u8 {
            agree(&[x]);
            for y in (0..=255u8).filter(second) {
                agree(&[x, y]);
                agree(&[x, y, 0x80]);
                agree(&[b'a', x, y]);
            }
        }
        for lead in [0xf0u8, 0xf4, 0xf5] {
            for second in [0x80u8, 0x8f, 0x90, 0xbf, 0xc0] {
                agree(&[lead, second, 0x80, 0x80]);
                agree(&[lead, second, 0x80]);
            }
        }
        // The edges: the last code point, both ends of the surrogates, the last 3-byte one.
        for edge in [
            &[0xf4, 0x8f, 0xbf, 0xbf][..],
            &[0xed, 0x9f, 0xbf],
            &[0xed, 0xa0, 0x80],
            &[0xed, 0xbf, 0xbf],
            &[0xee, 0x80, 0x80],
            &[0xef, 0xbf, 0xbf],
            &[0xf0, 0x8f, 0xbf, 0xbf],
        ] {
            agree(edge);
        }
    }
}
