//! Model-based property test: random sequences of operations on one simulated machine,
//! checked after every step against a plain model (expected values, raw per-CPU slots, the
//! slot occupancy).
//!
//! Each case makes a `Machine` of 1 to 4 CPUs and 16 or 32 slots and runs up to 40 of:
//! alloc a counter, free one, add `v` on a random CPU, add on one CPU then migrate and add on
//! another, zero, fetch_and_zero, fetch, alloc a `CounterArray` of 1, 3, 5 or 16 elements and
//! add to / zero / zero_all / fetch_and_zero_all / free it, and fill the zone until `ZoneFull`.
//! After every step: `in_use` equals the model's used slots; every live counter's and array
//! element's `fetch` equals the model exactly, and so does its raw `cpu_slot` on every CPU
//! (`CpuOutOfRange` one past the last); a new counter or array reads 0 on every CPU; an
//! allocation fails with `ZoneFull` exactly when the model has no free run of that length.
//!
//! 256 cases by default (a few tenths of a second); `PROPTEST_CASES=20000 cargo test --test
//! model -- --nocapture` runs more and prints the count.
//!
//! Shrinking, shown once on a scratch copy (never committed) whose `Zone::fetch_and_zero`
//! returned the delta without recording the new baseline (so `zero` did nothing either): with
//! the default 256 cases the first failing sequence was found and shrunk in 102 runs of the
//! property (shrinking included, 10 ms), to the minimal
//!
//! ```text
//! assertion failed: `(left == right)`
//!   left: `1`,
//!  right: `0`: fetch after Zero { c: 0 }
//! minimal failing input: (ncpus, counters, ops) = (1, 1, [Alloc, Add { c: 0, cpu: 0, v: 1 }, Zero { c: 0 }])
//! ```
//!
//! Six runs (random seeds) shrank to that, to the same with `v: -1`, or to its array form
//! `[AllocArray { len: One }, ArrayAdd { a: 0, i: 0, cpu: 0, v: 1 }, ArrayZero { a: 0, i: 0 }]`;
//! one stopped at five steps (an extra array allocated and freed first). Numbers name handles
//! clamped, not wrapped (`pick`), which is what lets the shrinker drop earlier allocations.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use pcpu_counter::sim::Machine;
use pcpu_counter::{array::CounterArray, Counter, Error, Zone};
use proptest::prelude::*;
mod common;

use proptest::test_runner::{TestCaseError, TestError, TestRunner};

/// Array lengths the test allocates (const generics: one arm each).
#[derive(Debug, Clone, Copy)]
enum ArrLen {
    One,
    Three,
    Five,
    Sixteen,
}

impl ArrLen {
    fn len(self) -> usize {
        match self {
            ArrLen::One => 1,
            ArrLen::Three => 3,
            ArrLen::Five => 5,
            ArrLen::Sixteen => 16,
        }
    }
}

/// One step. Counter, array, element and CPU numbers are clamped to what exists (a number
/// past the last means the last), so a step stays meaningful (or a no-op) when shrinking
/// removes the steps before it, and a shrunk sequence names the same handle.
#[derive(Debug, Clone)]
enum Op {
    Alloc,
    Free {
        c: usize,
    },
    Add {
        c: usize,
        cpu: usize,
        v: i64,
    },
    /// Bind `from`, add `v1`, migrate to `to`, add `v2`: one thread on two CPUs.
    Migrate {
        c: usize,
        from: usize,
        to: usize,
        v1: i64,
        v2: i64,
    },
    Zero {
        c: usize,
    },
    FetchAndZero {
        c: usize,
    },
    Fetch {
        c: usize,
    },
    /// Allocate until the zone says it is full.
    FillZone,
    AllocArray {
        len: ArrLen,
    },
    ArrayAdd {
        a: usize,
        i: usize,
        cpu: usize,
        v: i64,
    },
    ArrayZero {
        a: usize,
        i: usize,
    },
    ArrayZeroAll {
        a: usize,
    },
    ArrayFetchAndZeroAll {
        a: usize,
    },
    ArrayFree {
        a: usize,
    },
}

