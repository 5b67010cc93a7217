//! The named registry: snapshot values and order, zero by name, errors, no allocation on
//! the read path, and snapshots while CPUs add.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

use pcpu_counter::registry::{Registry, RegistryError, Stat};
use pcpu_counter::sim::Machine;
use pcpu_counter::{array::CounterArray, early::EarlyCounter};

/// Counts this thread's allocations, to show the read path makes none.
struct Counting;

std::thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counter is a const thread-local `Cell`.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|a| a.set(a.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

static EARLY: EarlyCounter = EarlyCounter::new();

#[test]
fn snapshot_lists_every_value_in_order_without_allocating() {
    let machine = Machine::new(3);
    let rx = machine.alloc().unwrap();
    let drops: CounterArray<'_, 3> = CounterArray::new(machine.zone()).unwrap();
    EARLY.add(4);
    let stats: Registry<'_, 4> = Registry::new();
    stats.register("net.rx", "packets received", &rx).unwrap();
    stats
        .register("net.drops", "drops by reason", &drops)
        .unwrap();
    stats
        .register("boot.early", "early events", &EARLY)
        .unwrap();
    machine.run_on(2, || {
        rx.add(100);
        drops.add(0, 1);
        drops.add(2, 3);
    });

    let mut got = [Stat {
        name: "",
        description: "",
        index: None,
        value: 0,
    }; 5];
    let before = allocations();
    let mut n = 0;
    for (slot, stat) in got.iter_mut().zip(stats.snapshot()) {
        *slot = stat;
        n += 1;
    }
    assert_eq!(allocations(), before, "the snapshot allocated");
    assert_eq!(n, 5);
    let values: Vec<_> = got.iter().map(|s| (s.name, s.index, s.value)).collect();
    assert_eq!(
        values,
        [
            ("net.rx", None, 100),
            ("net.drops", Some(0), 1),
            ("net.drops", Some(1), 0),
            ("net.drops", Some(2), 3),
            ("boot.early", None, 4),
        ]
    );
    assert_eq!(got[0].description, "packets received");
    assert_eq!(got[3].to_string(), "net.drops[2] = 3");
}

#[test]
fn zero_by_name_and_errors() {
    let machine = Machine::new(2);
    let a = machine.alloc().unwrap();
    let b = machine.alloc().unwrap();
    let arr: CounterArray<'_, 2> = CounterArray::new(machine.zone()).unwrap();
    let stats: Registry<'_, 2> = Registry::new();
    stats.register("a", "", &a).unwrap();
    stats.register("arr", "", &arr).unwrap();
    assert_eq!(stats.register("a", "", &b), Err(RegistryError::Duplicate));
    assert_eq!(
        stats.register("b", "", &b),
        Err(RegistryError::Full { capacity: 2 })
    );
    machine.run_on(1, || {
        a.add(5);
        arr.add(0, 6);
        arr.add(1, 7);
    });
    let before = allocations();
    stats.zero("arr").unwrap();
    assert_eq!(allocations(), before, "zero by name allocated");
    assert_eq!((a.fetch(), arr.fetch(0), arr.fetch(1)), (5, 0, 0));
    assert_eq!(stats.zero("nope"), Err(RegistryError::NotFound));
    assert_eq!(stats.unregister("a"), Ok(()));
    assert_eq!(stats.unregister("a"), Err(RegistryError::NotFound));
    stats.register("b", "", &b).unwrap();
    assert_eq!(stats.get("a").map(|s| s.value(0)), None);
    let names: Vec<_> = stats.snapshot().map(|s| s.name).collect();
    assert_eq!(names, ["b", "arr", "arr"], "b took a's place");
    assert_eq!(
        RegistryError::Full { capacity: 2 }.to_string(),
        "registry full: all 2 entries are in use"
    );
}

#[test]
fn zeroing_an_early_counter_before_init_leaves_it() {
    static E: EarlyCounter = EarlyCounter::new();
    E.add(3);
    let stats: Registry<'static, 1> = Registry::new();
    stats.register("e", "", &E).unwrap();
    stats.zero("e").unwrap();
    assert_eq!(E.fetch(), 3, "no slot yet: nothing to zero");
    let machine: &'static Machine = Box::leak(Box::new(Machine::new(1)));
    machine.run_on(0, || E.init(machine.zone())).unwrap();
    stats.zero("e").unwrap();
    assert_eq!(stats.get("e").unwrap().value(0), 0);
}

#[test]
fn snapshots_while_cpus_add_are_monotonic_and_end_exact() {
    // Adds per CPU (fewer under Miri, which is thousands of times slower).
    const N: u64 = if cfg!(miri) { 100 } else { 20_000 };
    let machine = Machine::new(4);
    let c = machine.alloc().unwrap();
    let arr: CounterArray<'_, 2> = CounterArray::new(machine.zone()).unwrap();
    let stats: Registry<'_, 2> = Registry::new();
    stats.register("c", "", &c).unwrap();
    stats.register("arr", "", &arr).unwrap();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let adders: Vec<_> = (0..4)
            .map(|cpu| {
                let (machine, c, arr) = (&machine, &c, &arr);
                s.spawn(move || {
                    machine.run_on(cpu, || {
                        for k in 0..N as usize {
                            c.inc();
                            arr.add(k % 2, 2);
                        }
                    })
                })
            })
            .collect();
        s.spawn(|| {
            let mut last = [0u64; 3];
            while !done.load(Ordering::Relaxed) {
                for (i, stat) in stats.snapshot().enumerate() {
                    assert!(stat.value >= last[i], "{} went back", stat.name);
                    last[i] = stat.value;
                }
            }
        });
        adders.into_iter().for_each(|a| a.join().unwrap());
        done.store(true, Ordering::Relaxed);
    });
    let values: Vec<u64> = stats.snapshot().map(|s| s.value).collect();
    assert_eq!(values, [4 * N; 3]);
}
