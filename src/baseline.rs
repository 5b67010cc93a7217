//! The baseline that makes `zero` lossless without IPIs.
//!
//! A remote CPU cannot clear another CPU's slot: the owner's add is a non-locked
//! read-modify-write, and a plain store racing with it loses either the zero or the add.
//! Instead `zero` records the current sum here, and `fetch` reports the sum minus it. The slots
//! are never written after allocation except by their owners.

cfg_if::cfg_if! {
    if #[cfg(all(target_has_atomic = "64", not(target_arch = "x86")))] {
        use core::sync::atomic::{AtomicU64, Ordering};

        /// The sum at the last zero, as an `AtomicU64`.
        pub(crate) struct Baseline(AtomicU64);

        impl Baseline {
            pub(crate) const fn new() -> Self {
                Baseline(AtomicU64::new(0))
            }

            /// The baseline, with the happens-before edge from the zero that stored it.
            pub(crate) fn load(&self) -> u64 {
                self.0.load(Ordering::Acquire)
            }

            /// Replaces `old` by `new` if it is still `old`.
            pub(crate) fn replace(&self, old: u64, new: u64) -> bool {
                self.0.compare_exchange(old, new, Ordering::AcqRel, Ordering::Acquire).is_ok()
            }
        }
    } else {
        /// The sum at the last zero, behind a spin lock taken under local protection (so an
        /// interrupt on the same CPU cannot deadlock on it). Used where 64-bit atomics are
        /// missing or, on i386, may be missing (no CX8).
        pub(crate) struct Baseline(spin::Mutex<u64>);

        impl Baseline {
            pub(crate) const fn new() -> Self {
                Baseline(spin::Mutex::new(0))
            }

            pub(crate) fn load(&self) -> u64 {
                let _p = crate::platform::Protection::acquire();
                *self.0.lock()
            }

            pub(crate) fn replace(&self, old: u64, new: u64) -> bool {
                let _p = crate::platform::Protection::acquire();
                let mut value = self.0.lock();
                let same = *value == old;
                if same {
                    *value = new;
                }
                same
            }
        }
    }
}
