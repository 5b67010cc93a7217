//! Counter operations on a simulated machine, against a plain model: alloc, free, arrays,
//! adds (plain and protected) on the CPU the thread holds, binds and migrations, fetch,
//! per-CPU slots, zero, fetch_and_zero, and adds from several threads at once.
//!
//! Asserts after every step: allocation is first fit (the exact offset the model predicts,
//! runs included) and `ZoneFull` exactly when the model has no free run; every fetch is the
//! model's wrapping sum since the last zero, every `cpu_slot` the model's raw per-CPU value,
//! `fetch_and_zero` returns the model's count and zeroes it; `bind`/`migrate` refuse a CPU
//! out of range (`CpuOutOfRange`) and a second bind (`AlreadyBound`); `in_use` is the
//! model's count of allocated slots. Nothing is lost: the sums are exact.
#![no_main]

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Barrier, Mutex, OnceLock};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use pcpu_counter::array::CounterArray;
use pcpu_counter::sim::{Bound, Machine};
use pcpu_counter::{Counter, Error, Protected};

mod common;
use common::Slot;

/// The elements of the arrays the target allocates.
const ARRAY: usize = 5;
/// A machine's zone starts its slots at this offset (`sim`: no counter's offset is 0).
const HEADER: usize = 8;

#[derive(Arbitrary, Debug)]
enum Op {
    Alloc,
    AllocArray,
    Free(u8),
    FreeArray(u8),
    Bind(u8),
    Migrate(u8),
    Unbind,
    Add(u8, i64),
    AddSmall(u8, i8),
    AddProtected(u8, i64, u8),
    ArrayAdd(u8, u8, i64),
    Fetch(u8),
    CpuSlot(u8, u8),
    Zero(u8),
    FetchAndZero(u8),
    ArrayFetchAndZero(u8, u8),
    /// Every CPU (up to 4) adds `v` to the first live counter `n` times from its own thread.
    Parallel {
        n: u8,
        v: i16,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    ncpus: u8,
    counters: u8,
    ops: Vec<Op>,
}

/// The zone's bitmap, first fit.
struct Model {
    used: Vec<bool>,
}

impl Model {
    fn first_fit(&self, n: usize) -> Option<usize> {
        (0..=self.used.len().checked_sub(n)?).find(|&s| self.used[s..s + n].iter().all(|u| !u))
    }
    fn set(&mut self, first: usize, n: usize, on: bool) {
        for u in &mut self.used[first..first + n] {
            assert_ne!(*u, on);
            *u = on;
        }
    }
    fn in_use(&self) -> usize {
        self.used.iter().filter(|&&u| u).count()
    }
}

fn pick<T>(v: &[T], i: u8) -> Option<usize> {
    (!v.is_empty()).then(|| usize::from(i) % v.len())
}

/// A job for a worker thread, its borrows erased (see [`parallel`]).
type Job = Box<dyn FnOnce() + Send>;

/// Worker threads that live as long as the process: a thread spawned and joined per input
/// still frees its thread-locals after the join returns, which LeakSanitizer reports.
struct Pool {
    jobs: Vec<Mutex<Sender<Job>>>,
    done: Mutex<Receiver<()>>,
}

const WORKERS: usize = 4;

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let (done_tx, done) = channel();
        let jobs = (0..WORKERS)
            .map(|_| {
                let (tx, rx) = channel::<Job>();
                let done_tx = done_tx.clone();
                std::thread::spawn(move || {
                    for job in rx {
                        job();
                        done_tx
                            .send(())
                            .expect("the pool lives as long as the process");
                    }
                });
                Mutex::new(tx)
            })
            .collect();
        Pool {
            jobs,
            done: Mutex::new(done),
        }
    })
}

/// Runs each job on its own worker thread and returns when all have finished.
fn parallel<'a>(jobs: Vec<Box<dyn FnOnce() + Send + 'a>>) {
    let pool = pool();
    let n = jobs.len();
    assert!(n <= WORKERS);
    for (worker, job) in pool.jobs.iter().zip(jobs) {
        // SAFETY: only the lifetime is erased, and this function waits below until every job
        // has run, so no borrow of a job outlives `'a`.
        let job: Job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + 'a>, Job>(job) };
        worker.lock().unwrap().send(job).unwrap();
    }
    let done = pool.done.lock().unwrap();
    for _ in 0..n {
        done.recv().unwrap();
    }
}

