// SPDX-License-Identifier: BSD-2-Clause
//! Counters usable before the zone exists (FreeBSD's `COUNTER_U64_DEFINE_EARLY`).
//!
//! An [`EarlyCounter`] is a `static`. Until [`EarlyCounter::init`] gives it a slot in a
//! zone, adds go to one shared word with an atomic add; afterwards they go to the per-CPU
//! slot. Unlike FreeBSD, which drops the early counts, `init` moves them into the per-CPU
//! slots, and an add racing with `init` is counted exactly once:
//!
//! - An add first checks `live`. Once set, it adds to the per-CPU slot and is done.
//! - Otherwise it announces itself in `early_adders`, checks `live` again, and only then
//!   adds to the shared word; then it withdraws the announcement.
//! - `init` publishes the slot, sets `live`, then waits until `early_adders` is 0, and only
//!   then takes the shared word (leaving 0) and adds it to its own CPU's slot.
//!
//! With sequentially consistent `live` and `early_adders`, an add that saw `live` clear
//! announced itself before `init` set it, so `init` waits for its word add; an add that
//! announces itself after `init` set `live` sees it set and takes the per-CPU path. So the
//! shared word is complete when `init` takes it, and nothing adds to it afterwards.
//!
//! **Which CPUs may add before `init`:** any CPU, and interrupt handlers, since the early
//! path is an atomic add on a shared word and needs no per-CPU register. (FreeBSD allows the
//! boot CPU only.) `init` itself must run on a CPU of the zone whose per-CPU register is
//! set, because it adds the early counts to that CPU's slot; it is checked in debug builds
//! under the host simulation. `init` must not run in an interrupt handler that may have
//! interrupted an early add on the same CPU, which it would wait for forever; likewise `fetch`
//! waits while `init` moves the early word (a few instructions), so an interrupt handler must
//! not `fetch` an early counter whose `init` it may have interrupted.

use crate::atomic::{AtomicUsize, Ordering};

use crate::baseline;
use crate::{Counter, Error, Zone};
use core::ptr::NonNull;

/// `EarlyCounter::live` before `init`: no slot's offset (an offset is below the area's size).
const NOT_LIVE: usize = usize::MAX;

/// A counter declared as a `static`, usable before any zone exists.
///
/// ```
/// use pcpu_counter::{early::EarlyCounter, sim::Machine};
///
/// static BOOT_EVENTS: EarlyCounter = EarlyCounter::new();
///
/// BOOT_EVENTS.add(3); // before any zone: kept in a shared word
/// let machine: &'static Machine = Box::leak(Box::new(Machine::new(2)));
/// machine.run_on(0, || BOOT_EVENTS.init(machine.zone())).unwrap();
/// machine.run_on(1, || BOOT_EVENTS.add(4)); // now per-CPU
/// assert_eq!(BOOT_EVENTS.fetch(), 7);
/// assert_eq!(BOOT_EVENTS.counter().unwrap().cpu_slot(0), Ok(3)); // moved to CPU 0's slot
/// ```
///
/// # Why not the lazy counter's protocol
/// An early counter and a [`LazyCounter`](crate::LazyCounter) are one idea, a shared word
/// and then a per-CPU slot, run by two protocols. The lazy counter *keeps* its word: `fetch`
/// is the word plus the slots, so an add that read the old state lands in the word and is
/// still counted, and the move never waits. The early counter *takes* its word into a slot
/// at `init`, so `init` must first wait for the adds that read "not live" (the announcement
/// in the module docs), and `fetch` retries across the move.
///
/// It takes its word because of what it promises today: after `init`,
/// [`counter`](EarlyCounter::counter) is a plain [`Counter`] that holds every count (the
/// early ones in `init`'s CPU's slot), so its `cpu_slot`, `zero` and `fetch_and_zero`, and
/// the registry's zero of an early counter, need no word beside the slot. Keeping the word
/// would make that `Counter` miss the early counts. The C early counters
/// (`COUNTER_U64_DEFINE_EARLY`, feature `capi`) cannot share either protocol: a C
/// `counter_u64_t` is one word that the header's inline add uses as a register-relative
/// address with no test, the early word's before the zone and the slot's after, so there is
/// no state to test and nowhere to keep a word; they move their word once, in
/// `pcpu_zone_init`, before other CPUs start.
///
/// One protocol for the two Rust types is possible, and is the plan: the lazy counter's
/// word-and-state core shared by both, the early counter's zone published by `init` (an
/// atomic pointer, stored before the state's release) instead of given at construction; the
/// early add after `init` becomes one load of the state, a test and the per-CPU add (no
/// slower than today's `live` flag and `Once`), `init` no longer waits (so an interrupt
/// handler may run it), the early counter gains its own lossless `zero` and
/// `fetch_and_zero` (also before `init`), and `counter()` no longer exists as a complete
/// `Counter`: a change a user sees, for a release that announces it.
pub struct EarlyCounter {
    /// [`NOT_LIVE`] until `counter` holds the slot and adds must go there; then the slot's
    /// offset: the add's one state test gives the offset it adds at (no second test of the
    /// `Once`).
    live: AtomicUsize,
    /// `counter`'s zone, written once (by the `init` whose `Once` ran) before `live` is set,
    /// and read only after `live` was seen set: a plain load, which a kernel build, whose add
    /// needs no zone, leaves out.
    zone: core::cell::UnsafeCell<NonNull<Zone<'static>>>,
    /// Early adds between their check of `live` and the end of their word add.
    early_adders: AtomicUsize,
    /// The counts made before `init` (a `Baseline` gives a 64-bit word on every arch).
    early: core::cell::UnsafeCell<u64>,
    /// 1 while `init` moves the early word into its slot, 2 after; `fetch` retries across
    /// a move so that it never sees the counts on neither or both sides.
    moving: AtomicUsize,
    /// The per-CPU counter, once `init` ran.
    counter: spin::Once<Counter<'static>>,
}

