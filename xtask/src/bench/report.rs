//! docs/BENCHMARKS.md's generated blocks for the crate against its peers: the machine, the
//! targets met or missed, and each section's tables. The prose around them is the
//! document's own text.

use std::fmt::Write;

use super::markers::Block;
use super::results::Results;
use super::table::{m, over, param_table, short_of, verdict, x};

/// This crate's name in the results.
const PCPU: &str = "pcpu-counter";
const ATOMIC: &str = "AtomicU64 (shared)";
const STRIPES: &str = "CachePadded stripes";
const RACY: &str = "racy +=";

/// What the report says about the machine.
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub kernel: String,
    pub rustc: String,
    pub date: String,
    pub load_before: String,
    pub load_after: String,
    /// Whether the kernel shares the CPU between sessions first (`sched_autogroup_enabled`).
    pub autogroup: bool,
}

/// What the report says about the bench's machine code.
pub struct Code {
    /// The single-thread loops, disassembled.
    pub disassembly: String,
    /// Whether the compiler emitted one function for the protected loop and the plain
    /// 8-counter loop (`None`: `nm` is not installed).
    pub protected_is_plain: Option<bool>,
}

/// One line of the targets table.
struct Target {
    what: String,
    goal: String,
    measured: String,
    met: bool,
    /// How far a missed target is from its goal (empty when met).
    short: String,
    why: Option<String>,
}

