// SPDX-License-Identifier: BSD-2-Clause
//! The zone's slot allocator: a bitmap with a summary tree over it, first fit.
//!
//! Level 0 has one bit per slot (set: in use). Each level above has one bit per word of the
//! level below, set when that word is full, up to a level of one word. A single slot is found
//! by walking down from that word, one `trailing_zeros` per level: the lowest free slot, in
//! `depth` word reads whatever the number of live slots (`depth` = levels, 4 for up to
//! 16,777,216 slots, at most 11 for any `usize`), and freed or taken in at most `depth` word
//! writes. Nothing scans a word count that grows with the zone, except a run of several slots
//! (a counter array), which is first fit from the lowest free slot (below).
//!
//! The levels lie top first in the words: the top word, then each level below it, the leaves
//! last. Level `k` (0: the leaves) has `ceil(nbits / 64^(k+1))` words, a shift to compute, so
//! a walk down or up finds each level's start from the one before it, with nothing stored
//! per level.
//!
//! One allocator is one contiguous range of slots, its words the caller's: a zone's today, and
//! a chunk's when zones grow.

use core::ptr::NonNull;

use crate::layout::bitmap_words as words_for;

/// A first-fit slot bitmap over `nbits` slots with its summary levels, kept in
/// [`words_for`]`(nbits)` caller-provided words, and the count of slots in use.
///
/// It is only touched under the zone's `spin::Mutex`, so it needs no atomics.
pub(crate) struct Bitmap {
    words: NonNull<u64>,
    nbits: usize,
    used: usize,
    /// Number of levels (0 only for no slots).
    depth: usize,
    /// Where the leaves start: the words of every level above them.
    leaves: usize,
}

// SAFETY: the words are owned by the bitmap for its whole life (the zone's contract) and are
// only reached through `&mut self`, i.e. under the zone's mutex.
unsafe impl Send for Bitmap {}

impl Bitmap {
    /// Takes `words` as storage for `nbits` slots, all free.
    ///
    /// Every word is written here: the leaf and summary bits of real slots and words clear,
    /// the padding past them set (a padding bit is never free, so "full" is `u64::MAX` in
    /// every word, the last ones included).
    ///
    /// # Safety
    /// `words` must point at [`words_for`]`(nbits)` writable `u64`s that nothing else
    /// touches while the bitmap lives.
    #[inline(always)]
    pub(crate) unsafe fn new(words: NonNull<u64>, nbits: usize) -> Self {
        let mut bitmap = Bitmap {
            words,
            nbits,
            used: 0,
            depth: usize::from(nbits > 0),
            leaves: 0,
        };
        while bitmap.depth > 0 && bitmap.level_words(bitmap.depth - 1) > 1 {
            bitmap.depth += 1;
        }
        // Top down: each level cleared, and the padding past its bits (the words of the level
        // below, or the slots) set in its last word; the last level is the leaves.
        let mut start = 0;
        for level in (0..bitmap.depth).rev() {
            let count = bitmap.level_words(level);
            let bits = match level {
                0 => nbits,
                _ => bitmap.level_words(level - 1),
            };
            for i in start..start + count {
                bitmap.set_word(i, 0);
            }
            if !bits.is_multiple_of(64) {
                bitmap.set_word(start + count - 1, u64::MAX << (bits % 64));
            }
            bitmap.leaves = start;
            start += count;
        }
        bitmap
    }

    /// Words of level `level` (0: the leaves): `ceil(nbits / 64^(level + 1))`, 1 at the top.
    fn level_words(&self, level: usize) -> usize {
        let shift = 6 * (level as u32 + 1);
        (self.nbits.saturating_sub(1).checked_shr(shift).unwrap_or(0)) + 1
    }

    fn word(&self, i: usize) -> u64 {
        debug_assert!(i < words_for(self.nbits));
        // SAFETY: every caller keeps `i` below the word count.
        unsafe { *self.words.as_ptr().add(i) }
    }

