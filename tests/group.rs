//! Group reads: a whole array, zone range or registry read CPU by CPU in one pass, and the
//! lossless group `fetch_and_zero`: exact values on 1 to 256 CPUs, deltas that add up
//! exactly while CPUs add, and the same race run against a broken group zero (a read, then
//! a separate zero) that it must catch losing adds.

mod common;

use common::Rng;
use pcpu_counter::array::CounterArray;
use pcpu_counter::early::EarlyCounter;
use pcpu_counter::registry::{Registry, RegistryError};
use pcpu_counter::sim::Machine;
use pcpu_counter::Error;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Random adds on every CPU to a 300-element array (five chunks of the group zero); the group
/// reads match every element's own fetch and the model, exactly.
#[test]
fn group_reads_match_single_fetches_exactly() {
    for ncpus in [1, 2, 7, 64, 256] {
        let machine = Machine::with_capacity(ncpus, 512).unwrap();
        let _before = machine.alloc().unwrap(); // the array does not start at the zone's start
        let a: CounterArray<'_, 300> = CounterArray::new(machine.zone()).unwrap();
        let mut model = [0u64; 300];
        let mut rng = Rng::new(ncpus as u64);
        for cpu in 0..ncpus {
            machine.run_on(cpu, || {
                for _ in 0..200 {
                    let (i, v) = (rng.below(300), rng.signed(1 << 40));
                    a.add(i, v);
                    model[i] = model[i].wrapping_add(v as u64);
                }
            });
        }
        let mut out = [0u64; 300];
        a.fetch_all(&mut out);
        assert_eq!(out, model, "{ncpus} CPUs: fetch_all");
        let singles: Vec<u64> = (0..300).map(|i| a.fetch(i)).collect();
        assert_eq!(out.as_slice(), singles, "{ncpus} CPUs: fetch of each");
        let mut range = [0u64; 100];
        machine
            .zone()
            .fetch_range(a.offset() + 8 * 150, &mut range)
            .unwrap();
        assert_eq!(range, model[150..250], "{ncpus} CPUs: a zone range");

        // Zero some elements one by one, then add again: the group reads subtract each
        // element's own baseline.
        (0..300).step_by(3).for_each(|i| a.zero(i));
        machine.run_on(ncpus - 1, || (0..300).for_each(|i| a.add(i, i as i64)));
        for (i, m) in model.iter_mut().enumerate() {
            *m = if i % 3 == 0 {
                i as u64
            } else {
                m.wrapping_add(i as u64)
            };
        }
        a.fetch_all(&mut out);
        assert_eq!(out, model, "{ncpus} CPUs: after zeroes");
        let mut deltas = [0u64; 300];
        a.fetch_and_zero_all(&mut deltas);
        assert_eq!(deltas, model, "{ncpus} CPUs: fetch_and_zero_all");
        a.fetch_all(&mut out);
        assert_eq!(out, [0; 300], "{ncpus} CPUs: after fetch_and_zero_all");
        machine.run_on(0, || a.add(299, 5));
        let raw: Vec<_> = (0..ncpus)
            .map(|cpu| a.cpu_slot(cpu, 299).unwrap())
            .collect();
        a.zero_all();
        a.fetch_all(&mut out);
        assert_eq!(out, [0; 300], "{ncpus} CPUs: after zero_all");
        let after: Vec<_> = (0..ncpus)
            .map(|cpu| a.cpu_slot(cpu, 299).unwrap())
            .collect();
        assert_eq!(raw, after, "{ncpus} CPUs: a group zero wrote a slot");
    }
}

