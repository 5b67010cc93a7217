//! Proof of the x86_64 add path: `Counter::add` compiles to exactly one non-locked
//! `add qword ptr gs:[...]` and no call. Reads this test binary with `objdump`.
//!
//! These tests run on the host simulation, whose add path also checks that the thread holds a
//! CPU of the counter's machine (a thread-local load, `fs`-relative, a compare with the
//! counter's area, a branch to a cold panic after the `ret`). A kernel build has no such
//! check. (Before the check was a thread-local it read a tag at `gs:0x0`, which the check
//! below still accepts.)
#![cfg(target_arch = "x86_64")]

mod common;

use pcpu_counter::Counter;

/// The probe: nothing but a counter add, kept out of line so it can be found and read.
#[inline(never)]
#[unsafe(no_mangle)]
pub fn pcpu_probe_counter_add(counter: &Counter<'_>, v: i64) {
    counter.add(v)
}

/// What the check demands of a function's instructions; returns what is wrong, if anything.
/// Only the hot path counts: the instructions up to the first `ret` (the simulation's cold
/// wrong-machine panic comes after it).
fn check_add_path(insns: &[String], debug_build: bool) -> Result<(), String> {
    let end = insns
        .iter()
        .position(|i| i.starts_with("ret"))
        .ok_or_else(|| format!("no ret: {insns:#?}"))?;
    let hot = &insns[..end];
    let gs_adds: Vec<&String> = hot
        .iter()
        .filter(|i| i.starts_with("add") && i.contains("gs:"))
        .collect();
    if gs_adds.len() != 1 {
        return Err(format!(
            "expected one gs-relative add, found {}: {insns:#?}",
            gs_adds.len()
        ));
    }
    if !gs_adds[0].starts_with("add    QWORD PTR gs:[") {
        return Err(format!(
            "not a 64-bit add to a gs-relative slot: {}",
            gs_adds[0]
        ));
    }
    let is_tag_load = |i: &&String| i.starts_with("mov") && i.ends_with("QWORD PTR gs:0x0");
    let tag_loads = hot.iter().filter(is_tag_load).count();
    let gs_others = hot.iter().filter(|i| i.contains("gs:")).count() - 1 - tag_loads;
    if gs_others != 0 || tag_loads > 1 {
        return Err(format!(
            "{gs_others} other gs-relative accesses and {tag_loads} tag loads: {insns:#?}"
        ));
    }
    if let Some(lock) = hot.iter().find(|i| i.starts_with("lock")) {
        return Err(format!("lock prefix on the add path: {lock}"));
    }
    // Debug builds also check the binding through a thread-local (calls); release builds
    // call nothing on the hot path.
    if !debug_build {
        if let Some(call) = hot
            .iter()
            .find(|i| i.starts_with("call") || i.starts_with("jmp  "))
        {
            return Err(format!("call or jump on the add path: {call}"));
        }
    }
    Ok(())
}

