//! docs/BENCHMARKS.md's blocks of the "Lazy counter" section (benches/peers/lazy.rs): the
//! memory of an idle and of a moved lazy counter against the plain counter's, its add before
//! and after the move against the plain add, and issue 31's targets.

use std::fmt::Write;

use super::markers::Block;
use super::results::Results;
use super::table::verdict;

/// The target: the add after the move at most this much slower than the plain add.
const ADD_RATIO: f64 = 1.3;

/// The section's blocks: `lazy-memory` and `lazy-add` (the add's table and the targets), or
/// what says it was not measured.
pub fn blocks(r: &Results) -> Result<Vec<Block>, String> {
    if r.section("lazy").next().is_none() {
        let none = "Not measured in this run.\n".to_string();
        return Ok(vec![("lazy-memory", none), ("lazy-add", String::new())]);
    }
    let cpus = r.params("lazy").into_iter().next().unwrap_or_default();
    let idle = r.get("lazy", "memory idle", &cpus, None)?;
    let moved = r.get("lazy", "memory moved", &cpus, None)?;
    let counter = r.get("lazy", "memory Counter", &cpus, None)?;
    // The target: 8 bytes plus the handle, a `Counter`'s size (its memory less its slots).
    let n: f64 = cpus
        .parse()
        .map_err(|_| format!("lazy: CPU count {cpus:?}"))?;
    let target = 8.0 + (counter - 8.0 * n);
    let memory = format!(
        "Memory on {cpus} CPUs: idle {idle:.0} bytes, moved {moved:.0} bytes (the plain \
         `Counter`: {counter:.0} bytes).\n"
    );
    // Parameter 1: one counter in a loop; the other: that many counters in turn.
    let many = r
        .params("lazy-add")
        .into_iter()
        .find(|p| p != "1")
        .ok_or("lazy-add: no row for many counters")?;
    let row = |name: &str, counters: &str| r.get("lazy-add", name, counters, None);
    let (before_name, after_name) = (
        "LazyCounter::add before the move",
        "LazyCounter::add after the move",
    );
    let mut ratios = Vec::new();
    let mut o = String::new();
    writeln!(
        o,
        "| counters | `Counter::add` | lazy, before the move | ratio | lazy, after the move | ratio |\n|---:|---:|---:|---:|---:|---:|"
    )
    .unwrap();
    for counters in ["1", many.as_str()] {
        let plain = row("Counter::add", counters)?;
        let before = row(before_name, counters)?;
        let after = row(after_name, counters)?;
        writeln!(
            o,
            "| {counters} | {plain:.3} | {before:.3} | {:.2}x | {after:.3} | {:.2}x |",
            before / plain,
            after / plain
        )
        .unwrap();
        ratios.push((counters.to_string(), before / plain, after / plain));
    }
    writeln!(
        o,
        "\n| Target (issue 31) | Goal | Measured | |\n|---|---:|---:|---|"
    )
    .unwrap();
    writeln!(
        o,
        "| memory per idle lazy counter | {target:.0} bytes (8 + the handle) | {idle:.0} bytes | {} |",
        verdict(idle <= target)
    )
    .unwrap();
    for (counters, before, after) in &ratios {
        let on = if counters == "1" {
            "one counter (the plain handle in registers)".to_string()
        } else {
            format!("{counters} counters in turn")
        };
        writeln!(
            o,
            "| add before the move vs the plain add, {on} | (reported) | {before:.2}x | |"
        )
        .unwrap();
        writeln!(
            o,
            "| add after the move vs the plain add, {on} | <= {ADD_RATIO}x | {after:.2}x | {} |",
            verdict(*after <= ADD_RATIO)
        )
        .unwrap();
    }
    Ok(vec![("lazy-memory", memory), ("lazy-add", o)])
}
