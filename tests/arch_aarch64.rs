//! aarch64 specifics: interrupts inside the LL/SC loop are retried exactly, the same storm
//! catches a racy load/add/store, and `Counter::add` disassembles to the `ldxr/stxr` loop (or
//! one `stadd` with `lse`).
//!
//! Under qemu-aarch64 signals arrive only between translation blocks, never inside a loop
//! body: `cargo xtask cross` runs the interrupt tests here with `qemu-aarch64 -singlestep`
//! (one instruction per block), where they land between any two instructions, as on hardware.
#![cfg(target_arch = "aarch64")]

mod common;

use pcpu_counter::sim::Machine;
use pcpu_counter::Counter;

#[test]
fn interrupts_inside_the_llsc_loop_are_retried_exactly() {
    const WANTED_RETRIES: u64 = 3;
    let machine = Machine::new(1);
    let c = machine.alloc().unwrap();
    let slot = (machine.zone().cpu_base(0).unwrap() + c.offset()) as *mut u64;
    let mut retries = 0u64;
    let event = format!("{WANTED_RETRIES} interrupts inside the LL/SC loop");
    let (adds, handled) = common::storm_on_cpu0(&machine, &c, &event, |_| {
        // SAFETY: `storm_on_cpu0` runs this bound to CPU 0, whose slot of `c` this is.
        retries += u64::from(unsafe { add_counting_retries(slot, 1) });
        retries >= WANTED_RETRIES
    });
    assert!(
        retries >= WANTED_RETRIES,
        "only {retries} interrupts fell inside the loop in {adds} adds ({handled} handled)"
    );
    assert!(retries <= handled, "a retry without an interrupt");
    assert_eq!(c.fetch(), adds + (handled << 32));
    println!("{retries} retries in {adds} adds, {handled} interrupts handled");
}

