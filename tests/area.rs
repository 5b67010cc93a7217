//! One per-CPU area, many zones: zones carved from one area share its per-CPU register values
//! and never overlap; a zone that would need other register values is refused at setup; and
//! under the simulation a counter added on another machine's CPU is refused instead of
//! changing that machine's counter at the same offset. These run in debug and release builds
//! (`.ci/run` runs this file with `--release` too).

use pcpu_counter::sim::Machine;
use pcpu_counter::{Area, AreaShape, Error, Zone, ZoneLayout};

/// `ncpus` blocks of `stride` bytes on the heap.
fn blocks(ncpus: usize, stride: usize) -> Vec<u64> {
    vec![0u64; ncpus * stride / 8]
}

#[test]
fn zones_carved_from_one_area_share_its_registers_and_never_overlap() {
    let area = Area::new();
    let mut mem = blocks(4, 512);
    let base = mem.as_mut_ptr() as usize;
    let first = ZoneLayout {
        base,
        stride: 512,
        offset: 0,
        len: 256,
        ncpus: 4,
    };
    let second = ZoneLayout {
        offset: 256,
        ..first
    };
    let (mut m1, mut m2, mut m3) = ([0u64; 33], [0u64; 33], [0u64; 33]);
    // SAFETY: the two halves of every block belong to the two zones; the rest are refused
    // before any memory is touched.
    unsafe {
        let a = Zone::from_raw_parts_in(&area, first, &mut m1).unwrap();
        let b = Zone::from_raw_parts_in(&area, second, &mut m2).unwrap();
        assert_eq!(area.zones(), 2);
        assert_eq!(
            area.shape(),
            Some(AreaShape {
                base,
                stride: 512,
                ncpus: 4
            })
        );
        for cpu in 0..4 {
            assert_eq!(
                a.cpu_base(cpu),
                b.cpu_base(cpu),
                "one register value per CPU"
            );
        }
        let (ca, cb) = (a.alloc().unwrap(), b.alloc().unwrap());
        assert_ne!(ca.offset(), cb.offset(), "offsets are unique in the area");
        let cases = [
            (
                ZoneLayout {
                    base: base + 8,
                    ..second
                },
                "another base",
            ),
            (
                ZoneLayout {
                    stride: 1024,
                    ..second
                },
                "another stride",
            ),
            (ZoneLayout { ncpus: 2, ..second }, "another CPU count"),
        ];
        for (layout, why) in cases {
            assert_eq!(
                Zone::from_raw_parts_in(&area, layout, &mut m3).unwrap_err(),
                Error::AreaMismatch {
                    in_force: AreaShape::of(&first),
                    needed: AreaShape::of(&layout)
                },
                "{why}"
            );
        }
        let overlapping = ZoneLayout {
            offset: 248,
            len: 16,
            ..first
        };
        assert_eq!(
            Zone::from_raw_parts_in(&area, overlapping, &mut m3).unwrap_err(),
            Error::ZoneOverlap {
                offset: 248,
                len: 16
            }
        );
        drop((ca, cb));
        drop((a, b));
        assert_eq!(
            (area.zones(), area.shape()),
            (0, None),
            "the last zone takes the shape"
        );
        let other = ZoneLayout {
            base: base + 8,
            stride: 256,
            offset: 0,
            len: 8,
            ncpus: 4,
        };
        let c = Zone::from_raw_parts_in(&area, other, &mut m3).unwrap();
        assert_eq!(area.shape(), Some(AreaShape::of(&other)));
        drop(c);
    }
}

#[test]
fn an_area_holds_at_most_max_zones() {
    let area = Area::new();
    let mut mem = blocks(1, 8 * (Area::MAX_ZONES + 1));
    let base = mem.as_mut_ptr() as usize;
    let mut metas = vec![[0u64; 2]; Area::MAX_ZONES + 1];
    let mut zones = Vec::new();
    for (i, meta) in metas.iter_mut().enumerate() {
        let layout = ZoneLayout {
            base,
            stride: 8 * (Area::MAX_ZONES + 1),
            offset: 8 * i,
            len: 8,
            ncpus: 1,
        };
        // SAFETY: slot `i` of the block belongs to zone `i`.
        let made = unsafe { Zone::from_raw_parts_in(&area, layout, meta) };
        if i < Area::MAX_ZONES {
            zones.push(made.unwrap());
        } else {
            assert_eq!(
                made.unwrap_err(),
                Error::TooManyZones {
                    max: Area::MAX_ZONES
                }
            );
        }
    }
    assert_eq!(area.zones(), Area::MAX_ZONES);
}

/// Each simulated machine is an area of its own. A counter of machine A added on a thread that
/// holds a CPU of machine B would, unchecked, add into B's counter at the same offset (the
/// thread's register points at B's blocks): the add path's check refuses it, in release builds
/// too, and neither machine's counter changes.
#[test]
fn a_counter_added_on_another_machines_cpu_is_refused() {
    let (a, b) = (Machine::new(2), Machine::new(2));
    let (ca, cb) = (a.alloc().unwrap(), b.alloc().unwrap());
    assert_eq!(ca.offset(), cb.offset(), "the same offset in two areas");
    b.run_on(1, || cb.add(7));
    let refused = std::thread::scope(|s| {
        s.spawn(|| {
            b.run_on(1, || {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ca.add(1)))
            })
        })
        .join()
        .unwrap()
    });
    let message = refused.expect_err("the add must be refused");
    let text = message
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| message.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(text.contains("of this counter's machine"), "{text}");
    assert_eq!(
        (ca.fetch(), cb.fetch()),
        (0, 7),
        "neither machine's counter changed"
    );
    assert_eq!(cb.cpu_slot(1), Ok(7));
    // A zone made outside any machine is an area of its own too.
    let loose = Zone::with_capacity(2, 8).unwrap();
    let cl = loose.alloc().unwrap();
    let refused = a.run_on(0, || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cl.add(1)))
    });
    assert!(refused.is_err());
    assert_eq!(cl.fetch(), 0);
}