// SAFETY: the early word is only reached through `baseline`'s atomic (or locked) operations;
// `zone` is written once, before `live` publishes it, and only read after; every other field
// is a synchronisation primitive.
unsafe impl Sync for EarlyCounter {}
// SAFETY: `zone` points at a `'static` zone, which is `Sync`; the rest is `Send`.
unsafe impl Send for EarlyCounter {}

impl EarlyCounter {
    /// A counter reading 0 with no slot yet, for a `static`.
    ///
    /// ```
    /// static C: pcpu_counter::early::EarlyCounter = pcpu_counter::early::EarlyCounter::new();
    /// assert_eq!(C.fetch(), 0);
    /// ```
    pub const fn new() -> Self {
        EarlyCounter {
            live: AtomicUsize::new(NOT_LIVE),
            zone: core::cell::UnsafeCell::new(NonNull::dangling()),
            early_adders: AtomicUsize::new(0),
            early: core::cell::UnsafeCell::new(0),
            moving: AtomicUsize::new(0),
            counter: spin::Once::new(),
        }
    }

    /// Adds `v`: to the per-CPU slot once [`init`](EarlyCounter::init) ran, else to the
    /// shared early word.
    ///
    /// ```
    /// static C: pcpu_counter::early::EarlyCounter = pcpu_counter::early::EarlyCounter::new();
    /// C.add(-2);
    /// assert_eq!(C.fetch() as i64, -2);
    /// ```
    #[inline(always)]
    pub fn add(&self, v: i64) {
        match self.live_slot(Ordering::Acquire) {
            // SAFETY: `off` is the live slot of `zone` (`live_slot`); per-CPU registers are
            // the platform's setup contract, as for `Counter::add`.
            Some((zone, off)) => unsafe { zone.add(off, v) },
            None => self.early_add(v),
        }
    }

    /// Adds 1.
    ///
    /// ```
    /// static C: pcpu_counter::early::EarlyCounter = pcpu_counter::early::EarlyCounter::new();
    /// C.inc();
    /// assert_eq!(C.fetch(), 1);
    /// ```
    /// Once live, the per-CPU counter's [`Counter::inc`] (on x86_64 one
    /// `add qword ptr gs:[off], 1`) after one test of `live`.
    #[inline(always)]
    pub fn inc(&self) {
        match self.live_slot(Ordering::Acquire) {
            // SAFETY: as in `add`.
            Some((zone, off)) => unsafe { zone.inc(off) },
            None => self.early_add(1),
        }
    }

