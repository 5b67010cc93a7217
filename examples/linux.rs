//! A Linux program's counters: any thread adds with no lock and no binding (rseq), a reader
//! sums. `cargo run --release --example linux --features rseq`.
//!
//! Eight worker threads serve "requests" and count them and their bytes; the main thread
//! reads the totals while they run and exactly once they are done.

use pcpu_counter::rseq;

const WORKERS: u64 = 8;
const REQUESTS: u64 = 250_000;

fn main() -> Result<(), pcpu_counter::Error> {
    // A zone of our own (room for 64 counters); `rseq::Counter::new()` uses the process's.
    let zone = rseq::Zone::new(64)?;
    let (requests, bytes) = (zone.alloc()?, zone.alloc()?);
    std::thread::scope(|s| {
        for worker in 0..WORKERS {
            let (requests, bytes) = (&requests, &bytes);
            s.spawn(move || {
                for i in 0..REQUESTS {
                    requests.inc();
                    bytes.add(((worker + i) % 1500) as i64);
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
    println!(
        "{} requests, {} bytes, counted through {} ({} KiB resident)",
        requests.fetch(),
        bytes.fetch(),
        rseq::path(),
        zone.resident_bytes().unwrap_or(0) / 1024
    );
    // The lossless zero: what was counted since the last zero, and 0 after it.
    assert_eq!(requests.fetch_and_zero(), WORKERS * REQUESTS);
    assert_eq!(requests.fetch(), 0);
    Ok(())
}
