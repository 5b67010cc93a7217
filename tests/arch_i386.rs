//! i386 specifics: the CX8 gate, both add paths (CX8 `cmpxchg8b` loop and the no-CX8 plain
//! add under protection), interrupts inside the `cmpxchg8b` loop, another CPU's slot read (a
//! `lock cmpxchg8b`) racing its adds, the FS descriptor helper, and the disassembly of
//! `Counter::add`.
//!
//! `cargo xtask cross` runs this whole suite twice on i686: as is (CX8) and with
//! `PCPU_COUNTER_FORCE_NO_CX8=1` (every add takes the no-CX8 path), runs it again under
//! qemu-i386 without the tests that take signals, and builds it once more with the remote read
//! broken (`--cfg pcpu_counter_broken="i386_unlocked_read"`), where
//! `remote_reads_racing_adds_lose_nothing` must fail.
#![cfg(target_arch = "x86")]

mod common;

use pcpu_counter::arch;
use pcpu_counter::sim::{self, Machine};
use pcpu_counter::Counter;
use std::sync::Mutex;

/// The tests that switch the path (`force_no_cx8`) must not overlap with other adds here.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether this run forces the no-CX8 path from the environment.
fn forced() -> bool {
    std::env::var_os("PCPU_COUNTER_FORCE_NO_CX8").is_some()
}

#[test]
fn the_path_is_the_one_the_environment_asks_for() {
    let _s = serial();
    // The simulation applies PCPU_COUNTER_FORCE_NO_CX8 as a machine is made (an add needs
    // one); every CPU this runs on (x86_64 hosts in 32-bit mode, qemu-i386) has CX8.
    let _machine = Machine::new(1);
    assert_eq!(arch::has_cx8(), !forced());
    let guard = pcpu_counter::freebsd::counter_enter();
    assert_eq!(guard.holds_protection(), forced());
    drop(guard);
    println!("i386 binds: {}", sim::i386::host_fs_mechanism());
    println!(
        "i386 add path: {}",
        if arch::has_cx8() {
            "CX8 (cmpxchg8b loop)"
        } else {
            "no CX8 (plain add under protection)"
        }
    );
}

/// Adds that carry across the 32-bit halves, and negative ones, from 4 CPUs at once.
fn carries_and_negatives(machine: &Machine, c: &Counter<'_>) {
    std::thread::scope(|s| {
        for cpu in 0..machine.ncpus() {
            s.spawn(move || {
                machine.run_on(cpu, || {
                    for _ in 0..1000 {
                        c.add(0xFFFF_FFFF); // carries into the high half every other add
                        c.add(-3);
                        c.inc();
                    }
                })
            });
        }
    });
}

#[test]
fn both_paths_add_exactly_across_the_32_bit_halves() {
    let _s = serial();
    let mut paths = Vec::new();
    for force in [false, true] {
        sim::i386::force_no_cx8(force);
        paths.push(arch::has_cx8());
        let machine = Machine::new(4);
        let c = machine.alloc().unwrap();
        carries_and_negatives(&machine, &c);
        let per_cpu = 1000 * (0xFFFF_FFFFu64 - 2);
        for cpu in 0..4 {
            assert_eq!(c.cpu_slot(cpu), Ok(per_cpu), "cpu {cpu}, force {force}");
        }
        assert_eq!(c.fetch(), 4 * per_cpu, "force {force}");
        // A slot above 2^32 reads whole: no torn read of the two halves.
        assert!(per_cpu > 1 << 32);
    }
    sim::i386::force_no_cx8(false);
    assert_eq!(arch::has_cx8(), !forced());
    assert_eq!(paths, vec![!forced(), false], "both paths ran");
}

