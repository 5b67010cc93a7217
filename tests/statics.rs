//! Per-CPU statics (`percpu_counter!`): exact sums from many simulated CPUs adding at once,
//! early adds kept once, the lossless zero, the install's checks, and (in the broken build,
//! `--cfg pcpu_counter_broken="static_shared_add"`: the add without `gs:`) lost adds that the
//! same harness must catch.
//!
//! One machine with statics at a time (the install is global, as a kernel's): every test
//! takes `ONE_MACHINE`.
#![cfg(unix)]

mod common;

use common::Workload;
use pcpu_counter::__private::StaticSlot;
use pcpu_counter::sim::Machine;
use pcpu_counter::statics::{self, StaticCounter};
use pcpu_counter::{Area, AreaShape, Error, ZoneLayout};
use std::sync::Mutex;

static ONE_MACHINE: Mutex<()> = Mutex::new(());

fn one_machine() -> std::sync::MutexGuard<'static, ()> {
    ONE_MACHINE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The per-CPU register as a kernel has it before the install: 0, so that adds reach the
/// template. On x86_64 an unbound thread's GS base is 0 already. On i386 a kernel boots with
/// a flat data segment (base 0) in `%fs` (docs/c.md), but a Linux thread's `%fs` is the null
/// selector, through which an add faults: load the flat one, as `%ds` holds it.
fn register_as_at_boot() {
    #[cfg(target_arch = "x86")]
    // SAFETY: copies the thread's flat user data selector into `%fs`, which neither glibc
    // (its TLS is in `%gs`) nor the simulation (it reloads `%fs` when it binds) relies on.
    unsafe {
        core::arch::asm!("mov {0:x}, ds", "mov fs, {0:x}", out(reg) _, options(nostack, preserves_flags));
    }
}

pcpu_counter::percpu_counter!(
    /// Counted by the harness.
    static PACKETS
);
pcpu_counter::percpu_counter!(static BYTES);
pcpu_counter::percpu_counter!(pub static ERRORS);
pcpu_counter::percpu_counter!(pub(crate) static DROPS);
pcpu_counter::percpu_counter!(static EARLY);
pcpu_counter::percpu_counter!(static ZEROED);
pcpu_counter::percpu_counter!(static SLOTS);
pcpu_counter::percpu_counter!(static RACED);

/// The harness's counters, by index.
#[cfg_attr(pcpu_counter_broken = "static_shared_add", allow(dead_code))]
fn harness_add(i: usize, v: i64) {
    match i {
        0 => PACKETS.add(v),
        1 => BYTES.add(v),
        2 => ERRORS.add(v),
        _ => DROPS.inc(),
    }
}

#[cfg_attr(pcpu_counter_broken = "static_shared_add", allow(dead_code))]
fn fetch_all() -> Vec<u64> {
    vec![
        PACKETS.fetch(),
        BYTES.fetch(),
        ERRORS.fetch(),
        DROPS.fetch(),
    ]
}

#[cfg_attr(pcpu_counter_broken = "static_shared_add", allow(dead_code))]
fn zero_all() {
    PACKETS.zero();
    BYTES.zero();
    ERRORS.zero();
    DROPS.zero();
}

/// Each static is its own slot of the section, 8 bytes, inside the linker's bounds.
#[test]
fn statics_are_slots_of_the_section() {
    let (start, stop) = statics::template();
    let offs = [
        PACKETS.offset(),
        BYTES.offset(),
        ERRORS.offset(),
        DROPS.offset(),
    ];
    for off in offs {
        assert!(
            start <= off && off + 8 <= stop,
            "{off:#x} in {start:#x}..{stop:#x}"
        );
        assert_eq!(off % 8, 0);
    }
    let mut sorted = offs.to_vec();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 4);
    assert_eq!(
        <PACKETS::Marker as StaticSlot>::slot().offset(),
        PACKETS.offset()
    );
}

