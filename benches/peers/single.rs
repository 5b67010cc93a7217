//! One thread, no contention: the cost of one add against the hardware's limits.
//!
//! Every loop body is 8 adds (`eight!`, or 8 counters in turn) and runs `black_box(n)` times,
//! so every variant pays the same loop overhead and the compiler cannot count the
//! iterations. This crate's add is an `asm!` block with a memory clobber, the atomic peer a
//! real `lock inc`, and the plain add a volatile load and store, so no loop can be folded or
//! merged: `cargo xtask bench` disassembles these functions into the report to show it.

use std::arch::asm;
use std::hint::black_box;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use pcpu_counter::sim::Machine;
use pcpu_counter::{
    freebsd::{counter_enter, counter_exit},
    Counter,
};

use crate::harness::{add_rounds, eight, medians_in_turn, Sink};

/// This crate's add on one counter, 8n times.
#[inline(never)]
pub fn pcpu_one(counter: &Counter<'_>, n: u64) {
    for _ in 0..n {
        eight!(counter.add(1));
    }
}

/// This crate's add on 8 counters in turn, n rounds (8n adds).
#[inline(never)]
pub fn pcpu_eight(counters: &[Counter<'_>; 8], n: u64) {
    for _ in 0..n {
        for counter in counters {
            counter.add(1);
        }
    }
}

pcpu_counter::percpu_counter!(static S0);
pcpu_counter::percpu_counter!(static S1);
pcpu_counter::percpu_counter!(static S2);
pcpu_counter::percpu_counter!(static S3);
pcpu_counter::percpu_counter!(static S4);
pcpu_counter::percpu_counter!(static S5);
pcpu_counter::percpu_counter!(static S6);
pcpu_counter::percpu_counter!(static S7);

/// 8 per-CPU statics (`percpu_counter!`) in turn, n rounds (8n adds): each add one
/// `add qword ptr gs:[rip + SLOT], reg` (and, in this simulation, the check that the thread
/// holds a CPU of the machine with the statics).
#[inline(never)]
pub fn static_eight(n: u64) {
    for _ in 0..n {
        S0.add(1);
        S1.add(1);
        S2.add(1);
        S3.add(1);
        S4.add(1);
        S5.add(1);
        S6.add(1);
        S7.add(1);
    }
}

/// Diagnostic: the 8 statics' adds as a kernel build compiles `static_eight` (the same
/// `add qword ptr gs:[rip + SLOT], 1` instructions, without this simulation's check).
///
/// # Safety
/// The thread's GS base is its CPU's register on the machine with the statics.
#[inline(never)]
pub unsafe fn static_asm_eight(n: u64) {
    for _ in 0..n {
        // SAFETY: the caller's contract: GS plus each slot's address is the CPU's copy.
        unsafe {
            asm!(
                "add qword ptr gs:[rip + {s0}], 1",
                "add qword ptr gs:[rip + {s1}], 1",
                "add qword ptr gs:[rip + {s2}], 1",
                "add qword ptr gs:[rip + {s3}], 1",
                "add qword ptr gs:[rip + {s4}], 1",
                "add qword ptr gs:[rip + {s5}], 1",
                "add qword ptr gs:[rip + {s6}], 1",
                "add qword ptr gs:[rip + {s7}], 1",
                s0 = sym S0::SLOT, s1 = sym S1::SLOT, s2 = sym S2::SLOT, s3 = sym S3::SLOT,
                s4 = sym S4::SLOT, s5 = sym S5::SLOT, s6 = sym S6::SLOT, s7 = sym S7::SLOT,
                options(nostack),
            )
        };
    }
}

/// The statics' totals, in order.
fn static_totals() -> [u64; 8] {
    [
        S0.fetch(),
        S1.fetch(),
        S2.fetch(),
        S3.fetch(),
        S4.fetch(),
        S5.fetch(),
        S6.fetch(),
        S7.fetch(),
    ]
}

/// `counter_enter`, 8 protected adds to 8 counters, `counter_exit`; n times.
#[inline(never)]
pub fn pcpu_protected(counters: &[Counter<'_>; 8], n: u64) {
    for _ in 0..n {
        let guard = counter_enter();
        for counter in counters {
            counter.add_protected(&guard, 1);
        }
        counter_exit(guard);
    }
}

/// An uncontended `AtomicU64::fetch_add`, 8n times.
#[inline(never)]
pub fn atomic_one(atomic: &AtomicU64, n: u64) {
    for _ in 0..n {
        eight!(atomic.fetch_add(1, Relaxed));
    }
}

/// Uncontended `fetch_add` on 8 atomics in turn, n rounds.
#[inline(never)]
pub fn atomic_eight(atomics: &[AtomicU64; 8], n: u64) {
    for _ in 0..n {
        for atomic in atomics {
            atomic.fetch_add(1, Relaxed);
        }
    }
}

/// A plain, non-atomic add through a pointer (volatile load and store), 8n times.
///
/// # Safety
/// `slot` is valid for reads and writes and nothing else touches it meanwhile.
#[inline(never)]
pub unsafe fn plain_one(slot: *mut u64, n: u64) {
    for _ in 0..n {
        // SAFETY: the caller's contract.
        eight!(unsafe { ptr::write_volatile(slot, ptr::read_volatile(slot) + 1) });
    }
}

/// The plain add on 8 slots in turn, n rounds.
///
/// # Safety
/// As [`plain_one`], for the 8 slots from `slots`.
#[inline(never)]
pub unsafe fn plain_eight(slots: *mut u64, n: u64) {
    for _ in 0..n {
        for i in 0..8 {
            // SAFETY: the caller's contract; `i < 8`.
            unsafe {
                let slot = slots.add(i);
                ptr::write_volatile(slot, ptr::read_volatile(slot) + 1);
            }
        }
    }
}

/// Diagnostic: this crate's instruction, `add gs:[off], 1`, written here with the offset
/// held in a register (the crate's `asm!` has a memory clobber, so the compiler reloads the
/// handle's offset from memory before every add).
///
/// # Safety
/// The thread's GS base points at a zone block and `off` is a live slot of it.
#[inline(never)]
pub unsafe fn gs_asm_one(off: usize, n: u64) {
    for _ in 0..n {
        // SAFETY: the caller's contract.
        eight!(unsafe { asm!("add qword ptr gs:[{off}], 1", off = in(reg) off, options(nostack)) });
    }
}

/// Diagnostic: `add gs:[off], 1` on 8 offsets held in registers, n rounds.
///
/// # Safety
/// As [`gs_asm_one`], for every offset in `offs`.
#[inline(never)]
pub unsafe fn gs_asm_eight(offs: [usize; 8], n: u64) {
    let [a, b, c, d, e, f, g, h] = offs;
    for _ in 0..n {
        // SAFETY: the caller's contract.
        unsafe {
            asm!(
                "add qword ptr gs:[{a}], 1",
                "add qword ptr gs:[{b}], 1",
                "add qword ptr gs:[{c}], 1",
                "add qword ptr gs:[{d}], 1",
                "add qword ptr gs:[{e}], 1",
                "add qword ptr gs:[{f}], 1",
                "add qword ptr gs:[{g}], 1",
                "add qword ptr gs:[{h}], 1",
                a = in(reg) a, b = in(reg) b, c = in(reg) c, d = in(reg) d,
                e = in(reg) e, f = in(reg) f, g = in(reg) g, h = in(reg) h,
                options(nostack),
            )
        };
    }
}

/// Diagnostic: the same instruction without the GS segment, `add qword ptr [p], 1`.
///
/// # Safety
/// `slot` is valid for reads and writes and nothing else touches it meanwhile.
#[inline(never)]
pub unsafe fn plain_asm_one(slot: *mut u64, n: u64) {
    for _ in 0..n {
        // SAFETY: the caller's contract.
        eight!(unsafe { asm!("add qword ptr [{p}], 1", p = in(reg) slot, options(nostack)) });
    }
}

/// One measured loop: where it is recorded, the adds (or sequences) one call makes, and the
/// call.
struct Variant<'a> {
    section: &'static str,
    name: &'static str,
    counters: usize,
    unit: &'static str,
    ops: u64,
    call: Box<dyn FnMut() + 'a>,
}

fn variant<'a>(
    section: &'static str,
    name: &'static str,
    counters: usize,
    unit: &'static str,
    ops: u64,
    call: Box<dyn FnMut() + 'a>,
) -> Variant<'a> {
    Variant {
        section,
        name,
        counters,
        unit,
        ops,
        call,
    }
}

