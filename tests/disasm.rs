//! Proof of the x86_64 add path: `Counter::add` compiles to exactly one non-locked
//! `add qword ptr gs:[...]` and no indirect call. Reads this test binary with `objdump`.
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
fn check_add_path(insns: &[String], debug_build: bool) -> Result<(), String> {
    let gs_adds: Vec<&String> = insns
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
    let gs_others = insns.iter().filter(|i| i.contains("gs:")).count() - 1;
    if gs_others != 0 {
        return Err(format!(
            "{gs_others} other gs-relative accesses: {insns:#?}"
        ));
    }
    if let Some(lock) = insns.iter().find(|i| i.starts_with("lock")) {
        return Err(format!("lock prefix on the add path: {lock}"));
    }
    for call in insns
        .iter()
        .filter(|i| i.starts_with("call") || i.starts_with("jmp  "))
    {
        if call.contains('[')
            || call
                .split_whitespace()
                .nth(1)
                .is_some_and(|t| t.starts_with('r'))
        {
            return Err(format!("indirect call or jump on the add path: {call}"));
        }
        // Debug builds check the simulated CPU binding (a direct call); release builds call nothing.
        if call.starts_with("call") && !(debug_build && call.contains("debug_check_binding")) {
            return Err(format!("call on the add path: {call}"));
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
        s(&["add    QWORD PTR [rax],rsi", "ret"]),
    ];
    for b in &bad {
        assert!(check_add_path(b, false).is_err(), "accepted {b:?}");
    }
}