#[test]
fn counter_enter_holds_protection_exactly_without_cx8() {
    let _s = serial();
    for force in [false, true] {
        sim::i386::force_no_cx8(force);
        let machine = Machine::new(2);
        let c = machine.alloc().unwrap();
        machine.run_on(1, || {
            let guard = pcpu_counter::freebsd::counter_enter();
            assert_eq!(guard.holds_protection(), !arch::has_cx8());
            c.add_protected(&guard, 5);
            c.add_protected(&guard, -2);
        });
        assert_eq!((c.fetch(), c.cpu_slot(1)), (3, Ok(3)));
    }
    sim::i386::force_no_cx8(false);
}

/// A measurement, not a check (run it with `-- --ignored --nocapture bind_rate`, and again
/// with `PCPU_COUNTER_FORCE_LDT=1` for the LDT path): binds per second, one thread
/// alternating between two CPUs and adding once on each.
#[test]
#[ignore = "a measurement: binds per second"]
fn bind_rate() {
    const BINDS: u64 = 200_000;
    let machine = Machine::new(2);
    let c = machine.alloc().unwrap();
    let started = std::time::Instant::now();
    for i in 0..BINDS {
        let _cpu = machine.bind((i % 2) as usize).unwrap();
        c.inc();
    }
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(
        (c.cpu_slot(0), c.cpu_slot(1)),
        (Ok(BINDS / 2), Ok(BINDS / 2))
    );
    println!(
        "{}: {BINDS} binds in {seconds:.2} s: {:.0} binds/s, {:.2} us each",
        sim::i386::host_fs_mechanism(),
        BINDS as f64 / seconds,
        seconds * 1e6 / BINDS as f64
    );
}

