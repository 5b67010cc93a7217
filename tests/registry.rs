//! The named registry: snapshot values and order, zero by name, errors, no allocation on
//! the read path, snapshots while CPUs add, the names it refuses (in Rust and from C) because
//! they would not export as a metric of their own, and an approximate counter that a delta
//! export leaves exact.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

use pcpu_counter::capi::*;
use pcpu_counter::registry::{Registry, RegistryError, Stat};
use pcpu_counter::sim::capi::pcpu_sim_machine_new;
use pcpu_counter::sim::Machine;
use pcpu_counter::{array::CounterArray, early::EarlyCounter, ApproxCounter};

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

/// Names whose metric names would be one metric, a name OpenMetrics reserves, or start with
/// `_` are refused, each error naming the names; names that stay apart are taken.
#[test]
fn names_that_would_not_export_apart_are_refused_naming_both() {
    let machine = Machine::new(1);
    let c: Vec<_> = (0..12).map(|_| machine.alloc().unwrap()).collect();
    let arr: CounterArray<'_, 2> = CounterArray::new(machine.zone()).unwrap();
    let stats: Registry<'_, 16> = Registry::new();
    let bad = |name| Err(RegistryError::BadName { name });
    let clash = |name, registered| Err(RegistryError::Clash { name, registered });
    // Empty, or a first character that the metric name would make `_` (a digit gets a `_`
    // before it): refused whatever is registered.
    for name in ["", "9x", "_9x", "_x", ".x", ":x", "-x", " x", "é"] {
        assert_eq!(stats.register(name, "", &c[0]), bad(name), "{name:?}");
    }
    assert_eq!(stats.register("a.b", "", &c[0]), Ok(()));
    assert_eq!(stats.register("a_b", "", &c[1]), clash("a_b", "a.b"));
    assert_eq!(stats.register("a:b", "", &arr), clash("a:b", "a.b"));
    assert_eq!(stats.register("foo", "", &c[1]), Ok(()));
    assert_eq!(
        stats.register("foo_total", "", &c[2]),
        clash("foo_total", "foo")
    );
    assert_eq!(
        stats.register("foo.created", "", &c[2]),
        clash("foo.created", "foo")
    );
    assert_eq!(stats.register("bar_created", "", &arr), Ok(()));
    assert_eq!(
        stats.register("bar", "", &c[2]),
        clash("bar", "bar_created")
    );
    assert_eq!(stats.register("baz_total", "", &c[2]), Ok(()));
    assert_eq!(stats.register("baz", "", &c[3]), clash("baz", "baz_total"));
    assert_eq!(stats.register("café", "", &c[3]), Ok(()));
    assert_eq!(stats.register("cafè", "", &c[4]), clash("cafè", "café"));
    // A name the same but for case, or with another suffix, is a metric of its own.
    for (i, name) in [
        "A.b",
        "foo_count",
        "foo_sum",
        "foo_total_total",
        "foo_createdx",
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(stats.register(name, "", &c[5 + i]), Ok(()), "{name:?}");
    }
    assert_eq!(
        stats.register("a.b", "", &c[11]),
        Err(RegistryError::Duplicate)
    );
    // Once the name is gone, a name that clashed with it alone is free.
    stats.unregister("foo").unwrap();
    assert_eq!(stats.register("foo.created", "", &c[11]), Ok(()));
    assert_eq!(
        stats.register("foo_total", "", &c[11]),
        clash("foo_total", "foo_total_total")
    );
    let names: Vec<_> = stats.snapshot().map(|s| s.name).collect();
    assert_eq!(
        names,
        [
            "a.b",
            "foo.created",
            "bar_created",
            "bar_created",
            "baz_total",
            "café",
            "A.b",
            "foo_count",
            "foo_sum",
            "foo_total_total",
            "foo_createdx"
        ]
    );
    assert_eq!(
        RegistryError::Clash {
            name: "a_b",
            registered: "a.b"
        }
        .to_string(),
        "\"a_b\" and the registered \"a.b\" export clashing metric names"
    );
    assert_eq!(
        RegistryError::BadName { name: "9x" }.to_string(),
        "\"9x\" cannot be exported: a name must start with an ASCII letter"
    );
}

