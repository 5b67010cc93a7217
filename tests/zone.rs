//! The zone: allocation, reuse, a full zone, and every bad configuration.

use pcpu_counter::sim::Machine;
use pcpu_counter::{AddressSpace, Error, Zone, ZoneLayout, ZoneMemory};
use std::sync::Mutex;

#[test]
fn full_zone_is_an_error_and_loses_nothing() {
    let zone = Zone::with_capacity(2, 16).unwrap();
    let capacity = zone.capacity();
    assert_eq!(capacity, 16);
    let counters: Vec<_> = (0..capacity).map(|_| zone.alloc().unwrap()).collect();
    assert_eq!(zone.alloc().unwrap_err(), Error::ZoneFull { capacity });
    assert_eq!(zone.in_use(), capacity);
    drop(counters);
    assert_eq!(zone.in_use(), 0);
    assert!(zone.alloc().is_ok());
}

#[test]
fn capacity_is_rounded_to_whole_cache_lines() {
    let zone = Zone::with_capacity(3, 17).unwrap();
    assert_eq!(zone.capacity(), 32);
    assert_eq!(zone.layout().stride, 256);
    assert_eq!(zone.layout().base % 128, 0);
}

#[test]
fn a_reused_slot_starts_at_zero() {
    let machine = Machine::with_capacity(4, 1).unwrap();
    assert_eq!(machine.zone().capacity(), 16);
    let all: Vec<_> = (0..16).map(|_| machine.alloc().unwrap()).collect();
    for cpu in 0..4 {
        machine.run_on(cpu, || all.iter().for_each(|c| c.add(1000 + cpu as i64)));
    }
    let offsets: Vec<usize> = all.iter().map(|c| c.offset()).collect();
    drop(all);
    let again: Vec<_> = (0..16).map(|_| machine.alloc().unwrap()).collect();
    let mut reused: Vec<usize> = again.iter().map(|c| c.offset()).collect();
    reused.sort();
    assert_eq!(reused, offsets, "the same slots come back");
    for c in &again {
        assert_eq!(c.fetch(), 0);
        for cpu in 0..4 {
            assert_eq!(
                c.cpu_slot(cpu).unwrap(),
                0,
                "slot reused dirty on CPU {cpu}"
            );
        }
    }
}

#[test]
fn alloc_free_reuse_under_concurrency() {
    let machine = Machine::with_capacity(4, 64).unwrap();
    let owners = Mutex::new(vec![None::<usize>; machine.zone().capacity()]);
    std::thread::scope(|s| {
        for t in 0..6usize {
            let (machine, owners) = (&machine, &owners);
            s.spawn(move || {
                for round in 0..if cfg!(miri) { 4 } else { 300usize } {
                    let _cpu = machine.bind((t + round) % 4).unwrap();
                    let mine: Vec<_> = (0..5).map(|_| machine.alloc().unwrap()).collect();
                    for c in &mine {
                        let slot = c.offset() / 8;
                        let mut o = owners.lock().unwrap();
                        assert_eq!(o[slot], None, "slot {slot} handed out twice");
                        o[slot] = Some(t);
                        drop(o);
                        assert_eq!(c.fetch(), 0, "a new counter must read 0");
                        c.add(t as i64 + 1);
                    }
                    for c in &mine {
                        assert_eq!(c.fetch(), t as u64 + 1);
                        owners.lock().unwrap()[c.offset() / 8] = None;
                    }
                }
            });
        }
    });
    assert_eq!(machine.zone().in_use(), 0);
}

