//! With feature `platform-base` (the crate's feature of that name): the add takes each CPU's
//! base from `Platform::cpu_base` instead of the per-CPU register, which this kernel then
//! never writes (`arch::set_cpu_base` writes nothing in such a build). The kernel's answer
//! counts its calls per CPU, and the check proves that every add asked it exactly once: a
//! build that ignored the feature would add through the register (still 0: the bring-up
//! check stops it) and ask nothing.

use core::sync::atomic::{AtomicU64, Ordering};

use pcpu_counter::Counter;
use pcpu_counter_testbed_protocol as protocol;

use crate::boot;
use crate::checks::MAX_CPUS;

/// Adds each CPU makes in the check, with its interrupts off.
const ADDS: u64 = 10_000;

/// `Platform::cpu_base` calls, per CPU.
static CALLS: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];
/// Calls counted during each CPU's own adds.
static DURING: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];
/// The check's counter, allocated by CPU 0.
static COUNTER: spin::Once<Counter<'static>> = spin::Once::new();

/// The kernel's `Platform::cpu_base`: CPU `cpu`'s block, as the kernel knows it, counted.
/// Never inlined, so that the add's disassembly shows it called (`cargo xtask qemu` pins it).
#[inline(never)]
pub fn cpu_base(cpu: usize) -> usize {
    CALLS[cpu].fetch_add(1, Ordering::Relaxed);
    crate::block_base(cpu)
}

/// Every CPU: `ADDS` adds with its interrupts off (nothing else on it can ask the hook), the
/// hook's calls counted around them; CPU 0 reports the calls and the sum.
pub fn run(cpu: usize) {
    let n = protocol::ncpus();
    if cpu == 0 {
        let zone = pcpu_counter::freebsd::global_zone().expect("installed");
        COUNTER.call_once(|| zone.alloc().expect("room for the check's counter"));
    }
    protocol::barrier(cpu);
    let counter = COUNTER.get().expect("allocated before the barrier");
    let irq = boot::irq_save();
    let before = CALLS[cpu].load(Ordering::Relaxed);
    for _ in 0..ADDS {
        counter.inc();
    }
    DURING[cpu].store(CALLS[cpu].load(Ordering::Relaxed) - before, Ordering::Relaxed);
    // SAFETY: the state of the `irq_save` above, on this CPU.
    unsafe { boot::irq_restore(irq) };
    protocol::barrier(cpu);
    if cpu == 0 {
        let asked: u64 = DURING.iter().take(n).map(|d| d.load(Ordering::Relaxed)).sum();
        protocol::report(
            "platform-base",
            &[
                ("Platform::cpu_base calls, one per add", ADDS * n as u64, asked),
                ("counter", ADDS * n as u64, counter.fetch()),
            ],
            n,
        );
    }
    protocol::barrier(cpu);
}