/// The C registry refuses the same names: `PCPU_ENAME` for a name that cannot be a metric's
/// (before the table: even a full one), `PCPU_ECLASH` for one that clashes.
#[test]
#[cfg_attr(
    miri,
    ignore = "the C machine reads the early-counter linker set's bounds, extern statics Miri cannot resolve"
)]
fn the_c_registry_refuses_the_same_names() {
    assert_eq!(pcpu_sim_machine_new(2, 128), PCPU_OK);
    let c = counter_u64_alloc(M_WAITOK);
    let mut a = [std::ptr::null_mut(); 2];
    assert_eq!(
        unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 2, M_WAITOK) },
        PCPU_OK
    );
    let add =
        |name: &std::ffi::CStr| unsafe { pcpu_sysctl_add_counter(name.as_ptr(), c"".as_ptr(), c) };
    let add_array = |name: &std::ffi::CStr| unsafe {
        pcpu_sysctl_add_counter_array(name.as_ptr(), c"".as_ptr(), a.as_ptr(), 2)
    };
    for name in [c"", c"9x", c"_9x", c"_x", c".x", c"\xc3\xa9"] {
        assert_eq!(add(name), PCPU_ENAME, "{name:?}");
        assert_eq!(add_array(name), PCPU_ENAME, "{name:?}");
    }
    assert_eq!(add(c"a.b"), PCPU_OK);
    assert_eq!(add(c"a_b"), PCPU_ECLASH);
    assert_eq!(add_array(c"a:b"), PCPU_ECLASH);
    assert_eq!(add(c"a.b"), PCPU_EEXIST);
    assert_eq!(add_array(c"foo"), PCPU_OK);
    assert_eq!(add(c"foo_total"), PCPU_ECLASH);
    assert_eq!(add(c"foo_created"), PCPU_ECLASH);
    assert_eq!(add(c"bar_created"), PCPU_OK);
    assert_eq!(add_array(c"bar"), PCPU_ECLASH);
    assert_eq!(add(c"foo_count"), PCPU_OK);
    let text = unsafe { std::ffi::CStr::from_ptr(pcpu_strerror(PCPU_ECLASH)) };
    assert_eq!(
        text.to_str(),
        Ok("the name exports as a metric that clashes with a registered name's")
    );
    // A full table: a bad name is still `PCPU_ENAME`, a good one `PCPU_EREGFULL`.
    let names: Vec<_> = (0..PCPU_SYSCTL_MAX - 4)
        .map(|i| std::ffi::CString::new(format!("fill{i}")).unwrap())
        .collect();
    for name in &names {
        assert_eq!(add(name), PCPU_OK);
    }
    assert_eq!((add(c"9x"), add(c"more")), (PCPU_ENAME, PCPU_EREGFULL));
    let registered =
        names
            .iter()
            .map(|n| n.as_c_str())
            .chain([c"a.b", c"foo", c"bar_created", c"foo_count"]);
    for name in registered {
        assert_eq!(
            unsafe { pcpu_sysctl_remove(name.as_ptr()) },
            PCPU_OK,
            "{name:?}"
        );
    }
    assert_eq!(add(c"foo_total"), PCPU_OK, "free once foo is gone");
    unsafe {
        assert_eq!(pcpu_sysctl_remove(c"foo_total".as_ptr()), PCPU_OK);
        counter_u64_array_free(a.as_mut_ptr(), 2);
        counter_u64_free(c);
    }
}

/// An approximate counter in the registry: a delta export takes its count with its own
/// `fetch_and_zero`, so the approximate value stays within its stated bound of the precise
/// one, and `compare` answers right.
#[test]
fn an_approximate_counter_stays_exact_through_a_delta_export() {
    let machine = Machine::new(2);
    let c = ApproxCounter::new(machine.alloc().unwrap(), 16).unwrap();
    assert_eq!(c.accuracy(), (30, 0));
    let stats: Registry<'_, 1> = Registry::new();
    stats
        .register("approx", "an approximate counter", &c)
        .unwrap();
    machine.run_on(1, || (0..1000).for_each(|_| c.inc()));
    let mut buf = [0u64; 1];
    assert_eq!(
        stats.fetch_and_zero_into(&mut buf).unwrap().values(),
        [1000]
    );
    machine.run_on(1, || (0..40).for_each(|_| c.inc()));
    // CPU 1's slot went from 1000 to 1040: it carried 992 before the zero took 1000, and
    // 48 after, so the approximate value is 992 - 1000 + 48 = 40, all of the precise one.
    assert_eq!((c.precise(), c.approximate()), (40, 40));
    assert_eq!(c.compare(500), std::cmp::Ordering::Less);
    assert_eq!(c.compare_approximate(500), Some(std::cmp::Ordering::Less));
    assert_eq!(stats.read_into(&mut buf).unwrap().values(), [40]);
    stats.zero("approx").unwrap();
    assert_eq!((c.precise(), c.approximate()), (0, 0));
}