#[test]
fn counter_add_is_one_unlocked_gs_relative_add() {
    // Call the probe for real (which also keeps the linker from dropping it).
    let machine = pcpu_counter::sim::Machine::new(2);
    let c = machine.alloc().unwrap();
    let probe = std::hint::black_box(pcpu_probe_counter_add as fn(&Counter<'_>, i64));
    machine.run_on(1, || probe(&c, 5));
    assert_eq!((c.fetch(), c.cpu_slot(1).unwrap()), (5, 5));
    let insns = common::disassemble(&["objdump"], &["-M", "intel"], "pcpu_probe_counter_add");
    assert!(!insns.is_empty(), "probe not found in the binary");
    check_add_path(&insns, cfg!(debug_assertions)).unwrap();
    println!("pcpu_probe_counter_add:\n  {}", insns.join("\n  "));
}

/// The check itself can fail: it rejects a locked add, a split load/add/store, two adds,
/// an indirect call.
#[test]
fn the_check_rejects_broken_add_paths() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let good = s(&[
        "mov    rax,QWORD PTR [rdi+0x8]",
        "add    QWORD PTR gs:[rax],rsi",
        "ret",
    ]);
    assert!(check_add_path(&good, false).is_ok());
    let checked = s(&[
        "mov    rax,0xffffffffffffff90",
        "mov    rdx,QWORD PTR fs:[rax]",
        "cmp    rdx,rcx",
        "jne    364ee <pcpu_probe_counter_add+0x1e>",
        "add    QWORD PTR gs:[rax],rsi",
        "ret",
        "call   QWORD PTR [rip+0xa13b3]",
    ]);
    assert!(check_add_path(&checked, false).is_ok());
    let bad = [
        s(&["lock add QWORD PTR gs:[rax],rsi", "ret"]),
        s(&[
            "mov    rcx,QWORD PTR gs:[rax]",
            "add    rcx,rsi",
            "mov    QWORD PTR gs:[rax],rcx",
            "ret",
        ]),
        s(&[
            "add    QWORD PTR gs:[rax],rsi",
            "add    QWORD PTR gs:[rax],rsi",
            "ret",
        ]),
        s(&[
            "call   QWORD PTR [rip+0x1000]",
            "add    QWORD PTR gs:[rax],rsi",
            "ret",
        ]),
        s(&["add    QWORD PTR gs:[rax],rsi", "call   rax", "ret"]),
        s(&["add    DWORD PTR gs:[rax],esi", "ret"]),
        s(&[
            "add    QWORD PTR gs:[rax],rsi",
            "jmp    1234 <memcpy>",
            "ret",
        ]),
        s(&["add    QWORD PTR [rax],rsi", "ret"]),
    ];
    for b in &bad {
        assert!(check_add_path(b, false).is_err(), "accepted {b:?}");
    }
}

/// The approximate counter's probe: `ApproxCounter::inc` alone, out of line.
#[inline(never)]
#[unsafe(no_mangle)]
pub fn pcpu_probe_approx_inc(counter: &pcpu_counter::ApproxCounter<'_>) {
    counter.inc()
}

/// `ApproxCounter::inc`'s hot path is the plain counter's one non-locked `add gs:[...]`, then
/// `lahf; test ah, 0x10; jne` on its auxiliary carry: no lock prefix and no `xadd` before the
/// first `ret` (the sixteens' `xadd` and the shared word's locked add are in the cold carry
/// function, the `pushfq` variant in its own).
#[test]
fn approx_inc_is_the_plain_add_then_a_flag_test() {
    let machine = pcpu_counter::sim::Machine::new(2);
    let c = pcpu_counter::ApproxCounter::new(machine.alloc().unwrap(), 16).unwrap();
    let probe = std::hint::black_box(pcpu_probe_approx_inc as fn(&pcpu_counter::ApproxCounter<'_>));
    machine.run_on(1, || (0..20).for_each(|_| probe(&c)));
    assert_eq!((c.precise(), c.approximate()), (20, 16));
    let insns = common::disassemble(&["objdump"], &["-M", "intel"], "pcpu_probe_approx_inc");
    assert!(!insns.is_empty(), "probe not found in the binary");
    let end = insns
        .iter()
        .position(|i| i.starts_with("ret"))
        .unwrap_or_else(|| panic!("no ret: {insns:#?}"));
    let hot = &insns[..end];
    let adds: Vec<usize> = (0..insns.len())
        .filter(|&k| insns[k].starts_with("add    QWORD PTR gs:["))
        .collect();
    assert_eq!(adds.len(), 1, "one gs-relative add: {insns:#?}");
    let k = adds[0];
    assert!(k < end, "the add is on the hot path: {insns:#?}");
    assert_eq!(insns[k + 1], "lahf", "{insns:#?}");
    assert!(insns[k + 2].starts_with("test   ah,0x10"), "{insns:#?}");
    assert!(insns[k + 3].starts_with("jne"), "{insns:#?}");
    for bad in ["lock", "xadd", "pushf"] {
        assert!(
            hot.iter().all(|i| !i.starts_with(bad)),
            "{bad} on the hot path: {insns:#?}"
        );
    }
}

/// `Counter::inc` out of line.
#[inline(never)]
#[unsafe(no_mangle)]
pub fn pcpu_probe_counter_inc(counter: &Counter<'_>) {
    counter.inc()
}

/// `Counter::inc` is the one non-locked `add gs:[...]` with an immediate 1 (no register
/// loaded with the constant).
#[test]
fn counter_inc_adds_an_immediate() {
    let machine = pcpu_counter::sim::Machine::new(2);
    let c = machine.alloc().unwrap();
    let probe = std::hint::black_box(pcpu_probe_counter_inc as fn(&Counter<'_>));
    machine.run_on(1, || probe(&c));
    assert_eq!((c.fetch(), c.cpu_slot(1).unwrap()), (1, 1));
    let insns = common::disassemble(&["objdump"], &["-M", "intel"], "pcpu_probe_counter_inc");
    check_add_path(&insns, cfg!(debug_assertions)).unwrap();
    check_immediate_one(&insns).unwrap();
    println!("pcpu_probe_counter_inc:\n  {}", insns.join("\n  "));
}

/// The gs-relative add's source operand is the immediate 1.
fn check_immediate_one(insns: &[String]) -> Result<(), String> {
    let add = insns
        .iter()
        .find(|i| i.starts_with("add") && i.contains("gs:"))
        .ok_or_else(|| format!("no gs-relative add: {insns:#?}"))?;
    let code = add.split('#').next().unwrap().trim_end();
    if code.ends_with("],0x1") {
        Ok(())
    } else {
        Err(format!("not an add of the immediate 1: {add}"))
    }
}

pcpu_counter::percpu_counter!(static PROBE_STATIC);

/// A per-CPU static's add, out of line.
#[inline(never)]
#[unsafe(no_mangle)]
pub fn pcpu_probe_static_add(v: i64) {
    PROBE_STATIC.add(v)
}

/// A per-CPU static's inc, out of line.
#[inline(never)]
#[unsafe(no_mangle)]
pub fn pcpu_probe_static_inc() {
    PROBE_STATIC.inc()
}

/// What a static's add must be: the one non-locked add (as [`check_add_path`]) addressed
/// `gs:[rip+disp]` (the slot's link-time address in the instruction: no handle loaded).
fn check_static_add_path(insns: &[String], debug_build: bool) -> Result<(), String> {
    check_add_path(insns, debug_build)?;
    let add = insns
        .iter()
        .find(|i| i.starts_with("add") && i.contains("gs:"))
        .unwrap();
    if add.starts_with("add    QWORD PTR gs:[rip+0x") {
        Ok(())
    } else {
        Err(format!("not a gs:[rip+disp] add: {add}"))
    }
}

/// A per-CPU static's add and inc are each one non-locked `add QWORD PTR gs:[rip+disp]`,
/// the inc's operand the immediate 1. (The simulation's check before it reads the installed
/// area and the thread's binding; a kernel build has the add alone.)
#[test]
fn static_add_is_one_rip_relative_gs_add() {
    let machine = pcpu_counter::sim::Machine::with_statics(2, 8).unwrap();
    let add = std::hint::black_box(pcpu_probe_static_add as fn(i64));
    let inc = std::hint::black_box(pcpu_probe_static_inc as fn());
    let before = PROBE_STATIC.fetch();
    machine.run_on(1, || {
        add(5);
        inc();
    });
    assert_eq!(PROBE_STATIC.fetch() - before, 6);
    assert_eq!(PROBE_STATIC.cpu_slot(1), Ok(6));
    for (probe, immediate) in [
        ("pcpu_probe_static_add", false),
        ("pcpu_probe_static_inc", true),
    ] {
        let insns = common::disassemble(&["objdump"], &["-M", "intel"], probe);
        assert!(!insns.is_empty(), "{probe} not found in the binary");
        check_static_add_path(&insns, cfg!(debug_assertions)).unwrap();
        assert_eq!(check_immediate_one(&insns).is_ok(), immediate, "{insns:#?}");
        println!("{probe}:\n  {}", insns.join("\n  "));
    }
}

/// The static's check rejects a handle loaded into a register, and the inc's check a
/// register operand.
#[test]
fn the_static_checks_reject_other_forms() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let good = s(&[
        "add    QWORD PTR gs:[rip+0x2a5f1],0x1        # 2b4f8 <_ZN6disasm12PROBE_STATIC4SLOT17h>",
        "ret",
    ]);
    assert!(check_static_add_path(&good, false).is_ok());
    assert!(check_immediate_one(&good).is_ok());
    let handle = s(&[
        "lea    rax,[rip+0x2a5f1]",
        "add    QWORD PTR gs:[rax],0x1",
        "ret",
    ]);
    assert!(check_static_add_path(&handle, false).is_err());
    let reg = s(&[
        "mov    eax,0x1",
        "add    QWORD PTR gs:[rip+0x2a5f1],rax",
        "ret",
    ]);
    assert!(check_static_add_path(&reg, false).is_ok());
    assert!(check_immediate_one(&reg).is_err());
    let shared = s(&["add    QWORD PTR [rip+0x2a5f1],rdi", "ret"]);
    assert!(check_static_add_path(&shared, false).is_err());
}

/// The lazy counter's probe: `LazyCounter::add` alone, out of line.
#[inline(never)]
#[unsafe(no_mangle)]
pub fn pcpu_probe_lazy_add(counter: &pcpu_counter::LazyCounter<'_>, v: i64) {
    counter.add(v)
}

/// `LazyCounter::add` is the plain counter's add behind one test of the counter's state: its
/// load, a `test` of the shared bit and a branch to the out-of-line shared path, then the one
/// non-locked `add gs:[...]` through the state (the slot's offset once moved). That `test`
/// and branch are all the add after the move costs over the plain add (the bench report's
/// lazy counter section).
#[test]
fn lazy_add_is_the_plain_add_behind_one_state_test() {
    let machine = pcpu_counter::sim::Machine::new(2);
    let c = pcpu_counter::LazyCounter::new(machine.zone());
    let probe =
        std::hint::black_box(pcpu_probe_lazy_add as fn(&pcpu_counter::LazyCounter<'_>, i64));
    machine.run_on(1, || probe(&c, 2));
    c.try_move().unwrap();
    machine.run_on(1, || probe(&c, 5));
    assert_eq!((c.fetch(), c.is_per_cpu()), (7, true));
    let insns = common::disassemble(&["objdump"], &["-M", "intel"], "pcpu_probe_lazy_add");
    assert!(!insns.is_empty(), "probe not found in the binary");
    check_add_path(&insns, cfg!(debug_assertions)).unwrap();
    if cfg!(debug_assertions) {
        return;
    }
    let end = insns.iter().position(|i| i.starts_with("ret")).unwrap();
    let hot = &insns[..end];
    let tests: Vec<usize> = (0..end).filter(|&k| hot[k].starts_with("test")).collect();
    let add = hot
        .iter()
        .position(|i| i.starts_with("add    QWORD PTR gs:["))
        .unwrap();
    assert_eq!(tests.len(), 1, "one test of the state: {insns:#?}");
    assert!(tests[0] < add, "the test before the add: {insns:#?}");
    assert!(hot[tests[0] + 1].starts_with("jne"), "{insns:#?}");
    println!("pcpu_probe_lazy_add:\n  {}", insns.join("\n  "));
}

/// `EarlyCounter::inc` out of line.
#[inline(never)]
#[unsafe(no_mangle)]
pub fn pcpu_probe_early_inc(counter: &pcpu_counter::early::EarlyCounter) {
    counter.inc()
}

/// Once live, `EarlyCounter::inc` is `Counter::inc`'s add of the immediate 1 (no register
/// loaded with the constant) after one test of its state, which holds the slot's offset: one
/// compare before the add in a release build (the simulation's check adds its own compare
/// with the bound area, which `cargo xtask pins` shows absent from a kernel build).
#[test]
fn early_inc_is_one_test_then_the_immediate_add() {
    static EARLY: pcpu_counter::early::EarlyCounter = pcpu_counter::early::EarlyCounter::new();
    let machine: &'static pcpu_counter::sim::Machine =
        Box::leak(Box::new(pcpu_counter::sim::Machine::new(2)));
    let probe =
        std::hint::black_box(pcpu_probe_early_inc as fn(&pcpu_counter::early::EarlyCounter));
    probe(&EARLY);
    machine.run_on(0, || EARLY.init(machine.zone())).unwrap();
    machine.run_on(1, || probe(&EARLY));
    assert_eq!(EARLY.fetch(), 2);
    assert_eq!(EARLY.counter().unwrap().cpu_slot(1), Ok(1));
    let insns = common::disassemble(&["objdump"], &["-M", "intel"], "pcpu_probe_early_inc");
    assert!(!insns.is_empty(), "probe not found in the binary");
    check_add_path(&insns, cfg!(debug_assertions)).unwrap();
    check_immediate_one(&insns).unwrap();
    if cfg!(debug_assertions) {
        return;
    }
    let end = insns.iter().position(|i| i.starts_with("ret")).unwrap();
    let add = insns[..end].iter().position(|i| i.contains("gs:")).unwrap();
    // The state's test, and the simulation's compare of the bound area.
    let compares = insns[..add]
        .iter()
        .filter(|i| i.starts_with("cmp") || i.starts_with("test"))
        .count();
    assert_eq!(
        compares, 2,
        "one state test and the simulation's check: {insns:#?}"
    );
    println!("pcpu_probe_early_inc:\n  {}", insns.join("\n  "));
}