    /// The zone and the slot's offset if `live` is set (one load of it, with `order`).
    #[inline(always)]
    fn live_slot(&self, order: Ordering) -> Option<(&'static Zone<'static>, usize)> {
        let off = self.live.load(order);
        if off == NOT_LIVE {
            return None;
        }
        // SAFETY: `zone` was written before the SeqCst store that set `live` (`go_live`) and
        // never after; this load of `live` (Acquire or SeqCst) saw that store. It points at
        // the counter's `'static` zone.
        let zone = unsafe { (*self.zone.get()).as_ref() };
        Some((zone, off))
    }

    /// The per-CPU counter, after `init` completed its `Once`.
    fn live_counter(&self) -> &Counter<'static> {
        self.counter
            .get()
            .expect("pcpu-counter: early counter live without a slot")
    }

    #[cold]
    #[inline(never)]
    fn early_add(&self, v: i64) {
        self.early_adders.fetch_add(1, Ordering::SeqCst);
        if let Some((zone, off)) = self.live_slot(Ordering::SeqCst) {
            self.early_adders.fetch_sub(1, Ordering::SeqCst);
            // SAFETY: as in `add`.
            return unsafe { zone.add(off, v) };
        }
        // SAFETY: the early word lives as long as `self` and is only accessed through
        // `baseline`'s atomic (or locked) operations.
        unsafe { baseline::add(self.early.get(), v as u64) };
        self.early_adders.fetch_sub(1, Ordering::SeqCst);
    }

    /// Gives the counter its slot in `zone` and moves the early counts into the calling
    /// CPU's slot. Adds running on other CPUs meanwhile are counted once, on one side or
    /// the other (see the module docs for the proof and for where `init` may run).
    ///
    /// Fails with [`Error::ZoneFull`] (nothing changes), [`Error::AlreadyInstalled`] when
    /// the counter already has a slot, or, before anything changes, with the bring-up
    /// check's error ([`Zone::check_cpu`]) when this CPU's per-CPU register holds no block of
    /// the zone, where the move would otherwise fault.
    ///
    /// ```
    /// # use pcpu_counter::{early::EarlyCounter, sim::Machine, Error};
    /// static C: EarlyCounter = EarlyCounter::new();
    /// let machine: &'static Machine = Box::leak(Box::new(Machine::new(1)));
    /// machine.run_on(0, || {
    ///     assert_eq!(C.init(machine.zone()), Ok(()));
    ///     assert_eq!(C.init(machine.zone()), Err(Error::AlreadyInstalled));
    /// });
    /// ```
    pub fn init(&self, zone: &'static Zone<'static>) -> Result<(), Error> {
        self.init_inner(zone, true)
    }

    /// The racy `init` that the early-counter tests must catch: it takes the early word
    /// without waiting for early adds in flight, so an add that saw the counter not yet live
    /// may land in the word after it was taken and be lost. Only in the broken build that
    /// `cargo xtask verify` makes (`--cfg pcpu_counter_broken="early_init_without_waiting"`).
    #[cfg(pcpu_counter_broken = "early_init_without_waiting")]
    pub fn init_without_waiting(&self, zone: &'static Zone<'static>) -> Result<(), Error> {
        self.init_inner(zone, false)
    }

    fn init_inner(&self, zone: &'static Zone<'static>, wait: bool) -> Result<(), Error> {
        // The add's check, before anything changes (the simulation refuses a thread that holds
        // no CPU of the zone's machine; a kernel checks nothing).
        crate::platform::check_add(zone.area());
        if self.counter.get().is_some() {
            return Err(Error::AlreadyInstalled);
        }
        // The move below adds through this CPU's register: a register that holds no block of
        // the zone (never set, or the other riscv64 register) is an error here, not a fault.
        crate::bringup::register_cpu(zone.layout())?;
        let counter = zone.alloc()?;
        let mut offered = Some(counter);
        self.counter.call_once(|| {
            // SAFETY: only the `init` whose `Once` runs writes `zone`, before it sets `live`;
            // nothing reads it until `live` is set.
            unsafe { *self.zone.get() = NonNull::from(zone) };
            offered.take().expect("offered once")
        });
        if offered.is_some() {
            return Err(Error::AlreadyInstalled);
        }
        if wait {
            self.go_live();
            while self.early_adders.load(Ordering::SeqCst) != 0 {
                core::hint::spin_loop();
            }
        }
        self.moving.store(1, Ordering::SeqCst);
        // A `fetch` that reads the moved count in this CPU's slot (a relaxed load of the
        // relaxed slot add below) must then see `moving` changed. The `SeqCst` store alone
        // does not order the later relaxed slot add before it for such a reader (the C++
        // model allows it to read the old `moving` and count the early word twice; found by
        // the loom model `early_fetch_fence`, tests/loom.rs); this fence, paired with
        // `fetch`'s, does.
        crate::atomic::fence(Ordering::SeqCst);
        let moved = self.take_early();
        self.live_counter().add(moved as i64);
        self.moving.store(2, Ordering::SeqCst);
        if !wait {
            self.go_live();
        }
        Ok(())
    }

    /// Sets `live` (after the `Once` completed and `zone` was written): adds go to the slot
    /// from now.
    fn go_live(&self) {
        let off = self.live_counter().offset();
        self.live.store(off, Ordering::SeqCst);
    }

    /// Takes the early word, leaving 0.
    fn take_early(&self) -> u64 {
        // SAFETY: as in `early_add`.
        unsafe { baseline::take(self.early.get()) }
    }

    /// The count: the per-CPU sum once `init` ran, else the early word.
    ///
    /// ```
    /// static C: pcpu_counter::early::EarlyCounter = pcpu_counter::early::EarlyCounter::new();
    /// C.add(5);
    /// assert_eq!(C.fetch(), 5);
    /// ```
    pub fn fetch(&self) -> u64 {
        loop {
            let before = self.moving.load(Ordering::SeqCst);
            if before == 1 {
                core::hint::spin_loop();
                continue;
            }
            // Early adds still in flight during `init` land in the word, which `init` moves
            // once they are done: count the word too (it reads 0 for good after the move).
            // SAFETY: as in `early_add`.
            let word = unsafe { baseline::load(self.early.get()) };
            let slots = self.counter.get().map_or(0, Counter::fetch);
            crate::atomic::fence(Ordering::SeqCst);
            if self.moving.load(Ordering::SeqCst) == before {
                return slots.wrapping_add(word);
            }
        }
    }

    /// The per-CPU counter, once [`init`](EarlyCounter::init) has given it a slot and moved
    /// the early counts.
    ///
    /// ```
    /// static C: pcpu_counter::early::EarlyCounter = pcpu_counter::early::EarlyCounter::new();
    /// assert!(C.counter().is_none());
    /// ```
    pub fn counter(&self) -> Option<&Counter<'static>> {
        match self.live.load(Ordering::Acquire) {
            NOT_LIVE => None,
            _ => self.counter.get(),
        }
    }
}