#[test]
fn bad_configurations_are_rejected() {
    let mut meta = [0u64; 17];
    let good = ZoneLayout {
        base: 0x10_0000,
        stride: 256,
        offset: 64,
        len: 128,
        ncpus: 4,
    };
    assert_eq!(good.validate(), Ok(()));
    let cases = [
        (ZoneLayout { ncpus: 0, ..good }, Error::NoCpus),
        (
            ZoneLayout {
                stride: 252,
                ..good
            },
            Error::StrideNotMultipleOf8 { stride: 252 },
        ),
        (
            ZoneLayout {
                stride: 128,
                ..good
            },
            Error::StrideTooSmall {
                stride: 128,
                needed: 192,
            },
        ),
        (
            ZoneLayout {
                base: 0x10_0004,
                ..good
            },
            Error::Misaligned { addr: 0x10_0004 },
        ),
        (
            ZoneLayout { offset: 60, ..good },
            Error::Misaligned { addr: 60 },
        ),
        (
            ZoneLayout { len: 0, ..good },
            Error::BadAreaLength { len: 0 },
        ),
        (
            ZoneLayout { len: 100, ..good },
            Error::BadAreaLength { len: 100 },
        ),
        // CPU 2's counter area would start 65 bytes past the end of the address space.
        (
            ZoneLayout {
                base: usize::MAX - 511,
                ..good
            },
            Error::WrapsAround {
                what: "zone",
                cpu: 2,
                addr: 64,
                len: 128,
            },
        ),
        (
            ZoneLayout {
                base: usize::MAX - 0xfff,
                ncpus: usize::MAX,
                ..good
            },
            Error::WrapsAround {
                what: "zone",
                cpu: 16,
                addr: 64,
                len: 128,
            },
        ),
    ];
    for (layout, error) in cases {
        assert_eq!(layout.validate(), Err(error), "{layout:?}");
        // SAFETY: every layout here is rejected before any memory is touched.
        assert_eq!(
            unsafe { Zone::from_raw_parts(layout, &mut meta) }.unwrap_err(),
            error
        );
    }
    assert_eq!(
        good.cpu_base(4),
        Err(Error::CpuOutOfRange { cpu: 4, ncpus: 4 })
    );
    let mut tiny = [0u64; 0];
    // SAFETY: rejected for its metadata before any memory is touched.
    let err = unsafe { Zone::from_raw_parts(good, &mut tiny) }.unwrap_err();
    assert_eq!(err, Error::MetaTooSmall { needed: 17, has: 0 });
    assert_eq!(Zone::with_capacity(0, 8).unwrap_err(), Error::NoCpus);
    assert_eq!(
        Zone::with_capacity(2, 0).unwrap_err(),
        Error::BadAreaLength { len: 0 }
    );
    assert!(Zone::with_capacity(2, usize::MAX).is_err());
    assert_eq!(Machine::with_capacity(0, 8).unwrap_err(), Error::NoCpus);
    let machine = Machine::new(2);
    assert_eq!(
        machine.bind(2).unwrap_err(),
        Error::CpuOutOfRange { cpu: 2, ncpus: 2 }
    );
    let held = machine.bind(0).unwrap();
    assert_eq!(machine.bind(1).unwrap_err(), Error::AlreadyBound);
    drop(held);
    for e in cases.map(|(_, e)| e) {
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn static_memory_backs_one_zone_at_a_time() {
    static MEMORY: ZoneMemory<3, 1> = ZoneMemory::new();
    let zone = Zone::new(&MEMORY).unwrap();
    assert_eq!(
        (zone.ncpus(), zone.capacity(), zone.layout().stride),
        (3, 64, 512)
    );
    assert_eq!(Zone::new(&MEMORY).unwrap_err(), Error::MemoryInUse);
    let c = zone.alloc().unwrap();
    assert_eq!(c.fetch(), 0);
    drop(c);
    drop(zone);
    assert!(
        Zone::new(&MEMORY).is_ok(),
        "dropping the zone gives the memory back"
    );
}

/// A kernel whose per-CPU register already points at its own per-CPU blocks hosts the zone
/// inside them: the zone's CPU bases are the kernel's blocks, the slots sit at the offset the
/// kernel reserved, and the kernel's own fields around them are never touched.
#[test]
fn zone_inside_a_kernels_own_per_cpu_blocks() {
    #[repr(C, align(64))]
    struct PerCpu {
        cpu_id: u64,
        scratch: [u64; 7],
        counters: [u64; 16],
        guard: u64,
        _pad: [u64; 7],
    }
    let mut blocks: Vec<PerCpu> = (0..4)
        .map(|i| PerCpu {
            cpu_id: i,
            scratch: [0xAA; 7],
            counters: [0xDEAD; 16],
            guard: 0x5AFE,
            _pad: [0; 7],
        })
        .collect();
    let base = blocks.as_mut_ptr() as usize;
    let layout = ZoneLayout {
        base,
        stride: core::mem::size_of::<PerCpu>(),
        offset: core::mem::offset_of!(PerCpu, counters),
        len: 16 * 8,
        ncpus: 4,
    };
    let mut meta = [0u64; 17];
    // SAFETY: the counter areas are inside `blocks`, which outlives the zone, and only the
    // zone touches them while it lives.
    let zone = unsafe { Zone::from_raw_parts(layout, &mut meta) }.unwrap();
    for cpu in 0..4 {
        assert_eq!(
            zone.cpu_base(cpu).unwrap(),
            base + cpu * core::mem::size_of::<PerCpu>()
        );
    }
    let all: Vec<_> = (0..16).map(|_| zone.alloc().unwrap()).collect();
    assert!(matches!(
        zone.alloc(),
        Err(Error::ZoneFull { capacity: 16 })
    ));
    for c in &all {
        assert_eq!(c.fetch(), 0, "allocation clears the kernel's stale bytes");
    }
    drop(all);
    drop(zone);
    for (i, b) in blocks.iter().enumerate() {
        assert_eq!(
            (b.cpu_id, b.scratch, b.guard),
            (i as u64, [0xAA; 7], 0x5AFE)
        );
        assert_eq!(b.counters, [0; 16]);
    }
}

/// A heap zone larger than the address space is an error, not an abort: 2^16 CPUs of 2^32
/// bytes is 256 TiB, more than a 64-bit process can map (and more than `usize` on 32 bits).
#[test]
#[cfg_attr(
    miri,
    ignore = "Miri stops the program at an allocation beyond its memory instead of returning null"
)]
fn a_heap_zone_too_large_for_memory_is_an_error() {
    let (ncpus, counters) = (1usize << 16, 1usize << 29);
    let err = Zone::with_capacity(ncpus, counters).unwrap_err();
    if let Ok(bytes) = usize::try_from(1u64 << 48) {
        assert_eq!(err, Error::OutOfMemory { bytes });
        assert!(err.to_string().contains("out of memory"), "{err}");
    } else {
        assert_eq!(err, Error::AddressOverflow);
    }
    assert!(Machine::with_capacity(ncpus, counters).is_err());
    // Nothing was lost: the next zone works.
    let zone = Zone::with_capacity(2, 8).unwrap();
    assert_eq!(zone.alloc().unwrap().fetch(), 0);
}