fuzz_target!(
    init: {
        // The pool's threads, and the main thread's first thread-local destructor (the
        // simulation's binding), which glibc registers once per thread: made here, not in an
        // input, where LeakSanitizer would count them.
        let machine = Machine::new(1);
        parallel(vec![Box::new(|| machine.run_on(0, || ()))]);
        machine.run_on(0, || ());
    },
    |input: Input| {
    let ncpus = usize::from(input.ncpus % 16) + 1;
    let counters = usize::from(input.counters % 200) + 1;
    let machine = Machine::with_capacity(ncpus, counters).expect("a valid machine");
    let zone = machine.zone();
    let capacity = zone.capacity();
    assert_eq!(capacity, (counters * 8).next_multiple_of(128) / 8);
    assert_eq!(zone.layout().offset, HEADER);

    let mut model = Model { used: vec![false; capacity] };
    let mut live: Vec<(Counter<'_>, Slot)> = Vec::new();
    let mut arrays: Vec<(CounterArray<'_, ARRAY>, Vec<Slot>)> = Vec::new();
    let mut bound: Option<Bound<'_>> = None;

    for op in input.ops.iter().take(256) {
        match *op {
            Op::Alloc => {
                let want = model.first_fit(1);
                match (zone.alloc(), want) {
                    (Ok(c), Some(first)) => {
                        assert_eq!(c.offset(), HEADER + 8 * first, "first fit");
                        assert_eq!(c.fetch(), 0);
                        model.set(first, 1, true);
                        live.push((c, Slot::new(ncpus)));
                    }
                    (Err(e), None) => assert_eq!(e, Error::ZoneFull { capacity }),
                    (got, want) => panic!("alloc: got {got:?}, model {want:?}"),
                }
            }
            Op::AllocArray => {
                let want = model.first_fit(ARRAY);
                match (CounterArray::<ARRAY>::new(zone), want) {
                    (Ok(a), Some(first)) => {
                        assert_eq!(a.offset(), HEADER + 8 * first, "first fit run");
                        let mut all = [1u64; ARRAY];
                        a.fetch_all(&mut all);
                        assert_eq!(all, [0; ARRAY]);
                        model.set(first, ARRAY, true);
                        arrays.push((a, vec![Slot::new(ncpus); ARRAY]));
                    }
                    (Err(e), None) => assert_eq!(e, Error::ZoneFull { capacity }),
                    (got, want) => panic!("array alloc: got {:?}, model {want:?}", got.err()),
                }
            }
            Op::Free(i) => {
                if let Some(i) = pick(&live, i) {
                    let (c, _) = live.swap_remove(i);
                    model.set((c.offset() - HEADER) / 8, 1, false);
                }
            }
            Op::FreeArray(i) => {
                if let Some(i) = pick(&arrays, i) {
                    let (a, _) = arrays.swap_remove(i);
                    model.set((a.offset() - HEADER) / 8, ARRAY, false);
                }
            }
            Op::Bind(cpu) => {
                let cpu = usize::from(cpu % 20);
                let got = machine.bind(cpu);
                match (&bound, cpu < ncpus, got) {
                    (Some(_), true, Err(e)) => assert_eq!(e, Error::AlreadyBound),
                    (_, false, Err(e)) => assert_eq!(e, Error::CpuOutOfRange { cpu, ncpus }),
                    (None, true, Ok(b)) => {
                        assert_eq!(b.cpu(), cpu);
                        bound = Some(b);
                    }
                    (b, ok, got) => panic!("bind {cpu} (bound {b:?}, in range {ok}): {got:?}"),
                }
            }
            Op::Migrate(cpu) => {
                let cpu = usize::from(cpu % 20);
                if let Some(b) = bound.take() {
                    match b.migrate(cpu) {
                        Ok(b) => {
                            assert!(cpu < ncpus);
                            assert_eq!(b.cpu(), cpu);
                            bound = Some(b);
                        }
                        Err(e) => assert_eq!(e, Error::CpuOutOfRange { cpu, ncpus }),
                    }
                    // On error the thread holds no CPU: a bind must work again.
                    if bound.is_none() {
                        drop(machine.bind(0).expect("no CPU held after a failed migrate"));
                    }
                }
            }
            Op::Unbind => bound = None,
            Op::Add(i, v) => add(&bound, &mut live, i, v, None),
            Op::AddSmall(i, v) => add(&bound, &mut live, i, i64::from(v), None),
            Op::AddProtected(i, v, times) => add(&bound, &mut live, i, v, Some(times % 8)),
            Op::ArrayAdd(i, e, v) => {
                if let (Some(b), Some(i)) = (&bound, pick(&arrays, i)) {
                    let (a, slots) = &mut arrays[i];
                    let e = usize::from(e) % ARRAY;
                    a.add(e, v);
                    let s = &mut slots[e].cpu[b.cpu()];
                    *s = s.wrapping_add(v as u64);
                    assert_eq!(a.fetch(e), slots[e].fetch());
                }
            }
            Op::Fetch(i) => {
                if let Some(i) = pick(&live, i) {
                    assert_eq!(live[i].0.fetch(), live[i].1.fetch());
                }
            }
            Op::CpuSlot(i, cpu) => {
                if let Some(i) = pick(&live, i) {
                    let cpu = usize::from(cpu % 20);
                    let (c, m) = &live[i];
                    let want = m.cpu.get(cpu).copied().ok_or(Error::CpuOutOfRange { cpu, ncpus });
                    assert_eq!(c.cpu_slot(cpu), want);
                }
            }
            Op::Zero(i) => {
                if let Some(i) = pick(&live, i) {
                    let (c, m) = &mut live[i];
                    c.zero();
                    m.fetch_and_zero();
                    assert_eq!(c.fetch(), 0);
                }
            }
            Op::FetchAndZero(i) => {
                if let Some(i) = pick(&live, i) {
                    let (c, m) = &mut live[i];
                    assert_eq!(c.fetch_and_zero(), m.fetch_and_zero());
                    assert_eq!(c.fetch(), 0);
                }
            }
            Op::ArrayFetchAndZero(i, e) => {
                if let Some(i) = pick(&arrays, i) {
                    let (a, slots) = &mut arrays[i];
                    let e = usize::from(e) % ARRAY;
                    assert_eq!(a.fetch_and_zero(e), slots[e].fetch_and_zero());
                    for (j, s) in slots.iter().enumerate() {
                        assert_eq!(a.fetch(j), s.fetch(), "element {j}");
                    }
                }
            }
            Op::Parallel { n, v } => {
                let Some((c, m)) = live.first_mut() else { continue };
                // The CPUs must be free for the threads: the main thread leaves its own.
                bound = None;
                let threads = ncpus.min(4);
                let barrier = Barrier::new(threads);
                let c: &Counter<'_> = c;
                let (barrier, machine) = (&barrier, &machine);
                parallel(
                    (0..threads)
                        .map(|cpu| -> Box<dyn FnOnce() + Send + '_> {
                            Box::new(move || {
                                barrier.wait();
                                machine.run_on(cpu, || (0..n).for_each(|_| c.add(i64::from(v))));
                            })
                        })
                        .collect(),
                );
                for cpu in 0..threads {
                    let s = &mut m.cpu[cpu];
                    *s = s.wrapping_add((i64::from(v) * i64::from(n)) as u64);
                }
                assert_eq!(c.fetch(), m.fetch(), "{threads} threads x {n} adds of {v}");
            }
        }
        assert_eq!(zone.in_use(), model.in_use());
    }
    // Every counter, every CPU, at the end.
    for (c, m) in &live {
        assert_eq!(c.fetch(), m.fetch());
        for cpu in 0..ncpus {
            assert_eq!(c.cpu_slot(cpu), Ok(m.cpu[cpu]));
        }
    }
    drop(bound);
    drop(arrays);
    drop(live);
    assert_eq!(zone.in_use(), 0);
    }
);

/// `times` protected adds (in one section), or one plain add, of `v` to live counter `i` on
/// the CPU the thread holds.
fn add(
    bound: &Option<Bound<'_>>,
    live: &mut [(Counter<'_>, Slot)],
    i: u8,
    v: i64,
    times: Option<u8>,
) {
    let (Some(b), Some(i)) = (bound, pick(live, i)) else {
        return;
    };
    let (c, m) = &mut live[i];
    let n = match times {
        None => {
            c.add(v);
            1
        }
        Some(times) => {
            let guard = Protected::enter();
            (0..times).for_each(|_| c.add_protected(&guard, v));
            times
        }
    };
    let s = &mut m.cpu[b.cpu()];
    *s = s.wrapping_add((v as u64).wrapping_mul(u64::from(n)));
    assert_eq!(c.fetch(), m.fetch());
    assert_eq!(c.cpu_slot(b.cpu()), Ok(m.cpu[b.cpu()]));
}