/// The blocks of the run, the machine, the targets and every section but the Linux,
/// approximate and lazy counters' (their own modules').
pub fn blocks(r: &Results, machine: &Machine, code: &Code) -> Result<Vec<Block>, String> {
    let tp = |name: &str, w: &str| r.get("throughput", name, w, None);
    let single = |name: &str, p: &str| r.get("single", name, p, None);
    let writers = r.params("throughput");
    let peers = r.names("throughput");
    let quick = r.text("meta", "quick", "-", None) == Some("true");
    let mut blocks: Vec<Block> = Vec::new();

    let mut run = format!("Run of {} (UTC).\n", machine.date);
    if quick {
        run.push_str("\n> This is a `--quick` run: short rounds, for checking the harness only.\n");
    }
    blocks.push(("run", run));

    let mut o = String::new();
    writeln!(o, "| | |\n|---|---|").unwrap();
    writeln!(o, "| CPU | {} |", machine.cpu).unwrap();
    writeln!(o, "| Cores (available parallelism) | {} |", machine.cores).unwrap();
    writeln!(o, "| Kernel | {} |", machine.kernel).unwrap();
    writeln!(o, "| Compiler | {} |", machine.rustc).unwrap();
    let meta = |name: &str| r.text("meta", name, "-", None).unwrap_or("?");
    writeln!(o, "| Arch primitive | {} |", meta("arch")).unwrap();
    writeln!(
        o,
        "| Load average before / after the run | {} / {} |",
        machine.load_before, machine.load_after
    )
    .unwrap();
    writeln!(o, "| Date (UTC) | {} |", machine.date).unwrap();
    writeln!(
        o,
        "| Throughput rounds | {} rounds of {} ms per peer and writer count |",
        meta("throughput rounds"),
        meta("throughput window"),
    )
    .unwrap();
    blocks.push(("machine", o));

    // The targets the report checks.
    let mut targets = Vec::new();
    let cores = machine.cores;
    let (p1, p2, p16) = (tp(PCPU, "1")?, tp(PCPU, "2")?, tp(PCPU, "16")?);
    let (a2, a16) = (tp(ATOMIC, "2")?, tp(ATOMIC, "16")?);
    let s2 = tp(STRIPES, "2")?;
    let handoff_name = "line handoff between 2 threads";
    let handoff = r.get("diag", handoff_name, "2", Some("ns fastest"))?;
    let handoff_median = r.get("diag", handoff_name, "2", Some("ns median"))?;
    let why_atomic = |w: &str, a: f64| {
        format!(
            "at {w} writers the shared atomic made {} M adds/s against {} M/s with 1 writer. \
             With {cores} cores at most {cores} writers run at once, so the shared line only \
             moves between {cores} cores (one step of passing a line between two threads took \
             {handoff:.0} ns in the fastest round, {handoff_median:.0} ns in the median one), \
             and whenever other work holds a core the writers are time-sliced on the other and \
             do not contend at all (load average {} before the run, {} after). FreeBSD's 22x \
             came from many CPUs contending at once.",
            m(a),
            m(tp(ATOMIC, "1").unwrap_or(f64::NAN)),
            machine.load_before,
            machine.load_after,
        )
    };
    targets.push(Target {
        what: "Throughput, 2 writers, vs shared `AtomicU64`".into(),
        goal: ">= 6x".into(),
        measured: x(p2 / a2),
        met: p2 / a2 >= 6.0,
        short: short_of(p2 / a2, 6.0),
        why: Some(why_atomic("2", a2)),
    });
    targets.push(Target {
        what: "Throughput, 2 writers, vs padded atomic stripes".into(),
        goal: ">= 2x".into(),
        measured: format!(
            "{} (fast-counter: {})",
            x(p2 / s2),
            x(p2 / tp("fast-counter", "2")?)
        ),
        met: p2 / s2 >= 2.0,
        short: short_of(p2 / s2, 2.0),
        why: Some(format!(
            "an uncontended `lock` add on a private stripe costs {:.2} ns here against {:.2} ns \
             for this crate's add (single-thread rows below).",
            single("AtomicU64::fetch_add", "1")?,
            single("pcpu-counter add", "1")?
        )),
    });
    targets.push(Target {
        what: "Throughput, 16 writers (8x oversubscribed), vs shared `AtomicU64`".into(),
        goal: ">= 10x".into(),
        measured: x(p16 / a16),
        met: p16 / a16 >= 10.0,
        short: short_of(p16 / a16, 10.0),
        why: Some(why_atomic("16", a16)),
    });
    targets.push(Target {
        what: "Throughput, 16 writers vs this crate at 2 writers (flat past the cores)".into(),
        goal: ">= 0.9x".into(),
        measured: x(p16 / p2),
        met: p16 / p2 >= 0.9,
        short: short_of(p16 / p2, 0.9),
        why: Some(format!(
            "16 writers share {cores} cores by time slicing; every switch between writers costs \
             a context switch (and the GS base reload), and any other load on the machine \
             (load average {} before, {} after) takes cores away from the run. 1 writer: {} M/s, \
             2: {} M/s, 16: {} M/s.",
            machine.load_before,
            machine.load_after,
            m(p1),
            m(p2),
            m(p16)
        )),
    });
    let (pc1, at1, pl1) = (
        single("pcpu-counter add", "1")?,
        single("AtomicU64::fetch_add", "1")?,
        single("plain add (volatile)", "1")?,
    );
    let (pc8, pl8) = (
        single("pcpu-counter add", "8")?,
        single("plain add (volatile)", "8")?,
    );
    let st8 = single("per-CPU static add", "8")?;
    let sk8 = r.get(
        "diag",
        "static add, kernel form (no simulation check)",
        "8",
        None,
    )?;
    targets.push(Target {
        what:
            "Per-CPU static add (`percpu_counter!`, kernel form) vs plain add, 8 counters in turn"
                .into(),
        goal: "<= 1.05x".into(),
        measured: format!("{} ({sk8:.2} vs {pl8:.2} ns)", x(sk8 / pl8)),
        met: sk8 / pl8 <= 1.05,
        short: over(sk8 / pl8, 1.05),
        why: Some(format!(
            "a kernel build's static add is the one instruction `add qword ptr gs:[rip + SLOT], \
             1` (pinned by `tests/disasm.rs`); the kernel-form row runs exactly those \
             instructions. Under this simulation `StaticCounter::add` also checks that the \
             thread holds a CPU of the machine with the statics (a load of the installed \
             area, a thread-local load and a compare): {st8:.2} ns, {} of `Counter::add` \
             ({pc8:.2} ns), which has the same kind of check.",
            x(st8 / pc8)
        )),
    });
    targets.push(Target {
        what: "Single thread vs uncontended `AtomicU64::fetch_add` (1 counter)".into(),
        goal: ">= 2.5x faster".into(),
        measured: format!("{} ({:.2} vs {:.2} ns)", x(at1 / pc1), pc1, at1),
        met: at1 / pc1 >= 2.5,
        short: short_of(at1 / pc1, 2.5),
        why: Some(format!(
            "an uncontended `lock inc` costs only {at1:.2} ns on this CPU."
        )),
    });
    targets.push(Target {
        what: "Single thread vs plain non-atomic add through a pointer".into(),
        goal: "<= 1.3x slower".into(),
        measured: format!(
            "{} on 1 counter ({pc1:.2} vs {pl1:.2} ns), {} on 8 ({pc8:.2} vs {pl8:.2} ns)",
            x(pc1 / pl1),
            x(pc8 / pl8)
        ),
        met: pc1 / pl1 <= 1.3 && pc8 / pl8 <= 1.3,
        short: over((pc1 / pl1).max(pc8 / pl8), 1.3),
        why: Some({
            let gs = r.get("diag", "add gs:[off], offset in a register", "1", None)?;
            let gs8 = r.get("diag", "add gs:[off], offsets in registers", "8", None)?;
            let flat = r.get("diag", "add [p], no segment", "1", None)?;
            format!(
                "the diagnostic rows split the gap. The instruction itself is not slower: \
                 `add gs:[off]` with the offsets kept in registers takes {gs8:.2} ns per add on \
                 8 counters (plain add {pl8:.2} ns) and {gs:.2} ns on 1 (`add [p]` without the \
                 segment {flat:.2} ns, plain add {pl1:.2} ns). The rest ({pc8:.2} and {pc1:.2} ns \
                 for `Counter::add`) is the reload of the handle's offset that the `asm!` memory \
                 clobber forces before every add, and, in this simulation only, the load and \
                 compare of the machine's tag through GS that stops a counter from being added \
                 on another machine's CPU (kernel builds have neither the tag nor the check): \
                 work that a loop of nothing but adds exposes and real code around an add \
                 mostly hides. The C header's inline add, which has no check, runs at the plain \
                 add's speed (the C fast path section). FreeBSD's \
                 amd64 `zpcpu_add` (behind `counter_u64_add`) has the same `\"memory\"` \
                 clobber; the clobber is what keeps the add ordered with the thread's own \
                 later `fetch`. \
                 Sub-nanosecond figures also move with other load on the machine (load average \
                 {} before the run).",
                machine.load_before
            )
        }),
    });
    let mem = |name: &str| r.get("memory", name, "64", Some("bytes computed"));
    let (mp, ms) = (mem(PCPU)?, mem(STRIPES)?);
    targets.push(Target {
        what: "Memory per counter, 64 CPUs".into(),
        goal: "8 B per CPU".into(),
        measured: format!("{mp:.0} B = {:.1} B per CPU", mp / 64.0),
        met: mp == 8.0 * 64.0,
        short: format!("{:.1} B per CPU more", mp / 64.0 - 8.0),
        why: None,
    });
    targets.push(Target {
        what: "Memory vs 128-byte padded stripes, 64 CPUs".into(),
        goal: ">= 16x less".into(),
        measured: format!("{} ({ms:.0} B vs {mp:.0} B)", x(ms / mp)),
        met: ms / mp >= 16.0,
        short: short_of(ms / mp, 16.0),
        why: None,
    });
    if let Some(target) = alloc_target(r)? {
        targets.push(target);
    }
    let exact = r.text("exact", PCPU, "-", None).unwrap_or("0");
    let worst_loss = writers
        .iter()
        .filter_map(|w| r.get("lost max", RACY, w, None).ok())
        .fold(0.0f64, f64::max);
    targets.push(Target {
        what: "Lost adds, this crate".into(),
        goal: "0 in every run".into(),
        measured: format!(
            "0 (asserted after each of {exact} throughput rounds and every single-thread loop); \
             racy `+=` lost up to {:.2}% of its adds in a round (table below)",
            worst_loss * 100.0
        ),
        met: exact.parse::<u64>().is_ok_and(|n| n > 0),
        short: "no exactness check ran".into(),
        why: None,
    });

    for (n, cpus, goal) in [(1024, "64", 8.0), (123, "256", 10.0)] {
        let by_one = r.get(
            "group",
            &format!("{n} counters: counter by counter"),
            cpus,
            None,
        );
        let group = r.get(
            "group",
            &format!("{n} counters: group snapshot"),
            cpus,
            None,
        );
        let ratio = match (by_one, group) {
            (Ok(a), Ok(b)) => a / b,
            _ => f64::NAN,
        };
        targets.push(Target {
            what: format!("Group snapshot of {n} counters at {cpus} CPUs"),
            goal: format!("at least {goal}x faster than {n} single fetches"),
            measured: x(ratio),
            met: ratio >= goal,
            short: short_of(ratio, goal),
            why: Some(
                "both read every slot once: a single `fetch` of a counter brings its line of \
                 8 slots on every CPU into the reader's cache, and the next 7 counters' fetches \
                 hit it there, so counter by counter is not one miss per CPU per counter \
                 unless those lines are evicted or written by their owners between the \
                 fetches (at 256 CPUs they no longer all fit in L1, where the group read wins \
                 most). Both are then bound by one load per slot per CPU; the group read \
                 saves the per-counter loop and the misses, not the loads (no SIMD: kernels \
                 build without it). See \"Group reads\" below for the warm and cold figures"
                    .into(),
            ),
        });
    }

    let mut o = String::new();
    writeln!(o, "| Target | Goal | Measured | |\n|---|---|---|---|").unwrap();
    for t in &targets {
        let verdict = verdict(t.met);
        writeln!(
            o,
            "| {} | {} | {} | {verdict} |",
            t.what, t.goal, t.measured
        )
        .unwrap();
    }
    let missed: Vec<&Target> = targets.iter().filter(|t| !t.met).collect();
    if !missed.is_empty() {
        writeln!(
            o,
            "\nWhy the missed targets were missed (the peers were not tuned down):\n"
        )
        .unwrap();
        for t in missed {
            writeln!(
                o,
                "- **{}** (goal {}, measured {}: {}): {}",
                t.what,
                t.goal,
                t.measured,
                t.short,
                t.why.as_deref().unwrap_or("")
            )
            .unwrap();
        }
    }
    blocks.push(("targets", o));

    let mut o = String::new();
    param_table(&mut o, "Peer", &writers, &peers, |peer, w| {
        Ok(m(tp(peer, w)?))
    })?;
    blocks.push(("throughput", o));
    let mut o = String::new();
    let others: Vec<String> = peers.iter().filter(|p| *p != PCPU).cloned().collect();
    param_table(&mut o, "Peer", &writers, &others, |peer, w| {
        Ok(x(tp(PCPU, w)? / tp(peer, w)?))
    })?;
    blocks.push(("speed-up", o));
    let mut o = String::new();
    if r.section("cpu share").next().is_some() {
        writeln!(
            o,
            "Share of the cores the writers got: process CPU time over the round ÷ (wall time × \
             the cores they could use, min(writers, {cores})). 1.00 means they had those cores \
             to themselves; less means other work on the machine took CPU time (Mutex<u64> \
             writers also sleep in the lock, so theirs is low by design):\n"
        )
        .unwrap();
        param_table(&mut o, "Peer", &writers, &peers, |peer, w| {
            Ok(format!("{:.2}", r.get("cpu share", peer, w, None)?))
        })?;
    }
    blocks.push(("cpu-share", o));

    let mut o = String::new();
    let share2 = r.get("cpu share", PCPU, "2", None).ok();
    if share2.map_or(p2 < 1.2 * p1, |share| share < 0.9) {
        let got = share2.map_or_else(String::new, |share| {
            format!(" (at 2 writers they got {share:.2} of the {cores} cores: see the table above)")
        });
        let autogroup = if machine.autogroup {
            " (this kernel has autogroup scheduling on, which shares the CPU between sessions \
             first, so one busy job elsewhere can leave these writers about one core)"
        } else {
            ""
        };
        writeln!(
            o,
            "Note: the {cores} cores were not both free for this run{got}: other work on the \
             machine (load average {} before, {} after) took CPU time{autogroup}. pcpu-counter made {} M adds/s with 1 writer and {} with 2, although \
             its writers share nothing. The multi-writer figures understate what {cores} idle \
             cores give; the interleaved rounds expose every peer to the same conditions, so \
             the ratios still compare them.\n",
            machine.load_before,
            machine.load_after,
            m(p1),
            m(p2),
        )
        .unwrap();
    }
    if p16 > 1.1 * p2 {
        let shares = match (share2, r.get("cpu share", PCPU, "16", None).ok()) {
            (Some(a), Some(b)) => {
                format!("; share of the cores: {a:.2} at 2 writers, {b:.2} at 16")
            }
            _ => String::new(),
        };
        writeln!(
            o,
            "Note: pcpu-counter made more adds with 16 writers than with 2 ({} against {} M/s{shares}). \
             Its writers share nothing, so nothing in it slows down past the core count; the \
             difference comes from how much CPU time the rounds got on a shared machine.\n",
            m(p16),
            m(p2),
        )
        .unwrap();
    }
    writeln!(
        o,
        "What contention costs here: a cache line passed back and forth between two threads \
         took {handoff:.0} ns per step in the fastest of the rounds (both threads running at \
         once), {handoff_median:.0} ns in the median round."
    )
    .unwrap();
    blocks.push(("throughput-notes", o));

    let mut o = String::new();
    let (median, worst) = ("Lost, median round", "Lost, worst round");
    let rows = [median.to_string(), worst.to_string()];
    param_table(&mut o, "Writers", &writers, &rows, |row, w| {
        let section = if row == median { "lost" } else { "lost max" };
        Ok(format!("{:.2}%", r.get(section, RACY, w, None)? * 100.0))
    })?;
    blocks.push(("lost", o));

    let mut o = String::new();
    writeln!(o, "| Operation | 1 counter | 8 counters round-robin | pcpu-counter speed-up (1 / 8) |\n|---|---:|---:|---:|").unwrap();
    for name in [
        "pcpu-counter add",
        "AtomicU64::fetch_add",
        "plain add (volatile)",
    ] {
        let (one, eight) = (single(name, "1")?, single(name, "8")?);
        writeln!(
            o,
            "| {name} | {one:.3} | {eight:.3} | {} / {} |",
            x(one / pc1),
            x(eight / pc8)
        )
        .unwrap();
    }
    writeln!(
        o,
        "| per-CPU static add (`percpu_counter!`) | | {st8:.3} | / {} |",
        x(st8 / pc8)
    )
    .unwrap();
    blocks.push(("single", o));
    let seq = single("counter_enter + 8 add_protected + counter_exit", "8")?;
    let same = match code.protected_is_plain {
        Some(true) => {
            "The compiler emitted one function for this loop and the 8-counter `add` loop (`nm` finds \
             one symbol for the two): on x86_64 `counter_enter` and `counter_exit` compile \
             to nothing, and any difference between the two figures is this run's noise."
        }
        Some(false) => "The compiler emitted different code for this loop and the 8-counter loop.",
        None => "(`nm` is not installed: whether the two loops compiled alike was not checked.)",
    };
    blocks.push((
        "protected",
        format!(
            "`counter_enter` + 8 `add_protected` (8 counters) + `counter_exit`: {seq:.3} ns per \
             sequence, {:.3} ns per add; 8 `Counter::add` on 8 counters: {:.3} ns. {same}\n",
            seq / 8.0,
            8.0 * pc8
        ),
    ));
    let mut o = String::new();
    writeln!(o, "| Loop | Counters | ns per add |\n|---|---:|---:|").unwrap();
    for row in r.section("diag").filter(|row| row.unit == "ns/add") {
        let ns = row.value.parse::<f64>().unwrap_or(f64::NAN);
        writeln!(o, "| `{}` | {} | {ns:.3} |", row.name, row.param).unwrap();
    }
    writeln!(o, "| this crate's `Counter::add` | 1 | {pc1:.3} |").unwrap();
    writeln!(o, "| this crate's `Counter::add` | 8 | {pc8:.3} |").unwrap();
    blocks.push(("diagnostics", o));

    blocks.push(("c-fast-path", c_fast_path(r, pc1)?));

    let mut o = String::new();
    writeln!(
        o,
        "| CPUs | fetch | zero | padded stripes sum |\n|---:|---:|---:|---:|"
    )
    .unwrap();
    for cpus in r.params("fetch") {
        writeln!(
            o,
            "| {cpus} | {:.1} | {:.1} | {:.1} |",
            r.get("fetch", "pcpu-counter fetch", &cpus, None)?,
            r.get("fetch", "pcpu-counter zero", &cpus, None)?,
            r.get("fetch", "CachePadded stripes sum", &cpus, None)?
        )
        .unwrap();
    }
    blocks.push(("fetch", o));
    blocks.push(("group", group_tables(r)?));

    let mut o = String::new();
    writeln!(o, "| Operation | CPUs / cells | ns |\n|---|---:|---:|").unwrap();
    for row in r.section("alloc") {
        writeln!(
            o,
            "| {} | {} | {:.1} |",
            row.name,
            row.param,
            row.value.parse::<f64>().unwrap_or(f64::NAN)
        )
        .unwrap();
    }
    blocks.push(("alloc", o));
    blocks.push(("alloc-live", alloc_live_table(r)?));

    let mut o = String::new();
    writeln!(
        o,
        "| Peer | Computed (B) | Measured (B) | vs pcpu-counter | Note |\n|---|---:|---:|---:|---|"
    )
    .unwrap();
    for name in r.names("memory") {
        let computed = mem(&name)?;
        let measured = r.get("memory", &name, "64", Some("bytes measured"))?;
        let note = match name.as_str() {
            PCPU => "8 B slot per CPU; measured includes the 1/1024 share of the bitmap",
            "AtomicU64 (shared)" | "Mutex<u64>" => "one shared value: small, but every add contends",
            RACY => "loses adds",
            STRIPES => "one 128-byte `CachePadded` per CPU",
            "fast-counter" => "64 cells of 128 B, plus the Vec header",
            "ThreadLocal<AtomicU64>" => "the bucket table, and one unpadded 16-byte entry per thread id in buckets of 1, 2, 4, ... entries allocated whole (64 threads with ids 0 to 63 need 127; measured: whatever ids this run's threads got); unpadded entries share cache lines",
            _ => "",
        };
        writeln!(
            o,
            "| {name} | {computed:.0} | {measured:.1} | {} | {note} |",
            x(computed / mp)
        )
        .unwrap();
    }
    blocks.push(("memory", o));
    blocks.push(("disassembly", format!("```text\n{}```\n", code.disassembly)));
    Ok(blocks)
}