/// 8 threads on 6 simulated CPUs, migrating every round, add random signed values (and 1s
/// through `inc`): every static sums exactly to what was added, a second run after a zero too.
#[cfg(not(pcpu_counter_broken = "static_shared_add"))]
#[test]
fn many_cpus_sum_exactly() {
    let _one = one_machine();
    let machine = Machine::with_statics(6, 16).unwrap();
    zero_all();
    for seed in 1..=2 {
        let w = Workload {
            threads: 8,
            rounds: 50,
            adds_per_round: 2_000,
            counters: 4,
            range: 1 << 20,
            seed,
        };
        let mut expected = common::run(&machine, w, &harness_add);
        // `inc` adds 1 whatever the value drawn: count the adds to DROPS instead.
        expected[3] = fetch_all()[3];
        assert_eq!(fetch_all(), expected, "seed {seed}");
        zero_all();
        assert_eq!(fetch_all(), [0, 0, 0, 0]);
    }
    // DROPS counted exactly too: the inc path, from every CPU at once.
    std::thread::scope(|s| {
        for t in 0..6 {
            let machine = &machine;
            s.spawn(move || machine.run_on(t, || (0..10_000).for_each(|_| DROPS.inc())));
        }
    });
    assert_eq!(DROPS.fetch(), 60_000);
    for cpu in 0..6 {
        assert!(DROPS.cpu_slot(cpu).unwrap() >= 10_000);
    }
}

/// Adds made before any install (the boot CPU, register 0) reach the template and are kept,
/// once, by `fetch` after the install; the install clears the blocks, it does not copy.
#[test]
fn early_adds_are_kept_once() {
    let _one = one_machine();
    register_as_at_boot();
    assert_eq!(statics::installed(), None);
    let before = EARLY.fetch();
    EARLY.add(40);
    EARLY.inc();
    EARLY.inc();
    assert_eq!(EARLY.fetch(), before + 42);
    assert_eq!(EARLY.cpu_slot(0), Err(Error::NotInstalled));
    let machine = Machine::with_statics(3, 8).unwrap();
    assert_eq!(EARLY.fetch(), before + 42);
    for cpu in 0..3 {
        assert_eq!(EARLY.cpu_slot(cpu), Ok(0));
        machine.run_on(cpu, || EARLY.add(cpu as i64 + 1));
    }
    assert_eq!(EARLY.fetch(), before + 42 + 6);
    assert_eq!(EARLY.cpu_slot(2), Ok(3));
    assert_eq!(
        EARLY.cpu_slot(3),
        Err(Error::CpuOutOfRange { cpu: 3, ncpus: 3 })
    );
    drop(machine);
    // The blocks went with the machine: the template alone again.
    assert_eq!(EARLY.fetch(), before + 42);
}

/// `fetch_and_zero` returns the count and leaves 0, moving the baseline, not the slots; the
/// deltas add up to every add.
#[test]
fn fetch_and_zero_moves_the_baseline() {
    let _one = one_machine();
    let machine = Machine::with_statics(2, 8).unwrap();
    ZEROED.zero();
    machine.run_on(0, || ZEROED.add(7));
    machine.run_on(1, || ZEROED.add(5));
    assert_eq!(ZEROED.fetch_and_zero(), 12);
    assert_eq!(ZEROED.fetch(), 0);
    assert_eq!((ZEROED.cpu_slot(0), ZEROED.cpu_slot(1)), (Ok(7), Ok(5)));
    machine.run_on(1, || ZEROED.add(-2));
    assert_eq!(ZEROED.fetch() as i64, -2);
    assert_eq!(
        format!("{ZEROED:?}"),
        format!(
            "StaticCounter {{ offset: {}, value: {} }}",
            ZEROED.offset(),
            -2i64 as u64
        )
    );
}

/// The install is one per kernel, and shares the area with the machine's zone: a second
/// install, a zone needing other registers, and one whose blocks a CPU's copy of the
/// template would overlap are refused.
#[test]
fn the_install_is_checked() {
    let _one = one_machine();
    let machine = Machine::with_statics(2, 8).unwrap();
    let shape = statics::installed().unwrap();
    assert_eq!(shape.ncpus, 2);
    // The registers are the copies' addresses minus the template's start.
    let (start, stop) = statics::template();
    assert!(shape.stride >= stop - start);
    assert_eq!(machine.zone().cpu_base(1), Ok(shape.base + shape.stride));
    assert_eq!(
        Machine::with_statics(2, 8).unwrap_err(),
        Error::AlreadyInstalled
    );
    let area = machine.zone().area();
    assert_eq!(area.shape(), Some(shape));
    // A zone of other register values in that area.
    let mut meta = [0u64; 4];
    let other = ZoneLayout {
        offset: 0,
        len: 8,
        ..ZoneLayout::dense(shape.base + 8, shape.stride, 2)
    };
    // SAFETY: refused before any memory is used.
    let err = unsafe { pcpu_counter::Zone::from_raw_parts_in(area, other, &mut meta) }.unwrap_err();
    assert_eq!(
        err,
        Error::AreaMismatch {
            in_force: shape,
            needed: AreaShape::of(&other)
        }
    );
}

