// SPDX-License-Identifier: BSD-2-Clause
//! Lazy counters: one shared 8-byte word until the counter is contended, then per-CPU slots
//! (the protocol is in [`LazyCounter`]'s docs).

use core::cell::UnsafeCell;

use crate::atomic::{AtomicUsize, Ordering};
use crate::baseline;
use crate::{Counter, Error, Zone};

/// State bit: the counter is shared. Clear, the state is the slot's offset (a multiple of 8,
/// so its low three bits are 0): the add after the move adds to it with no masking.
const SHARED: usize = 1;
/// State bit: an add is moving the counter (allocating its slot); nobody else writes the state.
const MOVING: usize = 2;
/// State bit: the zone was full; no add moves the counter any more (only `try_move`).
const STAY: usize = 4;
/// The tag bits; above them, while shared, the adds left before the threshold moves it.
const TAGS: u32 = 3;
/// One add, in the state word.
const ONE: usize = 1 << TAGS;
/// Adds left that mean "no threshold": only contention moves the counter.
const NEVER: usize = usize::MAX >> TAGS;

/// A 64-bit counter that is one shared word until it is contended, then per-CPU.
///
/// Most per-object counters (a process's, a socket's) are touched by one CPU at a time for
/// their whole life; giving each one 8 bytes on every CPU up front is what makes per-object
/// counting expensive (Linux's per-mm RSS counters, `pcpu_alloc` in fork/exec). A lazy
/// counter starts as one shared word with an atomic add and moves to a slot of its zone when
/// an add finds it contended (its compare-and-swap on the word failed: another CPU, or an
/// interrupt handler, changed the word in between), or after a number of adds the caller
/// picks ([`with_threshold`](LazyCounter::with_threshold)).
///
/// Idle it takes 8 bytes plus its handle (the zone and a state word: the size of a
/// [`Counter`]) and no slot; after the move it also has a slot of its zone (8 bytes per CPU),
/// which dropping it frees. [`add`](LazyCounter::add) after the move is a load of the state,
/// a test, and the per-CPU add; before it, a compare-and-swap on the shared word. An add
/// after the move needs the per-CPU register set, as [`Counter::add`] does; one before the
/// move needs nothing. [`fetch`](LazyCounter::fetch), [`zero`](LazyCounter::zero) and
/// [`fetch_and_zero`](LazyCounter::fetch_and_zero) are [`Counter`]'s, across the move too.
///
/// # The move
/// The mover claims the move (`MOVING` in the state word), allocates a slot and publishes
/// it: the state becomes the slot's offset (release). An add loads the state (acquire); an
/// offset sends it to its CPU's slot. The shared word keeps the counts from before the move,
/// and `fetch` is the word plus the slots' sum. So nothing is ever in transit: an add that
/// read the state before the publication lands in the word, one that read it after lands in
/// a slot, and either way exactly once in what `fetch` reads; `fetch` is exact during the
/// move too, with no retry. This is why the word is not taken into a slot as
/// [`EarlyCounter::init`](crate::early::EarlyCounter::init) takes its word: that needs the
/// mover to wait for the adds that read the old state (the early counter's announce and
/// wait), and a move that an add in an interrupt handler starts cannot wait for the add it
/// interrupted. The word costs nothing more: it is the 8 bytes the counter had before. (Why
/// the early counter still takes its word, and the plan for one protocol serving both: see
/// [`EarlyCounter`](crate::early::EarlyCounter#why-not-the-lazy-counters-protocol).)
///
/// The move never waits either: it takes the zone's allocator lock only if it is free (an
/// add in an interrupt handler may have interrupted its own CPU's `alloc` or `free`); if it
/// is busy the counter stays shared and a later contended add tries again. If the zone is
/// full the counter stays shared for good, counting exactly in its word, until
/// [`try_move`](LazyCounter::try_move) succeeds. An add that finds another add moving the
/// counter adds to the word. (`tests/loom.rs` `lazy_move` models the protocol; a move that
/// takes the word must fail it and `tests/lazy.rs`.)
///
/// ```
/// use pcpu_counter::{sim::Machine, LazyCounter};
///
/// let machine = Machine::new(2);
/// let c = LazyCounter::with_threshold(machine.zone(), 2).unwrap();
/// c.add(3); // a thread that holds no CPU: the shared word needs no per-CPU register
/// c.add(4);
/// assert!(!c.is_per_cpu());
/// machine.run_on(1, || c.add(5)); // the third add moves it, then adds to CPU 1's slot
/// assert!(c.is_per_cpu());
/// assert_eq!(c.fetch(), 12);
/// ```
pub struct LazyCounter<'z> {
    /// The shared word: every add before the move (and those that raced it). A `baseline`
    /// word, so that it is 64 bits on every arch.
    word: UnsafeCell<u64>,
    /// The zone the counter moves to.
    zone: &'z Zone<'z>,
    /// The slot's offset once per-CPU; before, `SHARED`, the other tag bits and the adds left.
    state: AtomicUsize,
}