/// The C header's inline add next to the library's call and a plain add, all from one run of
/// `benches/c/c_add.c`, and this crate's Rust add from the same `cargo xtask bench`.
fn c_fast_path(r: &Results, rust_add: f64) -> Result<String, String> {
    const INLINE: &str = "counter_u64_add (inline, header)";
    const CALL: &str = "pcpu_counter_add (out of line)";
    const PLAIN: &str = "plain add (volatile)";
    if r.section("c").next().is_none() {
        return Ok("Not measured in this run (`benches/c/c_add.c` needs gcc).\n".into());
    }
    let c = |name: &str| r.get("c", name, "1", None);
    let (inline, call, plain) = (c(INLINE)?, c(CALL)?, c(PLAIN)?);
    let mut o = String::new();
    writeln!(
        o,
        "| Operation (1 counter) | ns per add | against the plain add |\n|---|---:|---:|"
    )
    .unwrap();
    for (name, ns) in [(INLINE, inline), (CALL, call), (PLAIN, plain)] {
        writeln!(o, "| {name} | {ns:.3} | {} |", x(ns / plain)).unwrap();
    }
    writeln!(
        o,
        "| Rust `Counter::add` (this report's single-thread run, another process) | {rust_add:.3} | |"
    )
    .unwrap();
    Ok(o)
}

