//! The slot allocator against a model (issue 31): random sequences of single-slot allocs,
//! runs (counter arrays), frees and fills on zones of one to three bitmap levels, checked
//! after every step against a plain occupancy vector that allocates first fit.
//!
//! Each case makes a zone of 16, 64, 80, 208 or 4112 slots on one simulated CPU (4112 slots:
//! 65 leaf words, so a summary level of 2 words and a top word above it) and runs up to 48
//! of: alloc a counter, alloc an array of 2, 3, 64 or 65, free one live handle, free a range
//! of live handles, and fill the zone with counters until `ZoneFull`. After every step:
//! every allocation got exactly the slot or run the model chose (the lowest free slot, the
//! first free run: so never a slot handed twice, every freed slot reused, runs adjacent),
//! failed with `ZoneFull` exactly when the model has no free run of that length (a fill ends
//! exactly at capacity), and `in_use` equals the model's count.
//!
//! `cargo xtask verify --only broken` runs the same property against an allocator whose free
//! leaves a full word's summary bit set (`pcpu_counter_broken="slot_summary_stale"`): it
//! must fail (`the_model_catches_a_stale_summary`).

use pcpu_counter::{array::CounterArray, Counter, Error, Zone};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// Zone sizes: one leaf word, a full word, two and four words with a summary word, and three
/// levels.
const CAPACITIES: [usize; 5] = [16, 64, 80, 208, 4112];

#[derive(Debug, Clone)]
enum Op {
    Alloc,
    AllocRun(usize),
    Free(usize),
    FreeRange { from: usize, count: usize },
    Fill,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => Just(Op::Alloc),
        2 => prop::sample::select(vec![2usize, 3, 64, 65]).prop_map(Op::AllocRun),
        5 => any::<usize>().prop_map(Op::Free),
        1 => (any::<usize>(), 1usize..200).prop_map(|(from, count)| Op::FreeRange { from, count }),
        1 => Just(Op::Fill),
    ]
}

