//! The lazy counter (`LazyCounter`, issue 31 item 4): its memory idle and moved, and its add
//! before the move (the shared word) and after it, against the plain counter's add in the
//! same rounds.

use std::hint::black_box;
use std::mem::size_of;

use pcpu_counter::sim::Machine;
use pcpu_counter::{Counter, LazyCounter};

use crate::harness::{add_rounds, eight, medians_in_turn, Sink};
use crate::reads::ALLOC_CPUS;

/// The plain counter's add, 8n times (as `single::pcpu_one`, here for the same loop shape).
#[inline(never)]
pub fn plain_one(counter: &Counter<'_>, n: u64) {
    for _ in 0..n {
        eight!(counter.add(1));
    }
}

/// The lazy counter's add, 8n times.
#[inline(never)]
pub fn lazy_one(counter: &LazyCounter<'_>, n: u64) {
    for _ in 0..n {
        eight!(counter.add(1));
    }
}

/// The plain counter's add on each of `counters` in turn, `rounds` times.
#[inline(never)]
pub fn plain_many(counters: &[Counter<'_>], rounds: u64) {
    for _ in 0..rounds {
        for counter in counters {
            counter.add(1);
        }
    }
}

/// The lazy counter's add on each of `counters` in turn, `rounds` times.
#[inline(never)]
pub fn lazy_many(counters: &[LazyCounter<'_>], rounds: u64) {
    for _ in 0..rounds {
        for counter in counters {
            counter.add(1);
        }
    }
}

/// The counters of the `_many` loops: too many handles to keep in registers, so every add
/// loads its counter's, as an add to another object's counter does.
const MANY: usize = 64;

/// The add rows' names, for one counter (parameter 1) and for [`MANY`] in turn.
const NAMES: [&str; 3] = [
    "Counter::add",
    "LazyCounter::add before the move",
    "LazyCounter::add after the move",
];

pub fn run(sink: &mut Sink, quick: bool) {
    // Memory: idle, the counter itself and no slot (checked: the zone lends none); moved,
    // plus a slot of 8 bytes on each of `ALLOC_CPUS` CPUs, as the plain counter's.
    let cpus = ALLOC_CPUS;
    let machine = Machine::new(cpus);
    let idle = LazyCounter::new(machine.zone());
    idle.inc();
    assert_eq!((machine.zone().in_use(), idle.is_per_cpu()), (0, false));
    let lazy = size_of::<LazyCounter<'_>>();
    sink.record("lazy", "memory idle", cpus, lazy, "bytes");
    sink.record("lazy", "memory moved", cpus, lazy + 8 * cpus, "bytes");
    let plain = size_of::<Counter<'_>>() + 8 * cpus;
    sink.record("lazy", "memory Counter", cpus, plain, "bytes");

    // The adds: one thread on one CPU, every loop once per round in turn, median of each: the
    // plain add, the lazy add before its move (one thread never contends, and no threshold is
    // set) and after it (`try_move`). In a loop on one counter the compiler keeps the plain
    // counter's offset and zone in registers, but reloads the lazy counter's state (an atomic,
    // which another CPU's move changes) and, under the simulation, its zone for the add's
    // check; on `MANY` counters in turn both load their handle for every add.
    let (rounds, n) = add_rounds(quick);
    let n = black_box(n);
    let machine = Machine::new(1);
    let _bound = machine.bind(0).expect("bind");
    let new_moved = || {
        let c = LazyCounter::new(machine.zone());
        c.try_move().expect("a slot");
        c
    };
    let plain = machine.alloc().expect("alloc");
    let shared = LazyCounter::new(machine.zone());
    let moved = new_moved();
    let plains: Vec<Counter<'_>> = (0..MANY).map(|_| machine.alloc().expect("alloc")).collect();
    let shareds: Vec<LazyCounter<'_>> = (0..MANY)
        .map(|_| LazyCounter::new(machine.zone()))
        .collect();
    let moveds: Vec<LazyCounter<'_>> = (0..MANY).map(|_| new_moved()).collect();
    let many_rounds = 8 * n / MANY as u64;
    // In the order of `NAMES`, on one counter and then on `MANY`; each call 8n adds.
    let mut loops: [Box<dyn FnMut() + '_>; 6] = [
        Box::new(|| plain_one(&plain, n)),
        Box::new(|| lazy_one(&shared, n)),
        Box::new(|| lazy_one(&moved, n)),
        Box::new(|| plain_many(&plains, many_rounds)),
        Box::new(|| lazy_many(&shareds, many_rounds)),
        Box::new(|| lazy_many(&moveds, many_rounds)),
    ];
    let medians = medians_in_turn(rounds, loops.len(), |i| {
        loops[i]();
        8 * n
    });
    drop(loops);
    let adds = rounds as u64 * 8 * n;
    assert_eq!(
        (plain.fetch(), shared.fetch(), moved.fetch()),
        (adds, adds, adds)
    );
    let each = rounds as u64 * many_rounds;
    assert!(plains.iter().all(|c| c.fetch() == each));
    assert!(shareds.iter().chain(&moveds).all(|c| c.fetch() == each));
    assert!(!shared.is_per_cpu() && shareds.iter().all(|c| !c.is_per_cpu()));
    for (i, median) in medians.into_iter().enumerate() {
        let counters = [1, MANY][i / 3];
        sink.record("lazy-add", NAMES[i % 3], counters, median, "ns/add");
    }
}