/// The group reads: a group snapshot against the same counters fetched one by one.
fn group_tables(r: &Results) -> Result<String, String> {
    if r.params("group").is_empty() {
        return Ok("Not measured in this run.\n".into());
    }
    let mut o = String::new();
    for n in [1024, 123] {
        let name = |what: &str| format!("{n} counters: {what}");
        writeln!(
            o,
            "### {n} counters\n\n| CPUs | counter by counter | group snapshot | ratio | group fetch_and_zero | cold: counter by counter | cold: group snapshot | cold ratio |\n|---:|---:|---:|---:|---:|---:|---:|---:|"
        )
        .unwrap();
        for cpus in r.params("group") {
            let one = r.get("group", &name("counter by counter"), &cpus, None)?;
            let group = r.get("group", &name("group snapshot"), &cpus, None)?;
            let zero = r.get("group", &name("group fetch_and_zero"), &cpus, None)?;
            let cold = |what: &str| r.get("group", &name(what), &cpus, None).ok();
            let (c1, cg) = (
                cold("counter by counter, cold"),
                cold("group snapshot, cold"),
            );
            let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
            let ratio = match (c1, cg) {
                (Some(a), Some(b)) => x(a / b),
                _ => "-".into(),
            };
            writeln!(
                o,
                "| {cpus} | {one:.0} | {group:.0} | {} | {zero:.0} | {} | {} | {ratio} |",
                x(one / group),
                show(c1),
                show(cg)
            )
            .unwrap();
        }
        if n == 1024 {
            writeln!(o).unwrap();
        }
    }
    Ok(o)
}

