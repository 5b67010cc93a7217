// SPDX-License-Identifier: BSD-2-Clause
//! The zone's slot allocator: one bit per slot, first fit.

use core::ptr::NonNull;

/// A bitmap over `nbits` slots kept in caller-provided words; a set bit is a slot in use.
///
/// It is only touched under the zone's `spin::Mutex`, so it needs no atomics.
pub(crate) struct Bitmap {
    words: NonNull<u64>,
    nbits: usize,
}

// SAFETY: the words are owned by the bitmap for its whole life (the zone's contract) and are
// only reached through `&mut self`, i.e. under the zone's mutex.
unsafe impl Send for Bitmap {}

impl Bitmap {
    /// Takes `words` (cleared here) as storage for `nbits` bits.
    ///
    /// # Safety
    /// `words` must point at `nbits.div_ceil(64)` writable `u64`s that nothing else touches
    /// while the bitmap lives.
    pub(crate) unsafe fn new(words: NonNull<u64>, nbits: usize) -> Self {
        for i in 0..nbits.div_ceil(64) {
            // SAFETY: `i` is inside the caller's storage.
            unsafe { words.as_ptr().add(i).write(0) };
        }
        Bitmap { words, nbits }
    }

    fn word(&self, i: usize) -> u64 {
        debug_assert!(i < self.nbits.div_ceil(64));
        // SAFETY: every caller keeps `i` below the word count.
        unsafe { *self.words.as_ptr().add(i) }
    }

    fn set_word(&mut self, i: usize, w: u64) {
        debug_assert!(i < self.nbits.div_ceil(64));
        // SAFETY: as in `word`, and `&mut self` makes the write exclusive.
        unsafe { *self.words.as_ptr().add(i) = w }
    }

    fn is_set(&self, bit: usize) -> bool {
        self.word(bit / 64) & (1 << (bit % 64)) != 0
    }

    fn set_range(&mut self, start: usize, len: usize, on: bool) {
        for bit in start..start + len {
            let (i, mask) = (bit / 64, 1u64 << (bit % 64));
            let w = self.word(i);
            self.set_word(i, if on { w | mask } else { w & !mask });
        }
    }

    /// Number of set bits.
    pub(crate) fn count_used(&self) -> usize {
        (0..self.nbits.div_ceil(64))
            .map(|i| self.word(i).count_ones() as usize)
            .sum()
    }

    /// Finds the first run of `len` clear bits, sets it and returns its first bit.
    pub(crate) fn alloc_run(&mut self, len: usize) -> Option<usize> {
        if len == 0 || len > self.nbits {
            return None;
        }
        let mut start = 0;
        while start + len <= self.nbits {
            // Skip full words quickly; bits past `nbits` in the last word stay clear but are
            // never handed out because of the bound above.
            if start % 64 == 0 && self.word(start / 64) == u64::MAX {
                start += 64;
                continue;
            }
            match (start..start + len).find(|&b| self.is_set(b)) {
                Some(used) => start = used + 1,
                None => {
                    self.set_range(start, len, true);
                    return Some(start);
                }
            }
        }
        None
    }

    /// Clears the run `start..start + len`, which `alloc_run` handed out.
    pub(crate) fn free_run(&mut self, start: usize, len: usize) {
        assert!(
            start + len <= self.nbits,
            "slot run {start}+{len} outside the bitmap"
        );
        assert!(
            (start..start + len).all(|b| self.is_set(b)),
            "pcpu-counter: free of slot run {start}+{len}, which is not allocated (a double free?)"
        );
        self.set_range(start, len, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_bitmap(nbits: usize, f: impl FnOnce(&mut Bitmap)) {
        let mut words = [u64::MAX; 4]; // garbage: `new` must clear it
                                       // SAFETY: 4 words cover up to 256 bits and outlive the bitmap.
        let mut bitmap = unsafe { Bitmap::new(NonNull::from(&mut words).cast(), nbits) };
        f(&mut bitmap)
    }

    #[test]
    fn first_fit_runs_across_words_and_exact_capacity() {
        with_bitmap(130, |b| {
            assert_eq!(b.count_used(), 0);
            assert_eq!(b.alloc_run(1), Some(0));
            assert_eq!(b.alloc_run(62), Some(1));
            assert_eq!(b.alloc_run(3), Some(63), "a run may cross a word boundary");
            b.free_run(1, 62);
            assert_eq!(
                b.alloc_run(63),
                Some(66),
                "the 62-bit hole at 1 is one short"
            );
            assert_eq!(b.alloc_run(62), Some(1), "the freed hole is reused first");
            assert_eq!(b.count_used(), 1 + 62 + 3 + 63);
            assert_eq!(b.alloc_run(1), Some(129));
            assert_eq!(b.alloc_run(1), None, "bits past nbits are never handed out");
            assert_eq!(b.alloc_run(0), None);
            assert_eq!(b.alloc_run(131), None);
        });
    }

    #[test]
    fn a_run_as_long_as_the_bitmap_fits_only_when_it_is_empty() {
        with_bitmap(64, |b| {
            assert_eq!(b.alloc_run(64), Some(0));
            assert_eq!(b.count_used(), 64);
            assert_eq!(b.alloc_run(1), None);
            b.free_run(63, 1);
            assert_eq!(b.alloc_run(64), None);
            assert_eq!(b.alloc_run(1), Some(63));
        });
    }

    /// The full-word skip applies only at a word's first bit: a search that enters a full
    /// word after a set bit walks it bit by bit and finds the run that starts right after it.
    #[test]
    fn a_search_entering_a_full_word_midway_finds_the_run_after_it() {
        with_bitmap(192, |b| {
            assert_eq!(b.alloc_run(63), Some(0));
            assert_eq!(b.alloc_run(1), Some(63));
            assert_eq!(b.alloc_run(64), Some(64));
            b.free_run(63, 1); // word 0 has one clear bit, word 1 is full
            assert_eq!(b.alloc_run(3), Some(128));
            assert_eq!(b.alloc_run(1), Some(63));
        });
    }

    #[test]
    #[should_panic(expected = "outside the bitmap")]
    fn freeing_outside_the_bitmap_panics() {
        with_bitmap(64, |b| b.free_run(60, 8));
    }
}