fn value() -> impl Strategy<Value = i64> {
    prop_oneof![4 => -1000i64..1000, 1 => any::<i64>()]
}

fn op() -> impl Strategy<Value = Op> {
    let c = 0usize..32;
    let cpu = 0usize..8;
    prop_oneof![
        4 => Just(Op::Alloc),
        2 => c.clone().prop_map(|c| Op::Free { c }),
        6 => (c.clone(), cpu.clone(), value()).prop_map(|(c, cpu, v)| Op::Add { c, cpu, v }),
        2 => (c.clone(), cpu.clone(), cpu.clone(), value(), value())
            .prop_map(|(c, from, to, v1, v2)| Op::Migrate { c, from, to, v1, v2 }),
        1 => c.clone().prop_map(|c| Op::Zero { c }),
        2 => c.clone().prop_map(|c| Op::FetchAndZero { c }),
        1 => c.clone().prop_map(|c| Op::Fetch { c }),
        1 => Just(Op::FillZone),
        2 => prop_oneof![
            Just(ArrLen::One),
            Just(ArrLen::Three),
            Just(ArrLen::Five),
            Just(ArrLen::Sixteen)
        ]
        .prop_map(|len| Op::AllocArray { len }),
        3 => (c.clone(), 0usize..16, cpu, value())
            .prop_map(|(a, i, cpu, v)| Op::ArrayAdd { a, i, cpu, v }),
        1 => (c.clone(), 0usize..16).prop_map(|(a, i)| Op::ArrayZero { a, i }),
        1 => c.clone().prop_map(|a| Op::ArrayZeroAll { a }),
        1 => c.clone().prop_map(|a| Op::ArrayFetchAndZeroAll { a }),
        1 => c.prop_map(|a| Op::ArrayFree { a }),
    ]
}

/// A `CounterArray` of any length, behind one type.
trait AnyArray {
    fn len(&self) -> usize;
    fn offset(&self) -> usize;
    fn add(&self, i: usize, v: i64);
    fn fetch(&self, i: usize) -> u64;
    fn fetch_all(&self) -> Vec<u64>;
    fn zero(&self, i: usize);
    fn zero_all(&self);
    fn fetch_and_zero_all(&self) -> Vec<u64>;
    fn cpu_slot(&self, cpu: usize, i: usize) -> Result<u64, Error>;
}

impl<const N: usize> AnyArray for CounterArray<'_, N> {
    fn len(&self) -> usize {
        CounterArray::len(self)
    }
    fn offset(&self) -> usize {
        CounterArray::offset(self)
    }
    fn add(&self, i: usize, v: i64) {
        CounterArray::add(self, i, v)
    }
    fn fetch(&self, i: usize) -> u64 {
        CounterArray::fetch(self, i)
    }
    fn fetch_all(&self) -> Vec<u64> {
        let mut out = [0; N];
        CounterArray::fetch_all(self, &mut out);
        out.to_vec()
    }
    fn zero(&self, i: usize) {
        CounterArray::zero(self, i)
    }
    fn zero_all(&self) {
        CounterArray::zero_all(self)
    }
    fn fetch_and_zero_all(&self) -> Vec<u64> {
        let mut out = [0; N];
        CounterArray::fetch_and_zero_all(self, &mut out);
        out.to_vec()
    }
    fn cpu_slot(&self, cpu: usize, i: usize) -> Result<u64, Error> {
        CounterArray::cpu_slot(self, cpu, i)
    }
}