    fn set_word(&mut self, i: usize, w: u64) {
        debug_assert!(i < words_for(self.nbits));
        // SAFETY: as in `word`, and `&mut self` makes the write exclusive.
        unsafe { *self.words.as_ptr().add(i) = w }
    }

    fn is_set(&self, bit: usize) -> bool {
        self.word(self.leaves + bit / 64) & (1 << (bit % 64)) != 0
    }

    /// Marks free slot `bit` in use; a leaf word that fills sets its bit in the level above,
    /// and so on up.
    #[inline(always)]
    fn take(&mut self, bit: usize) {
        let (mut bit, mut start) = (bit, self.leaves);
        for level in 0..self.depth {
            let i = start + bit / 64;
            let w = self.word(i) | 1 << (bit % 64);
            self.set_word(i, w);
            if w != u64::MAX {
                break;
            }
            bit /= 64;
            // The level above ends where this one starts (past the top: unused).
            start = start.wrapping_sub(self.level_words(level + 1));
        }
        self.used += 1;
    }

    /// Marks slot `bit` (in use) free; a word that was full clears its bit in the level
    /// above, and so on up.
    #[inline(always)]
    fn give(&mut self, bit: usize) {
        let (mut bit, mut start) = (bit, self.leaves);
        for level in 0..self.depth {
            let i = start + bit / 64;
            let was = self.word(i);
            self.set_word(i, was & !(1 << (bit % 64)));
            if was != u64::MAX || cfg!(pcpu_counter_broken = "slot_summary_stale") {
                break;
            }
            bit /= 64;
            // As in `take`.
            start = start.wrapping_sub(self.level_words(level + 1));
        }
        self.used -= 1;
    }

    /// The lowest free slot, found down the summary levels: one word per level. The bitmap
    /// has slots (`alloc_run` checks).
    #[inline(always)]
    fn lowest_free(&self) -> Option<usize> {
        let (mut index, mut start) = (0, 0);
        for level in (0..self.depth).rev() {
            let w = self.word(start + index);
            if w == u64::MAX {
                // Only the top word can be full here: a clear bit above names a word with a
                // clear bit below.
                return None;
            }
            index = index * 64 + (!w).trailing_zeros() as usize;
            start += self.level_words(level);
        }
        Some(index)
    }

    /// Number of slots in use.
    pub(crate) fn count_used(&self) -> usize {
        self.used
    }

    /// Finds the first run of `len` free slots, takes it and returns its first slot.
    ///
    /// One slot (every counter) costs one walk down the levels. A longer run (an array) is
    /// searched from the lowest free slot up, bit by bit, skipping full words: up to
    /// O(capacity) bit tests in a fragmented zone.
    #[inline(always)]
    pub(crate) fn alloc_run(&mut self, len: usize) -> Option<usize> {
        if len == 0 || len > self.nbits {
            return None;
        }
        let mut start = self.lowest_free()?;
        let first = loop {
            if start + len > self.nbits {
                return None;
            }
            if start % 64 == 0 && self.word(self.leaves + start / 64) == u64::MAX {
                start += 64;
                continue;
            }
            match (start..start + len).find(|&b| self.is_set(b)) {
                Some(used) => start = used + 1,
                None => break start,
            }
        };
        for bit in first..first + len {
            self.take(bit);
        }
        Some(first)
    }

