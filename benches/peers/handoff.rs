//! Diagnostic: how long a cache line takes to move from one writer's core to the other's.
//!
//! Two threads pass a token through one `AtomicU64`: each waits until the value has the
//! parity it owns, then stores the next value. One step is one transfer of the line (and the
//! wait to see it). This is the cost a shared atomic pays per add when two cores contend,
//! and so what bounds its slowdown on this machine.

use std::hint::spin_loop;
use std::sync::atomic::{AtomicU64, Ordering::Acquire, Ordering::Release};
use std::thread;
use std::time::Instant;

use crate::harness::{median, Sink};

/// Passes the token `steps` times between two threads; nanoseconds per step.
fn round(steps: u64) -> f64 {
    let token = AtomicU64::new(0);
    let player = |mine: u64| {
        let token = &token;
        move || {
            let mut next = mine;
            while next < steps {
                while token.load(Acquire) != next {
                    spin_loop();
                }
                token.store(next + 1, Release);
                next += 2;
            }
        }
    };
    let start = Instant::now();
    thread::scope(|s| {
        s.spawn(player(1));
        player(0)();
    });
    let ns = start.elapsed().as_nanos() as f64 / steps as f64;
    assert_eq!(token.load(Acquire), steps, "the token was lost");
    ns
}

/// Records the fastest round (the hardware's cost, from a round in which both threads ran
/// at once: under other load they are often time-sliced on one core) and the median.
pub fn run(sink: &mut Sink, quick: bool) {
    let (rounds, steps) = if quick { (3, 20_000) } else { (31, 20_000) };
    let mut samples: Vec<f64> = (0..rounds).map(|_| round(steps)).collect();
    let fastest = samples.iter().copied().fold(f64::MAX, f64::min);
    let name = "line handoff between 2 threads";
    sink.record("diag", name, 2, fastest, "ns fastest");
    sink.record("diag", name, 2, median(&mut samples), "ns median");
}