fn alloc_array<'z>(zone: &'z Zone<'z>, len: ArrLen) -> Result<Box<dyn AnyArray + 'z>, Error> {
    Ok(match len {
        ArrLen::One => Box::new(CounterArray::<'z, 1>::new(zone)?),
        ArrLen::Three => Box::new(CounterArray::<'z, 3>::new(zone)?),
        ArrLen::Five => Box::new(CounterArray::<'z, 5>::new(zone)?),
        ArrLen::Sixteen => Box::new(CounterArray::<'z, 16>::new(zone)?),
    })
}

/// What one counter (or array element) must read: its value since the last zero, and the
/// raw slot on every CPU (every add since allocation, zeroes leave it alone).
#[derive(Debug, Clone)]
struct Expected {
    value: u64,
    raw: Vec<u64>,
}

impl Expected {
    fn new(ncpus: usize) -> Self {
        Expected {
            value: 0,
            raw: vec![0; ncpus],
        }
    }
    fn add(&mut self, cpu: usize, v: i64) {
        self.value = self.value.wrapping_add(v as u64);
        self.raw[cpu] = self.raw[cpu].wrapping_add(v as u64);
    }
}

/// The plain model: which slots are used, and what every live handle must read.
struct Model {
    ncpus: usize,
    used: Vec<bool>,
    counters: Vec<(usize, Expected)>,
    arrays: Vec<(usize, Vec<Expected>)>,
}

impl Model {
    fn in_use(&self) -> usize {
        self.used.iter().filter(|&&u| u).count()
    }
    /// Whether some run of `len` adjacent slots is free.
    fn has_free_run(&self, len: usize) -> bool {
        self.used.windows(len).any(|w| w.iter().all(|&u| !u))
    }
}

/// How often the interesting outcomes happened, over the whole run (coverage).
#[derive(Default)]
struct Seen {
    zone_full: Cell<usize>,
    array_full: Cell<usize>,
    migrations: Cell<usize>,
    steps: Cell<usize>,
}

fn bump(c: &Cell<usize>) {
    c.set(c.get() + 1);
}

/// Allocates one counter into `live`; `Ok(false)` when the zone was (and had to be) full.
fn alloc_one<'m>(
    machine: &'m Machine,
    model: &mut Model,
    live: &mut Vec<Counter<'m>>,
    seen: &Seen,
) -> Result<bool, TestCaseError> {
    let (ncpus, capacity) = (machine.ncpus(), machine.zone().capacity());
    let full = !model.has_free_run(1);
    match machine.alloc() {
        Ok(c) => {
            prop_assert!(!full, "alloc succeeded but the model's zone is full");
            let slot = slot_of(machine.zone(), c.offset());
            prop_assert!(slot < capacity && !model.used[slot], "slot {slot} not free");
            for cpu in 0..ncpus {
                prop_assert_eq!(c.cpu_slot(cpu), Ok(0), "new counter on CPU {}", cpu);
            }
            prop_assert_eq!(c.fetch(), 0);
            model.used[slot] = true;
            model.counters.push((slot, Expected::new(ncpus)));
            live.push(c);
            Ok(true)
        }
        Err(e) => {
            prop_assert!(
                full,
                "alloc failed with {e:?} but the model has a free slot"
            );
            prop_assert_eq!(e, Error::ZoneFull { capacity });
            bump(&seen.zone_full);
            Ok(false)
        }
    }
}

/// Handle, element or CPU number `i` of `n` (> 0): clamped, not wrapped, so that shrinking
/// `i` or removing earlier allocations keeps naming the same (last) one.
fn pick(i: usize, n: usize) -> usize {
    i.min(n - 1)
}

/// The slot index of a register-relative offset.
fn slot_of(zone: &Zone<'_>, off: usize) -> usize {
    (off - zone.layout().offset) / 8
}

/// Runs `ops` on a fresh machine against the model, checking after every step.
fn run_case(ncpus: usize, counters: usize, ops: &[Op], seen: &Seen) -> Result<(), TestCaseError> {
    let machine = Machine::with_capacity(ncpus, counters).expect("machine");
    let zone = machine.zone();
    let capacity = zone.capacity();
    let mut model = Model {
        ncpus,
        used: vec![false; capacity],
        counters: Vec::new(),
        arrays: Vec::new(),
    };
    let mut live = Vec::new();
    let mut arrays: Vec<Box<dyn AnyArray + '_>> = Vec::new();

    for op in ops {
        bump(&seen.steps);
        let nc = live.len();
        let na = arrays.len();
        match *op {
            Op::Alloc => {
                alloc_one(&machine, &mut model, &mut live, seen)?;
            }
            Op::FillZone => {
                let free = capacity - model.in_use();
                let mut got = 0;
                while alloc_one(&machine, &mut model, &mut live, seen)? {
                    got += 1;
                    prop_assert!(got <= free, "more than {free} counters fit");
                }
                prop_assert_eq!(got, free, "FillZone allocated");
            }
            Op::Free { c } if nc > 0 => {
                let (slot, _) = model.counters.remove(pick(c, nc));
                model.used[slot] = false;
                drop(live.remove(pick(c, nc)));
            }
            Op::Add { c, cpu, v } if nc > 0 => {
                let cpu = pick(cpu, ncpus);
                machine.run_on(cpu, || live[pick(c, nc)].add(v));
                model.counters[pick(c, nc)].1.add(cpu, v);
            }
            Op::Migrate {
                c,
                from,
                to,
                v1,
                v2,
            } if nc > 0 => {
                let (from, to) = (pick(from, ncpus), pick(to, ncpus));
                let counter = &live[pick(c, nc)];
                let bound = machine.bind(from).expect("bind");
                counter.add(v1);
                let bound = bound.migrate(to).expect("migrate");
                prop_assert_eq!(bound.cpu(), to);
                counter.add(v2);
                drop(bound);
                model.counters[pick(c, nc)].1.add(from, v1);
                model.counters[pick(c, nc)].1.add(to, v2);
                bump(&seen.migrations);
            }
            Op::Zero { c } if nc > 0 => {
                live[pick(c, nc)].zero();
                model.counters[pick(c, nc)].1.value = 0;
            }
            Op::FetchAndZero { c } if nc > 0 => {
                let want = model.counters[pick(c, nc)].1.value;
                prop_assert_eq!(
                    live[pick(c, nc)].fetch_and_zero(),
                    want,
                    "fetch_and_zero's delta"
                );
                model.counters[pick(c, nc)].1.value = 0;
            }
            Op::Fetch { c } if nc > 0 => {
                prop_assert_eq!(
                    live[pick(c, nc)].fetch(),
                    model.counters[pick(c, nc)].1.value
                );
            }
            Op::AllocArray { len } => {
                let n = len.len();
                let full = !model.has_free_run(n);
                match alloc_array(zone, len) {
                    Ok(a) => {
                        prop_assert!(!full, "array of {n} allocated but the model has no run");
                        let start = slot_of(zone, a.offset());
                        prop_assert!(start + n <= capacity);
                        prop_assert!(
                            model.used[start..start + n].iter().all(|&u| !u),
                            "array run {start}..{} not free",
                            start + n
                        );
                        for i in 0..n {
                            for cpu in 0..ncpus {
                                prop_assert_eq!(a.cpu_slot(cpu, i), Ok(0));
                            }
                        }
                        prop_assert_eq!(a.fetch_all(), vec![0; n]);
                        model.used[start..start + n].fill(true);
                        model.arrays.push((start, vec![Expected::new(ncpus); n]));
                        arrays.push(a);
                    }
                    Err(e) => {
                        prop_assert!(full, "array of {n} failed ({e:?}) but a run is free");
                        prop_assert_eq!(e, Error::ZoneFull { capacity });
                        bump(&seen.array_full);
                    }
                }
            }
            Op::ArrayAdd { a, i, cpu, v } if na > 0 => {
                let (a, cpu) = (pick(a, na), pick(cpu, ncpus));
                let i = pick(i, arrays[a].len());
                machine.run_on(cpu, || arrays[a].add(i, v));
                model.arrays[a].1[i].add(cpu, v);
            }
            Op::ArrayZero { a, i } if na > 0 => {
                let a = pick(a, na);
                let i = pick(i, arrays[a].len());
                arrays[a].zero(i);
                model.arrays[a].1[i].value = 0;
            }
            Op::ArrayZeroAll { a } if na > 0 => {
                arrays[pick(a, na)].zero_all();
                model.arrays[pick(a, na)]
                    .1
                    .iter_mut()
                    .for_each(|e| e.value = 0);
            }
            Op::ArrayFetchAndZeroAll { a } if na > 0 => {
                let want: Vec<u64> = model.arrays[pick(a, na)]
                    .1
                    .iter()
                    .map(|e| e.value)
                    .collect();
                prop_assert_eq!(arrays[pick(a, na)].fetch_and_zero_all(), want);
                model.arrays[pick(a, na)]
                    .1
                    .iter_mut()
                    .for_each(|e| e.value = 0);
            }
            Op::ArrayFree { a } if na > 0 => {
                let (start, elems) = model.arrays.remove(pick(a, na));
                model.used[start..start + elems.len()].fill(false);
                drop(arrays.remove(pick(a, na)));
            }
            // A step on a counter or array when none is live does nothing.
            _ => {}
        }

        // After every step, everything the model knows.
        prop_assert_eq!(zone.in_use(), model.in_use(), "in_use after {:?}", op);
        for (c, (slot, want)) in live.iter().zip(&model.counters) {
            prop_assert_eq!(slot_of(zone, c.offset()), *slot);
            prop_assert_eq!(c.fetch(), want.value, "fetch after {:?}", op);
            for cpu in 0..ncpus {
                prop_assert_eq!(
                    c.cpu_slot(cpu),
                    Ok(want.raw[cpu]),
                    "CPU {} after {:?}",
                    cpu,
                    op
                );
            }
            prop_assert_eq!(
                c.cpu_slot(model.ncpus),
                Err(Error::CpuOutOfRange { cpu: ncpus, ncpus })
            );
        }
        for (a, (start, elems)) in arrays.iter().zip(&model.arrays) {
            prop_assert_eq!(slot_of(zone, a.offset()), *start);
            let want: Vec<u64> = elems.iter().map(|e| e.value).collect();
            prop_assert_eq!(a.fetch_all(), want, "array after {:?}", op);
            for (i, e) in elems.iter().enumerate() {
                prop_assert_eq!(a.fetch(i), e.value);
                for cpu in 0..ncpus {
                    prop_assert_eq!(a.cpu_slot(cpu, i), Ok(e.raw[cpu]));
                }
            }
        }
    }
    drop(live);
    drop(arrays);
    prop_assert_eq!(zone.in_use(), 0, "everything freed at the end");
    Ok(())
}

#[test]
fn model_based_sequences() {
    let config = common::proptest_config();
    let cases = config.cases;
    let strategy = (
        1usize..=4,
        // 1..=16 counters round to 16 slots, 17..=24 to 32: the zone fills often.
        1usize..=24,
        proptest::collection::vec(op(), 0..=40),
    );
    let calls = AtomicUsize::new(0);
    let seen = Seen::default();
    let start = std::time::Instant::now();
    let mut runner = TestRunner::new(config);
    let result = runner.run(&strategy, |(ncpus, counters, ops)| {
        calls.fetch_add(1, Ordering::Relaxed);
        run_case(ncpus, counters, &ops, &seen)
    });
    println!(
        "model_based_sequences: {cases} cases ({} sequences run in all, shrinking included) in {:.2?}: {} steps, \
         {} migrations, {} allocs and {} array allocs that hit ZoneFull",
        calls.load(Ordering::Relaxed),
        start.elapsed(),
        seen.steps.get(),
        seen.migrations.get(),
        seen.zone_full.get(),
        seen.array_full.get(),
    );
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, (ncpus, counters, ops))) => panic!(
            "{reason}\nminimal failing input: (ncpus, counters, ops) = ({ncpus}, {counters}, \
             {ops:?})"
        ),
        Err(e) => panic!("{e}"),
    }
}
