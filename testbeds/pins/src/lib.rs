//! The hot paths of a kernel build, each alone in a function of its own, for
//! `cargo xtask cross`'s pin steps (xtask/src/cross/pins.rs): the crate is built as a kernel
//! depends on it (another crate, a bare-metal target) in every profile a kernel builds with,
//! and the steps disassemble these functions and check each add's instructions. The
//! `pcpu_pin_registry_*` functions are `cargo xtask stack --rust`'s probes of the registry's
//! read (its stack, callees included, within 1 KiB).
#![no_std]

use pcpu_counter::array::CounterArray;
use pcpu_counter::early::EarlyCounter;
use pcpu_counter::registry::Registry;
use pcpu_counter::{ApproxCounter, Counter, LazyCounter};

/// `Counter::add`: one add to the slot (x86_64: `add qword ptr gs:[off], v`).
#[unsafe(no_mangle)]
pub fn pcpu_pin_counter_add(counter: &Counter<'_>, v: i64) {
    counter.add(v)
}

/// `Counter::inc`: the add of an immediate 1 where the arch has one.
#[unsafe(no_mangle)]
pub fn pcpu_pin_counter_inc(counter: &Counter<'_>) {
    counter.inc()
}

/// `EarlyCounter::inc`: one test of its state, then `Counter::inc`'s add.
#[unsafe(no_mangle)]
pub fn pcpu_pin_early_inc(counter: &EarlyCounter) {
    counter.inc()
}

/// `LazyCounter::add`: one test of its state, then `Counter::add`'s add.
#[unsafe(no_mangle)]
pub fn pcpu_pin_lazy_add(counter: &LazyCounter<'_>, v: i64) {
    counter.add(v)
}

/// `ApproxCounter::inc`: the plain add, then the test of its carry out of the low 4 bits.
#[unsafe(no_mangle)]
pub fn pcpu_pin_approx_inc(counter: &ApproxCounter<'_>) {
    counter.inc()
}

/// The registry's reads that `cargo xtask stack --rust` bounds (1 KiB, callees included):
/// `Registry::snapshot` iterated to its end, the registry's streaming read. Returns the sum
/// of the values.
#[unsafe(no_mangle)]
pub extern "C" fn pcpu_pin_registry_snapshot(registry: &Registry<'_, 64>) -> u64 {
    registry
        .snapshot()
        .fold(0, |sum, s| sum.wrapping_add(s.value))
}

/// Registers one statistic of each of the crate's kinds a kernel registers, so that the
/// library holds their `Statistic` vtables: the calls of the reads above through a
/// `&dyn Statistic` reach their methods in `cargo xtask stack`'s call graph.
#[unsafe(no_mangle)]
pub extern "C" fn pcpu_pin_registry_register<'a>(
    registry: &Registry<'a, 64>,
    counter: &'a Counter<'a>,
    array: &'a CounterArray<'a, 4>,
    early: &'a EarlyCounter,
    approx: &'a ApproxCounter<'a>,
) -> bool {
    registry.register("counter", "", counter).is_ok()
        && registry.register("array", "", array).is_ok()
        && registry.register("early", "", early).is_ok()
        && registry.register("approx", "", approx).is_ok()
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {}
}
