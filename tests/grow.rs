//! Zones that grow (issue 31): chunks from a source, counters in them reached through the same
//! per-CPU register values, chunks given back when they empty, `M_WAITOK` that keeps its
//! promise or says why not.
//!
//! The churn test runs each CPU's thread allocating, adding to and freeing counters across
//! many chunks while a set of long-lived counters is added to, and checks every sum exactly.
//! It must be able to fail: `cargo xtask verify --only broken` runs it against a zone whose
//! reused chunk slots keep the count of the counter that had them
//! (`pcpu_counter_broken="chunk_slot_not_cleared"`), which it must catch.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use pcpu_counter::freebsd::{self, Wait};
use pcpu_counter::{array::CounterArray, sim::Machine, ChunkSource, Error, HeapChunks};

/// A source over the heap that counts what it hands out and takes back, checks each chunk's
/// layout, and can be told to refuse, or to say it gave `short` bytes (a page allocator's one
/// page for a bigger chunk; the heap chunk behind it has the layout asked, so that a zone
/// that used it would not corrupt the test's heap).
struct Counting {
    taken: AtomicUsize,
    given_back: AtomicUsize,
    refuse: AtomicBool,
    short: AtomicUsize,
    waits: AtomicUsize,
    layout: Mutex<Option<Layout>>,
    /// The chunks given back with a layout other than the one asked: address and size.
    short_frees: Mutex<Vec<(usize, usize)>>,
}

impl Counting {
    const fn new() -> Self {
        Counting {
            taken: AtomicUsize::new(0),
            given_back: AtomicUsize::new(0),
            refuse: AtomicBool::new(false),
            short: AtomicUsize::new(0),
            waits: AtomicUsize::new(0),
            layout: Mutex::new(None),
            short_frees: Mutex::new(Vec::new()),
        }
    }

    fn live(&self) -> usize {
        self.taken.load(Ordering::SeqCst) - self.given_back.load(Ordering::SeqCst)
    }
}

// SAFETY: the heap's memory, of the layout asked, taken back with it.
unsafe impl ChunkSource for Counting {
    fn alloc_chunk(&self, layout: Layout, wait: bool) -> Option<NonNull<[u8]>> {
        if wait {
            self.waits.fetch_add(1, Ordering::SeqCst);
        }
        if self.refuse.load(Ordering::SeqCst) {
            return None;
        }
        let mut seen = self.layout.lock().unwrap();
        assert_eq!(
            *seen.get_or_insert(layout),
            layout,
            "every chunk has one layout"
        );
        let chunk = HeapChunks.alloc_chunk(layout, wait)?;
        self.taken.fetch_add(1, Ordering::SeqCst);
        match self.short.load(Ordering::SeqCst) {
            0 => Some(chunk),
            says => Some(NonNull::slice_from_raw_parts(chunk.cast(), says)),
        }
    }

    unsafe fn free_chunk(&self, chunk: NonNull<u8>, layout: Layout) {
        let asked = self.layout.lock().unwrap().expect("a chunk was asked for");
        if layout != asked {
            let addr = chunk.as_ptr() as usize;
            self.short_frees.lock().unwrap().push((addr, layout.size()));
        }
        self.given_back.fetch_add(1, Ordering::SeqCst);
        // SAFETY: from `alloc_chunk` above, which took `asked` from the heap.
        unsafe { HeapChunks.free_chunk(chunk, asked) }
    }
}

/// Makes `zone` grow from the heap and fills its first blocks: the next counter is in a
/// chunk. Returns the counters that fill them.
fn grow_and_fill<'z>(zone: &'z pcpu_counter::Zone<'_>) -> Vec<pcpu_counter::Counter<'z>> {
    zone.grow_from(&HeapChunks).unwrap();
    (0..zone.layout().capacity())
        .map(|_| zone.alloc().unwrap())
        .collect()
}