// Idle: the 8-byte word plus a handle the size of a `Counter` (zone and state), in every build.
const _: () =
    assert!(core::mem::size_of::<LazyCounter<'_>>() == 8 + core::mem::size_of::<Counter<'_>>());

// SAFETY: the word is only reached through `baseline`'s atomic (or locked) operations; the
// state is an atomic; the zone is shared by `&`.
unsafe impl Sync for LazyCounter<'_> {}

impl<'z> LazyCounter<'z> {
    /// The largest threshold [`with_threshold`](LazyCounter::with_threshold) accepts (a
    /// function, not an associated constant, so that the C header generator, which reads every
    /// public constant, leaves it out: the lazy counter has no C API).
    pub const fn max_threshold() -> usize {
        NEVER - 1
    }

    /// A shared counter reading 0 that moves to `zone` when an add finds it contended.
    ///
    /// ```
    /// # use pcpu_counter::{sim::Machine, LazyCounter};
    /// let machine = Machine::new(2);
    /// let c = LazyCounter::new(machine.zone());
    /// c.inc();
    /// assert_eq!((c.fetch(), c.is_per_cpu(), machine.zone().in_use()), (1, false, 0));
    /// ```
    pub fn new(zone: &'z Zone<'z>) -> Self {
        Self::shared(zone, NEVER)
    }

    /// A shared counter reading 0 whose first `adds` adds go to the shared word: the next
    /// one moves it to `zone` (as does an earlier contended one). `0` moves it at its first
    /// add: a counter that takes its slot only when it is first used.
    ///
    /// Fails with [`Error::BadThreshold`] above [`max_threshold`](LazyCounter::max_threshold)
    /// (2^61 - 2 on 64-bit targets, 2^29 - 2 on 32-bit ones).
    ///
    /// ```
    /// # use pcpu_counter::{sim::Machine, Error, LazyCounter};
    /// let machine = Machine::new(1);
    /// let max = LazyCounter::max_threshold();
    /// assert!(LazyCounter::with_threshold(machine.zone(), max).is_ok());
    /// assert_eq!(
    ///     LazyCounter::with_threshold(machine.zone(), max + 1).err(),
    ///     Some(Error::BadThreshold { threshold: max + 1, max })
    /// );
    /// ```
    pub fn with_threshold(zone: &'z Zone<'z>, adds: usize) -> Result<Self, Error> {
        if adds > Self::max_threshold() {
            return Err(Error::BadThreshold {
                threshold: adds,
                max: Self::max_threshold(),
            });
        }
        Ok(Self::shared(zone, adds))
    }

    fn shared(zone: &'z Zone<'z>, adds_left: usize) -> Self {
        LazyCounter {
            word: UnsafeCell::new(0),
            zone,
            state: AtomicUsize::new(adds_left << TAGS | SHARED),
        }
    }

    /// Adds `v` (which may be negative): to this CPU's slot once the counter moved, else to
    /// the shared word, moving the counter first if the word is contended or the threshold
    /// is reached.
    #[inline(always)]
    pub fn add(&self, v: i64) {
        // Acquire: the slot's clearing by `alloc` happens before this CPU adds to it.
        let s = self.state.load(Ordering::Acquire);
        if s & SHARED == 0 {
            // SAFETY: a state without `SHARED` is this counter's slot, owned until drop; per-CPU
            // registers are the platform's setup contract (see the type's docs).
            return unsafe { self.zone.add(s, v) };
        }
        self.shared_add(s, v)
    }

    /// Adds 1: once moved, [`Counter::inc`]'s immediate add (on x86_64
    /// `add qword ptr gs:[off], 1`) after the one test of the state.
    #[inline(always)]
    pub fn inc(&self) {
        let s = self.state.load(Ordering::Acquire);
        if s & SHARED == 0 {
            // SAFETY: as in `add`.
            return unsafe { self.zone.inc(s) };
        }
        self.shared_add(s, 1)
    }

