// SPDX-License-Identifier: BSD-2-Clause
//! A zone's growth paths: every step of an alloc, a free or a lookup that deals with chunks.
//!
//! They are reached only through a table of functions, made for the source's type by
//! [`Zone::grow_from`] and kept beside the zone's [`ChunkShape`] (a [`Grown`]): the zone's
//! own paths test for one and call through it, so a kernel that never makes a zone grow links
//! none of this (the C library's footprint). The calls through the table are in `Grown`'s
//! methods alone, never inlined, so that the stack check (`cargo xtask stack`) knows where
//! they go: to the table's functions. Inside those, everything is a direct call: the source's
//! methods (the table is made for its type) and the zone's state, never a zone method that
//! would call through the table again.

use core::marker::PhantomData;
use core::ptr::NonNull;

use super::{Place, Zone};
use crate::chunk::{Chunk, ChunkShape, ChunkSource, Found};
use crate::{Error, Wait};

/// The growth paths of a zone whose source is of one type, as a table of functions.
pub(crate) struct Growth {
    take_run: fn(&Zone<'_>, &Grown, usize, Wait) -> Result<usize, Error>,
    try_take_run: fn(&Zone<'_>, usize) -> Option<Result<usize, Error>>,
    place: unsafe fn(&Zone<'_>, usize) -> Option<Place>,
    free_run: fn(&Zone<'_>, &Grown, *mut Chunk, usize, usize),
    holds_run: fn(&Zone<'_>, usize, usize) -> bool,
    release_all: fn(&Zone<'_>, &Grown),
    release_spare: fn(&Zone<'_>, &Grown) -> usize,
}

/// The table for sources of type `S`.
struct Table<S>(PhantomData<S>);

impl<S: ChunkSource> Table<S> {
    const GROWTH: Growth = Growth {
        take_run: take_run::<S>,
        try_take_run,
        place,
        free_run: free_run::<S>,
        holds_run,
        release_all: release_all::<S>,
        release_spare: release_spare::<S>,
    };
}

/// A zone's chunk source, with the table of its growth paths.
pub(crate) struct Grown {
    /// The `&'static S` the table was made for, its type erased.
    source: NonNull<()>,
    paths: &'static Growth,
}

// SAFETY: the source is a `&'static S` with `S: ChunkSource: Sync`; the rest is plain data.
unsafe impl Send for Grown {}
// SAFETY: as above.
unsafe impl Sync for Grown {}

impl Grown {
    /// The growth of a zone's chunks from `source`.
    pub(crate) fn new<S: ChunkSource>(source: &'static S) -> Self {
        Grown {
            source: NonNull::from(source).cast(),
            paths: &Table::<S>::GROWTH,
        }
    }

    /// The source, as the type the table was made for.
    ///
    /// # Safety
    /// `S` is the type `new` was given (only the table's own functions call this).
    unsafe fn source<S: ChunkSource>(&self) -> &S {
        // SAFETY: a `&'static S` when made (the caller's contract).
        unsafe { self.source.cast::<S>().as_ref() }
    }

    /// A run of `len` slots from the chunks, taking a chunk from the source (asked with
    /// `wait`) when none has it.
    #[inline(never)]
    pub(crate) fn take_run(&self, zone: &Zone<'_>, len: usize, wait: Wait) -> Result<usize, Error> {
        (self.paths.take_run)(zone, self, len, wait)
    }

    /// As [`take_run`](Grown::take_run), but never waiting for the lock or the source: `None`
    /// when it would.
    #[inline(never)]
    pub(crate) fn try_take_run(&self, zone: &Zone<'_>, len: usize) -> Option<Result<usize, Error>> {
        (self.paths.try_take_run)(zone, len)
    }

    /// Where the slot at `off` (outside the first blocks) lies: a chunk and its index there.
    ///
    /// # Safety
    /// As [`ChunkShape::find`].
    #[inline(never)]
    pub(crate) unsafe fn place(&self, zone: &Zone<'_>, off: usize) -> Option<Place> {
        // SAFETY: the caller's contract.
        unsafe { (self.paths.place)(zone, off) }
    }

    /// Frees the run of `len` slots from slot `index` of `chunk`.
    #[inline(never)]
    pub(crate) fn free_run(&self, zone: &Zone<'_>, chunk: *mut Chunk, index: usize, len: usize) {
        (self.paths.free_run)(zone, self, chunk, index, len)
    }

    /// Whether the slots from `off` to `last` are slots of one chunk (a walk).
    #[inline(never)]
    pub(crate) fn holds_run(&self, zone: &Zone<'_>, off: usize, last: usize) -> bool {
        (self.paths.holds_run)(zone, off, last)
    }

    /// Gives the spare chunk back, if one is kept: the chunks given back (0 or 1).
    #[inline(never)]
    pub(crate) fn release_spare(&self, zone: &Zone<'_>) -> usize {
        (self.paths.release_spare)(zone, self)
    }

    /// Gives every chunk back (the zone's drop).
    #[inline(never)]
    pub(crate) fn release_all(&self, zone: &Zone<'_>) {
        (self.paths.release_all)(zone, self)
    }
}

/// The shape of `zone`'s chunks.
fn shape(zone: &Zone<'_>) -> ChunkShape {
    ChunkShape::of(&zone.layout, zone.baselines.as_ptr() as usize)
}

fn take_run<S: ChunkSource>(
    zone: &Zone<'_>,
    grown: &Grown,
    len: usize,
    wait: Wait,
) -> Result<usize, Error> {
    // SAFETY: the table of `S` calls this.
    let source = unsafe { grown.source::<S>() };
    let shape = &shape(zone);
    loop {
        let mut slots = zone.slots.lock();
        match slots.chunks.alloc_run(shape, len) {
            Found::Slot(off) => return Ok(off),
            Found::TooLong => {
                return Err(Error::RunTooLong {
                    len,
                    max: shape.slots,
                });
            }
            Found::Grow => {}
        }
        // The source may block (`wait`): never under the zone's lock.
        drop(slots);
        let given = source
            .alloc_chunk(shape.layout, wait == Wait::WaitOk)
            .ok_or(Error::OutOfMemory {
                bytes: shape.layout.size(),
            })?;
        let chunk = accept(source, given, shape)?;
        let mut slots = zone.slots.lock();
        // Another CPU may have grown the zone meanwhile: then this chunk is the spare, or goes
        // back, and the run comes from the chunks there are.
        if let Found::Slot(off) = slots.chunks.alloc_run(shape, len) {
            // SAFETY: a chunk of the zone's chunk layout from its source, unused.
            let extra = unsafe { slots.chunks.stash(shape, chunk) };
            drop(slots);
            if let Some(memory) = extra {
                // SAFETY: the source's own chunk, unused, given back once.
                unsafe { source.free_chunk(memory, shape.layout) };
            }
            return Ok(off);
        }
        // SAFETY: a chunk of the zone's chunk layout from its source, unused.
        unsafe { slots.chunks.add(shape, chunk) };
        // The run comes from the new chunk (first on the list), under the lock that linked
        // it: another CPU's frees meanwhile cannot leave it on the list, empty, for good.
        if let Found::Slot(off) = slots.chunks.alloc_run(shape, len) {
            return Ok(off);
        }
    }
}

/// The chunk `given` by the source, if the zone can use it: the zone finds chunks by their
/// alignment and writes `shape.layout.size()` bytes of each, so a chunk misaligned
/// ([`Error::Misaligned`]) or shorter ([`Error::ShortChunk`]) goes back to the source at once
/// (with the length it gave) and the alloc fails, the zone unchanged.
fn accept<S: ChunkSource>(
    source: &S,
    given: NonNull<[u8]>,
    shape: &ChunkShape,
) -> Result<NonNull<u8>, Error> {
    let chunk = given.cast::<u8>();
    let (asked, len) = (shape.layout.size(), given.len());
    let error = if !(chunk.as_ptr() as usize).is_multiple_of(shape.layout.align()) {
        Error::Misaligned {
            addr: chunk.as_ptr() as usize,
        }
    } else if len < asked && cfg!(not(pcpu_counter_broken = "short_chunk_accepted")) {
        Error::ShortChunk { asked, given: len }
    } else {
        return Ok(chunk);
    };
    let layout = match len < asked {
        // SAFETY: smaller than a valid layout of the same alignment, so valid too.
        true => unsafe {
            core::alloc::Layout::from_size_align_unchecked(len, shape.layout.align())
        },
        false => shape.layout,
    };
    // SAFETY: the source's own chunk, unused, given back at once with the length it gave.
    unsafe { source.free_chunk(chunk, layout) };
    Err(error)
}

fn try_take_run(zone: &Zone<'_>, len: usize) -> Option<Result<usize, Error>> {
    let mut slots = zone.slots.try_lock()?;
    let shape = &shape(zone);
    match slots.chunks.alloc_run(shape, len) {
        Found::Slot(off) => Some(Ok(off)),
        Found::TooLong => Some(Err(Error::RunTooLong {
            len,
            max: shape.slots,
        })),
        Found::Grow => None,
    }
}

/// # Safety
/// As [`ChunkShape::find`].
unsafe fn place(zone: &Zone<'_>, off: usize) -> Option<Place> {
    // SAFETY: the caller's contract.
    let found = unsafe { shape(zone).find(off) };
    found.map(|(chunk, index)| Place::Chunk(chunk, index))
}

fn free_run<S: ChunkSource>(
    zone: &Zone<'_>,
    grown: &Grown,
    chunk: *mut Chunk,
    index: usize,
    len: usize,
) {
    let shape = shape(zone);
    let give_back = zone.slots.lock().chunks.free_run(&shape, chunk, index, len);
    if let Some(memory) = give_back {
        // SAFETY: the table of `S` calls this; an empty chunk of this zone, off its lists,
        // from its source.
        unsafe { grown.source::<S>().free_chunk(memory, shape.layout) };
    }
}

fn holds_run(zone: &Zone<'_>, off: usize, last: usize) -> bool {
    zone.slots.lock().chunks.holds_run(&shape(zone), off, last)
}

fn release_spare<S: ChunkSource>(zone: &Zone<'_>, grown: &Grown) -> usize {
    let shape = shape(zone);
    let Some(memory) = zone.slots.lock().chunks.take_spare(&shape) else {
        return 0;
    };
    // SAFETY: the table of `S` calls this; the spare is empty, off every list, from the source.
    unsafe { grown.source::<S>().free_chunk(memory, shape.layout) };
    1
}

fn release_all<S: ChunkSource>(zone: &Zone<'_>, grown: &Grown) {
    // SAFETY: the table of `S` calls this.
    let source = unsafe { grown.source::<S>() };
    let shape = shape(zone);
    zone.slots.lock().chunks.release_all(&shape, |memory| {
        // SAFETY: every chunk came from the source with this layout; no counter is alive.
        unsafe { source.free_chunk(memory, shape.layout) }
    });
}
