// SPDX-License-Identifier: BSD-2-Clause
//! The per-CPU area: the blocks the CPUs' per-CPU registers point at, and the zones carved
//! from them.
//!
//! A CPU has one per-CPU register (GS base, `TPIDR_EL1`, the FS segment), so it can point at
//! one block only, and every counter's offset is taken from it. If two zones needed different
//! register values, an add to a counter of one would land in the other's slot at that offset.
//! So a kernel has one [`Area`] (`Area::global()`): every zone is carved out of it, with the
//! same register values (`base + cpu * stride`, for the same CPU count) and a byte range of
//! every block that no other live zone uses. A zone that would need other register values, or
//! that overlaps a live zone, is refused when it is set up, with [`Error::AreaMismatch`] or
//! [`Error::ZoneOverlap`]: in release builds too, never a silent wrong add.
//!
//! The shape of the area is fixed by its first live zone and forgotten when the last one is
//! dropped. The host simulation has one area per simulated machine (`sim::Machine`).

use core::sync::atomic::{AtomicUsize, Ordering};

use crate::{AreaShape, Error, ZoneLayout};

/// What an area knows: its shape while any zone lives, and the byte ranges the zones use.
struct Carved {
    shape: Option<AreaShape>,
    ranges: [Option<(usize, usize)>; Area::MAX_ZONES],
}

/// A per-CPU area: one per kernel ([`Area::global`]), one per simulated machine.
///
/// ```
/// use pcpu_counter::{Area, AreaShape, Error, Zone, ZoneLayout};
/// static AREA: Area = Area::new();
/// static mut BLOCKS: [[u64; 32]; 2] = [[0; 32]; 2]; // 2 CPUs, 256 bytes each
/// let base = &raw mut BLOCKS as usize;
/// let (mut meta_a, mut meta_b) = ([0u64; 17], [0u64; 17]);
/// let a = ZoneLayout { base, stride: 256, offset: 0, len: 128, ncpus: 2 };
/// let b = ZoneLayout { offset: 128, ..a };
/// // SAFETY: the two halves of every block belong to the two zones.
/// let (za, zb) = unsafe {
///     (Zone::from_raw_parts_in(&AREA, a, &mut meta_a).unwrap(),
///      Zone::from_raw_parts_in(&AREA, b, &mut meta_b).unwrap())
/// };
/// let mut meta_c = [0u64; 17];
/// let c = ZoneLayout { base: base + 8, ..b }; // would need other register values
/// assert_eq!(
///     unsafe { Zone::from_raw_parts_in(&AREA, c, &mut meta_c) }.unwrap_err(),
///     Error::AreaMismatch { in_force: AreaShape::of(&a), needed: AreaShape::of(&c) },
/// );
/// # drop((za, zb));
/// ```
pub struct Area {
    carved: spin::Mutex<Carved>,
    /// The shape's `base`, `stride` and `ncpus` (0 while no zone lives), for lock-free
    /// readers ([`Area::register`]): written under the lock, `ncpus` last (release).
    registers: [AtomicUsize; 3],
}

impl Area {
    /// How many zones can live in one area at once.
    ///
    /// cbindgen:ignore
    pub const MAX_ZONES: usize = 16;

    /// An area with no zone yet; its shape is set by the first zone carved from it.
    pub const fn new() -> Self {
        Area {
            carved: spin::Mutex::new(Carved {
                shape: None,
                ranges: [None; Area::MAX_ZONES],
            }),
            registers: [const { AtomicUsize::new(0) }; 3],
        }
    }

