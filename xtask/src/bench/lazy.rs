//! The report's "Lazy counter" section (benches/peers/lazy.rs): the memory of an idle and of
//! a moved lazy counter against the plain counter's, its add before and after the move
//! against the plain add, and issue 31's targets.

use std::fmt::Write;

use super::results::Results;

/// The target: the add after the move at most this much slower than the plain add.
const ADD_RATIO: f64 = 1.3;

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**missed**"
    }
}

/// Writes the section, or says it was not measured.
pub fn section(o: &mut String, r: &Results) -> Result<(), String> {
    writeln!(o, "## Lazy counter: one shared word until contended\n").unwrap();
    if r.section("lazy").next().is_none() {
        writeln!(o, "Not measured in this run.\n").unwrap();
        return Ok(());
    }
    let cpus = r.params("lazy").into_iter().next().unwrap_or_default();
    let idle = r.get("lazy", "memory idle", &cpus, None)?;
    let moved = r.get("lazy", "memory moved", &cpus, None)?;
    let counter = r.get("lazy", "memory Counter", &cpus, None)?;
    // The target: 8 bytes plus the handle, a `Counter`'s size (its memory less its slots).
    let n: f64 = cpus.parse().map_err(|_| format!("lazy: CPU count {cpus:?}"))?;
    let target = 8.0 + (counter - 8.0 * n);
    writeln!(
        o,
        "`LazyCounter`: one shared 8-byte word and its handle (the zone and a state word) until \
         an add finds the word contended or a chosen number of adds is reached, then a slot of \
         its zone; the word keeps the counts from before the move, so nothing moves and \
         nothing waits. Memory on {cpus} CPUs: idle {idle:.0} bytes, moved {moved:.0} bytes \
         (the plain `Counter`: {counter:.0} bytes).\n"
    )
    .unwrap();
    let plain = r.get("lazy-add", "Counter::add", "1", None)?;
    let before = r.get("lazy-add", "LazyCounter::add before the move", "1", None)?;
    let after = r.get("lazy-add", "LazyCounter::add after the move", "1", None)?;
    let ratio = after / plain;
    writeln!(
        o,
        "The add, one thread on one CPU, in the same rounds (8 adds per loop iteration, median \
         of the rounds): `Counter::add` {plain:.3} ns; `LazyCounter::add` before the move \
         {before:.3} ns ({:.2}x: a load and a `lock cmpxchg` on the shared word, uncontended), \
         after it {after:.3} ns ({ratio:.2}x: a load of the state, a test, and the same \
         `add gs:[off]`).\n",
        before / plain
    )
    .unwrap();
    writeln!(
        o,
        "| Target (issue 31) | Goal | Measured | |\n|---|---:|---:|---|"
    )
    .unwrap();
    writeln!(
        o,
        "| memory per idle lazy counter | {target:.0} bytes (8 + the handle) | {idle:.0} bytes | {} |",
        met(idle <= target)
    )
    .unwrap();
    writeln!(
        o,
        "| add before the move vs the plain add | (reported) | {:.2}x | |",
        before / plain
    )
    .unwrap();
    writeln!(
        o,
        "| add after the move vs the plain add | <= {ADD_RATIO}x | {ratio:.2}x | {} |\n",
        met(ratio <= ADD_RATIO)
    )
    .unwrap();
    Ok(())
}
