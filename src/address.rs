// SPDX-License-Identifier: BSD-2-Clause
//! The addresses each arch can reach: plain data, at the bottom of the crate (the error type
//! names it). The set-up checks that use it are `AddressSpace::check_copies` (`layout.rs`).

/// Which addresses a CPU can reach: the rule that set-up checks
/// ([`ZoneLayout::validate`](crate::ZoneLayout::validate), `statics::install_section`) apply to every CPU's counter area or copy before anything is written,
/// so that an address the CPU cannot write is an error at set-up, never a fault (a `#GP`, a
/// store page fault) in the middle of it. Pure address arithmetic: every rule is usable, and
/// testable, on any host.
///
/// Bar x86_64's 4-level rule (see there), a rule refuses only what no configuration of the
/// arch can address; a kernel's own mapping may still leave an address unmapped, which no
/// arithmetic can know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AddressSpace {
    /// Every address (i386, aarch64 and the portable archs): only a range that wraps around
    /// the end of the address space is refused. (aarch64's top-byte-ignore and 52-bit
    /// address configurations leave almost every 64-bit address reachable in some kernel.)
    Flat,
    /// x86_64 with 4-level paging: canonical addresses, bits 63..47 all equal (below
    /// `0x0000_8000_0000_0000` or from `0xffff_8000_0000_0000`). 4-level paging, not 5-level
    /// (LA57, bits 63..56 equal), because the 48-bit rule is the one every x86_64 CPU
    /// enforces by default, the one the `x86_64` crate's `VirtAddr` (hence
    /// `arch::set_cpu_base`) applies, and the one that catches the mistake it exists for: a
    /// CPU's copy computed as two kernel addresses added (`0xffff_0000_0045_9c68`) is
    /// canonical under LA57. A kernel with 5-level paging whose per-CPU memory lies outside
    /// the 48-bit range is refused.
    X86_64,
    /// riscv64: what its widest mode, Sv57, can address (bits 63..56 all equal; Bare mode's
    /// physical addresses lie below 2^56). Sv39 (sign-extended from bit 38) and Sv48 (from
    /// bit 47) kernels reach less, but the crate cannot know the kernel's mode, so only what
    /// no mode can address is refused: an address only Sv48 or Sv57 reach passes (and an Sv39
    /// kernel's write there faults, as without the check).
    Riscv64,
}

impl AddressSpace {
    /// The rule of the target the crate is built for.
    pub const TARGET: AddressSpace = if cfg!(target_arch = "x86_64") {
        AddressSpace::X86_64
    } else if cfg!(target_arch = "riscv64") {
        AddressSpace::Riscv64
    } else {
        AddressSpace::Flat
    };

    /// Where the hole of unaddressable addresses starts and ends: `[low, high)`, empty for
    /// [`Flat`](AddressSpace::Flat).
    #[inline(always)]
    pub(crate) const fn hole(self) -> (usize, usize) {
        let bits = match self {
            AddressSpace::Flat => return (0, 0),
            AddressSpace::X86_64 => 47,
            AddressSpace::Riscv64 => 56,
        };
        // usize is 64 bits on both arches; on a 32-bit host the rule has no hole.
        match 1usize.checked_shl(bits) {
            Some(low) if bits < usize::BITS - 1 => (low, low.wrapping_neg()),
            _ => (0, 0),
        }
    }

    /// Whether the CPU can address `addr`.
    pub const fn reaches(self, addr: usize) -> bool {
        let (low, high) = self.hole();
        addr < low || addr >= high
    }
}

impl core::fmt::Display for AddressSpace {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            AddressSpace::Flat => "an address",
            AddressSpace::X86_64 => {
                "a canonical x86_64 address (4-level paging: bits 63..47 all equal)"
            }
            AddressSpace::Riscv64 => {
                "an address any riscv64 mode can reach (Sv57: bits 63..56 all equal)"
            }
        })
    }
}
