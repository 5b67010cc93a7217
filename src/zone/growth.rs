// SPDX-License-Identifier: BSD-2-Clause
//! A zone's growth paths: every step of an alloc, a free or a lookup that deals with chunks.
//!
//! They are reached only through the table [`GROWTH`], which [`Zone::grow_from`] puts in the
//! zone beside its [`ChunkShape`] (a [`Grown`]): the zone's own paths test for one and call
//! through it, so a kernel that never makes a zone grow links none of this (the C library's
//! footprint).

use super::{Place, Zone};
use crate::chunk::{Chunk, ChunkShape, Found};
use crate::{Error, Wait};

/// A run taken: its offset, how many of its slots were handed out before, and whether the
/// others read zero (what `Zone::clear_run` needs).
pub(crate) type Taken = (usize, usize, bool);

/// The growth paths, as a table of functions (see the module's text).
pub(crate) struct Growth {
    take_run: fn(&Zone<'_>, &ChunkShape, usize, Wait) -> Result<Taken, Error>,
    try_take_run: fn(&Zone<'_>, &ChunkShape, usize) -> Option<Result<Taken, Error>>,
    place: unsafe fn(&ChunkShape, usize) -> Option<Place>,
    free_run: fn(&Zone<'_>, &ChunkShape, *mut Chunk, usize, usize),
    holds: fn(&Zone<'_>, &ChunkShape, usize) -> bool,
    holds_run: fn(&Zone<'_>, &ChunkShape, usize, usize) -> bool,
    counts: fn(&Zone<'_>) -> (usize, usize),
    full: fn(&Zone<'_>, usize) -> Error,
    release_all: fn(&Zone<'_>, &ChunkShape),
}

/// A zone's chunks' shape and source, with the table of its growth paths.
pub(crate) struct Grown {
    pub(crate) shape: ChunkShape,
    paths: &'static Growth,
}

impl Grown {
    /// The growth of chunks of `shape`: the only place that names [`GROWTH`].
    pub(crate) fn new(shape: ChunkShape) -> Self {
        Grown {
            shape,
            paths: &GROWTH,
        }
    }
}

impl core::ops::Deref for Grown {
    type Target = ChunkShape;

    fn deref(&self) -> &ChunkShape {
        &self.shape
    }
}

/// The one table: `Grown::new` is its only user.
pub(crate) static GROWTH: Growth = Growth {
    take_run,
    try_take_run,
    place,
    free_run,
    holds,
    holds_run,
    counts,
    full,
    release_all,
};

impl Grown {
    /// A run of `len` slots from the chunks, taking a chunk from the source (asked with
    /// `wait`) when none has it.
    pub(crate) fn take_run(&self, zone: &Zone<'_>, len: usize, wait: Wait) -> Result<Taken, Error> {
        (self.paths.take_run)(zone, &self.shape, len, wait)
    }

    /// As [`take_run`](ChunkShape::take_run), but never waiting for the lock or the source:
    /// `None` when it would.
    pub(crate) fn try_take_run(&self, zone: &Zone<'_>, len: usize) -> Option<Result<Taken, Error>> {
        (self.paths.try_take_run)(zone, &self.shape, len)
    }

    /// Where the slot at `off` (outside the first blocks) lies: a chunk and its index there.
    ///
    /// # Safety
    /// As [`ChunkShape::find`].
    pub(crate) unsafe fn place(&self, off: usize) -> Option<Place> {
        // SAFETY: the caller's contract.
        unsafe { (self.paths.place)(&self.shape, off) }
    }

    /// Frees the run of `len` slots from slot `index` of `chunk`.
    pub(crate) fn free_run(&self, zone: &Zone<'_>, chunk: *mut Chunk, index: usize, len: usize) {
        (self.paths.free_run)(zone, &self.shape, chunk, index, len)
    }

    /// Whether `off` is a slot of one of the zone's chunks (a walk).
    pub(crate) fn holds(&self, zone: &Zone<'_>, off: usize) -> bool {
        (self.paths.holds)(zone, &self.shape, off)
    }

    /// Whether the slots from `off` to `last` are slots of one chunk (a walk).
    pub(crate) fn holds_run(&self, zone: &Zone<'_>, off: usize, last: usize) -> bool {
        (self.paths.holds_run)(zone, &self.shape, off, last)
    }

    /// The chunks taken and the slots in use in them.
    pub(crate) fn counts(&self, zone: &Zone<'_>) -> (usize, usize) {
        (self.paths.counts)(zone)
    }

    /// The error of an alloc of `len` slots that no chunk can give: a run longer than a chunk
    /// (or the first blocks); else a full zone.
    pub(crate) fn full(&self, zone: &Zone<'_>, len: usize) -> Error {
        (self.paths.full)(zone, len)
    }

    /// Gives every chunk back (the zone's drop).
    pub(crate) fn release_all(&self, zone: &Zone<'_>) {
        (self.paths.release_all)(zone, self)
    }
}

fn take_run(zone: &Zone<'_>, shape: &ChunkShape, len: usize, wait: Wait) -> Result<Taken, Error> {
    loop {
        let mut slots = zone.slots.lock();
        match slots.chunks.alloc_run(shape, len) {
            Found::Slot(off, used_before) => return Ok((off, used_before, shape.source.zeroed())),
            Found::TooLong => {
                drop(slots);
                return Err(zone.full(len));
            }
            Found::Grow => {}
        }
        // The source may block (`wait`): never under the zone's lock.
        drop(slots);
        let chunk = shape
            .source
            .alloc_chunk(shape.layout, wait == Wait::WaitOk)
            .ok_or(Error::OutOfMemory {
                bytes: shape.layout.size(),
            })?;
        if !(chunk.as_ptr() as usize).is_multiple_of(shape.layout.align()) {
            // The zone finds chunks by their alignment: a source that ignored it gets its
            // memory back and the alloc fails.
            // SAFETY: the source's own chunk, unused, given back at once.
            unsafe { shape.source.free_chunk(chunk, shape.layout) };
            return Err(Error::Misaligned {
                addr: chunk.as_ptr() as usize,
            });
        }
        let mut slots = zone.slots.lock();
        // Another CPU may have grown the zone meanwhile: then this chunk is the spare, or goes
        // back, and the run comes from the chunks there are.
        if let Found::Slot(off, used_before) = slots.chunks.alloc_run(shape, len) {
            // SAFETY: a chunk of the zone's chunk layout from its source, unused.
            let extra = unsafe { slots.chunks.stash(shape, chunk) };
            drop(slots);
            if let Some(memory) = extra {
                // SAFETY: the source's own chunk, unused, given back once.
                unsafe { shape.source.free_chunk(memory, shape.layout) };
            }
            return Ok((off, used_before, shape.source.zeroed()));
        }
        // SAFETY: a chunk of the zone's chunk layout from its source, unused.
        unsafe { slots.chunks.add(shape, chunk) };
        // The run comes from the new chunk (first on the list), under the lock that linked
        // it: another CPU's frees meanwhile cannot leave it on the list, empty, for good.
        if let Found::Slot(off, used_before) = slots.chunks.alloc_run(shape, len) {
            return Ok((off, used_before, shape.source.zeroed()));
        }
    }
}

fn try_take_run(zone: &Zone<'_>, shape: &ChunkShape, len: usize) -> Option<Result<Taken, Error>> {
    let mut slots = zone.slots.try_lock()?;
    match slots.chunks.alloc_run(shape, len) {
        Found::Slot(off, used_before) => Some(Ok((off, used_before, shape.source.zeroed()))),
        Found::TooLong => {
            drop(slots);
            Some(Err(zone.full(len)))
        }
        Found::Grow => None,
    }
}

/// # Safety
/// As [`ChunkShape::find`].
unsafe fn place(shape: &ChunkShape, off: usize) -> Option<Place> {
    // SAFETY: the caller's contract.
    let found = unsafe { shape.find(off) };
    found.map(|(chunk, index)| Place::Chunk(chunk, index))
}

fn free_run(zone: &Zone<'_>, shape: &ChunkShape, chunk: *mut Chunk, index: usize, len: usize) {
    let give_back = zone.slots.lock().chunks.free_run(shape, chunk, index, len);
    if let Some(memory) = give_back {
        // SAFETY: an empty chunk of this zone, off its lists, from its source.
        unsafe { shape.source.free_chunk(memory, shape.layout) };
    }
}

fn holds(zone: &Zone<'_>, shape: &ChunkShape, off: usize) -> bool {
    zone.slots.lock().chunks.holds(shape, off)
}

fn holds_run(zone: &Zone<'_>, shape: &ChunkShape, off: usize, last: usize) -> bool {
    zone.slots.lock().chunks.holds_run(shape, off, last)
}

fn counts(zone: &Zone<'_>) -> (usize, usize) {
    let slots = zone.slots.lock();
    (slots.chunks.count(), slots.chunks.used())
}

fn full(zone: &Zone<'_>, len: usize) -> Error {
    let max = zone.max_run();
    match len > max {
        true => Error::RunTooLong { len, max },
        false => Error::ZoneFull {
            capacity: zone.capacity(),
        },
    }
}

fn release_all(zone: &Zone<'_>, shape: &ChunkShape) {
    zone.slots.lock().chunks.release_all(shape);
}