/// A live handle: a counter or an array (its slots are freed when it is dropped).
enum Live<'z> {
    One(Counter<'z>),
    Two(CounterArray<'z, 2>),
    Three(CounterArray<'z, 3>),
    Word(CounterArray<'z, 64>),
    Wide(CounterArray<'z, 65>),
}

impl Live<'_> {
    /// The first slot's offset and the slot count.
    fn run(&self) -> (usize, usize) {
        match self {
            Live::One(c) => (c.offset(), 1),
            Live::Two(a) => (a.offset(), 2),
            Live::Three(a) => (a.offset(), 3),
            Live::Word(a) => (a.offset(), 64),
            Live::Wide(a) => (a.offset(), 65),
        }
    }
}

/// Allocates a run of `len` (one of the lengths `op` draws).
fn alloc<'z>(zone: &'z Zone<'z>, len: usize) -> Result<Live<'z>, Error> {
    Ok(match len {
        1 => Live::One(zone.alloc()?),
        2 => Live::Two(CounterArray::new(zone)?),
        3 => Live::Three(CounterArray::new(zone)?),
        64 => Live::Word(CounterArray::new(zone)?),
        65 => Live::Wide(CounterArray::new(zone)?),
        _ => unreachable!("no such run length"),
    })
}

/// The model: which slots are in use, first fit.
struct Model(Vec<bool>);

impl Model {
    fn first_fit(&self, len: usize) -> Option<usize> {
        (0..=self.0.len().checked_sub(len)?).find(|&s| self.0[s..s + len].iter().all(|u| !u))
    }

    fn set(&mut self, start: usize, len: usize, used: bool) {
        for slot in &mut self.0[start..start + len] {
            assert_ne!(*slot, used, "the model's own bookkeeping");
            *slot = used;
        }
    }

    fn used(&self) -> usize {
        self.0.iter().filter(|&&u| u).count()
    }
}

/// One allocation of `len`: the model's slot or `ZoneFull`, exactly. True if it got one.
fn step<'z>(
    zone: &'z Zone<'z>,
    len: usize,
    model: &mut Model,
    live: &mut Vec<Live<'z>>,
) -> Result<bool, TestCaseError> {
    let capacity = zone.capacity();
    let slot = |off: usize| (off - zone.layout().offset) / 8;
    let expected = model.first_fit(len);
    match (alloc(zone, len), expected) {
        (Ok(handle), Some(start)) => {
            let (off, n) = handle.run();
            prop_assert_eq!((slot(off), n), (start, len), "alloc of {}", len);
            model.set(start, len, true);
            live.push(handle);
            Ok(true)
        }
        (Err(e), None) => {
            prop_assert_eq!(e, Error::ZoneFull { capacity });
            Ok(false)
        }
        (got, want) => Err(TestCaseError::fail(format!(
            "alloc of {len}: got {:?}, the model has {want:?}",
            got.map(|h| slot(h.run().0))
        ))),
    }
}

/// Runs `ops` on a zone of `capacity` slots, checking each step against the model.
fn agrees_with_model(capacity: usize, ops: &[Op]) -> Result<(), TestCaseError> {
    let zone = Zone::with_capacity(1, capacity).expect("zone");
    prop_assert_eq!(zone.capacity(), capacity);
    let base = zone.layout().offset;
    let slot = |off: usize| (off - base) / 8;
    let mut model = Model(vec![false; capacity]);
    let mut live: Vec<Live<'_>> = Vec::new();
    for op in ops {
        match *op {
            Op::Alloc => {
                step(&zone, 1, &mut model, &mut live)?;
            }
            Op::AllocRun(len) => {
                step(&zone, len, &mut model, &mut live)?;
            }
            Op::Free(i) if !live.is_empty() => {
                let handle = live.swap_remove(i % live.len());
                let (off, n) = handle.run();
                drop(handle);
                model.set(slot(off), n, false);
            }
            Op::FreeRange { from, count } if !live.is_empty() => {
                let from = from % live.len();
                let to = (from + count).min(live.len());
                for handle in live.drain(from..to) {
                    let (off, n) = handle.run();
                    drop(handle);
                    model.set(slot(off), n, false);
                }
            }
            Op::Fill => {
                // Every free slot, lowest first, then `ZoneFull` (the model's first fit of one
                // slot, without searching it again for each).
                let free: Vec<usize> = (0..capacity).filter(|&s| !model.0[s]).collect();
                for want in free {
                    let counter = zone.alloc().map_err(|e| {
                        TestCaseError::fail(format!("fill: {e:?}, the model has slot {want}"))
                    })?;
                    prop_assert_eq!(slot(counter.offset()), want, "fill");
                    model.0[want] = true;
                    live.push(Live::One(counter));
                }
                prop_assert_eq!(zone.alloc().err(), Some(Error::ZoneFull { capacity }));
            }
            Op::Free(_) | Op::FreeRange { .. } => {}
        }
        prop_assert_eq!(zone.in_use(), model.used(), "in_use after {:?}", op);
    }
    drop(live);
    prop_assert_eq!(zone.in_use(), 0);
    Ok(())
}

fn cases() -> impl Strategy<Value = (usize, Vec<Op>)> {
    (
        prop::sample::select(CAPACITIES.to_vec()),
        prop::collection::vec(op(), 0..48),
    )
}

// 256 cases by default; `PROPTEST_CASES` sets another count (`cargo xtask verify --only fuzz`).
// No regression file: the failures the broken and mutant runs find are theirs, not the
// product's.
proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_allocator_agrees_with_a_first_fit_model((capacity, ops) in cases()) {
        agrees_with_model(capacity, &ops)?;
    }
}

/// An 80-slot zone (two leaf words and a summary word): fill it, free one slot of the full
/// first word, and the next single allocation must get it back.
#[test]
fn a_freed_slot_of_a_full_word_is_handed_out_again() {
    agrees_with_model(80, &[Op::Fill, Op::Free(usize::MAX), Op::Alloc, Op::Fill]).unwrap();
}

/// Runs only in the broken build (`cargo xtask verify --only broken`): the same property
/// finds an allocator whose free leaves a full word's summary bit set.
#[cfg(pcpu_counter_broken = "slot_summary_stale")]
#[test]
fn the_model_catches_a_stale_summary() {
    let config = ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let result = proptest::test_runner::TestRunner::new(config).run(&cases(), |(capacity, ops)| {
        agrees_with_model(capacity, &ops)
    });
    let failure = result.expect_err("the property passed against a stale summary");
    println!("caught: {failure}");
}
