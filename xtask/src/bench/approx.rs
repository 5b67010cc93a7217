//! docs/BENCHMARKS.md's blocks of the "Approximate counter" section (benches/peers/approx.rs):
//! the O(1) read, `compare` far from and near its threshold, the precise sum, a rate check,
//! the memory and the bound against the CPU count, the add against the plain add, and issue
//! 21's targets.

use std::fmt::Write;

use super::markers::Block;
use super::results::Results;
use super::table::verdict;

/// The targets: the approximate read at most this many ns at any CPU count...
const READ_NS: f64 = 5.0;
/// ... `compare` far from its threshold at 256 CPUs at least this much faster than precise...
const COMPARE_SPEEDUP: f64 = 10.0;
/// ... and the add at most this much slower than the plain add.
const ADD_RATIO: f64 = 1.3;

/// The section's blocks: `approx` (the batch and the table by CPU count) and `approx-add`
/// (the add and the targets), or what says it was not measured.
pub fn blocks(r: &Results) -> Result<Vec<Block>, String> {
    if r.section("approx").next().is_none() {
        let none = "Not measured in this run.\n".to_string();
        return Ok(vec![("approx", none), ("approx-add", String::new())]);
    }
    let batch = r.get("approx", "batch", "-", None)?;
    let mut o = String::new();
    writeln!(o, "Batch {batch:.0}, nanoseconds per call:\n").unwrap();
    writeln!(
        o,
        "| CPUs | approximate | compare far | compare near | precise | precise / compare far | ratecheck | bound | memory (bytes) |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    .unwrap();
    let mut worst_read: f64 = 0.0;
    let mut speedup_256 = None;
    for cpus in r.params("approx").into_iter().filter(|p| p != "-") {
        let read = r.get("approx", "approximate", &cpus, None)?;
        let far = r.get("approx", "compare far", &cpus, None)?;
        let near = r.get("approx", "compare near", &cpus, None)?;
        let precise = r.get("approx", "precise", &cpus, None)?;
        let rate = r.get("approx", "ratecheck far below the limit", &cpus, None)?;
        let bound = r.get("approx", "bound (under)", &cpus, None)?;
        let memory = r.get("approx", "memory", &cpus, None)?;
        worst_read = worst_read.max(read);
        if cpus == "256" {
            speedup_256 = Some(precise / far);
        }
        writeln!(
            o,
            "| {cpus} | {read:.2} | {far:.2} | {near:.1} | {precise:.1} | {:.0}x | {rate:.1} | {bound:.0} | {memory:.0} |",
            precise / far
        )
        .unwrap();
    }
    let table = o;
    let plain = r.get("approx-add", "Counter::add", "1", None)?;
    let approx = r.get("approx-add", "ApproxCounter::add", "1", None)?;
    let ratio = approx / plain;
    let mut o = String::new();
    writeln!(
        o,
        "`Counter::add` {plain:.3} ns, `ApproxCounter::add` {approx:.3} ns ({ratio:.2}x); every \
         {batch:.0}th add a locked add to the shared word.\n"
    )
    .unwrap();
    writeln!(
        o,
        "| Target (issue 21) | Goal | Measured | |\n|---|---:|---:|---|"
    )
    .unwrap();
    writeln!(
        o,
        "| approximate read, worst CPU count | <= {READ_NS} ns | {worst_read:.2} ns | {} |",
        verdict(worst_read <= READ_NS)
    )
    .unwrap();
    match speedup_256 {
        Some(s) => writeln!(
            o,
            "| compare far from the threshold vs precise, 256 CPUs | >= {COMPARE_SPEEDUP}x | {s:.0}x | {} |",
            verdict(s >= COMPARE_SPEEDUP)
        )
        .unwrap(),
        None => writeln!(o, "| compare vs precise, 256 CPUs | >= {COMPARE_SPEEDUP}x | not measured | |").unwrap(),
    }
    writeln!(
        o,
        "| add vs the plain add | <= {ADD_RATIO}x | {ratio:.2}x | {} |",
        verdict(ratio <= ADD_RATIO)
    )
    .unwrap();
    Ok(vec![("approx", table), ("approx-add", o)])
}