/// A zone of 2 CPUs and 16 counters grows past its first blocks, counts exactly in the
/// chunks, gives an emptied chunk back (keeping one spare), and every chunk on its drop.
#[test]
fn a_zone_grows_counts_and_gives_chunks_back() {
    static SOURCE: Counting = Counting::new();
    let machine = Machine::with_capacity(2, 16).unwrap();
    let zone = machine.zone();
    let first = zone.capacity();
    assert_eq!(
        zone.alloc().map(drop).and(Ok(())),
        Ok(()),
        "a zone allocates before it grows"
    );
    zone.grow_from(&SOURCE).unwrap();
    let layout = zone.chunk_layout().unwrap();
    let per_chunk = zone.max_run();
    assert_eq!(per_chunk, zone.layout().stride / 8);
    assert!(layout.align().is_power_of_two() && layout.align() >= zone.layout().stride);
    assert!(layout.size() >= zone.ncpus() * zone.layout().stride);

    let n = first + 5 * per_chunk + 3;
    let counters: Vec<_> = (0..n).map(|_| zone.alloc().unwrap()).collect();
    assert_eq!(zone.in_use(), n);
    assert_eq!(
        SOURCE.live(),
        6,
        "five full chunks and one with three counters"
    );
    assert_eq!(zone.capacity(), first + 6 * per_chunk);
    for (i, c) in counters.iter().enumerate() {
        assert!(zone.holds_offset(c.offset()));
        machine.run_on(i % 2, || c.add(i as i64 + 1));
        machine.run_on(1 - i % 2, || c.inc());
    }
    for (i, c) in counters.iter().enumerate() {
        assert_eq!(c.fetch(), i as u64 + 2, "counter {i}");
        assert_eq!(c.cpu_slot(i % 2).unwrap(), i as u64 + 1);
    }
    let last = counters.last().unwrap();
    assert_eq!(last.fetch_and_zero(), n as u64 + 1);
    assert_eq!(last.fetch(), 0);

    // Free the chunks' counters: every chunk empties; one stays as the spare.
    let mut counters = counters;
    let chunked = counters.split_off(first);
    drop(chunked);
    assert_eq!(zone.in_use(), first);
    assert_eq!(SOURCE.live(), 1, "the spare");
    assert_eq!(zone.capacity(), first);
    // The spare serves the next growth without the source.
    let again: Vec<_> = (0..per_chunk).map(|_| zone.alloc().unwrap()).collect();
    assert_eq!(SOURCE.taken.load(Ordering::SeqCst), 6);
    for c in &again {
        assert_eq!(c.fetch(), 0, "a reused chunk's slots read 0");
    }
    drop(again);
    drop(counters);
    drop(machine);
    assert_eq!(SOURCE.live(), 0, "the zone's drop gave back every chunk");
}

/// A source that gives one 4 KiB page for a bigger chunk (and says so) makes the alloc fail
/// with `ShortChunk`: the page goes back to the source with the size it gave, the zone is
/// unchanged, and a source that then gives the chunk asked makes the zone grow. Run against
/// `--cfg pcpu_counter_broken="short_chunk_accepted"` (the size check removed), the first
/// alloc succeeds and the test fails.
#[test]
fn a_short_chunk_is_refused_and_given_back() {
    static SOURCE: Counting = Counting::new();
    let machine = Machine::with_capacity(8, 512).unwrap();
    let zone = machine.zone();
    let first = zone.capacity();
    let fill: Vec<_> = (0..first).map(|_| zone.alloc().unwrap()).collect();
    zone.grow_from(&SOURCE).unwrap();
    let asked = zone.chunk_layout().unwrap().size();
    assert!(asked > 4096, "a chunk bigger than a page: {asked}");
    SOURCE.short.store(4096, Ordering::SeqCst);

    let refused = zone.alloc().map(|c| c.offset());
    assert_eq!(refused, Err(Error::ShortChunk { asked, given: 4096 }));
    assert_eq!(SOURCE.taken.load(Ordering::SeqCst), 1);
    assert_eq!(SOURCE.live(), 0, "the page went back");
    let short_frees = SOURCE.short_frees.lock().unwrap().clone();
    assert_eq!(short_frees.len(), 1);
    assert_eq!(short_frees[0].1, 4096, "given back with the size it gave");
    assert_eq!(zone.capacity(), first, "the zone is unchanged");
    assert_eq!((zone.in_use(), zone.spare_chunks()), (first, 0));
    let message = refused.unwrap_err().to_string();
    assert!(
        message.contains("gave 4096 bytes for a chunk of"),
        "{message}"
    );

    SOURCE.short.store(0, Ordering::SeqCst);
    let grown = zone.alloc().unwrap();
    machine.run_on(7, || grown.add(5));
    assert_eq!(grown.fetch(), 5);
    assert_eq!(zone.capacity(), first + zone.max_run());
    assert_eq!(SOURCE.live(), 1);
    drop((grown, fill));
}

