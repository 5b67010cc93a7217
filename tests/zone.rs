//! The zone: allocation, reuse, a full zone, and every bad configuration.

use pcpu_counter::sim::Machine;
use pcpu_counter::{Error, Zone, ZoneLayout, ZoneMemory};
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
        (
            ZoneLayout {
                base: usize::MAX - 511,
                ..good
            },
            Error::AddressOverflow,
        ),
        (
            ZoneLayout {
                ncpus: usize::MAX,
                ..good
            },
            Error::AddressOverflow,
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