    /// The add while the counter is shared (`s`: the state this add read). Each add tries at
    /// most one move and counts itself against the threshold at most once, so an add in an
    /// interrupt handler whose move finds the allocator busy goes on to the word.
    ///
    /// `#[cold]`: the add after the move is the one at the hardware's limit, so its branch
    /// falls through to the per-CPU add and this path is laid out of line.
    #[cold]
    #[inline(never)]
    fn shared_add(&self, mut s: usize, v: i64) {
        let mut may_move = true;
        loop {
            if s & SHARED == 0 {
                // SAFETY: as in `add`.
                return unsafe { self.zone.add(s, v) };
            }
            if may_move && s & (MOVING | STAY) == 0 {
                let left = s >> TAGS;
                if left == 0 {
                    // The threshold is reached: this add moves the counter.
                    may_move = false;
                    self.move_from(s, false);
                    s = self.state.load(Ordering::Acquire);
                    continue;
                }
                if left != NEVER {
                    let counted = self.state.compare_exchange(
                        s,
                        s - ONE,
                        Ordering::Relaxed,
                        Ordering::Acquire,
                    );
                    if let Err(now) = counted {
                        // Another add counted at the same moment: contended.
                        may_move = false;
                        s = self.contended(now);
                        continue;
                    }
                }
            }
            // SAFETY: the word lives as long as `self` and is only accessed through
            // `baseline`'s atomic (or locked) operations.
            let old = unsafe { baseline::load(self.word.get()) };
            // SAFETY: as above.
            if unsafe { baseline::replace(self.word.get(), old, old.wrapping_add(v as u64)) } {
                return;
            }
            s = self.state.load(Ordering::Acquire);
            if may_move {
                may_move = false;
                s = self.contended(s);
            }
        }
    }

    /// An add found the word (or the adds left) changed under it: moves the counter unless
    /// it is moving, moved or staying. Returns the state to go on with.
    #[cold]
    fn contended(&self, s: usize) -> usize {
        if s & (SHARED | MOVING | STAY) == SHARED {
            self.move_from(s, false);
        }
        self.state.load(Ordering::Acquire)
    }