    /// The kernel's one area: where [`Zone::new`](crate::Zone::new),
    /// [`Zone::from_raw_parts`](crate::Zone::from_raw_parts) and `Zone::with_capacity` carve
    /// their zones in a `no_std` build.
    pub fn global() -> &'static Area {
        static GLOBAL: Area = Area::new();
        &GLOBAL
    }

    /// The register values in force, while a zone lives.
    pub fn shape(&self) -> Option<AreaShape> {
        self.lock().shape
    }

    /// The value CPU `cpu`'s per-CPU register holds in this area (`base + cpu * stride`),
    /// while a zone lives. Lock-free: the portable arch, which has no register, asks it on
    /// every add.
    pub fn register(&self, cpu: usize) -> Result<usize, Error> {
        let ncpus = self.registers[2].load(Ordering::Acquire);
        if ncpus == 0 {
            return Err(Error::NotInstalled);
        }
        if cpu >= ncpus {
            return Err(Error::CpuOutOfRange { cpu, ncpus });
        }
        let base = self.registers[0].load(Ordering::Relaxed);
        // Wrapping: the per-CPU statics' registers are their blocks less the template's start.
        Ok(base.wrapping_add(cpu.wrapping_mul(self.registers[1].load(Ordering::Relaxed))))
    }

    /// Publishes the shape to [`register`](Area::register)'s readers (`None`: no zone lives).
    fn publish(&self, shape: Option<AreaShape>) {
        let AreaShape {
            base,
            stride,
            ncpus,
        } = shape.unwrap_or(AreaShape {
            base: 0,
            stride: 0,
            ncpus: 0,
        });
        self.registers[2].store(0, Ordering::Release);
        self.registers[0].store(base, Ordering::Relaxed);
        self.registers[1].store(stride, Ordering::Relaxed);
        self.registers[2].store(ncpus, Ordering::Release);
    }

    /// Number of zones carved now.
    pub fn zones(&self) -> usize {
        self.lock().ranges.iter().flatten().count()
    }

    fn lock(&self) -> spin::MutexGuard<'_, Carved> {
        self.carved.lock()
    }

    /// Records a zone of `layout` (already validated), or says why it cannot live here.
    pub(crate) fn carve(&self, layout: &ZoneLayout) -> Result<(), Error> {
        let range = (layout.offset, layout.offset + layout.len);
        self.carve_range(AreaShape::of(layout), range)
    }

    /// Records a byte range `start..end` of register-relative offsets (a zone's counter area,
    /// or the per-CPU statics' template, see `statics`) that every CPU `i` owns at
    /// `register(i) + start`, for an area of `needed`'s register values; or says why it
    /// cannot live here: other register values in force ([`Error::AreaMismatch`]), bytes
    /// that some live range of some CPU already uses ([`Error::ZoneOverlap`]), or no room.
    // Inlined into each caller, so that a C kernel without statics links no second copy.
    #[inline(always)]
    pub(crate) fn carve_range(
        &self,
        needed: AreaShape,
        range: (usize, usize),
    ) -> Result<(), Error> {
        let mut carved = self.lock();
        if let Some(in_force) = carved.shape {
            if in_force != needed {
                return Err(Error::AreaMismatch { in_force, needed });
            }
        }
        if carved
            .ranges
            .iter()
            .flatten()
            .any(|&other| collide(range, other, needed))
        {
            return Err(Error::ZoneOverlap {
                offset: range.0,
                len: range.1 - range.0,
            });
        }
        let free = carved
            .ranges
            .iter_mut()
            .find(|r| r.is_none())
            .ok_or(Error::TooManyZones {
                max: Area::MAX_ZONES,
            })?;
        *free = Some(range);
        if carved.shape.is_none() {
            carved.shape = Some(needed);
            self.publish(carved.shape);
        }
        Ok(())
    }

    /// Forgets the zone of `layout`; the shape goes with the last zone.
    pub(crate) fn release(&self, layout: &ZoneLayout) {
        self.release_range((layout.offset, layout.offset + layout.len));
    }

    /// Forgets the range `start..end` (see [`carve_range`](Area::carve_range)); the shape goes
    /// with the last range.
    #[inline(always)]
    pub(crate) fn release_range(&self, range: (usize, usize)) {
        let mut carved = self.lock();
        if let Some(r) = carved.ranges.iter_mut().find(|r| **r == Some(range)) {
            *r = None;
        }
        if carved.ranges.iter().all(Option::is_none) {
            carved.shape = None;
            self.publish(None);
        }
    }
}

/// Whether range `a` of some CPU and range `b` of some CPU (the same or another) share a byte
/// in an area of `shape`: CPU `i`'s copy of a range starts at `register(i) + start`, so the
/// two meet when, for some `k` with `|k| < ncpus`, `a` moved by `k` strides overlaps `b`:
/// `a.start + k * stride - b.start` in `(-len(a), len(b))`, that is
/// `a.end - 1 + k * stride - b.start` in `0..len(a) + len(b) - 1`, one unsigned compare per
/// `k` (modulo the address space, as the registers wrap). Ranges inside `0..stride` (every
/// zone's) only meet for `k = 0`, the plain interval overlap; a range far off (the statics'
/// template, at its link address) meets another where some CPU's copy lands on another
/// CPU's block. Setup only: one pass over the CPUs, no division (small in the C library).
fn collide(a: (usize, usize), b: (usize, usize), shape: AreaShape) -> bool {
    let width = (a.1 - a.0) + (b.1 - b.0) - 1;
    let last = shape.ncpus.saturating_sub(1);
    let mut at = (a.1 - 1)
        .wrapping_sub(b.0)
        .wrapping_sub(last.wrapping_mul(shape.stride));
    (0..=2 * last).any(|_| {
        let meet = at < width;
        at = at.wrapping_add(shape.stride);
        meet
    })
}