/// Interrupts land between the `cmpxchg8b` loop's load and its `cmpxchg8b` (the retries
/// count them) and the sum stays exact. Needs signals that arrive between any two
/// instructions: natively (qemu-i386 delivers them only between translation blocks).
#[test]
fn interrupts_inside_the_cmpxchg8b_loop_are_retried_exactly() {
    let _s = serial();
    const WANTED_RETRIES: u64 = 3;
    let machine = Machine::new(1);
    let c = machine.alloc().unwrap();
    let mut retries = 0u64;
    let event = format!("{WANTED_RETRIES} interrupts inside the cmpxchg8b loop");
    let (adds, handled) = common::storm_on_cpu0(&machine, &c, &event, |_| {
        // SAFETY: `storm_on_cpu0` runs this bound to CPU 0 of the counter's machine; the CPU has CX8.
        retries += u64::from(unsafe { add_counting_retries(c.offset(), 1) });
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

/// The same storm catches a split fs-relative 64-bit add (loads, add/adc, stores): the
/// interrupt tests can fail.
#[test]
fn the_storm_catches_a_racy_split_add() {
    let _s = serial();
    common::assert_storm_catches_racy_add(|off, _| {
        // SAFETY: the thread holds CPU 0, so fs:[off] is its slot of the helper's counter;
        // the split read-modify-write is the deliberate bug.
        unsafe {
            core::arch::asm!(
                "mov {lo}, fs:[{off}]",
                "mov {hi}, fs:[{off} + 4]",
                "add {lo}, 1",
                "adc {hi}, 0",
                "mov fs:[{off}], {lo}",
                "mov fs:[{off} + 4], {hi}",
                off = in(reg) off,
                lo = out(reg) _,
                hi = out(reg) _,
                options(nostack),
            )
        }
    });
}

/// A read of CPU 0's slot counts as a close race when it is at most this many adds past the
/// reader's previous read: the adder made only a few adds between two reads (about 0.1 us
/// apart), so both threads were running on two cores at once, where an unlocked read's write
/// can land between the adder's load and store. (Two threads taking turns on one core see
/// whole time slices of adds between reads.)
const CLOSE_ADDS: u64 = 1024;

/// The close races the real read must survive before the sums are checked: five times the
/// most the broken read needed to lose an add in 30 runs on a 2-core x86_64 host (13 to
/// 15,560 idle, 190 to 37,888 with 6 busy loops beside it; 0 to 3,041 under qemu-i386).
const CLOSE_RACES: u64 = 200_000;

/// How long the race may take to reach its count (the broken read's loss, or the real read's
/// close races): only turns a race that can never run (one core) into a failure, not a hang.
const RACE_CAP: std::time::Duration = std::time::Duration::from_secs(300);

/// FreeBSD's i386 hazard: reading another CPU's slot with `cmpxchg8b` WITHOUT `lock` (equal
/// operands) writes the value it read back to the slot, a second access, and an add the slot's
/// CPU stores in between is lost. The crate's read is `lock cmpxchg8b`. A thread adds on CPU 0
/// while another thread, on another core, reads CPU 0's slot (`cpu_slot`, the read `fetch`
/// makes) as fast as it can; after every 4096 adds the adder checks its slot against its own
/// count. The real read runs until [`CLOSE_RACES`] reads raced the adds closely (counted), and
/// the sums must be exact. Built with `--cfg pcpu_counter_broken="i386_unlocked_read"` (`cargo
/// xtask cross`, natively) the read is the unlocked one, and the test runs until the count
/// shows a loss, then fails on the exact sum, as it must. Both stop at [`RACE_CAP`] at the
/// latest, with a message that names the host's load.
#[test]
fn remote_reads_racing_adds_lose_nothing() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
    let _s = serial();
    const STEP: u64 = 4096;
    let broken = cfg!(pcpu_counter_broken = "i386_unlocked_read");
    let machine = Machine::new(2);
    if !arch::has_cx8() {
        // FreeBSD's rule: a machine without CX8 has one CPU, so no read races another CPU.
        println!("no-CX8 path: the remote read is a plain load under local protection; not raced");
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        println!("one core: a read cannot race an add on another core; not raced");
        return;
    }
    let c = machine.alloc().unwrap();
    let stop = AtomicBool::new(false);
    let close = AtomicU64::new(0);
    let started = std::time::Instant::now();
    let (adds, slot, reads) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let (mut last, mut reads) = (0u64, 0u64);
            while !stop.load(Relaxed) {
                let now = c.cpu_slot(0).unwrap();
                reads += 1;
                if now != last && now.wrapping_sub(last) <= CLOSE_ADDS {
                    close.fetch_add(1, Relaxed);
                }
                last = now;
            }
            reads
        });
        let (adds, slot) = machine.run_on(0, || {
            let mut adds = 0u64;
            loop {
                for _ in 0..STEP {
                    c.inc();
                }
                adds += STEP;
                let slot = c.cpu_slot(0).unwrap();
                // The broken read waits for its loss; the real one for its close races.
                let counted = slot != adds || (!broken && close.load(Relaxed) >= CLOSE_RACES);
                if counted || started.elapsed() >= RACE_CAP {
                    return (adds, slot);
                }
            }
        });
        stop.store(true, Relaxed);
        (adds, slot, reader.join().unwrap())
    });
    let close = close.into_inner();
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(
        slot,
        adds,
        "remote reads lost {} adds of {adds} on CPU 0 ({close} close races, {reads} reads, {seconds:.1} s{})",
        adds.wrapping_sub(slot),
        if broken { "; read: cmpxchg8b WITHOUT lock, the broken build" } else { "" }
    );
    assert!(
        !broken && close >= CLOSE_RACES,
        "{}: {close} close races (reads within {CLOSE_ADDS} adds of the last), {reads} reads, {adds} adds in {seconds:.0} s, with the host at {}",
        if broken {
            "the unlocked cmpxchg8b read lost no add"
        } else {
            "the reader and the adder never raced enough"
        },
        sim::host_load()
    );
    assert_eq!(c.fetch(), adds);
    println!("{adds} adds exact against {reads} reads of CPU 0's slot, {close} close races, {seconds:.1} s");
}

#[test]
fn gdt_data_descriptor_encodes_a_flat_data_segment() {
    // The classic flat 4 GiB ring-0 data descriptor.
    assert_eq!(arch::gdt_data_descriptor(0), 0x00CF_9300_0000_FFFF);
    assert_eq!(
        arch::gdt_data_descriptor(0x1234_5678),
        0x12CF_9334_5678_FFFF
    );
    assert_eq!(
        arch::gdt_data_descriptor(0xFFFF_F000),
        0xFFCF_93FF_F000_FFFF
    );
}