#[test]
fn a_range_outside_the_zone_is_an_error_and_reads_nothing() {
    let machine = Machine::with_capacity(2, 16).unwrap();
    let zone = machine.zone();
    let (first, len) = (zone.layout().offset, zone.capacity());
    let mut out = vec![7u64; len + 1];
    assert_eq!(
        zone.fetch_range(first, &mut out),
        Err(Error::NotInZone {
            offset: first,
            len: len + 1
        })
    );
    assert_eq!(
        zone.fetch_and_zero_range(first + 4, &mut out[..1]),
        Err(Error::NotInZone {
            offset: first + 4,
            len: 1
        })
    );
    assert_eq!(
        zone.fetch_range(usize::MAX - 7, &mut out[..2]),
        Err(Error::NotInZone {
            offset: usize::MAX - 7,
            len: 2
        })
    );
    assert!(out.iter().all(|&v| v == 7), "an error wrote the buffer");
    assert_eq!(
        Error::NotInZone { offset: 8, len: 2 }.to_string(),
        "2 slots from offset 0x8 are not all slots of the zone"
    );
    assert_eq!(zone.fetch_range(first, &mut out[..len]), Ok(()));
    assert_eq!(out[..len], vec![0; len]);
}

/// An empty range is a valid one, as an empty slice is: from a slot of the zone (its first,
/// its last, allocated or not) it reads and zeroes nothing and returns `Ok(())`; from an
/// offset that is not a slot of the zone it is `NotInZone`, as a range of any length is.
#[test]
fn an_empty_range_at_a_slot_of_the_zone_is_a_no_op() {
    let machine = Machine::with_capacity(2, 16).unwrap();
    let zone = machine.zone();
    let c = machine.alloc().unwrap();
    machine.run_on(1, || c.add(5));
    let (first, len) = (zone.layout().offset, zone.layout().len);
    let last = first + len - 8;
    for off in [c.offset(), first, last] {
        assert_eq!(zone.fetch_range(off, &mut []), Ok(()), "{off:#x}");
        assert_eq!(zone.fetch_and_zero_range(off, &mut []), Ok(()), "{off:#x}");
    }
    assert_eq!(c.fetch(), 5, "an empty range zeroed it");
    for off in [first + 4, last + 8, first - 8, usize::MAX - 7] {
        let want = Err(Error::NotInZone {
            offset: off,
            len: 0,
        });
        assert_eq!(zone.fetch_range(off, &mut []), want, "{off:#x}");
        assert_eq!(zone.fetch_and_zero_range(off, &mut []), want, "{off:#x}");
    }
}