impl Default for Area {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for Area {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let carved = self.lock();
        f.debug_struct("Area")
            .field("shape", &carved.shape)
            .field("zones", &carved.ranges.iter().flatten().count())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;

    /// Zones may touch on either side: a zone that ends where a live one starts is carved
    /// too, and one that starts inside it is not.
    #[test]
    fn a_zone_may_end_where_another_starts() {
        let area = Area::new();
        let high = ZoneLayout {
            offset: 128,
            len: 128,
            ..ZoneLayout::dense(0x1000, 256, 2)
        };
        area.carve(&high).unwrap();
        let low = ZoneLayout { offset: 0, ..high };
        assert_eq!(area.carve(&low), Ok(()));
        assert_eq!(area.zones(), 2);
        let across = ZoneLayout {
            offset: 120,
            len: 16,
            ..high
        };
        assert_eq!(
            area.carve(&across),
            Err(Error::ZoneOverlap {
                offset: 120,
                len: 16
            })
        );
        area.release(&low);
        area.release(&high);
        assert_eq!((area.zones(), area.shape()), (0, None));
    }

    /// The lock-free register values follow the shape: none before the first zone and after
    /// the last, `base + cpu * stride` for a CPU in range, the CPU count otherwise.
    #[test]
    fn register_values_follow_the_shape() {
        let area = Area::new();
        assert_eq!(area.register(0), Err(Error::NotInstalled));
        let layout = ZoneLayout::dense(0x1000, 64, 3);
        area.carve(&layout).unwrap();
        assert_eq!(area.register(0), Ok(0x1000));
        assert_eq!(area.register(2), Ok(0x1000 + 2 * 64));
        assert_eq!(
            area.register(3),
            Err(Error::CpuOutOfRange { cpu: 3, ncpus: 3 })
        );
        area.release(&layout);
        assert_eq!(area.register(0), Err(Error::NotInstalled));
    }

    /// A range far from the blocks (the statics' template at its link address) collides
    /// with a zone exactly when some CPU's copy of it lands on some CPU's counter area: here
    /// CPU 0's copy of `far` is CPU 2's bytes 8..16, and one stride further it misses.
    #[test]
    fn a_far_range_collides_where_a_copy_lands_on_a_block() {
        let shape = AreaShape {
            base: 0x1000,
            stride: 256,
            ncpus: 3,
        };
        let zone = (8, 16);
        assert!(collide((2 * 256 + 8, 2 * 256 + 16), zone, shape));
        assert!(collide(zone, (2 * 256 + 8, 2 * 256 + 16), shape));
        assert!(collide((2 * 256 + 15, 2 * 256 + 40), zone, shape));
        assert!(!collide((2 * 256 + 16, 2 * 256 + 40), zone, shape));
        assert!(!collide((3 * 256 + 8, 3 * 256 + 16), zone, shape));
        assert!(collide(
            (3 * 256, 3 * 256 + 9),
            zone,
            AreaShape { ncpus: 4, ..shape }
        ));
        assert!(!collide((2 * 256, 2 * 256 + 8), zone, shape));
        let area = Area::new();
        area.carve_range(shape, zone).unwrap();
        assert_eq!(
            area.carve_range(shape, (2 * 256, 2 * 256 + 9)),
            Err(Error::ZoneOverlap {
                offset: 512,
                len: 9
            })
        );
        assert_eq!(area.carve_range(shape, (1 << 28, (1 << 28) + 64)), Ok(()));
        area.release_range((1 << 28, (1 << 28) + 64));
        area.release_range(zone);
        assert_eq!(area.shape(), None);
    }

    #[test]
    fn debug_shows_the_shape_and_the_zone_count() {
        let area = Area::new();
        assert_eq!(format!("{area:?}"), "Area { shape: None, zones: 0 }");
        let layout = ZoneLayout::dense(0x1000, 64, 2);
        area.carve(&layout).unwrap();
        assert_eq!(
            format!("{area:?}"),
            "Area { shape: Some(AreaShape { base: 4096, stride: 64, ncpus: 2 }), zones: 1 }"
        );
        area.release(&layout);
        assert_eq!(format!("{area:?}"), "Area { shape: None, zones: 0 }");
    }
}