impl Default for EarlyCounter {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for EarlyCounter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("EarlyCounter")
            .field("live", &(self.live.load(Ordering::Relaxed) != NOT_LIVE))
            .field("value", &self.fetch())
            .finish()
    }
}

/// FreeBSD's `COUNTER_U64_DEFINE_EARLY(name)`: declares `static name: EarlyCounter`.
///
/// FreeBSD allocates it from a `SYSINIT`; here the kernel calls
/// [`EarlyCounter::init`] once its zone is up.
///
/// ```
/// pcpu_counter::freebsd::counter_u64_define_early!(pub static RX_EARLY);
/// RX_EARLY.inc();
/// assert_eq!(RX_EARLY.fetch(), 1);
/// ```
///
/// Its path is `pcpu_counter::freebsd::counter_u64_define_early`, with FreeBSD's other names.
/// As a `macro_export` macro it is also at the crate root, hidden from the root's docs.
#[doc(hidden)]
#[macro_export]
macro_rules! counter_u64_define_early {
    ($vis:vis static $name:ident) => {
        $vis static $name: $crate::early::EarlyCounter = $crate::early::EarlyCounter::new();
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;

    #[test]
    fn inc_and_debug_before_and_after_init() {
        let c = EarlyCounter::new();
        c.inc();
        c.add(2);
        assert_eq!(format!("{c:?}"), "EarlyCounter { live: false, value: 3 }");
        let machine = crate::sim::machine_for_ever(2);
        machine.run_on(1, || c.init(machine.zone())).unwrap();
        machine.run_on(0, || c.inc());
        assert_eq!(format!("{c:?}"), "EarlyCounter { live: true, value: 4 }");
        let slots = c.counter().map(|s| (s.cpu_slot(0), s.cpu_slot(1)));
        assert_eq!(
            slots,
            Some((Ok(1), Ok(3))),
            "the early counts moved to CPU 1"
        );
    }
}