/// The registry's group reads: counters, arrays and an early counter, with a gap left by
/// `unregister`, more than one batch of the snapshot (over 64 values and over 16 names).
#[test]
fn registry_group_reads_are_exact() {
    let machine = Machine::new(5);
    let singles: Vec<_> = (0..40).map(|_| machine.alloc().unwrap()).collect();
    let big: CounterArray<'_, 100> = CounterArray::new(machine.zone()).unwrap();
    let early = EarlyCounter::new();
    early.add(11);
    let names: Vec<String> = (0..40).map(|i| format!("c{i}")).collect();
    let stats: Registry<'_, 64> = Registry::new();
    for (i, c) in singles.iter().enumerate() {
        stats.register(&names[i], "a counter", c).unwrap();
        if i == 20 {
            stats.register("big", "an array", &big).unwrap();
            stats.register("early", "an early counter", &early).unwrap();
        }
    }
    stats.unregister("c3").unwrap();
    let mut rng = Rng::new(7);
    for cpu in 0..5 {
        machine.run_on(cpu, || {
            for (i, c) in singles.iter().enumerate() {
                c.add(i as i64 * 10 + cpu as i64);
            }
            (0..100).for_each(|_| big.add(rng.below(100), 3));
        });
    }
    let expected: Vec<(String, Option<usize>, u64)> = stats
        .snapshot()
        .map(|s| (s.name.to_string(), s.index, s.value))
        .collect();
    let singles_model = |i: usize| 50 * i as u64 + 10;
    let mut want = Vec::new();
    for i in (0..40).filter(|&i| i != 3) {
        want.push((format!("c{i}"), None, singles_model(i)));
        if i == 20 {
            want.extend((0..100).map(|j| ("big".to_string(), Some(j), big.fetch(j))));
            want.push(("early".to_string(), None, 11));
        }
    }
    assert_eq!(expected, want, "snapshot");
    assert_eq!(stats.values_len(), 140);

    let mut buf = vec![0u64; 140];
    assert_eq!(
        stats.read_into(&mut buf[..139]).err(),
        Some(RegistryError::BufferTooSmall { needed: 140 })
    );
    let values = stats.read_into(&mut buf).unwrap();
    let listed: Vec<_> = values
        .iter()
        .map(|s| (s.name.to_string(), s.index, s.value))
        .collect();
    assert_eq!(listed, want, "read_into");
    assert_eq!(
        values.values(),
        want.iter().map(|w| w.2).collect::<Vec<_>>()
    );

    // A short buffer takes nothing; the deltas then are the whole counts, and the next
    // ones only what was added since.
    assert!(stats.fetch_and_zero_into(&mut buf[..1]).is_err());
    assert_eq!(singles[39].fetch(), singles_model(39));
    let deltas: Vec<u64> = stats
        .fetch_and_zero_into(&mut buf)
        .unwrap()
        .values()
        .to_vec();
    assert_eq!(deltas, want.iter().map(|w| w.2).collect::<Vec<_>>());
    // The take zeroed the counters themselves (their own baselines moved); c3, no longer
    // registered, kept its count.
    let left: Vec<u64> = singles.iter().map(|c| c.fetch()).collect();
    let mut want_left = vec![0; 40];
    want_left[3] = singles_model(3);
    assert_eq!(left, want_left, "the counters after the take");
    assert!(
        (0..100).all(|j| big.fetch(j) == 0),
        "an element kept its count"
    );
    machine.run_on(2, || {
        singles[0].add(4);
        big.add(99, 1)
    });
    let deltas = stats.fetch_and_zero_into(&mut buf).unwrap();
    let nonzero: Vec<_> = deltas
        .iter()
        .filter(|s| s.value != 0)
        .map(|s| (s.name, s.index, s.value))
        .collect();
    // The early counter has no slot: its count cannot be zeroed and is reported whole.
    assert_eq!(
        nonzero,
        [("c0", None, 4), ("big", Some(99), 1), ("early", None, 11)]
    );
}

/// Writers add to every element of a 200-element array (four chunks of the group zero) on
/// their own CPUs while a reader takes group deltas with `take`; returns, per element, the
/// adds made and the deltas taken plus the final fetch. The writers go on until the reader
/// has taken `MIN_RACES` non-empty deltas while they ran (a count, not a time); `MAX_ADDS`
/// only turns a reader that never runs into a failure.
fn race(
    try_: u64,
    take: &(dyn Fn(&CounterArray<'_, 200>, &mut [u64; 200]) + Sync),
) -> (Vec<u64>, Vec<u64>) {
    const WRITERS: usize = 3;
    const MIN_ADDS: u64 = 20_000;
    const MAX_ADDS: u64 = 50_000_000;
    let min_races = 50 * try_;
    let machine = Machine::new(WRITERS);
    let a: CounterArray<'_, 200> = CounterArray::new(machine.zone()).unwrap();
    let done = AtomicBool::new(false);
    let races = AtomicU64::new(0);
    let (adds, mut taken) = std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|cpu| {
                let (machine, a, races) = (&machine, &a, &races);
                s.spawn(move || {
                    machine.run_on(cpu, || {
                        let mut adds = vec![0u64; 200];
                        let mut total = 0u64;
                        while total < MIN_ADDS
                            || (races.load(Ordering::Relaxed) < min_races && total < MAX_ADDS)
                        {
                            let seen = races.load(Ordering::Relaxed);
                            for round in 0..5 {
                                for (i, n) in adds.iter_mut().enumerate() {
                                    let v = 1 + ((i + round + cpu) % 3) as i64;
                                    a.add(i, v);
                                    *n += v as u64;
                                    total += 1;
                                }
                            }
                            if races.load(Ordering::Relaxed) == seen {
                                std::thread::yield_now();
                            }
                        }
                        adds
                    })
                })
            })
            .collect();
        let reader = s.spawn(|| {
            let mut sums = vec![0u64; 200];
            let mut out = [0u64; 200];
            while !done.load(Ordering::Relaxed) {
                take(&a, &mut out);
                if out.iter().any(|&d| d > 0) {
                    races.fetch_add(1, Ordering::Relaxed);
                }
                for (s, d) in sums.iter_mut().zip(out) {
                    assert!(d < 1 << 40, "impossible delta {d}: a zero went backwards");
                    *s += d;
                }
            }
            sums
        });
        let mut adds = vec![0u64; 200];
        for w in writers {
            for (t, n) in adds.iter_mut().zip(w.join().unwrap()) {
                *t += n;
            }
        }
        done.store(true, Ordering::Relaxed);
        (adds, reader.join().unwrap())
    });
    for (i, t) in taken.iter_mut().enumerate() {
        *t += a.fetch(i);
    }
    (adds, taken)
}