pub fn run(sink: &mut Sink, quick: bool) {
    // Many short rounds (262,144 adds each), every variant once per round in turn: a
    // preemption spoils one sample, which the median skips, and a slow drift (clock, other
    // load) hits every variant alike.
    let (rounds, n) = add_rounds(quick);
    let n: u64 = black_box(n);
    let calls = rounds as u64 * n;
    // A machine whose CPU also holds the per-CPU statics (the same zone otherwise).
    let machine = Machine::with_statics(1, 64).expect("machine with statics");
    let _bound = machine.bind(0).expect("bind");
    let statics_before = static_totals();
    let one = machine.alloc().expect("alloc");
    let eight: [Counter<'_>; 8] = std::array::from_fn(|_| machine.alloc().expect("alloc"));
    let offs: [usize; 8] = std::array::from_fn(|i| eight[i].offset());
    let atomic = AtomicU64::new(0);
    let atomics: [AtomicU64; 8] = Default::default();
    let mut plain = [0u64; 8];
    let mut slot = 0u64;
    let (plain_ptr, slot_ptr) = (plain.as_mut_ptr(), &mut slot as *mut u64);

    let (single, diag, per_add) = ("single", "diag", "ns/add");
    let protected = "counter_enter + 8 add_protected + counter_exit";
    // SAFETY (the `unsafe` calls below): `plain` and `slot` are locals that only these
    // loops touch, one at a time; the thread is bound, so GS points at CPU 0's block, where
    // `one` and `eight` are live.
    let mut variants = [
        variant(
            single,
            "pcpu-counter add",
            1,
            per_add,
            8 * n,
            Box::new(|| pcpu_one(&one, n)),
        ),
        variant(
            single,
            "pcpu-counter add",
            8,
            per_add,
            8 * n,
            Box::new(|| pcpu_eight(&eight, n)),
        ),
        variant(
            single,
            "AtomicU64::fetch_add",
            1,
            per_add,
            8 * n,
            Box::new(|| atomic_one(&atomic, n)),
        ),
        variant(
            single,
            "AtomicU64::fetch_add",
            8,
            per_add,
            8 * n,
            Box::new(|| atomic_eight(&atomics, n)),
        ),
        // SAFETY: see above.
        variant(
            single,
            "plain add (volatile)",
            1,
            per_add,
            8 * n,
            Box::new(|| unsafe { plain_one(slot_ptr, n) }),
        ),
        // SAFETY: see above.
        variant(
            single,
            "plain add (volatile)",
            8,
            per_add,
            8 * n,
            Box::new(|| unsafe { plain_eight(plain_ptr, n) }),
        ),
        variant(
            single,
            "per-CPU static add",
            8,
            per_add,
            8 * n,
            Box::new(|| static_eight(n)),
        ),
        variant(
            single,
            protected,
            8,
            "ns/sequence",
            n,
            Box::new(|| pcpu_protected(&eight, n)),
        ),
        // SAFETY: see above.
        variant(
            diag,
            "add gs:[off], offset in a register",
            1,
            per_add,
            8 * n,
            Box::new(|| unsafe { gs_asm_one(one.offset(), n) }),
        ),
        // SAFETY: see above.
        variant(
            diag,
            "add [p], no segment",
            1,
            per_add,
            8 * n,
            Box::new(|| unsafe { plain_asm_one(slot_ptr, n) }),
        ),
        // SAFETY: see above.
        // SAFETY: see above; the machine holds the statics.
        variant(
            diag,
            "static add, kernel form (no simulation check)",
            8,
            per_add,
            8 * n,
            Box::new(|| unsafe { static_asm_eight(n) }),
        ),
        variant(
            diag,
            "add gs:[off], offsets in registers",
            8,
            per_add,
            8 * n,
            Box::new(|| unsafe { gs_asm_eight(offs, n) }),
        ),
    ];
    let medians = medians_in_turn(rounds, variants.len(), |i| {
        (variants[i].call)();
        variants[i].ops
    });
    for (v, median) in variants.iter().zip(medians) {
        sink.record(v.section, v.name, v.counters, median, v.unit);
    }
    drop(variants);

    // Every add landed: `one` got pcpu_one and gs_asm_one, each of `eight` one add per call
    // of pcpu_eight, pcpu_protected and gs_asm_eight.
    assert_eq!(one.fetch(), 2 * 8 * calls, "pcpu-counter lost adds");
    for counter in &eight {
        assert_eq!(counter.fetch(), 3 * calls, "pcpu-counter lost adds");
    }
    for (after, before) in static_totals().into_iter().zip(statics_before) {
        assert_eq!(after - before, 2 * calls, "per-CPU statics lost adds");
    }
    assert_eq!(atomic.load(Relaxed), 8 * calls);
    assert!(atomics.iter().all(|a| a.load(Relaxed) == calls));
    assert_eq!(slot, 2 * 8 * calls);
    assert_eq!(plain, [calls; 8]);
}
