// SPDX-License-Identifier: BSD-2-Clause
//! Where a zone's per-CPU memory lies, and the checks that keep every access inside it.

use crate::{AddressSpace, AreaShape, Error};

/// The shape of a zone's memory: `ncpus` per-CPU blocks, `stride` bytes apart, each holding a
/// counter area of `len` bytes (8 per counter) at `offset` inside the block.
///
/// CPU `i`'s per-CPU register (GS base on x86_64, `TPIDR_EL1` on aarch64, the FS segment base
/// on i386) holds `base + i * stride`, and a counter's slot on CPU `i` is at
/// `base + i * stride + off`, where `off` (the counter's offset) is the same on every CPU.
///
/// A zone of its own has `offset == 0` and `len == stride`; a kernel that already points its
/// per-CPU register at its own per-CPU blocks hosts the zone inside them by giving their base
/// and size, and the offset of the area it reserved for counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZoneLayout {
    /// The per-CPU register value of CPU 0: the start of CPU 0's block.
    pub base: usize,
    /// Bytes from one CPU's block to the next.
    pub stride: usize,
    /// Offset of the counter area inside each block.
    pub offset: usize,
    /// Bytes of counter area in each block: 8 per counter.
    pub len: usize,
    /// Number of possible CPUs (blocks).
    pub ncpus: usize,
}

impl AreaShape {
    /// The register values a zone of `layout` needs.
    pub const fn of(layout: &ZoneLayout) -> Self {
        AreaShape {
            base: layout.base,
            stride: layout.stride,
            ncpus: layout.ncpus,
        }
    }
}

impl ZoneLayout {
    /// A layout whose blocks are nothing but counter area: `ncpus` blocks of `stride` bytes.
    pub const fn dense(base: usize, stride: usize, ncpus: usize) -> Self {
        ZoneLayout {
            base,
            stride,
            offset: 0,
            len: stride,
            ncpus,
        }
    }

    /// Checks every rule a zone relies on; the error names the first one broken. The last
    /// rule is that the CPU can write every CPU's counter area: none wraps around the end of
    /// the address space ([`Error::WrapsAround`]) or has a byte the target cannot address
    /// ([`Error::Unaddressable`], [`AddressSpace::TARGET`]); both name the first such CPU and
    /// its address.
    pub fn validate(&self) -> Result<(), Error> {
        if self.ncpus == 0 {
            return Err(Error::NoCpus);
        }
        if !self.stride.is_multiple_of(8) {
            return Err(Error::StrideNotMultipleOf8 {
                stride: self.stride,
            });
        }
        if self.len == 0 || !self.len.is_multiple_of(8) {
            return Err(Error::BadAreaLength { len: self.len });
        }
        for addr in [self.base, self.offset] {
            if addr % 8 != 0 {
                return Err(Error::Misaligned { addr });
            }
        }
        let needed = self
            .offset
            .checked_add(self.len)
            .ok_or(Error::AddressOverflow)?;
        if needed > self.stride {
            return Err(Error::StrideTooSmall {
                stride: self.stride,
                needed,
            });
        }
        AddressSpace::TARGET.check_copies(
            "zone",
            self.base,
            self.offset,
            self.stride,
            self.len,
            self.ncpus,
        )
    }

    /// How many counters the zone holds: one 8-byte slot each.
    pub const fn capacity(&self) -> usize {
        self.len / 8
    }

    /// Words of zone metadata the zone needs: one zero baseline per slot, then the slot
    /// bitmap and its summary levels (see [`meta_words_for`](ZoneLayout::meta_words_for)).
    pub const fn meta_words(&self) -> usize {
        Self::meta_words_for(self.capacity())
    }

    /// Words of zone metadata for a zone of `capacity` slots: a baseline word per slot (for
    /// the lossless zero), a bitmap bit per slot and the bitmap's summary levels (a bit per
    /// word of the level below, up to one word), for alloc and free in a few word steps
    /// whatever the number of live counters: `capacity + ceil(capacity / 64) +
    /// ceil(capacity / 4096) + ...`, about 1.016 words per slot. A `const fn`, so a kernel can
    /// size a static: `[u64; ZoneLayout::meta_words_for(SLOTS)]`.
    ///
    /// ```
    /// use pcpu_counter::ZoneLayout;
    /// assert_eq!(ZoneLayout::meta_words_for(64), 64 + 1);
    /// assert_eq!(ZoneLayout::meta_words_for(4096), 4096 + 64 + 1);
    /// assert_eq!(ZoneLayout::meta_words_for(1_000_000), 1_000_000 + 15_625 + 245 + 4 + 1);
    /// ```
    pub const fn meta_words_for(capacity: usize) -> usize {
        capacity + bitmap_words(capacity)
    }

    /// The per-CPU register value for `cpu`.
    pub fn cpu_base(&self, cpu: usize) -> Result<usize, Error> {
        if cpu >= self.ncpus {
            return Err(Error::CpuOutOfRange {
                cpu,
                ncpus: self.ncpus,
            });
        }
        Ok(self.base + cpu * self.stride)
    }
}