/// The alloc + free pairs of a 64-CPU and a 1-CPU machine (`alloc live`), by live count.
fn alloc_live(r: &Results) -> Result<Vec<(String, f64, f64)>, String> {
    let name = |cpus: &str| format!("{PCPU} alloc + free, {cpus} CPUs");
    r.params("alloc live")
        .into_iter()
        .map(|live| {
            let many = r.get("alloc live", &name("64"), &live, None)?;
            let one = r.get("alloc live", &name("1"), &live, None)?;
            Ok((live, many, one))
        })
        .collect()
}

/// The 64-CPU pair in a zone grown by chunks, by live count (`None` for results without it).
fn alloc_grown(r: &Results, live: &str) -> Option<f64> {
    let name = format!("{PCPU} alloc + free, 64 CPUs, grown by chunks");
    r.get("alloc live", &name, live, None).ok()
}

/// The table of alloc + free against the live count (none for results without those rows).
fn alloc_live_table(r: &Results) -> Result<String, String> {
    let rows = alloc_live(r)?;
    if rows.is_empty() {
        return Ok("Not measured in this run.\n".into());
    }
    let mut o = String::new();
    writeln!(
        o,
        "| Live counters | 64 CPUs | 1 CPU | clear of 63 more copies | 64 CPUs, grown by chunks |\n|---:|---:|---:|---:|---:|"
    )
    .unwrap();
    for (live, many, one) in rows {
        let grown = alloc_grown(r, &live).map_or("-".into(), |ns| format!("{ns:.1}"));
        writeln!(
            o,
            "| {live} | {many:.1} | {one:.1} | {:.1} | {grown} |",
            many - one
        )
        .unwrap();
    }
    Ok(o)
}