    /// Frees the run `start..start + len`, every slot of which is in use.
    ///
    /// # Panics
    /// If the run is outside the slots, or a slot of it is free (a double free). Fixed texts,
    /// not formatted: a C kernel's library reaches this (`tests/c/footprint.sh`).
    #[inline(always)]
    pub(crate) fn free_run(&mut self, start: usize, len: usize) {
        assert!(
            start + len <= self.nbits,
            "pcpu-counter: free of a slot run outside the bitmap"
        );
        assert!(
            (start..start + len).all(|b| self.is_set(b)),
            "pcpu-counter: free of a slot run that is not allocated (a double free?)"
        );
        for bit in start..start + len {
            self.give(bit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_bitmap(nbits: usize, f: impl FnOnce(&mut Bitmap)) {
        let mut words = [u64::MAX; 8]; // garbage: `new` must write every word
        assert!(words_for(nbits) <= words.len());
        // SAFETY: the words cover `words_for(nbits)` and outlive the bitmap.
        let mut bitmap = unsafe { Bitmap::new(NonNull::from(&mut words).cast(), nbits) };
        f(&mut bitmap)
    }

    /// The walk down the levels alone (`alloc_run` would find the same slot by its scan from
    /// slot 0): the lowest free slot at every level, and none in a full bitmap.
    #[test]
    fn the_walk_down_finds_the_lowest_free_slot() {
        let mut words = [0u64; 68];
        // SAFETY: 68 words are `words_for(4097)` and outlive the bitmap.
        let mut b = unsafe { Bitmap::new(NonNull::from(&mut words).cast(), 4097) };
        assert_eq!(b.lowest_free(), Some(0));
        assert_eq!(b.alloc_run(64 * 63 + 5), Some(0));
        assert_eq!(
            b.lowest_free(),
            Some(64 * 63 + 5),
            "into the last word of a summary word"
        );
        assert_eq!(b.alloc_run(59), Some(64 * 63 + 5));
        assert_eq!(b.lowest_free(), Some(4096), "past a full summary word");
        b.free_run(64 * 3 + 7, 1);
        assert_eq!(
            b.lowest_free(),
            Some(64 * 3 + 7),
            "under a clear summary bit again"
        );
        assert_eq!(b.alloc_run(1), Some(64 * 3 + 7));
        assert_eq!(b.alloc_run(1), Some(4096));
        assert_eq!(b.lowest_free(), None, "full");
    }

    #[test]
    fn first_fit_runs_across_words_and_exact_capacity() {
        with_bitmap(130, |b| {
            assert_eq!(b.count_used(), 0);
            assert_eq!(b.alloc_run(0), None, "no empty run, even with room");
            assert_eq!(
                b.alloc_run(131),
                None,
                "no run longer than the bitmap, even empty"
            );
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

    /// Three levels (4097 slots: 65 leaf words, 2 summary words, 1 top word): filling a leaf
    /// word sets its summary bit, freeing one slot of it clears the bit again, at every level.
    #[test]
    fn the_summary_follows_full_words_up_three_levels() {
        let mut words = [0u64; 68];
        // SAFETY: 68 words are `words_for(4097)` and outlive the bitmap.
        let mut b = unsafe { Bitmap::new(NonNull::from(&mut words).cast(), 4097) };
        assert_eq!(b.alloc_run(4096), Some(0));
        assert_eq!(b.alloc_run(1), Some(4096));
        assert_eq!(b.alloc_run(1), None, "full at exactly 4097");
        b.free_run(4095, 1);
        b.free_run(0, 1);
        assert_eq!(b.alloc_run(1), Some(0), "the lowest free slot first");
        assert_eq!(b.alloc_run(1), Some(4095));
        assert_eq!(b.count_used(), 4097);
        b.free_run(0, 4097);
        assert_eq!(b.count_used(), 0);
        // The bitmap is not used past here. Every real bit is clear again; only the padding
        // past 2, 65 and 4097 stays set: in the top word (0), the second summary word (2) and
        // the last leaf word (67).
        let padding = [(0, u64::MAX << 2), (2, u64::MAX << 1), (67, u64::MAX << 1)];
        for (i, w) in words.iter().enumerate() {
            let expected = padding.iter().find(|p| p.0 == i).map_or(0, |p| p.1);
            assert_eq!(*w, expected, "word {i}");
        }
    }

    #[test]
    #[should_panic(expected = "not allocated (a double free?)")]
    fn a_double_free_panics() {
        with_bitmap(130, |b| {
            assert_eq!(b.alloc_run(2), Some(0));
            b.free_run(1, 1);
            b.free_run(0, 2);
        });
    }

    #[test]
    #[should_panic(expected = "outside the bitmap")]
    fn freeing_outside_the_bitmap_panics() {
        with_bitmap(64, |b| b.free_run(60, 8));
    }
}
