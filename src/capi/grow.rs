// SPDX-License-Identifier: BSD-2-Clause
//! `pcpu_zone_grow`: the C zone grows through the kernel's chunk hooks.

use core::alloc::Layout;
use core::ffi::{c_int, c_void};
use core::ptr::NonNull;

use super::counter::{M_NOWAIT, M_WAITOK};
use super::error::{code, PCPU_EINVAL, PCPU_ENOTINSTALLED, PCPU_OK};
use super::zone::current_zone;
use crate::ChunkSource;

/// The kernel's chunk allocator: `size` bytes aligned to `align`, or NULL; `*given`: bytes given.
///
/// `align` is a power of two. The hook stores the bytes it gave in `*given` (a page allocator
/// that gave one page says 4096: a chunk shorter than `size` goes back through the free hook
/// and the alloc fails with `PCPU_ESHORTCHUNK`; `*given` is 0 when called, so a hook that
/// never sets it is refused).
/// `wait` is `M_WAITOK` (it may sleep until it has memory) or `M_NOWAIT` (it must not
/// block: the caller may hold a spin lock or run in an interrupt handler). It runs outside
/// the library's lock, in the context of the caller of the alloc that needs the chunk.
pub type pcpu_chunk_alloc_fn = Option<
    unsafe extern "C" fn(size: usize, align: usize, wait: c_int, given: *mut usize) -> *mut c_void,
>;

/// Takes back a chunk the allocator gave (`size`: as asked, or the `*given` of a short one).
///
/// It gets the `size` and `align` asked: an empty chunk, or one refused at once (misaligned;
/// or short, and then `size` is the `*given` it said). It runs outside the library's lock, in
/// the context of the caller of the free (or `pcpu_zone_trim`) that gives the chunk back.
pub type pcpu_chunk_free_fn =
    Option<unsafe extern "C" fn(chunk: *mut c_void, size: usize, align: usize)>;

/// The hooks `pcpu_zone_grow` was given.
struct Hooks {
    alloc: unsafe extern "C" fn(usize, usize, c_int, *mut usize) -> *mut c_void,
    free: unsafe extern "C" fn(*mut c_void, usize, usize),
}

static HOOKS: spin::Once<Hooks> = spin::Once::new();

/// The C kernel's hooks as a [`ChunkSource`].
struct CHooks;

// SAFETY: the hooks' contract (`pcpu_zone_grow`): memory of the bytes it says it gave and
// the alignment asked, the kernel's to give, taken back once.
unsafe impl ChunkSource for CHooks {
    fn alloc_chunk(&self, layout: Layout, wait: bool) -> Option<NonNull<[u8]>> {
        let hooks = HOOKS.get()?;
        let flag = if wait { M_WAITOK } else { M_NOWAIT };
        let mut given = 0;
        // SAFETY: the kernel's hook, called as its contract says.
        let chunk = unsafe {
            call_chunk_alloc_hook(hooks, layout.size(), layout.align(), flag, &mut given)
        };
        // A misaligned or short chunk is the zone's to refuse (and give back).
        NonNull::new(chunk.cast()).map(|c| NonNull::slice_from_raw_parts(c, given))
    }

    unsafe fn free_chunk(&self, chunk: NonNull<u8>, layout: Layout) {
        if let Some(hooks) = HOOKS.get() {
            // SAFETY: a chunk the alloc hook gave, with its size and alignment, once.
            unsafe { call_chunk_free_hook(hooks, chunk.as_ptr().cast(), layout) };
        }
    }
}

/// The kernel's alloc hook, out of line: the only calls through a pointer in the growth
/// paths of the C library, which `cargo xtask stack` counts as the kernel's own (its stack
/// comes on top, as the platform hooks' does), by this function's name.
///
/// # Safety
/// As the hook's contract (`pcpu_zone_grow`).
#[inline(never)]
unsafe fn call_chunk_alloc_hook(
    hooks: &Hooks,
    size: usize,
    align: usize,
    wait: c_int,
    given: &mut usize,
) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe { (hooks.alloc)(size, align, wait, given) }
}

/// The kernel's free hook, out of line (see [`call_chunk_alloc_hook`]).
///
/// # Safety
/// As the hook's contract (`pcpu_zone_grow`).
#[inline(never)]
unsafe fn call_chunk_free_hook(hooks: &Hooks, chunk: *mut c_void, layout: Layout) {
    // SAFETY: the caller's contract.
    unsafe { (hooks.free)(chunk, layout.size(), layout.align()) }
}