/// The alloc target (issue 31): the pair at most 100 ns at every live count, the clear apart.
fn alloc_target(r: &Results) -> Result<Option<Target>, String> {
    let rows = alloc_live(r)?;
    if rows.is_empty() {
        return Ok(None);
    }
    let worst = rows.iter().map(|row| row.2).fold(0.0f64, f64::max);
    let list = |pick: fn(&(String, f64, f64)) -> f64| {
        rows.iter()
            .map(|row| format!("{:.1}", pick(row)))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let lives = rows
        .iter()
        .map(|row| row.0.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    Ok(Some(Target {
        what: format!("Alloc + free at 64 CPUs with {lives} live counters, the clear apart"),
        goal: "<= 100 ns".into(),
        measured: format!(
            "{} ns without the clear of 63 copies (the 1-CPU pair); {} ns with it; {} ns with \
             it in a zone grown by chunks",
            list(|row| row.2),
            list(|row| row.1),
            rows.iter()
                .map(|row| alloc_grown(r, &row.0).map_or("-".into(), |ns| format!("{ns:.1}")))
                .collect::<Vec<_>>()
                .join(" / ")
        ),
        met: worst <= 100.0,
        short: over(worst, 100.0),
        why: Some(
            "the pair takes the zone's spin lock twice and walks the bitmap's four levels; the \
             table under \"Allocation\" has each figure."
                .into(),
        ),
    }))
}