impl AddressSpace {
    /// Checks that the CPU can write every CPU's range: CPU `i`'s `len` bytes start at
    /// `origin + offset + i * stride`, for `i` below `ncpus` (a zone's counter areas: `origin`
    /// its `base`; the per-CPU statics' copies: `origin` CPU 0's copy, `offset` 0). The error
    /// names the first CPU whose range is not writable, and where, for `what` is set up
    /// (`"zone"`, `"statics"`): [`Error::Unaddressable`] (the range's first byte this space
    /// cannot address) or [`Error::WrapsAround`] (the range, or its end, runs past the end of
    /// the address space: one past its last byte must be below 2^64). Setup only: two
    /// divisions, no loop over the CPUs.
    ///
    /// ```
    /// use pcpu_counter::{AddressSpace, Error};
    /// // The percpu-crate kernel's mistake: CPU 0's copy at two kernel addresses added.
    /// let copy0 = 0xffff_0000_0045_9c68;
    /// assert_eq!(
    ///     AddressSpace::X86_64.check_copies("statics", copy0, 0, 0x1000, 16, 4),
    ///     Err(Error::Unaddressable { what: "statics", cpu: 0, addr: copy0, space: AddressSpace::X86_64 }),
    /// );
    /// assert_eq!(AddressSpace::Riscv64.check_copies("statics", copy0, 0, 0x1000, 16, 4), Ok(()));
    /// ```
    // Inlined, so that with the target's rule (a constant) a build whose arch has no hole
    // keeps only the wrap check (the C library's size).
    #[inline(always)]
    pub fn check_copies(
        self,
        what: &'static str,
        origin: usize,
        offset: usize,
        stride: usize,
        len: usize,
        ncpus: usize,
    ) -> Result<(), Error> {
        if ncpus == 0 || len == 0 {
            return Ok(());
        }
        let first = origin.checked_add(offset);
        // CPU 0's last byte; the ranges rise by `stride` from it.
        let last = match first {
            Some(a) => a.checked_add(len - 1),
            None => None,
        };
        let wraps = |cpu: usize| Error::WrapsAround {
            what,
            cpu,
            addr: origin
                .wrapping_add(offset)
                .wrapping_add(cpu.wrapping_mul(stride)),
            len,
        };
        let (low, high) = self.hole();
        if low != 0 {
            // The first CPU whose range is not wholly below the hole is wholly above it, or
            // has an address in it.
            let cpu = ranges_up_to(last, low - 1, stride, ncpus);
            if cpu < ncpus {
                let start = match (first, cpu.checked_mul(stride)) {
                    (Some(a), Some(k)) => a.checked_add(k),
                    _ => None,
                };
                match start {
                    None => return Err(wraps(cpu)),
                    Some(s) if s < high => {
                        return Err(Error::Unaddressable {
                            what,
                            cpu,
                            addr: if s > low { s } else { low },
                            space: self,
                        })
                    }
                    Some(_) => {}
                }
            }
        }
        // One past each range's last byte must be an address too (the end a walk stops at).
        let cpu = ranges_up_to(last, usize::MAX - 1, stride, ncpus);
        if cpu < ncpus {
            return Err(wraps(cpu));
        }
        Ok(())
    }
}

/// How many of `ncpus` ranges, the first ending at byte `last` (`None`: past the address
/// space) and each `stride` bytes after the one before, end at or below byte `top`.
#[inline(always)]
const fn ranges_up_to(last: Option<usize>, top: usize, stride: usize, ncpus: usize) -> usize {
    match last {
        Some(last) if last <= top => match (top - last).checked_div(stride) {
            Some(k) if k < ncpus => k + 1,
            _ => ncpus,
        },
        _ => 0,
    }
}

/// Words of the slot bitmap and its summary levels over `nbits` slots (`src/bitmap.rs`):
/// `ceil(nbits / 64)` leaf words, then `ceil(words / 64)` for each level above until a level
/// of one word.
pub(crate) const fn bitmap_words(nbits: usize) -> usize {
    let mut total = 0;
    let mut n = nbits;
    while n > 0 {
        let words = n.div_ceil(64);
        total += words;
        if words == 1 {
            break;
        }
        n = words;
    }
    total
}

/// Slot arithmetic, for the zone.
impl ZoneLayout {
    /// The register-relative offset of slot `index` (what the add instruction uses).
    pub(crate) const fn slot_offset(&self, index: usize) -> usize {
        self.offset + index * 8
    }

    /// The slot index of a register-relative offset.
    pub(crate) const fn slot_index(&self, off: usize) -> usize {
        (off - self.offset) / 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same table as `PCPU_META_WORDS`'s `_Static_assert`s in `tests/c/capi_test.c`.
    #[test]
    fn meta_words_count_baselines_bitmap_and_summary_levels() {
        let table = [
            (0, 0),
            (1, 1 + 1),
            (64, 64 + 1),
            (65, 65 + 2 + 1),
            (4096, 4096 + 64 + 1),
            (4097, 4097 + 65 + 2 + 1),
            (1_000_001, 1_000_001 + 15_626 + 245 + 4 + 1),
        ];
        for (capacity, words) in table {
            assert_eq!(ZoneLayout::meta_words_for(capacity), words, "{capacity}");
        }
    }

    /// The span check counts `ncpus - 1` whole strides before the last block: a zone whose
    /// last block ends 8 bytes below the top of the address space is valid, and one 8 bytes
    /// higher (ending at 2^64, an end that is no address) wraps, naming that block.
    #[test]
    fn the_last_block_may_end_at_the_top_of_the_address_space() {
        let top = ZoneLayout::dense(usize::MAX - 7 - 4 * 256, 256, 4);
        assert_eq!(top.validate(), Ok(()));
        assert_eq!(top.cpu_base(3), Ok(usize::MAX - 7 - 256));
        let past = ZoneLayout {
            base: top.base + 8,
            ..top
        };
        assert_eq!(
            past.validate(),
            Err(Error::WrapsAround {
                what: "zone",
                cpu: 3,
                addr: usize::MAX - 255,
                len: 256
            })
        );
    }
}