#[test]
fn set_cpu_base_rejects_bad_selectors_without_writing() {
    let mut entry = 0u64;
    // SAFETY: every call here is rejected before it writes or loads anything.
    unsafe {
        for selector in [0, 3, 0x0F] {
            // null, null with RPL 3, one that names the LDT
            assert_eq!(
                arch::set_cpu_base(&mut entry, selector, 0x1000),
                Err(pcpu_counter::Error::BadSelector { selector })
            );
        }
    }
    assert_eq!(entry, 0);
}

/// The probe: nothing but a counter add, kept out of line so it can be found and read.
#[inline(never)]
#[unsafe(no_mangle)]
pub fn pcpu_probe_i386_counter_add(counter: &Counter<'_>, v: i64) {
    counter.add(v)
}

/// What the add path must be: one non-locked `cmpxchg8b` on `fs:` inside a backward loop,
/// the no-CX8 `add`/`adc` pair on `fs:`, no `lock` anywhere, no indirect call.
fn check_add_path(insns: &[String]) -> Result<(), String> {
    let cmpxchg: Vec<&String> = insns.iter().filter(|i| i.contains("cmpxchg8b")).collect();
    match cmpxchg.as_slice() {
        [one] if one.starts_with("cmpxchg8b") && one.contains("fs:[") => {}
        _ => {
            return Err(format!(
                "expected one unlocked `cmpxchg8b fs:[..]`: {insns:#?}"
            ))
        }
    }
    if let Some(lock) = insns.iter().find(|i| i.starts_with("lock")) {
        return Err(format!("lock prefix on the add path: {lock}"));
    }
    let at = insns.iter().position(|i| i.contains("cmpxchg8b")).unwrap();
    if !insns.get(at + 1).is_some_and(|i| i.starts_with("jne")) {
        return Err(format!("no retry branch right after cmpxchg8b: {insns:#?}"));
    }
    let fs_loads = insns
        .iter()
        .filter(|i| i.starts_with("mov") && i.contains(",DWORD PTR fs:["))
        .count();
    if fs_loads != 2 {
        return Err(format!(
            "expected the two fs-relative loads before the loop: {insns:#?}"
        ));
    }
    let plain = ["add    DWORD PTR fs:[", "adc    DWORD PTR fs:["];
    for p in plain {
        if insns.iter().filter(|i| i.starts_with(p)).count() != 1 {
            return Err(format!("expected one `{p}..]` (no-CX8 path): {insns:#?}"));
        }
    }
    for call in insns.iter().filter(|i| i.starts_with("call")) {
        if call.contains('[')
            || call
                .split_whitespace()
                .nth(1)
                .is_some_and(|t| t.starts_with('e'))
        {
            return Err(format!("indirect call on the add path: {call}"));
        }
    }
    Ok(())
}