/// An add from a thread that holds no CPU of the machine with the statics is refused by the
/// simulation's check, not written through a stale register.
#[test]
fn an_add_off_the_machine_is_refused() {
    let _one = one_machine();
    let machine = Machine::with_statics(2, 8).unwrap();
    let other = Machine::new(2);
    let r = std::thread::scope(|s| s.spawn(|| other.run_on(0, || SLOTS.inc())).join());
    assert!(r.is_err());
    let r = std::thread::scope(|s| s.spawn(|| SLOTS.add(1)).join());
    assert!(r.is_err());
    assert_eq!(SLOTS.fetch(), 0);
    machine.run_on(1, || SLOTS.inc());
    assert_eq!(SLOTS.fetch(), 1);
}

/// The broken build adds to the template without `gs:`: CPUs adding at once lose adds, and
/// the same harness sees it (tries, not time, bound it, as `tests/counting.rs`'s racy `+=`).
#[cfg(pcpu_counter_broken = "static_shared_add")]
#[test]
fn harness_catches_a_shared_static_add() {
    const TRIES: u64 = 24;
    let _one = one_machine();
    let machine = Machine::with_statics(4, 8).unwrap();
    let caught = (0..TRIES).find_map(|attempt| {
        RACED.zero();
        let w = Workload {
            threads: 4,
            rounds: 20,
            adds_per_round: 20_000 << attempt.min(7),
            counters: 1,
            range: 0,
            seed: attempt,
        };
        let expected = common::run(&machine, w, &|_, v| RACED.add(v));
        let lost = expected[0] - RACED.fetch();
        (lost > 0).then_some((attempt + 1, lost, expected[0]))
    });
    let (tries, lost, adds) = caught.unwrap_or_else(|| {
        panic!("a shared static add lost nothing in {TRIES} tries: the harness cannot fail")
    });
    println!("a shared static add lost {lost} of {adds} adds, caught on try {tries}");
}

/// `StaticCounter` is the type the macro names.
#[allow(dead_code)]
fn the_type_is_public(c: &'static StaticCounter<PACKETS::Marker>) -> u64 {
    c.fetch()
}

pcpu_counter::percpu_counter!(static REGISTERED);

/// A static registers as a counter does: its value in a snapshot, zeroed by name.
#[test]
fn a_static_registers_as_a_counter() {
    use pcpu_counter::registry::Registry;
    static STATS: Registry<'static, 4> = Registry::new();
    let _one = one_machine();
    let machine = Machine::with_statics(2, 8).unwrap();
    REGISTERED.zero();
    machine.run_on(1, || REGISTERED.add(9));
    STATS
        .register("net.registered", "a per-CPU static", &REGISTERED)
        .unwrap();
    let seen: Vec<String> = STATS.snapshot().map(|s| s.to_string()).collect();
    assert_eq!(seen, ["net.registered = 9"]);
    STATS.zero("net.registered").unwrap();
    assert_eq!(REGISTERED.fetch(), 0);
    assert_eq!(REGISTERED.cpu_slot(1), Ok(9));
}

pcpu_counter::percpu_counter!(static BY_PROTO: [3]);

/// An array's elements are adjacent slots, each counted exactly from every CPU, fetched and
/// zeroed together; an index out of range panics.
#[test]
fn an_array_counts_each_element() {
    let _one = one_machine();
    let machine = Machine::with_statics(4, 8).unwrap();
    BY_PROTO.zero_all();
    std::thread::scope(|s| {
        for cpu in 0..4 {
            let machine = &machine;
            s.spawn(move || {
                machine.run_on(cpu, || {
                    for _ in 0..1000 {
                        BY_PROTO.inc(0);
                        BY_PROTO.add(2, cpu as i64);
                    }
                })
            });
        }
    });
    let mut out = [0; 3];
    BY_PROTO.fetch_all(&mut out);
    assert_eq!(out, [4000, 0, 6000]);
    assert_eq!(BY_PROTO.cpu_slot(2, 3), Ok(3000));
    BY_PROTO.fetch_and_zero_all(&mut out);
    assert_eq!(out, [4000, 0, 6000]);
    BY_PROTO.fetch_all(&mut out);
    assert_eq!(out, [0, 0, 0]);
    let r = std::panic::catch_unwind(|| BY_PROTO.fetch(3));
    assert!(r.is_err());
}