/// Against a zone that uses a chunk shorter than it asked
/// (`pcpu_counter_broken="short_chunk_accepted"`, the size check removed): the test above
/// must fail.
#[cfg(pcpu_counter_broken = "short_chunk_accepted")]
#[test]
fn short_chunk_test_catches_a_short_chunk_accepted() {
    let caught = std::panic::catch_unwind(a_short_chunk_is_refused_and_given_back);
    assert!(
        caught.is_err(),
        "the test missed a short chunk the zone used"
    );
}

/// A fresh zone grown and shrunk gives every chunk back: the emptied chunk it keeps is
/// reported (`spare_chunks`, outside `capacity`) and `release_spare` returns it, so the
/// source's live count is back to its start with the zone still alive.
#[test]
fn a_grown_zone_can_give_every_chunk_back() {
    static SOURCE: Counting = Counting::new();
    let machine = Machine::with_capacity(2, 16).unwrap();
    let zone = machine.zone();
    zone.grow_from(&SOURCE).unwrap();
    assert_eq!((zone.spare_chunks(), zone.release_spare()), (0, 0));
    let per_chunk = zone.max_run();
    let all: Vec<_> = (0..16 + 3 * per_chunk)
        .map(|_| zone.alloc().unwrap())
        .collect();
    assert_eq!(SOURCE.live(), 3);
    assert_eq!(zone.capacity(), 16 + 3 * per_chunk);
    drop(all);
    assert_eq!(zone.in_use(), 0);
    assert_eq!(zone.capacity(), 16, "the spare is outside the capacity");
    assert_eq!(zone.spare_chunks(), 1);
    assert_eq!(SOURCE.live(), 1, "the spare, still the source's memory");
    assert_eq!(zone.release_spare(), 1);
    assert_eq!(SOURCE.live(), 0, "every chunk back, the zone alive");
    assert_eq!((zone.spare_chunks(), zone.release_spare()), (0, 0));
    // The zone grows again from the source, and gives the chunk back on its drop.
    let again: Vec<_> = (0..17).map(|_| zone.alloc().unwrap()).collect();
    assert_eq!(SOURCE.live(), 1);
    drop(again);
    drop(machine);
    assert_eq!(SOURCE.live(), 0);
}

