//! riscv64 specifics: `Counter::add` disassembles to one `amoadd.d zero, ...` (in release, a
//! pinned instruction count), adds stay exact under an interrupt storm, and the same storm
//! catches a racy `ld; add; sd`.
//!
//! Under qemu-riscv64 signals arrive only between translation blocks: `cargo xtask cross`
//! runs this file again with `qemu-riscv64 -singlestep` (one instruction per block), where a
//! signal can land between any two instructions, as on hardware, and with the crate built as
//! release builds it (opt-level 3, no debug assertions), where the add's instruction count
//! is pinned; `cargo test --release --test arch_riscv64` checks the same.
#![cfg(target_arch = "riscv64")]

mod common;

use pcpu_counter::sim::Machine;
use pcpu_counter::Counter;
use std::sync::atomic::Ordering;

/// Instructions of the optimised probe up to and including its `ret` (under `sim`): the
/// simulation's check (the thread-local bound area: `auipc; ld` its initial-exec GOT offset,
/// `add` tp, `ld`; the counter's area, through its zone: `ld` the zone, `ld` its area; `bne`
/// to the cold panic after the `ret`), the platform's base (a thread-local: `auipc; ld; add
/// tp; ld`), the handle's offset, the slot address, `amoadd.d zero`, `ret`. A kernel build
/// has neither thread-local nor check: `mv a, tp; add a, a, off; amoadd.d`.
const RELEASE_HOT_PATH: usize = 15;

#[test]
fn adds_under_an_interrupt_storm_are_exact() {
    const WANTED_INTERRUPTS: u64 = 200;
    let machine = Machine::new(1);
    let c = machine.alloc().unwrap();
    let event = format!("{WANTED_INTERRUPTS} interrupts handled");
    let (adds, handled) = common::storm_on_cpu0(&machine, &c, &event, |handled| {
        c.add(1);
        handled.load(Ordering::Relaxed) >= WANTED_INTERRUPTS
    });
    assert!(handled > 0, "no interrupt in {adds} adds");
    assert_eq!(c.fetch(), adds + (handled << 32));
    println!("{adds} adds, {handled} interrupts handled: exact");
}

#[test]
fn the_storm_catches_a_racy_ld_add_sd() {
    common::assert_storm_catches_racy_add(|_, slot| {
        // SAFETY: `slot` is CPU 0's slot of the helper's counter, and this thread holds CPU 0;
        // the split load/add/store (no AMO) is the deliberate bug.
        unsafe {
            core::arch::asm!(
                "ld {t}, 0({p})",
                "addi {t}, {t}, 1",
                "sd {t}, 0({p})",
                p = in(reg) slot,
                t = out(reg) _,
                options(nostack),
            )
        }
    });
}

/// The probe: nothing but a counter add, kept out of line so it can be found and read.
#[inline(never)]
#[unsafe(no_mangle)]
pub fn pcpu_probe_riscv64_counter_add(counter: &Counter<'_>, v: i64) {
    counter.add(v)
}

fn mnemonic(insn: &str) -> &str {
    insn.split_whitespace().next().unwrap_or("")
}

fn count(insns: &[String], name: &str) -> usize {
    insns.iter().filter(|i| mnemonic(i) == name).count()
}

/// What the add path must be: exactly one `amoadd.d` that discards the old value (`rd` =
/// `zero`), no ordering bits, no LR/SC, no fence, no store but to the stack, and in release
/// no call at all and exactly `hot_len` instructions up to the first `ret`.
fn check_add_path(insns: &[String], release: Option<usize>) -> Result<(), String> {
    let end = insns
        .iter()
        .position(|i| mnemonic(i) == "ret")
        .ok_or_else(|| format!("no ret: {insns:#?}"))?;
    let hot = &insns[..=end];
    let amos: Vec<&String> = insns
        .iter()
        .filter(|i| mnemonic(i).starts_with("amo"))
        .collect();
    if amos.len() != 1 || count(hot, "amoadd.d") != 1 {
        return Err(format!(
            "expected exactly one amoadd.d (before the ret), found {amos:?}: {insns:#?}"
        ));
    }
    if !amos[0]
        .split_whitespace()
        .nth(1)
        .is_some_and(|ops| ops.starts_with("zero,"))
    {
        return Err(format!("the amoadd.d keeps the old value: {}", amos[0]));
    }
    for bad in ["lr.d", "sc.d", "lr.w", "sc.w", "fence", "fence.i"] {
        if count(insns, bad) != 0 {
            return Err(format!("`{bad}` on the add path: {insns:#?}"));
        }
    }
    if let Some(store) = hot.iter().find(|i| {
        matches!(mnemonic(i), "sd" | "sw" | "sh" | "sb" | "c.sd" | "c.sdsp") && !i.contains("(sp)")
    }) {
        return Err(format!("a plain store on the add path: {store}"));
    }
    if let Some(hot_len) = release {
        let calls = ["jal", "jalr", "call", "tail", "c.jalr", "c.jr", "jr"];
        if let Some(call) = hot.iter().find(|i| calls.contains(&mnemonic(i))) {
            return Err(format!("call or jump on the release add path: {call}"));
        }
        if hot.len() != hot_len {
            return Err(format!(
                "{} instructions up to the ret, pinned at {hot_len}: {insns:#?}",
                hot.len()
            ));
        }
    }
    Ok(())
}