pcpu_counter::percpu_counter!(static FROM_C);

/// The C ABI of the statics, on a slot of the section (a C kernel's `PCPU_COUNTER_DEFINE`
/// makes the same `struct pcpu_static`): the out-of-line add, fetch and the lossless zero,
/// and the install's refusals.
#[test]
fn the_c_abi_adds_fetches_and_zeroes() {
    use pcpu_counter::capi::*;
    let _one = one_machine();
    register_as_at_boot();
    let mut s = pcpu_static {
        slot: FROM_C::SLOT.offset() as *mut u64,
        baseline: 0,
    };
    // SAFETY (the calls below): `s` names a slot of the section; the adds run on the boot
    // thread before any install, then on the machine's CPUs.
    unsafe {
        let early = pcpu_static_fetch(&s);
        pcpu_static_add(s.slot, 4);
        assert_eq!(pcpu_static_fetch(&s), early + 4);
        let machine = Machine::with_statics(2, 8).unwrap();
        machine.run_on(1, || pcpu_static_add(s.slot, 6));
        assert_eq!(pcpu_static_fetch(&s), early + 10);
        assert_eq!(FROM_C.cpu_slot(1), Ok(6));
        assert_eq!(pcpu_static_fetch_and_zero(&mut s), early + 10);
        assert_eq!(pcpu_static_fetch(&s), 0);
        machine.run_on(0, || pcpu_static_add(s.slot, -1));
        assert_eq!(pcpu_static_zero(&mut s), PCPU_OK);
        assert_eq!(pcpu_static_fetch(&s), 0);
        assert_eq!(pcpu_static_zero(core::ptr::null_mut()), PCPU_EINVAL);
        assert_eq!(pcpu_static_fetch(core::ptr::null()), 0);
        let shape = statics::installed().unwrap();
        assert_eq!(
            pcpu_statics_install(shape.base, shape.stride, 2),
            PCPU_EINSTALLED
        );
        drop(machine);
        assert_eq!(pcpu_statics_install(0, 256, 0), PCPU_ENOCPUS);
        assert_eq!(pcpu_statics_install(0, 12, 2), PCPU_ESTRIDE);
        assert_eq!(pcpu_statics_install(4, 256, 2), PCPU_EMISALIGNED);
        assert_eq!(pcpu_statics_install(0, 8, 2), PCPU_ESTRIDESMALL);
        // CPU 0's block would start 8 bytes below the top of the address space.
        let (start, _) = statics::template();
        let top = (usize::MAX - 7).wrapping_sub(start);
        assert_eq!(pcpu_statics_install(top, 1 << 20, 2), PCPU_EOVERFLOW);
        // CPU 0's copy 8 bytes into the template.
        assert_eq!(pcpu_statics_install(8, 1 << 20, 2), PCPU_EOVERLAP);
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            pcpu_statics_install(0xffff_0000_0045_9c68usize.wrapping_sub(start), 1 << 20, 2),
            PCPU_EUNADDR
        );
        assert_eq!(statics::installed(), None);
    }
}

/// `install` refuses copies the CPU cannot write before it writes anything (a write would
/// fault, or clear the template), naming the first such CPU and its copy's address; nothing
/// is installed and the template keeps its early counts.
mod unwritable {
    use super::*;

    pcpu_counter::percpu_counter!(static KEPT);

    /// Installs `shape` in the kernel's area, which the refusals leave untouched.
    fn install(base: usize, stride: usize, ncpus: usize) -> Result<(), Error> {
        let shape = AreaShape {
            base,
            stride,
            ncpus,
        };
        // SAFETY: every shape here is refused before any write (a write would fault or
        // change `KEPT`, which the tests check).
        unsafe { statics::install_section(Area::global(), shape) }
    }

    /// The template's bounds, with an early count in `KEPT` and no install in force.
    fn template_with_an_early_count() -> (usize, usize) {
        register_as_at_boot();
        assert_eq!(statics::installed(), None);
        KEPT.add(5);
        statics::template()
    }

    fn nothing_changed(kept: u64) {
        assert_eq!(statics::installed(), None);
        assert_eq!(Area::global().shape(), None);
        assert_eq!(KEPT.fetch(), kept);
    }