/// Lets the installed zone grow with chunks from `alloc` (Rust: `Zone::grow_from`).
///
/// When every slot is in use, `counter_u64_alloc` and the arrays call
/// `alloc(size, align, wait, &given)` for a chunk of `pcpu_zone_chunk_size` bytes aligned to
/// `pcpu_zone_chunk_align` (at least 64; both known before the zone exists:
/// `pcpu_chunk_size`, `pcpu_chunk_align`), with the caller's `M_WAITOK` or `M_NOWAIT`, and
/// carry on in it; a chunk that empties goes back through `free`, except one kept as a spare
/// (not in `pcpu_zone_capacity`: `pcpu_zone_spare`, `pcpu_zone_trim`). The counters in a chunk
/// are reached through the same per-CPU register values: nothing else changes for the kernel.
/// Both hooks run outside the library's lock, in the caller's context: they may sleep exactly
/// when the caller of the alloc or free may.
///
/// `M_WAITOK` then returns a counter whenever `alloc` gives memory; when `alloc` returns NULL
/// even with `M_WAITOK`, the alloc returns NULL (`PCPU_ENOMEM` from the arrays). A chunk
/// `alloc` returns misaligned, or shorter than `size` (`given`), is given back through `free`
/// at once, and the alloc fails (`PCPU_EMISALIGNED`, `PCPU_ESHORTCHUNK` from the arrays), the
/// zone unchanged.
///
/// Returns 0, `PCPU_EINVAL` (a NULL hook), `PCPU_ENOTINSTALLED` (before `pcpu_zone_init`),
/// `PCPU_ESOURCE` (hooks given already), `PCPU_EOVERFLOW` (no chunk fits the address space).
///
/// Without hooks a full zone stays full: `M_NOWAIT` fails at once, `M_WAITOK` waits for a
/// free.
///
/// # Safety
/// `alloc` returns NULL or `*given` bytes aligned to `align`, readable and writable, used by
/// nothing else until given to `free`; both may be called from any CPU, `alloc` with
/// `M_NOWAIT` where the caller cannot sleep.
///
/// ```
/// use pcpu_counter::{capi::*, sim::capi::*};
/// assert_eq!(unsafe { pcpu_zone_grow(None, None) }, PCPU_EINVAL);
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_zone_grow(
    alloc: pcpu_chunk_alloc_fn,
    free: pcpu_chunk_free_fn,
) -> c_int {
    let (Some(alloc), Some(free)) = (alloc, free) else {
        return PCPU_EINVAL;
    };
    let Some(zone) = current_zone() else {
        return PCPU_ENOTINSTALLED;
    };
    // Before the hooks are kept: a zone that cannot grow leaves them unset, for no later call
    // to be refused as a second source.
    if let Err(e) = zone.chunk_layout() {
        return code(e);
    }
    let mut fresh = false;
    HOOKS.call_once(|| {
        fresh = true;
        Hooks { alloc, free }
    });
    if !fresh {
        return code(crate::Error::SourceAlreadySet);
    }
    match zone.grow_from(&CHooks) {
        Ok(()) => PCPU_OK,
        Err(e) => code(e),
    }
}

/// The bytes of a chunk the installed zone asks `pcpu_zone_grow`'s `alloc` for (0: no zone).
///
/// `ncpus * stride` for the slots, then the chunk's header, a baseline word and a bitmap bit
/// per slot. 0 when no zone is installed.
#[no_mangle]
pub extern "C" fn pcpu_zone_chunk_size() -> usize {
    current_zone()
        .and_then(|z| z.chunk_layout().ok())
        .map_or(0, |l| l.size())
}

/// The alignment of those chunks: the power of two at or above the stride, at least 64.
///
/// 0 when no zone is installed.
#[no_mangle]
pub extern "C" fn pcpu_zone_chunk_align() -> usize {
    current_zone()
        .and_then(|z| z.chunk_layout().ok())
        .map_or(0, |l| l.align())
}

/// Bytes of a chunk of a zone of `ncpus` CPUs, blocks `stride` apart, known before it exists.
///
/// What such a zone asks `pcpu_zone_grow`'s `alloc` for (Rust:
/// `ZoneLayout::chunk_layout_for`): `ncpus * stride + 8 * PCPU_META_WORDS(stride / 8) + H`,
/// `H` the chunk header (88 bytes on 64-bit targets, 48 on 32-bit). 0 for no such chunk (no
/// CPUs, a stride 0 or not a multiple of 8, a size past the address space).
#[no_mangle]
pub extern "C" fn pcpu_chunk_size(ncpus: usize, stride: usize) -> usize {
    crate::ZoneLayout::chunk_layout_for(ncpus, stride).map_or(0, |l| l.size())
}

/// The alignment of those chunks: the power of two at or above `stride`, at least 64.
///
/// 4096 or less (a page's) for a stride of 4096 or less. 0 for no such chunk.
#[no_mangle]
pub extern "C" fn pcpu_chunk_align(ncpus: usize, stride: usize) -> usize {
    crate::ZoneLayout::chunk_layout_for(ncpus, stride).map_or(0, |l| l.align())
}

/// Emptied chunks the installed zone keeps, outside its capacity: 0 or 1 (the spare).
///
/// Rust: `Zone::spare_chunks`. The last chunk that empties is kept, outside
/// `pcpu_zone_capacity`, so that a counter allocated and freed over and over at a chunk's
/// edge does not take and give back memory each time. 0 when no zone is installed.
#[no_mangle]
pub extern "C" fn pcpu_zone_spare() -> usize {
    current_zone().map_or(0, |z| z.spare_chunks())
}

/// Gives the installed zone's spare chunk back through the free hook: the chunks given back.
///
/// 0 or 1 (Rust: `Zone::release_spare`). Once every counter in chunks is
/// freed, the kernel then has every chunk back (a leak check, or memory handed back under
/// pressure). The free hook runs in the caller's context. 0 when no zone is installed.
#[no_mangle]
pub extern "C" fn pcpu_zone_trim() -> usize {
    current_zone().map_or(0, |z| z.release_spare())
}