    /// Moves the counter from state `s`: claims the move, allocates its slot (`wait`: even
    /// if another CPU holds the allocator's lock; else only if it is free), and publishes it.
    /// `None`: the state was no longer `s` (another add counted, moved or claimed), nothing
    /// done. A full zone leaves the counter shared with `STAY` set.
    #[cold]
    fn move_from(&self, s: usize, wait: bool) -> Option<Result<(), Error>> {
        let idle = s & !STAY;
        self.state
            .compare_exchange(s, idle | MOVING, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        let allocated = if wait {
            Some(self.zone.alloc_run(1, crate::Wait::NoWait))
        } else {
            self.zone.try_alloc_run(1)
        };
        let (next, result) = match allocated {
            Some(Ok(off)) => (off, Ok(())),
            Some(Err(e)) => (idle | STAY, Err(e)),
            // The lock was busy: stay shared, a later contended add tries again.
            None => (idle, Ok(())),
        };
        // Release: the slot's clearing happens before any add that sees it live.
        self.state.store(next, Ordering::Release);
        #[cfg(pcpu_counter_broken = "lazy_move_takes_word")]
        if next & SHARED == 0 {
            // The broken move `cargo xtask verify` runs against tests/lazy.rs: it takes the
            // word into the mover's slot, and `fetch` then reads the slots alone, so an add
            // that read the shared state before the publication and lands in the word after
            // the take is lost (and a `fetch` between the take and the slot add reads low).
            // SAFETY: as in `shared_add`; the slot is this counter's, the register the
            // platform's contract.
            unsafe {
                let moved = baseline::take(self.word.get());
                self.zone.add(next, moved as i64);
            }
        }
        Some(result)
    }

    /// Moves the counter to per-CPU slots now (nothing if it already moved), waiting for the
    /// allocator's lock and for an add that is moving it.
    ///
    /// Fails with [`Error::ZoneFull`]: the counter stays shared, counting exactly. Adds do
    /// not retry a move that found the zone full; call this again once slots were freed. Not
    /// in an interrupt handler that may interrupt an `alloc`, a `free` or a move of this zone
    /// on the same CPU, which it would wait for forever.
    ///
    /// ```
    /// # use pcpu_counter::{sim::Machine, Error, LazyCounter};
    /// let machine = Machine::with_capacity(1, 1).unwrap();
    /// let hog: Vec<_> = (0..machine.zone().capacity()).map(|_| machine.alloc().unwrap()).collect();
    /// let c = LazyCounter::new(machine.zone());
    /// assert!(matches!(c.try_move(), Err(Error::ZoneFull { .. })));
    /// c.add(2);
    /// drop(hog);
    /// assert_eq!(c.try_move(), Ok(()));
    /// machine.run_on(0, || c.add(3));
    /// assert_eq!((c.fetch(), c.is_per_cpu()), (5, true));
    /// ```
    pub fn try_move(&self) -> Result<(), Error> {
        loop {
            let s = self.state.load(Ordering::Acquire);
            if s & SHARED == 0 {
                return Ok(());
            }
            if s & MOVING != 0 {
                core::hint::spin_loop();
                continue;
            }
            if let Some(result) = self.move_from(s, true) {
                return result;
            }
        }
    }

    /// Whether the counter moved to per-CPU slots.
    pub fn is_per_cpu(&self) -> bool {
        self.state.load(Ordering::Acquire) & SHARED == 0
    }

    /// The count: the shared word plus, once moved, the slots since their last zero.
    ///
    /// ```
    /// # use pcpu_counter::{sim::Machine, LazyCounter};
    /// let machine = Machine::new(2);
    /// let c = LazyCounter::with_threshold(machine.zone(), 1).unwrap();
    /// machine.run_on(0, || (0..3).for_each(|_| c.add(-2)));
    /// assert_eq!(c.fetch() as i64, -6);
    /// ```
    pub fn fetch(&self) -> u64 {
        // The state first: an add that completed before this call and went to a slot read a
        // state without `SHARED`, so this load reads it too.
        let s = self.state.load(Ordering::Acquire);
        let word = self.word_unless_taken(s);
        if s & SHARED != 0 {
            return word;
        }
        word.wrapping_add(self.zone.fetch(s))
    }

    /// The shared word, which a live counter keeps (0 in the broken build, whose move took it).
    fn word_unless_taken(&self, s: usize) -> u64 {
        if cfg!(pcpu_counter_broken = "lazy_move_takes_word") && s & SHARED == 0 {
            return 0;
        }
        // SAFETY: as in `shared_add`.
        unsafe { baseline::load(self.word.get()) }
    }

    /// Resets the counter to 0 without writing any CPU's slot.
    pub fn zero(&self) {
        self.fetch_and_zero();
    }

    /// Returns the count since the last zero and zeroes it, as one step: no add is lost
    /// between the two and none is counted twice. The word is taken (an atomic swap with 0)
    /// and the slots zeroed as [`Counter::fetch_and_zero`] does; a `fetch` racing it may see
    /// one of the two zeroed and not yet the other.
    ///
    /// ```
    /// # use pcpu_counter::{sim::Machine, LazyCounter};
    /// let machine = Machine::new(2);
    /// let c = LazyCounter::with_threshold(machine.zone(), 1).unwrap();
    /// machine.run_on(0, || (0..3).for_each(|_| c.inc()));
    /// assert_eq!((c.fetch_and_zero(), c.fetch()), (3, 0));
    /// ```
    pub fn fetch_and_zero(&self) -> u64 {
        let s = self.state.load(Ordering::Acquire);
        let word = if cfg!(pcpu_counter_broken = "lazy_move_takes_word") && s & SHARED == 0 {
            0
        } else {
            // SAFETY: as in `shared_add`.
            unsafe { baseline::take(self.word.get()) }
        };
        if s & SHARED != 0 {
            return word;
        }
        word.wrapping_add(self.zone.fetch_and_zero(s))
    }

    /// The zone the counter moves (or moved) to.
    pub fn zone(&self) -> &'z Zone<'z> {
        self.zone
    }
}

impl Drop for LazyCounter<'_> {
    fn drop(&mut self) {
        let s = *self.state.get_mut();
        if s & SHARED == 0 {
            self.zone.free_run(s, 1);
        }
    }
}

impl core::fmt::Debug for LazyCounter<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LazyCounter")
            .field("per_cpu", &self.is_per_cpu())
            .field("value", &self.fetch())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::sim::Machine;
    use crate::LazyCounter;
    use std::format;

    #[test]
    fn debug_shows_the_mode_and_the_value() {
        let machine = Machine::new(2);
        let c = LazyCounter::with_threshold(machine.zone(), 1).unwrap();
        c.add(2);
        assert_eq!(format!("{c:?}"), "LazyCounter { per_cpu: false, value: 2 }");
        machine.run_on(1, || c.add(5));
        assert_eq!(format!("{c:?}"), "LazyCounter { per_cpu: true, value: 7 }");
    }
}