    /// x86_64: the register taken as the block itself (base = the percpu area, a kernel
    /// address), so CPU 0's copy is two kernel addresses added: `0xffff_0000_0045_9c68`, not
    /// canonical. Refused with that CPU and address (the rule is checked on every host through
    /// `AddressSpace::X86_64`; the install applies the target's).
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn a_non_canonical_copy() {
        use pcpu_counter::AddressSpace;
        let _one = one_machine();
        let (start, stop) = template_with_an_early_count();
        let kept = KEPT.fetch();
        let copy0: usize = 0xffff_0000_0045_9c68;
        let want = Error::Unaddressable {
            what: "statics",
            cpu: 0,
            addr: copy0,
            space: AddressSpace::X86_64,
        };
        assert_eq!(
            want.to_string(),
            "statics: CPU 0's copy at 0xffff000000459c68 is not a canonical x86_64 address \
             (4-level paging: bits 63..47 all equal): no CPU can write there"
        );
        assert_eq!(
            AddressSpace::X86_64.check_copies("statics", copy0, 0, 0x1000, stop - start, 4),
            Err(want)
        );
        if AddressSpace::TARGET == AddressSpace::X86_64 {
            assert_eq!(install(copy0.wrapping_sub(start), 0x1000, 4), Err(want));
            // CPUs 0 and 1 below 2^47, CPU 2's copy at it.
            let at_hole = (1usize << 47) - 0x2000;
            assert_eq!(
                install(at_hole.wrapping_sub(start), 0x1000, 4),
                Err(Error::Unaddressable {
                    what: "statics",
                    cpu: 2,
                    addr: 1 << 47,
                    space: AddressSpace::X86_64
                })
            );
        }
        nothing_changed(kept);
    }

    /// Every arch: CPU 1's copy would run past the end of the address space.
    #[test]
    fn a_copy_that_wraps() {
        let _one = one_machine();
        let (start, stop) = template_with_an_early_count();
        let kept = KEPT.fetch();
        let len = stop - start;
        // CPU 0's copy ends 8 bytes below the top; CPU 1's starts a stride later, past it.
        let stride = len.next_multiple_of(8) + 8;
        let copy0 = (usize::MAX - 7 - len) & !7;
        let want = Error::WrapsAround {
            what: "statics",
            cpu: 1,
            addr: copy0.wrapping_add(stride),
            len,
        };
        assert_eq!(install(copy0.wrapping_sub(start), stride, 2), Err(want));
        assert_eq!(
            want.to_string(),
            format!(
                "statics: CPU 1's copy, {len} bytes at {:#x} (modulo 2^64), wraps around the \
                 end of the address space",
                copy0.wrapping_add(stride)
            )
        );
        nothing_changed(kept);
    }

    /// Every arch: CPU 1's copy starts 8 bytes into the template (base + stride = 8): clearing
    /// it would erase the template's early counts.
    #[test]
    fn a_copy_over_the_template() {
        let _one = one_machine();
        let (start, stop) = template_with_an_early_count();
        let kept = KEPT.fetch();
        let len = stop - start;
        let stride = (len + 8).next_multiple_of(4096);
        let want = Error::CopyOverlapsTemplate {
            cpu: 1,
            addr: start + 8,
            template: start,
            len,
        };
        assert_eq!(install(8usize.wrapping_sub(stride), stride, 2), Err(want));
        // CPU 0's copy 8 bytes below the template, its tail over the template's head.
        assert_eq!(
            install(8usize.wrapping_neg(), stride, 2),
            Err(Error::CopyOverlapsTemplate {
                cpu: 0,
                addr: start - 8,
                template: start,
                len,
            })
        );
        assert_eq!(
            want.to_string(),
            format!(
                "statics: CPU 1's copy at {:#x} overlaps the template (the section itself, \
                 {len} bytes at {start:#x}): a copy is the template exactly (register 0) or \
                 apart from it",
                start + 8
            )
        );
        nothing_changed(kept);
    }

    /// The former name `statics::install` is `install_section`: the same refusals, nothing
    /// installed.
    #[test]
    #[allow(deprecated)]
    fn the_former_name_installs_as_install_section() {
        let _one = one_machine();
        template_with_an_early_count();
        let kept = KEPT.fetch();
        let shape = AreaShape {
            base: 0,
            stride: 256,
            ncpus: 0,
        };
        // SAFETY: refused before any write (no CPUs).
        assert_eq!(
            unsafe { statics::install(Area::global(), shape) },
            Err(Error::NoCpus)
        );
        nothing_changed(kept);
    }
}
