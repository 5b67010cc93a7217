//! The report's "Approximate counter" section (benches/peers/approx.rs): the O(1) read,
//! `compare` far from and near its threshold, the precise sum, a rate check, the memory and
//! the bound against the CPU count, the add against the plain add, and issue 21's targets.

use std::fmt::Write;

use super::report::verdict;
use super::results::Results;

/// The targets: the approximate read at most this many ns at any CPU count...
const READ_NS: f64 = 5.0;
/// ... `compare` far from its threshold at 256 CPUs at least this much faster than precise...
const COMPARE_SPEEDUP: f64 = 10.0;
/// ... and the add at most this much slower than the plain add.
const ADD_RATIO: f64 = 1.3;

/// Writes the section, or says it was not measured.
pub fn section(o: &mut String, r: &Results) -> Result<(), String> {
    writeln!(o, "## Approximate counter: O(1) bounded read\n").unwrap();
    if r.section("approx").next().is_none() {
        writeln!(o, "Not measured in this run.\n").unwrap();
        return Ok(());
    }
    let batch = r.get("approx", "batch", "-", None)?;
    writeln!(
        o,
        "`ApproxCounter` with batch {batch:.0}: the plain per-CPU slot, and a shared word that \
         a CPU's add carries into only when its slot crosses a multiple of the batch. \
         `approximate` is one load of that word, at most `ncpus * (batch - 1)` under the \
         precise value (the bound column); `compare` answers from it when the threshold is \
         outside that interval (\"far\": the threshold `bound + 1000` above the value) and sums \
         every CPU otherwise (\"near\": the threshold equal to the value). The rate check is \
         `CounterRate::check` far below its limit (an add, a fence, one load). Memory: 16 \
         bytes per CPU (the slot, and its count of multiples of 16) plus the 256-byte handle (the shared word has a 128-byte line of its own). \
         Nanoseconds per call.\n"
    )
    .unwrap();
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
    let plain = r.get("approx-add", "Counter::add", "1", None)?;
    let approx = r.get("approx-add", "ApproxCounter::add", "1", None)?;
    let ratio = approx / plain;
    writeln!(
        o,
        "\nThe add, one thread on one CPU (8 adds per loop iteration, median of the rounds): \
         `Counter::add` {plain:.3} ns, `ApproxCounter::add` {approx:.3} ns ({ratio:.2}x; on \
         x86_64 the same `add gs:[off]` then `lahf; test ah, 0x10; jnz` on its carry out of the \
         low 4 bits, after a cached check that the CPU has `lahf` (none in a build for x86-64-v2); every 16th add an `xadd` to the count of sixteens, every {batch:.0}th a locked add to the shared word).\n"
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
        "| add vs the plain add | <= {ADD_RATIO}x | {ratio:.2}x | {} |\n",
        verdict(ratio <= ADD_RATIO)
    )
    .unwrap();
    Ok(())
}
