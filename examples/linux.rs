//! A Linux program's counters: any thread adds with no lock and no binding (rseq), a reader
//! sums. `cargo run --release --example linux --features rseq`.
//!
//! Eight worker threads serve "requests" and count them and their bytes; the main thread
//! reads the totals while they run and exactly once they are done. A `static` counts the
//! errors, and a gauge (adds of both signs) the requests in flight.

use pcpu_counter::rseq;

/// A static counter: one line, allocated from the process-wide zone on first use.
static ERRORS: rseq::RseqStaticCounter = rseq::RseqStaticCounter::new();

const WORKERS: u64 = 8;
const REQUESTS: u64 = 250_000;

fn main() -> Result<(), pcpu_counter::Error> {
    // Before any counter: this program asks for no particular path, so `Auto` (what
    // `PCPU_COUNTER_RSEQ` would choose); `rseq::Choice::CpuId` and the others pin one.
    rseq::set_path(rseq::Choice::Auto)?;
    // A zone of our own (room for 64 counters); `rseq::RseqCounter::new()` uses the process's.
    let zone = rseq::RseqZone::new(64)?;
    let (requests, bytes, in_flight) = (zone.alloc()?, zone.alloc()?, zone.alloc()?);
    std::thread::scope(|s| {
        for worker in 0..WORKERS {
            let (requests, bytes, in_flight) = (&requests, &bytes, &in_flight);
            s.spawn(move || {
                for i in 0..REQUESTS {
                    in_flight.inc();
                    requests.inc();
                    bytes.add(((worker + i) % 1500) as i64);
                    if i % 1000 == 999 {
                        ERRORS.inc();
                    }
                    in_flight.add(-1);
                }
            });
        }
        // A reader while they run: never more than was added, never going back.
        let mut last = 0;
        for _ in 0..100 {
            let now = requests.fetch();
            assert!(now >= last && now <= WORKERS * REQUESTS);
            last = now;
        }
    });
    let expected_bytes: u64 = (0..WORKERS)
        .map(|w| (0..REQUESTS).map(|i| (w + i) % 1500).sum::<u64>())
        .sum();
    assert_eq!(requests.fetch(), WORKERS * REQUESTS);
    assert_eq!(bytes.fetch(), expected_bytes);
    assert_eq!(ERRORS.fetch(), WORKERS * REQUESTS / 1000);
    // A gauge back at zero; one more departure than arrivals reads -1, signed.
    in_flight.add(-1);
    assert_eq!(in_flight.fetch_i64(), -1);
    println!(
        "{} requests, {} bytes, {} errors, counted through {} ({} KiB resident)",
        requests.fetch(),
        bytes.fetch(),
        ERRORS.fetch(),
        rseq::path(),
        zone.resident_bytes().unwrap_or(0) / 1024
    );
    // The lossless zero: what was counted since the last zero, and 0 after it.
    assert_eq!(requests.fetch_and_zero(), WORKERS * REQUESTS);
    assert_eq!(requests.fetch(), 0);
    Ok(())
}