#[test]
fn counter_add_is_an_unlocked_fs_relative_cmpxchg8b_loop() {
    let _s = serial();
    let machine = Machine::new(2);
    let c = machine.alloc().unwrap();
    let probe = std::hint::black_box(pcpu_probe_i386_counter_add as fn(&Counter<'_>, i64));
    machine.run_on(1, || probe(&c, 5));
    assert_eq!((c.fetch(), c.cpu_slot(1)), (5, Ok(5)));
    let insns = common::disassemble(
        &["i686-linux-gnu-objdump", "objdump"],
        &["-M", "intel"],
        "pcpu_probe_i386_counter_add",
    );
    assert!(!insns.is_empty(), "probe not found in the binary");
    check_add_path(&insns).unwrap();
    println!("pcpu_probe_i386_counter_add:\n  {}", insns.join("\n  "));
}

#[test]
fn the_check_rejects_broken_add_paths() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let good = [
        "mov    eax,DWORD PTR fs:[edi]",
        "mov    edx,DWORD PTR fs:[edi+0x4]",
        "mov    ebx,eax",
        "cmpxchg8b QWORD PTR fs:[edi]",
        "jne    80 <x+0x10>",
        "add    DWORD PTR fs:[ecx],eax",
        "adc    DWORD PTR fs:[ecx+0x4],edx",
        "call   1234 <pcpu_counter::platform::acquire>",
        "ret",
    ];
    assert!(check_add_path(&s(&good)).is_ok());
    let with = |i: usize, insn: &str| {
        let mut v = s(&good);
        v[i] = insn.to_string();
        v
    };
    let bad = [
        with(3, "lock cmpxchg8b QWORD PTR fs:[edi]"),
        with(3, "cmpxchg8b QWORD PTR [edi]"),
        with(4, "nop"),
        with(0, "mov    eax,DWORD PTR [edi]"),
        with(5, "add    DWORD PTR [ecx],eax"),
        with(6, "lock adc DWORD PTR fs:[ecx+0x4],edx"),
        with(7, "call   DWORD PTR [ebx+0x10]"),
        with(7, "call   eax"),
    ];
    for b in &bad {
        assert!(check_add_path(b).is_err(), "accepted {b:?}");
    }
}

/// The CX8 add loop (as `Counter::add` runs it) with a count of failed `cmpxchg8b`s, i.e. of
/// interrupts that changed the slot inside the loop. Returns the retries. `tests/asm_copies.rs`
/// checks that it is the product's loop but for the count.
///
/// # Safety
/// The thread is bound to a simulated CPU of the zone owning slot offset `off`, and the
/// CPU has CX8.
unsafe fn add_counting_retries(off: usize, v: i64) -> u32 {
    let retries: u32;
    // SAFETY: as the crate's `fetch_add_cx8`, with one more stack word for the retry count.
    unsafe {
        core::arch::asm!(
            "push ebx",
            "push 0",
            "push edx",
            "push eax",
            "mov eax, fs:[edi]",
            "mov edx, fs:[edi + 4]",
            "2:",
            "mov ebx, eax",
            "mov ecx, edx",
            "add ebx, [esp]",
            "adc ecx, [esp + 4]",
            "cmpxchg8b fs:[edi]",
            "je 3f",
            "inc dword ptr [esp + 8]",
            "jmp 2b",
            "3:",
            "add esp, 8",
            "pop ecx",
            "pop ebx",
            in("edi") off,
            inout("eax") v as u32 => _,
            inout("edx") ((v as u64) >> 32) as u32 => _,
            out("ecx") retries,
        )
    };
    retries
}

pcpu_counter::percpu_counter!(static PROBE_STATIC);

/// A per-CPU static's add, out of line.
#[inline(never)]
#[unsafe(no_mangle)]
pub fn pcpu_probe_i386_static_add(v: i64) {
    PROBE_STATIC.add(v)
}

/// A per-CPU static's add is the counter's `cmpxchg8b fs:` loop (and the no-CX8 pair) on the
/// slot's link-time address.
#[test]
fn static_add_is_the_fs_relative_cmpxchg8b_loop() {
    let _s = serial();
    let machine = Machine::with_statics(2, 8).unwrap();
    let probe = std::hint::black_box(pcpu_probe_i386_static_add as fn(i64));
    machine.run_on(1, || probe(5));
    machine.run_on(0, || probe(-7));
    assert_eq!(PROBE_STATIC.fetch() as i64, -2);
    assert_eq!(PROBE_STATIC.cpu_slot(1), Ok(5));
    let insns = common::disassemble(
        &["i686-linux-gnu-objdump", "objdump"],
        &["-M", "intel"],
        "pcpu_probe_i386_static_add",
    );
    assert!(!insns.is_empty(), "probe not found in the binary");
    println!("pcpu_probe_i386_static_add:\n  {}", insns.join("\n  "));
    check_add_path(&insns).unwrap();
}
