//! What every section shares: the results sink, the median of rounds, and `eight!`.

/// Evaluates `$e` eight times: the unrolled body of every measured loop, so that each
/// variant's loop overhead is the same whatever the compiler unrolls by itself.
macro_rules! eight {
    ($e:expr) => {{
        $e;
        $e;
        $e;
        $e;
        $e;
        $e;
        $e;
        $e;
    }};
}
pub(crate) use eight;

use std::fmt::Display;
use std::fs::File;
use std::io::Write;
use std::time::{Duration, Instant};

/// Where results go: stdout, and the `--out` file when one was given.
pub struct Sink {
    file: Option<File>,
}

impl Sink {
    pub fn new(path: Option<&str>) -> Self {
        let file = path.map(|p| File::create(p).unwrap_or_else(|e| panic!("create {p}: {e}")));
        Sink { file }
    }

    /// One result line: `section, name, parameter, value, unit`, tab-separated.
    pub fn record(
        &mut self,
        section: &str,
        name: &str,
        param: impl Display,
        value: impl Display,
        unit: &str,
    ) {
        let line = format!("{section}\t{name}\t{param}\t{value}\t{unit}");
        println!("{line}");
        if let Some(file) = &mut self.file {
            writeln!(file, "{line}").expect("write results");
        }
    }
}

/// The CPU time all threads of this process have used so far
/// (`clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`).
pub fn process_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The median of `values` (the upper middle one for an even count).
pub fn median(values: &mut [f64]) -> f64 {
    assert!(!values.is_empty(), "median of no rounds");
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Nanoseconds per operation of `ops` operations done by `f`, median of `rounds` rounds.
pub fn ns_per_op(rounds: usize, ops: u64, mut f: impl FnMut()) -> f64 {
    let mut samples: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_nanos() as f64 / ops as f64
        })
        .collect();
    median(&mut samples)
}

/// The add benches' rounds, and the `n` of their loops of `8n` adds: many short rounds, so
/// that a preemption spoils one sample, which the median skips (`quick`: a smoke run).
pub fn add_rounds(quick: bool) -> (usize, u64) {
    if quick {
        (5, 1 << 12)
    } else {
        (101, 1 << 15)
    }
}

/// The median nanoseconds per operation of each of `calls` calls, made once per round in
/// turn for `rounds` rounds, so that a slow drift (clock, other load) hits every call alike.
/// `call(i)` makes call `i` and returns how many operations it did.
pub fn medians_in_turn(
    rounds: usize,
    calls: usize,
    mut call: impl FnMut(usize) -> u64,
) -> Vec<f64> {
    let mut samples = vec![Vec::with_capacity(rounds); calls];
    for _ in 0..rounds {
        for (i, samples) in samples.iter_mut().enumerate() {
            let start = Instant::now();
            let ops = call(i);
            samples.push(start.elapsed().as_nanos() as f64 / ops as f64);
        }
    }
    samples.iter_mut().map(|s| median(s)).collect()
}