/// The chunk size known before a zone exists is the one a zone asks for, and the table of
/// docs/kernel.md ("Kernels whose allocator hands out single pages"): per CPU count, the
/// largest stride whose chunk fits a 4 KiB page, and the largest power of two.
#[test]
fn chunk_layout_for_is_the_zones_and_the_page_table_holds() {
    use pcpu_counter::ZoneLayout;
    for (ncpus, counters) in [(1, 16), (2, 100), (8, 512), (3, 4096)] {
        let machine = Machine::with_capacity(ncpus, counters).unwrap();
        let zone = machine.zone();
        assert_eq!(
            ZoneLayout::chunk_layout_for(ncpus, zone.layout().stride),
            zone.chunk_layout(),
            "{ncpus} CPUs, {counters} counters"
        );
    }
    assert_eq!(ZoneLayout::chunk_layout_for(0, 64), Err(Error::NoCpus));
    assert_eq!(
        ZoneLayout::chunk_layout_for(2, 12),
        Err(Error::StrideNotMultipleOf8 { stride: 12 })
    );
    assert_eq!(
        ZoneLayout::chunk_layout_for(2, 0),
        Err(Error::StrideTooSmall {
            stride: 0,
            needed: 8
        })
    );
    assert_eq!(
        ZoneLayout::chunk_layout_for(usize::MAX / 8, 64),
        Err(Error::AddressOverflow)
    );
    if cfg!(not(target_pointer_width = "64")) {
        return; // the sizes below are 64-bit ones (an 88-byte chunk header)
    }
    assert_eq!(
        ZoneLayout::chunk_layout_for(8, 704).map(|l| (l.size(), l.align())),
        Ok((6448, 1024)),
        "issue 38's chunk"
    );
    let size = |ncpus, stride| ZoneLayout::chunk_layout_for(ncpus, stride).unwrap().size();
    let rows = [
        (1, 1984, 1024),
        (2, 1320, 1024),
        (4, 792, 512),
        (8, 440, 256),
        (16, 232, 128),
        (32, 120, 64),
        (64, 56, 0),
    ];
    for (ncpus, largest, power_of_two) in rows {
        assert!(size(ncpus, largest) <= 4096, "{ncpus} CPUs");
        assert!(size(ncpus, largest + 8) > 4096, "{ncpus} CPUs");
        if power_of_two > 0 {
            assert!(size(ncpus, power_of_two) <= 4096, "{ncpus} CPUs");
        }
        assert!(size(ncpus, power_of_two.max(32) * 2) > 4096, "{ncpus} CPUs");
    }
    assert_eq!(size(64, 64), 4256);
}

/// A fresh counter in a reused slot of a chunk reads 0 on every CPU.
#[test]
fn a_reused_chunk_slot_reads_zero() {
    let machine = Machine::with_capacity(3, 16).unwrap();
    let zone = machine.zone();
    let fill = grow_and_fill(zone);
    let c = zone.alloc().unwrap();
    let off = c.offset();
    for cpu in 0..3 {
        machine.run_on(cpu, || c.add(1 << cpu));
    }
    drop(c);
    let d = zone.alloc().unwrap();
    assert_eq!(d.offset(), off, "the freed slot is reused");
    assert_eq!(d.fetch(), 0);
    for cpu in 0..3 {
        assert_eq!(d.cpu_slot(cpu), Ok(0));
    }
    drop(fill);
}

/// Without a source a full zone fails with `ZoneFull`, which says how to grow; a refusing
/// source is `OutOfMemory`, with `wait` passed as asked; `M_WAITOK` then returns `None`
/// instead of spinning.
#[test]
#[cfg_attr(
    miri,
    ignore = "the global zone lives for ever, and Miri's leak check cannot follow its spare chunk (an address a free computed)"
)]
fn a_full_zone_says_why_and_waitok_does_not_spin() {
    static SOURCE: Counting = Counting::new();
    let machine = Machine::with_global_zone(2, 16).unwrap();
    let zone = freebsd::global_zone().unwrap();
    let fill: Vec<_> = (0..zone.capacity())
        .map(|_| zone.alloc().unwrap())
        .collect();
    let full = zone.alloc().unwrap_err();
    assert_eq!(full, Error::ZoneFull { capacity: 16 });
    assert!(full.to_string().contains("Zone::grow_from"), "{full}");
    assert!(freebsd::counter_u64_alloc(Wait::NoWait).is_none());

    zone.grow_from(&SOURCE).unwrap();
    assert_eq!(zone.grow_from(&HeapChunks), Err(Error::SourceAlreadySet));
    SOURCE.refuse.store(true, Ordering::SeqCst);
    let size = zone.chunk_layout().unwrap().size();
    assert_eq!(
        zone.alloc().unwrap_err(),
        Error::OutOfMemory { bytes: size }
    );
    assert_eq!(
        SOURCE.waits.load(Ordering::SeqCst),
        0,
        "alloc asks without wait"
    );
    assert!(
        freebsd::counter_u64_alloc(Wait::WaitOk).is_none(),
        "WaitOk returns"
    );
    assert_eq!(
        SOURCE.waits.load(Ordering::SeqCst),
        1,
        "WaitOk asked with wait"
    );
    SOURCE.refuse.store(false, Ordering::SeqCst);
    let grown = freebsd::counter_u64_alloc(Wait::WaitOk).expect("the source gives memory");
    machine.run_on(1, || grown.add(7));
    assert_eq!(grown.fetch(), 7);
    drop((grown, fill));
}

