// SPDX-License-Identifier: BSD-2-Clause
//! `percpu_counter!` and the per-arch add it expands to.
//!
//! One instruction needs the slot's symbol in the instruction (an `asm!` `sym` operand): a
//! method on a shared type can only take the slot's address from a register. So the macro
//! generates, per counter, a marker type whose [`StaticSlot`](super::private::StaticSlot) impl holds
//! the add compiled against that counter's slot. The form of the add is chosen by this
//! crate's build (its arch and cfgs), not the user's: the form is the one `#[doc(hidden)]`
//! exported macro `__pcpu_static_add`, defined under this crate's `cfg`, so the expansion
//! holds the right arch's code only. The slot's section is chosen in the expansion itself
//! (a `cfg_attr` on the target, which the user's crate shares).

/// Declares a per-CPU counter as a `static`, its slot in the per-CPU section (see the
/// `statics` module): no allocation, usable before any zone exists, from any crate.
///
/// ```ignore
/// pcpu_counter::percpu_counter!(
///     /// Packets received.
///     pub static RX_PACKETS
/// );
/// RX_PACKETS.inc();     // x86_64: add qword ptr gs:[rip + RX_PACKETS::SLOT], 1
/// RX_PACKETS.add(len);  // x86_64: add qword ptr gs:[rip + RX_PACKETS::SLOT], rsi
/// let total = RX_PACKETS.fetch();
/// ```
///
/// An array of `N` adjacent counters (`N` a literal): `percpu_counter!(pub static RX: [8]);`
/// then `RX.add(i, v)`, `RX.fetch_all(&mut out)` (a [`StaticArray`](crate::statics::StaticArray)).
///
/// It also defines a module of the same name (modules and statics have separate
/// namespaces) holding the slot and the marker type.
#[macro_export]
macro_rules! percpu_counter {
    ($(#[$attr:meta])* $vis:vis static $name:ident: [$n:literal]) => {
        $(#[$attr])*
        $vis static $name: $crate::statics::StaticArray<$name::Marker, $n> =
            $crate::__private::static_array();

        #[doc(hidden)]
        #[allow(non_snake_case)]
        $vis mod $name {
            /// The array's template slots, adjacent in the per-CPU section.
            #[cfg_attr(
                not(any(target_vendor = "apple", target_os = "windows", target_family = "wasm")),
                unsafe(link_section = "pcpu_counter_statics")
            )]
            pub static SLOTS: [$crate::__private::Slot; $n] =
                [const { $crate::__private::Slot::new() }; $n];

            /// The array's marker type.
            pub struct Marker;

            // SAFETY: `SLOTS` are adjacent slots in the per-CPU section, used by this type
            // alone.
            unsafe impl $crate::__private::StaticSlots for Marker {
                #[inline(always)]
                fn first() -> &'static $crate::__private::Slot {
                    &SLOTS[0]
                }
            }
        }
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident) => {
        $(#[$attr])*
        $vis static $name: $crate::statics::StaticCounter<$name::Marker> =
            $crate::__private::static_counter();

        #[doc(hidden)]
        #[allow(non_snake_case)]
        $vis mod $name {
            /// The counter's template slot, in the per-CPU section.
            #[cfg_attr(
                not(any(target_vendor = "apple", target_os = "windows", target_family = "wasm")),
                unsafe(link_section = "pcpu_counter_statics")
            )]
            pub static SLOT: $crate::__private::Slot = $crate::__private::Slot::new();

            /// The counter's marker type: its adds, against `SLOT`'s symbol.
            pub struct Marker;

            // SAFETY: `SLOT` is in the per-CPU section and used by this type alone; the
            // adds are the crate's per-CPU adds of it.
            unsafe impl $crate::__private::StaticSlot for Marker {
                #[inline(always)]
                fn slot() -> &'static $crate::__private::Slot {
                    &SLOT
                }
                #[inline(always)]
                fn add(v: i64) {
                    $crate::__pcpu_static_add!(SLOT, v)
                }
                #[inline(always)]
                fn inc() {
                    $crate::__pcpu_static_add!(SLOT)
                }
            }
        }
    };
}

/// The add of a static's slot (`$slot`, the template slot's path) to the running CPU's copy:
/// `(SLOT, v)` adds `v`, `(SLOT)` adds 1. x86_64: one `add qword ptr gs:[rip + SLOT], v` (or
/// `, 1`, an immediate).
#[cfg(all(
    target_arch = "x86_64",
    not(pcpu_no_cpu_register),
    not(pcpu_counter_broken = "static_shared_add")
))]
#[doc(hidden)]
#[macro_export]
macro_rules! __pcpu_static_add {
    ($slot:path, $v:expr) => {{
        $crate::__private::check();
        // SAFETY: GS base plus the slot's link-time address is the running CPU's copy (the
        // `statics` module's contract); one instruction, which neither an interrupt nor a
        // migration can split.
        unsafe {
            ::core::arch::asm!(
                "add qword ptr gs:[rip + {slot}], {v}",
                slot = sym $slot,
                v = in(reg) $v,
                options(nostack),
            )
        }
    }};
    ($slot:path) => {{
        $crate::__private::check();
        // SAFETY: as the add of `v` above.
        unsafe {
            ::core::arch::asm!(
                "add qword ptr gs:[rip + {slot}], 1",
                slot = sym $slot,
                options(nostack),
            )
        }
    }};
}

/// TEST ONLY (`--cfg pcpu_counter_broken="static_shared_add"`): the add without `gs:`, so
/// every CPU adds to the template with a plain, non-locked read-modify-write, which
/// concurrent CPUs lose. `tests/statics.rs` must catch it.
#[cfg(all(target_arch = "x86_64", pcpu_counter_broken = "static_shared_add"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __pcpu_static_add {
    ($slot:path, $v:expr) => {{
        $crate::__private::check();
        // SAFETY: the template slot, in the image for ever (racy on purpose).
        unsafe {
            ::core::arch::asm!(
                "add qword ptr [rip + {slot}], {v}",
                slot = sym $slot,
                v = in(reg) $v,
                options(nostack),
            )
        }
    }};
    ($slot:path) => {
        $crate::__pcpu_static_add!($slot, 1i64)
    };
}

/// Every other arch: its add primitive on the slot's address in a register (aarch64
/// `mrs tpidr_el1; add; ldadd` or LL/SC, riscv64 `add; amoadd.d`, i386 the `cmpxchg8b fs:`
/// loop, the portable fallback under protection).
#[cfg(not(all(target_arch = "x86_64", not(pcpu_no_cpu_register))))]
#[doc(hidden)]
#[macro_export]
macro_rules! __pcpu_static_add {
    ($slot:path, $v:expr) => {
        $crate::__private::add_at($slot.offset(), $v)
    };
    ($slot:path) => {
        $crate::__private::add_at($slot.offset(), 1)
    };
}