#[test]
fn the_storm_catches_a_racy_load_add_store() {
    common::assert_storm_catches_racy_add(|_, slot| {
        // SAFETY: `slot` is CPU 0's slot of the helper's counter, and this thread holds CPU 0;
        // the split load/add/store (no exclusive pair) is the deliberate bug.
        unsafe {
            core::arch::asm!(
                "ldr {t}, [{p}]",
                "add {t}, {t}, #1",
                "str {t}, [{p}]",
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
pub fn pcpu_probe_aarch64_counter_add(counter: &Counter<'_>, v: i64) {
    counter.add(v)
}

fn count(insns: &[String], mnemonic: &str) -> usize {
    insns
        .iter()
        .filter(|i| i.split_whitespace().next() == Some(mnemonic))
        .count()
}

/// What the add path must be: one `ldxr`/`add`/`stxr`/`cbnz` loop (or, with `lse`, one
/// `ldadd` and no exclusive pair), no `stadd` (a "far" atomic), no acquire/release variants,
/// no indirect call.
fn check_add_path(insns: &[String], lse: bool) -> Result<(), String> {
    let (ldxr, stxr, ldadd) = (
        count(insns, "ldxr"),
        count(insns, "stxr"),
        count(insns, "ldadd"),
    );
    if count(insns, "stadd") != 0 {
        return Err(format!("stadd (executed far) on the add path: {insns:#?}"));
    }
    if lse {
        if (ldadd, ldxr, stxr) != (1, 0, 0) {
            return Err(format!("expected one ldadd and no ldxr/stxr: {insns:#?}"));
        }
    } else {
        if (ldxr, stxr, ldadd) != (1, 1, 0) {
            return Err(format!("expected one ldxr/stxr pair: {insns:#?}"));
        }
        let l = insns.iter().position(|i| i.starts_with("ldxr")).unwrap();
        let s = insns.iter().position(|i| i.starts_with("stxr")).unwrap();
        let body = &insns[l..=s + 1];
        if s < l || count(body, "add") != 1 || !body.last().unwrap().starts_with("cbnz") {
            return Err(format!("not a ldxr; add; stxr; cbnz loop: {insns:#?}"));
        }
    }
    for barrier in [
        "ldaxr", "stlxr", "ldadda", "ldaddl", "ldaddal", "stlr", "dmb",
    ] {
        if count(insns, barrier) != 0 {
            return Err(format!("`{barrier}` on the add path: {insns:#?}"));
        }
    }
    if let Some(call) = insns
        .iter()
        .find(|i| i.starts_with("blr") || i.starts_with("br"))
    {
        return Err(format!("indirect call on the add path: {call}"));
    }
    Ok(())
}

#[test]
fn counter_add_is_the_llsc_loop_or_one_ldadd() {
    let machine = Machine::new(2);
    let c = machine.alloc().unwrap();
    let probe = std::hint::black_box(pcpu_probe_aarch64_counter_add as fn(&Counter<'_>, i64));
    machine.run_on(1, || probe(&c, 5));
    assert_eq!((c.fetch(), c.cpu_slot(1)), (5, Ok(5)));
    let insns = common::disassemble(
        &["aarch64-linux-gnu-objdump"],
        &[],
        "pcpu_probe_aarch64_counter_add",
    );
    assert!(!insns.is_empty(), "probe not found in the binary");
    let lse = cfg!(target_feature = "lse");
    check_add_path(&insns, lse).unwrap();
    println!(
        "pcpu_probe_aarch64_counter_add ({}):\n  {}",
        pcpu_counter::arch::NAME,
        insns.join("\n  ")
    );
}

#[test]
fn the_check_rejects_broken_add_paths() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let llsc = s(&[
        "ldr\tx8, [x0, #8]",
        "bl\t1234 <std::thread::local::LocalKey<T>::with>",
        "add\tx9, x0, x8",
        "ldxr\tx10, [x9]",
        "add\tx10, x10, x1",
        "stxr\tw11, x10, [x9]",
        "cbnz\tw11, 10 <x+0x10>",
        "ret",
    ]);
    assert!(check_add_path(&llsc, false).is_ok());
    assert!(check_add_path(&s(&["ldadd\tx1, x8, [x9]", "ret"]), true).is_ok());
    assert!(
        check_add_path(&s(&["stadd\tx1, [x9]", "ret"]), true).is_err(),
        "stadd accepted"
    );
    assert!(check_add_path(&s(&["ldaddal\tx1, x8, [x9]", "ret"]), true).is_err());
    let with = |i: usize, insn: &str| {
        let mut v = llsc.clone();
        v[i] = insn.to_string();
        v
    };
    let bad = [
        with(3, "ldr\tx10, [x9]"),
        with(5, "str\tx10, [x9]"),
        with(6, "nop"),
        with(3, "ldaxr\tx10, [x9]"),
        with(1, "blr\tx8"),
        with(0, "dmb\tish"),
    ];
    for b in &bad {
        assert!(check_add_path(b, false).is_err(), "accepted {b:?}");
    }
    assert!(
        check_add_path(&llsc, true).is_err(),
        "LL/SC accepted as lse"
    );
    assert!(check_add_path(&s(&["ldadd\tx1, x8, [x9]", "ret"]), false).is_err());
}

/// The LL/SC loop (as `Counter::add` runs it without `lse`) on `slot`, with a count of
/// failed `stxr`s, i.e. of interrupts (or other writers) that fell between the `ldxr` and
/// the `stxr`. Returns the retries. `tests/asm_copies.rs` checks that it is the product's loop
/// but for the count.
///
/// # Safety
/// `slot` is the bound CPU's slot of a live counter.
unsafe fn add_counting_retries(slot: *mut u64, v: i64) -> u32 {
    let retries: u32;
    // SAFETY: as the LL/SC `atomic_add`, with a retry count in a register.
    unsafe {
        core::arch::asm!(
            "mov {r:w}, #0",
            "b 3f",
            "2:",
            "add {r:w}, {r:w}, #1",
            "3:",
            "ldxr {t}, [{slot}]",
            "add {t}, {t}, {v}",
            "stxr {s:w}, {t}, [{slot}]",
            "cbnz {s:w}, 2b",
            slot = in(reg) slot,
            v = in(reg) v,
            t = out(reg) _,
            s = out(reg) _,
            r = out(reg) retries,
            options(nostack),
        )
    };
    retries
}

pcpu_counter::percpu_counter!(static PROBE_STATIC);

/// A per-CPU static's add, out of line.
#[inline(never)]
#[unsafe(no_mangle)]
pub fn pcpu_probe_aarch64_static_add(v: i64) {
    PROBE_STATIC.add(v)
}

/// A per-CPU static's add is the counter's add (the LL/SC loop, or one `ldadd` with `lse`)
/// on the register plus the slot's link-time address, which `adrp` forms: no handle loaded.
#[test]
fn static_add_is_the_llsc_loop_or_one_ldadd_on_the_slots_address() {
    let machine = Machine::with_statics(2, 8).unwrap();
    let probe = std::hint::black_box(pcpu_probe_aarch64_static_add as fn(i64));
    machine.run_on(1, || probe(5));
    assert_eq!((PROBE_STATIC.fetch(), PROBE_STATIC.cpu_slot(1)), (5, Ok(5)));
    let insns = common::disassemble(
        &["aarch64-linux-gnu-objdump"],
        &[],
        "pcpu_probe_aarch64_static_add",
    );
    assert!(!insns.is_empty(), "probe not found in the binary");
    check_add_path(&insns, cfg!(target_feature = "lse")).unwrap();
    assert!(
        insns.iter().any(|i| i.starts_with("adrp")),
        "the slot's address from adrp: {insns:#?}"
    );
    println!(
        "pcpu_probe_aarch64_static_add ({}):\n  {}",
        pcpu_counter::arch::NAME,
        insns.join("\n  ")
    );
}
