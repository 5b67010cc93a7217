// SPDX-License-Identifier: BSD-2-Clause
//! The crate's atomics: `core`'s where the target has compare-and-swap, `portable-atomic`'s
//! where it has only loads and stores (`thumbv6m-none-eabi`: Cortex-M0/M0+).
//!
//! There `portable-atomic` (with its `critical-section` feature) runs each read-modify-write
//! inside a `critical_section::with`, so the final binary supplies a `critical-section`
//! implementation, as it does for the crate's default local protection anyway. On a
//! single-core M0 that is an interrupt disable (PRIMASK); on a multi-core one (RP2040) it must
//! exclude the other core too (rp2040-hal's uses a hardware spinlock). Loads and stores stay
//! plain single instructions.

cfg_if::cfg_if! {
    if #[cfg(target_has_atomic = "ptr")] {
        pub(crate) use core::sync::atomic::*;
    } else {
        pub(crate) use portable_atomic::*;
    }
}
