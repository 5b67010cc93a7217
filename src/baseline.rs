// SPDX-License-Identifier: BSD-2-Clause
//! The baseline words that make `zero` lossless without IPIs.
//!
//! A remote CPU cannot clear another CPU's slot: the owner's add is a non-locked
//! read-modify-write, and a plain store racing with it loses either the zero or the add.
//! Instead `zero` records the current sum as the slot's baseline, and `fetch` reports the sum
//! minus it. The slots are never written after allocation except by their owners. The
//! baselines are one word per slot in the zone's metadata, so a counter is nothing but its
//! zone and slot.

cfg_if::cfg_if! {
    if #[cfg(all(target_has_atomic = "64", not(target_arch = "x86")))] {
        use core::sync::atomic::{AtomicU64, Ordering};

        /// The baseline at `word`, with the happens-before edge from the zero that stored it.
        ///
        /// # Safety
        /// `word` is an aligned baseline word of a live zone (or an early counter's word).
        pub(crate) unsafe fn load(word: *mut u64) -> u64 {
            // SAFETY: aligned and live per the caller; every access to it is atomic.
            unsafe { AtomicU64::from_ptr(word) }.load(Ordering::Acquire)
        }

        /// Replaces `old` by `new` at `word` if it is still `old`.
        ///
        /// # Safety
        /// As [`load`].
        pub(crate) unsafe fn replace(word: *mut u64, old: u64, new: u64) -> bool {
            // SAFETY: as in `load`.
            unsafe { AtomicU64::from_ptr(word) }
                .compare_exchange(old, new, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        }

        /// Sets the baseline of a slot nobody uses yet (being allocated).
        ///
        /// # Safety
        /// As [`load`].
        pub(crate) unsafe fn store(word: *mut u64, value: u64) {
            // SAFETY: as in `load`.
            unsafe { AtomicU64::from_ptr(word) }.store(value, Ordering::Release)
        }
    } else {
        /// Where 64-bit atomics are missing or, on i386, may be missing (no CX8), every
        /// baseline word is read and written under this lock, taken under local protection so
        /// that an interrupt on the same CPU cannot deadlock on it. Zeroes are rare.
        static LOCK: spin::Mutex<()> = spin::Mutex::new(());

        /// The baseline at `word`.
        ///
        /// # Safety
        /// `word` is an aligned baseline word of a live zone (or an early counter's word).
        pub(crate) unsafe fn load(word: *mut u64) -> u64 {
            let _p = crate::platform::Protection::acquire();
            let _l = LOCK.lock();
            // SAFETY: aligned and live per the caller; the lock orders every access.
            unsafe { word.read_volatile() }
        }

        /// Replaces `old` by `new` at `word` if it is still `old`.
        ///
        /// # Safety
        /// As [`load`].
        pub(crate) unsafe fn replace(word: *mut u64, old: u64, new: u64) -> bool {
            let _p = crate::platform::Protection::acquire();
            let _l = LOCK.lock();
            // SAFETY: as in `load`.
            let same = unsafe { word.read_volatile() } == old;
            if same {
                // SAFETY: as in `load`.
                unsafe { word.write_volatile(new) };
            }
            same
        }

        /// Sets the baseline of a slot nobody uses yet (being allocated).
        ///
        /// # Safety
        /// As [`load`].
        pub(crate) unsafe fn store(word: *mut u64, value: u64) {
            let _p = crate::platform::Protection::acquire();
            let _l = LOCK.lock();
            // SAFETY: as in `load`.
            unsafe { word.write_volatile(value) }
        }
    }
}

/// Adds `v` to the word at `word` (early counters' shared word), as a compare-and-swap loop
/// over [`replace`].
///
/// # Safety
/// As [`load`].
pub(crate) unsafe fn add(word: *mut u64, v: u64) {
    loop {
        // SAFETY: per the caller.
        let old = unsafe { load(word) };
        // SAFETY: per the caller.
        if unsafe { replace(word, old, old.wrapping_add(v)) } {
            return;
        }
    }
}

/// Takes the word's value and leaves 0 there.
///
/// # Safety
/// As [`load`].
pub(crate) unsafe fn take(word: *mut u64) -> u64 {
    loop {
        // SAFETY: per the caller.
        let old = unsafe { load(word) };
        // SAFETY: per the caller.
        if unsafe { replace(word, old, 0) } {
            return old;
        }
    }
}