/// `Counter` and `Zone` are the same types under the simulation as in a kernel's build: the
/// same sizes as the crate's own compile-time checks demand of every build (`src/counter.rs`,
/// `src/zone.rs`; a kernel's build without `alloc` has a zone of 22 words).
#[test]
fn counter_and_zone_are_the_size_of_a_kernels() {
    let word = std::mem::size_of::<usize>();
    assert_eq!(std::mem::size_of::<pcpu_counter::Counter<'_>>(), 2 * word);
    assert_eq!(std::mem::size_of::<pcpu_counter::Zone<'_>>(), 27 * word);
}

/// Zone construction refuses counter areas the CPU cannot write, before anything is written,
/// naming the first such CPU and the address: through `ZoneLayout::validate` and the
/// constructors (here the target's rule, `AddressSpace::TARGET`), and, for every arch's rule
/// on any host, through `AddressSpace::check_copies`.
mod unwritable {
    use super::*;

    /// A kernel's blocks, 4 CPUs 4 KiB apart, with counters from byte 64.
    fn blocks(base: usize) -> ZoneLayout {
        ZoneLayout {
            base,
            stride: 0x1000,
            offset: 64,
            len: 512,
            ncpus: 4,
        }
    }

    /// Checks `layout` with `space`'s rule as `validate` does with the target's.
    fn check(space: AddressSpace, l: ZoneLayout) -> Result<(), Error> {
        space.check_copies("zone", l.base, l.offset, l.stride, l.len, l.ncpus)
    }

    /// x86_64: CPU 0's counter area at a non-canonical address (two kernel addresses added,
    /// as in an outside kernel) is refused, naming CPU 0 and the address.
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn a_non_canonical_counter_area() {
        let l = blocks(0xffff_0000_0045_9000);
        let want = Error::Unaddressable {
            what: "zone",
            cpu: 0,
            addr: 0xffff_0000_0045_9040,
            space: AddressSpace::X86_64,
        };
        assert_eq!(check(AddressSpace::X86_64, l), Err(want));
        assert_eq!(
            want.to_string(),
            "zone: CPU 0's counter area at 0xffff000000459040 is not a canonical x86_64 \
             address (4-level paging: bits 63..47 all equal): no CPU can write there"
        );
        // Sv57 (and Sv48) reach it: riscv64 cannot refuse it.
        assert_eq!(check(AddressSpace::Riscv64, l), Ok(()));
        assert_eq!(check(AddressSpace::Flat, l), Ok(()));
        if AddressSpace::TARGET == AddressSpace::X86_64 {
            assert_eq!(l.validate(), Err(want));
            let mut meta = [0u64; 600];
            // SAFETY: refused before any memory is touched (a write there would fault).
            let err = unsafe { Zone::from_raw_parts(l, &mut meta) }.unwrap_err();
            assert_eq!(err, want);
        }
    }

    /// x86_64: the CPUs below the hole are fine; the first whose counter area runs into it
    /// is named, at the hole's first address (its area starts canonical).
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn a_counter_area_that_runs_into_the_hole() {
        // CPU 2's block starts 0x100 below 2^47: its counters (64..576) cross it.
        let l = blocks((1 << 47) - 0x2100);
        let want = Error::Unaddressable {
            what: "zone",
            cpu: 2,
            addr: 1 << 47,
            space: AddressSpace::X86_64,
        };
        assert_eq!(check(AddressSpace::X86_64, l), Err(want));
        assert_eq!(
            want.to_string(),
            "zone: CPU 2's counter area at 0x800000000000 is not a canonical x86_64 address \
             (4-level paging: bits 63..47 all equal): no CPU can write there"
        );
        // The higher half is canonical from 0xffff_8000_0000_0000: CPU 0 just below it is
        // refused, a zone wholly above it is not.
        let below_high = blocks(0xffff_7fff_ffff_f000);
        assert_eq!(
            check(AddressSpace::X86_64, below_high),
            Err(Error::Unaddressable {
                what: "zone",
                cpu: 0,
                addr: 0xffff_7fff_ffff_f040,
                space: AddressSpace::X86_64
            })
        );
        assert_eq!(
            check(AddressSpace::X86_64, blocks(0xffff_8000_0000_0000)),
            Ok(())
        );
        if AddressSpace::TARGET == AddressSpace::X86_64 {
            assert_eq!(l.validate(), Err(want));
        }
    }

    /// riscv64: only what no mode can address (Sv57: bits 63..56 all equal) is refused; an
    /// Sv39 kernel's mistake that Sv48 can address passes.
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn riscv64_refuses_what_no_mode_addresses() {
        let sv48_only = blocks(0xffff_ff81_0044_1000);
        assert_eq!(check(AddressSpace::Riscv64, sv48_only), Ok(()));
        let l = blocks(0xfe00_0000_0000_0000);
        let want = Error::Unaddressable {
            what: "zone",
            cpu: 0,
            addr: 0xfe00_0000_0000_0040,
            space: AddressSpace::Riscv64,
        };
        assert_eq!(check(AddressSpace::Riscv64, l), Err(want));
        assert_eq!(
            want.to_string(),
            "zone: CPU 0's counter area at 0xfe00000000000040 is not an address any riscv64 \
             mode can reach (Sv57: bits 63..56 all equal): no CPU can write there"
        );
        assert_eq!(
            check(AddressSpace::Riscv64, blocks(0xff00_0000_0000_0000)),
            Ok(())
        );
        assert_eq!(
            check(AddressSpace::Riscv64, blocks(0x00ff_ffff_ffff_0000)),
            Ok(())
        );
        if AddressSpace::TARGET == AddressSpace::Riscv64 {
            assert_eq!(l.validate(), Err(want));
        }
    }

    /// Every arch: a counter area past the end of the address space is refused, naming the
    /// first CPU whose area wraps and its start (modulo 2^64).
    #[test]
    fn a_counter_area_that_wraps() {
        // CPU 3's block starts 0x100 below the top: its counters (64..576) run past it.
        let l = blocks(usize::MAX - 0x30ff);
        let want = Error::WrapsAround {
            what: "zone",
            cpu: 3,
            addr: usize::MAX - 0xff + 64,
            len: 512,
        };
        for space in [
            AddressSpace::Flat,
            AddressSpace::X86_64,
            AddressSpace::Riscv64,
        ] {
            assert_eq!(check(space, l), Err(want), "{space:?}");
        }
        assert_eq!(l.validate(), Err(want));
        let mut meta = [0u64; 600];
        // SAFETY: refused before any memory is touched.
        assert_eq!(
            unsafe { Zone::from_raw_parts(l, &mut meta) }.unwrap_err(),
            want
        );
        assert_eq!(
            want.to_string(),
            format!(
                "zone: CPU 3's counter area, 512 bytes at {:#x} (modulo 2^64), wraps around \
                 the end of the address space",
                usize::MAX - 0xff + 64
            )
        );
        // The last area may end 8 bytes below the top (its end an address), not at 2^64.
        let top = ZoneLayout {
            offset: 0x1000 - 520,
            ..blocks(usize::MAX - 0x3fff)
        };
        assert_eq!(check(AddressSpace::X86_64, top), Ok(()));
        assert_eq!(top.validate(), Ok(()));
        let at_the_end = ZoneLayout {
            offset: 0x1000 - 512,
            ..top
        };
        assert_eq!(
            at_the_end.validate(),
            Err(Error::WrapsAround {
                what: "zone",
                cpu: 3,
                addr: usize::MAX - 511,
                len: 512
            })
        );
    }
}

/// The first failed bring-up check is kept for a kernel that checks before its console
/// exists: the CPU and the error, not replaced by later failures (from 4 CPUs at once), and
/// nothing while every check passes. (The only test of this binary whose checks fail.)
#[test]
fn the_first_failed_bring_up_check_is_kept() {
    let machine = Machine::new(4);
    let zone = machine.zone();
    for cpu in 0..4 {
        assert_eq!(machine.run_on(cpu, || zone.check_cpu(cpu)), Ok(()));
    }
    assert_eq!(Zone::first_failed_check(), None);
    // CPU 2's check run on CPU 3: before any console, the kernel cannot print it.
    let first = Error::CpuRegisterForeign {
        cpu: 2,
        other: 3,
        register: pcpu_counter::arch::REGISTER,
    };
    assert_eq!(machine.run_on(3, || zone.check_cpu(2)), Err(first));
    std::thread::scope(|s| {
        for cpu in 0..4 {
            let machine = &machine;
            s.spawn(move || {
                let later = machine.run_on(cpu, || zone.check_cpu(4 + cpu));
                assert_eq!(
                    later,
                    Err(Error::CpuNotInZone {
                        cpu: 4 + cpu,
                        ncpus: 4
                    })
                );
            });
        }
    });
    assert_eq!(Zone::first_failed_check(), Some((2, first)));
}