/// Arrays take a run inside one chunk; a run longer than a chunk is `RunTooLong`.
#[test]
fn arrays_stay_in_one_chunk() {
    let machine = Machine::with_capacity(2, 16).unwrap();
    let zone = machine.zone();
    let fill = grow_and_fill(zone);
    let per_chunk = zone.max_run();
    let a = CounterArray::<'_, 5>::new(zone).unwrap();
    let b = CounterArray::<'_, 5>::new(zone).unwrap();
    machine.run_on(1, || {
        a.add(4, 3);
        b.add(0, 2)
    });
    let mut out = [0; 5];
    a.fetch_all(&mut out);
    assert_eq!(out, [0, 0, 0, 0, 3]);
    zone.fetch_range(b.offset(), &mut out).unwrap();
    assert_eq!(out, [2, 0, 0, 0, 0]);
    assert_eq!(
        CounterArray::<'_, 200>::new(zone).err(),
        Some(Error::RunTooLong {
            len: 200,
            max: per_chunk
        })
    );
    drop((a, b, fill));
}

/// The churn: each CPU's thread allocates counters into new chunks, adds to them and to the
/// long-lived ones, frees and reallocates, and checks exact sums; returns the mismatches.
fn churn<S: ChunkSource>(source: &'static S) -> usize {
    const NCPUS: usize = 4;
    let rounds = if cfg!(miri) { 2 } else { 20 };
    let machine = Machine::with_capacity(NCPUS, 16).unwrap();
    let zone = machine.zone();
    zone.grow_from(source).unwrap();
    // Long-lived counters in the chunks, each added to by every CPU.
    let keep: Vec<_> = (0..3 * zone.max_run())
        .map(|_| zone.alloc())
        .collect::<Result<_, _>>()
        .unwrap();
    let bad = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for cpu in 0..NCPUS {
            let (machine, keep, bad) = (&machine, &keep, &bad);
            s.spawn(move || {
                let _bound = machine.bind(cpu).unwrap();
                for round in 0..rounds {
                    let mine: Vec<_> = (0..40).map(|_| zone.alloc().unwrap()).collect();
                    for (i, c) in mine.iter().enumerate() {
                        c.add((i + round) as i64);
                    }
                    for c in keep.iter() {
                        c.inc();
                    }
                    for (i, c) in mine.iter().enumerate() {
                        if c.fetch() != (i + round) as u64 {
                            bad.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    let want = (NCPUS * rounds) as u64;
    bad.load(Ordering::Relaxed) + keep.iter().filter(|c| c.fetch() != want).count()
}

#[cfg(not(pcpu_counter_broken = "chunk_slot_not_cleared"))]
#[test]
fn churn_across_chunks_counts_exactly() {
    assert_eq!(churn(&HeapChunks), 0);
}

/// Against a zone whose reused chunk slots keep their old count
/// (`pcpu_counter_broken="chunk_slot_not_cleared"`, `cargo xtask verify --only broken`).
#[cfg(pcpu_counter_broken = "chunk_slot_not_cleared")]
#[test]
fn churn_catches_a_chunk_slot_not_cleared() {
    assert!(
        churn(&HeapChunks) > 0,
        "the churn missed reused slots that were not cleared"
    );
}

mod model {
    //! The growing zone's allocator against a model: random allocs, array runs and frees on a
    //! zone of 16 first slots that grows by chunks, checked after every step: no two live
    //! counters share a slot, each reads exactly what was added to it (a new one 0), `in_use`
    //! is the model's count, the capacity is the first slots plus whole chunks, the source
    //! holds those chunks (and at most one spare), and emptied zones give everything back.

    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    #[derive(Debug, Clone)]
    enum Op {
        Alloc,
        Run3,
        Run16,
        Free(usize),
        FreeAll,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => Just(Op::Alloc),
            1 => Just(Op::Run3),
            1 => Just(Op::Run16),
            6 => any::<usize>().prop_map(Op::Free),
            1 => Just(Op::FreeAll),
        ]
    }

    enum Live<'z> {
        One(pcpu_counter::Counter<'z>),
        Three(CounterArray<'z, 3>),
        Sixteen(CounterArray<'z, 16>),
    }

    impl Live<'_> {
        fn slots(&self) -> Vec<usize> {
            let (off, n) = match self {
                Live::One(c) => (c.offset(), 1),
                Live::Three(a) => (a.offset(), 3),
                Live::Sixteen(a) => (a.offset(), 16),
            };
            (0..n).map(|i| off.wrapping_add(8 * i)).collect()
        }

        fn add(&self, v: i64) {
            match self {
                Live::One(c) => c.add(v),
                Live::Three(a) => a.add(2, v),
                Live::Sixteen(a) => a.add(15, v),
            }
        }

        fn fetch(&self) -> u64 {
            match self {
                Live::One(c) => c.fetch(),
                Live::Three(a) => a.fetch(2),
                Live::Sixteen(a) => a.fetch(15),
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 256,
            ..ProptestConfig::default()
        })]
        #[test]
        #[cfg_attr(miri, ignore = "proptest's failure persistence needs the file system, which Miri isolates")]
        fn growth_agrees_with_a_model(ops in prop::collection::vec(op(), 1..120)) {
            let source: &'static Counting = Box::leak(Box::new(Counting::new()));
            let machine = Machine::with_capacity(2, 16).unwrap();
            let zone = machine.zone();
            zone.grow_from(source).unwrap();
            let (first, per_chunk) = (zone.layout().capacity(), zone.max_run());
            let mut live: Vec<(Live<'_>, u64)> = Vec::new();
            let mut next = 1u64;
            for op in ops {
                let made = match op {
                    Op::Alloc => Some(Live::One(zone.alloc().unwrap())),
                    Op::Run3 => Some(Live::Three(CounterArray::new(zone).unwrap())),
                    Op::Run16 => Some(Live::Sixteen(CounterArray::new(zone).unwrap())),
                    Op::Free(i) if !live.is_empty() => {
                        live.swap_remove(i % live.len());
                        None
                    }
                    Op::Free(_) => None,
                    Op::FreeAll => {
                        live.clear();
                        None
                    }
                };
                if let Some(l) = made {
                    prop_assert_eq!(l.fetch(), 0, "a new counter reads 0");
                    machine.run_on((next % 2) as usize, || l.add(next as i64));
                    live.push((l, next));
                    next += 1;
                }
                let mut seen = HashSet::new();
                for (l, v) in &live {
                    prop_assert_eq!(l.fetch(), *v);
                    for s in l.slots() {
                        prop_assert!(seen.insert(s), "slot {:#x} handed out twice", s);
                    }
                }
                prop_assert_eq!(zone.in_use(), seen.len());
                let chunks = (zone.capacity() - first) / per_chunk;
                prop_assert_eq!(zone.capacity(), first + chunks * per_chunk);
                let held = source.live();
                prop_assert!(held == chunks || held == chunks + 1, "{} chunks, source {}", chunks, held);
                if live.is_empty() {
                    prop_assert_eq!(chunks, 0, "an empty zone keeps no chunk but the spare");
                }
            }
            drop(live);
            drop(machine);
            prop_assert_eq!(source.live(), 0);
        }
    }
}

/// What is built on counters works on counters in chunks: the approximate counter (whose
/// second slot is taken from the same zone), the lazy counter's move, the registry's snapshot
/// and its Prometheus text.
#[test]
fn counters_in_chunks_serve_everything_built_on_them() {
    use pcpu_counter::{registry::Registry, ApproxCounter, LazyCounter};
    let machine = Machine::with_capacity(2, 16).unwrap();
    let zone = machine.zone();
    let fill = grow_and_fill(zone);
    let first_end = zone.layout().offset + zone.layout().len;
    let in_chunk = |off: usize| off >= first_end || off < zone.layout().offset;

    let rx = zone.alloc().unwrap();
    let errs = CounterArray::<'_, 2>::new(zone).unwrap();
    let approx = ApproxCounter::new(zone.alloc().unwrap(), 16).unwrap();
    let lazy = LazyCounter::new(zone);
    assert!(in_chunk(rx.offset()) && in_chunk(errs.offset()) && in_chunk(approx.offset()));

    machine.run_on(1, || {
        rx.add(7);
        errs.add(1, 2);
        approx.add(40);
        lazy.add(3);
    });
    lazy.try_move().unwrap();
    machine.run_on(0, || lazy.add(4));
    assert_eq!(lazy.fetch(), 7);
    assert_eq!((approx.precise(), approx.fetch()), (40, 40));

    let stats: Registry<'_, 4> = Registry::new();
    let (rx, errs) = (&rx, &errs);
    stats.register("net.rx", "packets", rx).unwrap();
    stats.register("errs", "errors", errs).unwrap();
    let values: Vec<u64> = stats.snapshot().map(|s| s.value).collect();
    assert_eq!(values, [7, 0, 2]);
    let mut buf = [0; 3];
    let mut text = String::new();
    stats
        .read_into(&mut buf)
        .unwrap()
        .write_prometheus(&mut text)
        .unwrap();
    assert!(text.contains("net_rx_total 7\n"), "{text}");
    assert!(text.contains("errs_total{index=\"1\"} 2\n"), "{text}");
    drop((approx, lazy, fill));
}

/// A registered statistic whose `slots` names more slots than its counter has: its group read
/// reads the run while it stays in the counter's chunk (found by the counter's own slot, with
/// no walk over the chunks), and panics once it leaves it.
#[test]
#[should_panic(expected = "group read of a run outside its zone")]
fn a_statistic_naming_slots_past_its_chunk_panics() {
    use pcpu_counter::registry::{Registry, Slots, Statistic};
    use pcpu_counter::Counter;
    struct Claims<'c>(&'c Counter<'c>, usize);
    impl Statistic for Claims<'_> {
        fn len(&self) -> usize {
            self.1
        }
        fn value(&self, _: usize) -> u64 {
            0
        }
        fn zero_value(&self, _: usize) {}
        fn slots(&self) -> Option<Slots<'_>> {
            Some(Slots::counter(self.0))
        }
    }
    let machine = Machine::with_capacity(2, 16).unwrap();
    let zone = machine.zone();
    let fill = grow_and_fill(zone);
    // The first slot of a new chunk: the chunk's slots are the counter's and the next ones.
    let counter = zone.alloc().unwrap();
    machine.run_on(1, || counter.add(5));
    let per_chunk = zone.max_run();
    let whole = Claims(&counter, per_chunk);
    let stats: Registry<'_, 2> = Registry::new();
    stats.register("whole", "the chunk", &whole).unwrap();
    let values: Vec<u64> = stats.snapshot().map(|s| s.value).collect();
    assert_eq!(values.len(), per_chunk);
    assert_eq!((values[0], values[1..].iter().sum::<u64>()), (5, 0));
    let past = Claims(&counter, per_chunk + 1);
    stats
        .register("past", "one slot past the chunk", &past)
        .unwrap();
    let _ = stats.snapshot().count();
    drop(fill);
}

/// An early counter moves into a full zone that grows: its slot is in a chunk, with its count.
#[test]
#[cfg_attr(
    miri,
    ignore = "the zone is leaked for the early counter's 'static borrow, and Miri's leak check cannot follow its chunks (addresses a free computed)"
)]
fn an_early_counter_moves_into_a_chunk() {
    use pcpu_counter::early::EarlyCounter;
    static EARLY: EarlyCounter = EarlyCounter::new();
    let machine: &'static Machine = Box::leak(Box::new(Machine::with_capacity(2, 16).unwrap()));
    let zone = machine.zone();
    let _fill = grow_and_fill(zone);
    EARLY.add(5);
    machine.run_on(0, || EARLY.init(zone)).unwrap();
    machine.run_on(1, || EARLY.add(1));
    assert_eq!(EARLY.fetch(), 6);
    assert_eq!(zone.in_use(), zone.layout().capacity() + 1);
}
