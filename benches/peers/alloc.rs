//! Alloc + free against the number of live counters (issue 31): one zone of 1,000,016 slots,
//! with 1, 1,000 and 1,000,000 counters held while a counter is allocated and freed again.
//!
//! The same pairs on a 64-CPU and on a 1-CPU machine, side by side in one run: alloc clears
//! the new slot on every CPU (FreeBSD's `counter_u64_alloc` zeroes it too), so the 64-CPU pair
//! is the allocator plus 64 copies' clear, the 1-CPU pair the allocator plus one copy's, and
//! the difference is the clear of the 63 others, reported apart.
//!
//! Then the same pairs at 64 CPUs in a zone that grows (issue 31): first blocks of 511 slots
//! (a stride of 4,224 bytes: not 4 KiB, whose 64 copies would all fall in one L1 set), every
//! other counter in chunks of 528 slots from the heap (`HeapChunks`), so that at 1,000,000
//! live counters the pair finds its slot among about 1,900 chunks.

use std::hint::black_box;

use pcpu_counter::sim::Machine;
use pcpu_counter::{HeapChunks, Zone};

use crate::harness::{ns_per_op, Sink};
use crate::reads::ALLOC_CPUS;

/// The live counter counts.
pub const LIVE: [usize; 3] = [1, 1_000, 1_000_000];

/// The zone's room: every live count and the pair's own counter.
const CAPACITY: usize = 1_000_001;

pub fn run(sink: &mut Sink, quick: bool) {
    let (rounds, pairs) = if quick { (3, 2_000) } else { (9, 50_000) };
    for ncpus in [ALLOC_CPUS, 1] {
        let machine = Machine::with_capacity(ncpus, CAPACITY).expect("machine");
        let row = format!("pcpu-counter alloc + free, {ncpus} CPUs");
        pairs_against_live(sink, &row, machine.zone(), rounds, pairs);
    }
    let machine = Machine::with_capacity(ALLOC_CPUS, 511).expect("machine");
    machine.zone().grow_from(&HeapChunks).expect("a source");
    let row = format!("pcpu-counter alloc + free, {ALLOC_CPUS} CPUs, grown by chunks");
    pairs_against_live(sink, &row, machine.zone(), rounds, pairs);
}

/// Records `row`: the alloc + free pair on `zone` with each of [`LIVE`] counters held, the
/// median of `rounds` rounds of `pairs` pairs.
fn pairs_against_live(sink: &mut Sink, row: &str, zone: &Zone<'_>, rounds: usize, pairs: u64) {
    let mut live = Vec::with_capacity(CAPACITY);
    for n in LIVE {
        while live.len() < n {
            live.push(zone.alloc().expect("alloc"));
        }
        let ns = ns_per_op(rounds, pairs, || {
            for _ in 0..pairs {
                drop(black_box(zone.alloc().expect("alloc")));
            }
        });
        assert_eq!(zone.in_use(), n, "the pairs left a slot in use");
        sink.record("alloc live", row, n, ns, "ns");
    }
}