#[test]
fn counter_add_is_one_amoadd_d() {
    let machine = Machine::new(2);
    let c = machine.alloc().unwrap();
    let probe = std::hint::black_box(pcpu_probe_riscv64_counter_add as fn(&Counter<'_>, i64));
    machine.run_on(1, || probe(&c, 5));
    assert_eq!((c.fetch(), c.cpu_slot(1)), (5, Ok(5)));
    let insns = common::disassemble(
        &["riscv64-linux-gnu-objdump", "objdump"],
        &[],
        "pcpu_probe_riscv64_counter_add",
    );
    assert!(!insns.is_empty(), "probe not found in the binary");
    println!(
        "{} ({}, {}):\n  {}",
        "pcpu_probe_riscv64_counter_add",
        pcpu_counter::arch::NAME,
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        insns.join("\n  ")
    );
    let release = (!cfg!(debug_assertions)).then_some(RELEASE_HOT_PATH);
    check_add_path(&insns, release).unwrap();
}

#[test]
fn the_check_rejects_broken_add_paths() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let good = s(&[
        "ld\ta2,8(a0)",
        "add\ta2,a2,tp",
        "amoadd.d\tzero,a1,(a2)",
        "ret",
    ]);
    assert!(check_add_path(&good, Some(4)).is_ok());
    assert!(check_add_path(&good, None).is_ok());
    let with = |i: usize, insns: &[&str]| {
        let mut v = good.clone();
        v.splice(i..=i, insns.iter().map(|x| x.to_string()));
        v
    };
    let bad = [
        // The broken add: ld; add; sd.
        with(2, &["ld\ta3,0(a2)", "add\ta3,a3,a1", "sd\ta3,0(a2)"]),
        // An LR/SC loop instead of the AMO.
        with(
            2,
            &[
                "lr.d\ta3,(a2)",
                "add\ta3,a3,a1",
                "sc.d\ta4,a3,(a2)",
                "bnez\ta4,10 <x>",
            ],
        ),
        // Ordering bits, a kept old value, two AMOs, a fence.
        with(2, &["amoadd.d.aqrl\tzero,a1,(a2)"]),
        with(2, &["amoadd.d\ta3,a1,(a2)"]),
        with(2, &["amoadd.d\tzero,a1,(a2)", "amoadd.d\tzero,a1,(a2)"]),
        with(2, &["amoadd.w\tzero,a1,(a2)"]),
        with(1, &["fence\trw,rw", "add\ta2,a2,tp"]),
        // A call through a pointer, one more instruction.
        with(1, &["jalr\ta5", "add\ta2,a2,tp"]),
        with(1, &["nop", "add\ta2,a2,tp"]),
    ];
    for b in &bad {
        assert!(check_add_path(b, Some(4)).is_err(), "accepted {b:?}");
    }
    // The amoadd.d after the ret (in a cold block) does not count as the add path.
    assert!(check_add_path(&s(&["ret", "amoadd.d\tzero,a1,(a2)"]), None).is_err());
    // Debug builds may spill to the stack and call.
    let debug = with(1, &["sd\tra,8(sp)", "jal\t1234 <f>", "add\ta2,a2,tp"]);
    assert!(check_add_path(&debug, None).is_ok());
    assert!(check_add_path(&debug, Some(6)).is_err());
}

pcpu_counter::percpu_counter!(static PROBE_STATIC);

/// A per-CPU static's add, out of line.
#[inline(never)]
#[unsafe(no_mangle)]
pub fn pcpu_probe_riscv64_static_add(v: i64) {
    PROBE_STATIC.add(v)
}

/// A per-CPU static's add is the counter's one `amoadd.d zero` on the base plus the slot's
/// link-time address, which `auipc` forms (pc-relative): no handle loaded.
#[test]
fn static_add_is_one_amoadd_d_on_the_slots_address() {
    let machine = Machine::with_statics(2, 8).unwrap();
    let probe = std::hint::black_box(pcpu_probe_riscv64_static_add as fn(i64));
    machine.run_on(1, || probe(5));
    assert_eq!((PROBE_STATIC.fetch(), PROBE_STATIC.cpu_slot(1)), (5, Ok(5)));
    let insns = common::disassemble(
        &["riscv64-linux-gnu-objdump", "objdump"],
        &[],
        "pcpu_probe_riscv64_static_add",
    );
    assert!(!insns.is_empty(), "probe not found in the binary");
    println!(
        "pcpu_probe_riscv64_static_add ({}):\n  {}",
        pcpu_counter::arch::NAME,
        insns.join("\n  ")
    );
    check_add_path(&insns, None).unwrap();
    assert!(
        insns.iter().any(|i| mnemonic(i) == "auipc"),
        "the slot's address from auipc: {insns:#?}"
    );
}