#[test]
fn group_fetch_and_zero_racing_with_adds_loses_nothing() {
    for try_ in 1..=3 {
        let (adds, taken) = race(try_, &|a, out| a.fetch_and_zero_all(out));
        assert_eq!(taken, adds, "try {try_}: deltas + final fetch, per element");
    }
}

/// The same race against a broken group zero: every value read in one pass, then every
/// element zeroed in a second (a fetch, then a zero, as two steps). Adds made between the two
/// are in no delta: the check above must see it. Tries, each longer, bound the search.
#[test]
fn the_same_check_catches_a_group_zero_in_two_steps() {
    const TRIES: u64 = 30;
    let broken = |a: &CounterArray<'_, 200>, out: &mut [u64; 200]| {
        a.fetch_all(out);
        a.zero_all();
    };
    let caught = (1..=TRIES).find_map(|try_| {
        let (adds, taken) = race(try_, &broken);
        (taken != adds).then(|| {
            let lost: u64 = adds.iter().sum::<u64>() - taken.iter().sum::<u64>();
            (try_, lost)
        })
    });
    let (try_, lost) =
        caught.unwrap_or_else(|| panic!("the two-step group zero lost no add in {TRIES} tries"));
    println!("the two-step group zero lost {lost} adds, caught on try {try_}");
}

/// Two readers take group deltas of the same array at once while a writer adds, and a third
/// zeroes single elements: every add is in exactly one delta (the group zero's compare-and-
/// swap fails when another zero moved a baseline, and that element is then taken alone).
#[test]
fn concurrent_group_and_single_zeroes_split_the_count_exactly() {
    let machine = Machine::new(2);
    let a: CounterArray<'_, 130> = CounterArray::new(machine.zone()).unwrap();
    let done = AtomicBool::new(false);
    let total = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            machine.run_on(0, || {
                for _ in 0..400 {
                    (0..130).for_each(|i| a.add(i, 2));
                }
            })
        });
        let groups: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let (mut sum, mut out) = (0u64, [0u64; 130]);
                    while !done.load(Ordering::Relaxed) {
                        a.fetch_and_zero_all(&mut out);
                        for d in out {
                            assert!(d <= 800, "delta {d}: deltas overlapped");
                            sum += d;
                        }
                    }
                    sum
                })
            })
            .collect();
        let single = s.spawn(|| {
            let mut sum = 0u64;
            while !done.load(Ordering::Relaxed) {
                sum += (0..130).map(|i| a.fetch_and_zero(i)).sum::<u64>();
            }
            sum
        });
        writer.join().unwrap();
        done.store(true, Ordering::Relaxed);
        groups.into_iter().map(|g| g.join().unwrap()).sum::<u64>() + single.join().unwrap()
    });
    let mut rest = [0u64; 130];
    a.fetch_and_zero_all(&mut rest);
    assert_eq!(total + rest.iter().sum::<u64>(), 400 * 130 * 2);
}
