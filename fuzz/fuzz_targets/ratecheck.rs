//! `counter_ratecheck` with arbitrary clocks: ticks that jump forward, stand still, go
//! backwards and wrap past `u32::MAX`, any `hz` (0 included for the Rust API), any limit
//! (negative, 0, `i64::MAX`), events on any CPU, and the counter added to or zeroed by its
//! owner between checks. The Rust API (`CounterRate::check` through its `Clock`, and
//! `check_at`) and the C API (`struct counter_rate`, `counter_ratecheck` with a
//! `pcpu_set_ticks` hook) run the same sequence side by side.
//!
//! Asserts every return value and the counter after every call against a model of the
//! documented semantics (`src/ratecheck.rs`): each call counts one event; a call at least
//! `hz` ticks (wrapping) after the last reset starts a new second: it zeroes the count, and
//! returns the previous second's count if that was over the limit, else 0; a call whose
//! count goes over the limit returns -1 and the second stays over (-1) until the next reset.
#![no_main]

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use pcpu_counter::capi::*;
use pcpu_counter::ratecheck::{Clock, CounterRate};
use pcpu_counter::sim::capi::*;
use pcpu_counter::sim::Machine;

const NCPUS: usize = 3;

/// The tick both clocks read.
static NOW: AtomicU32 = AtomicU32::new(0);

fn now() -> u32 {
    NOW.load(Relaxed)
}

extern "C" fn c_now() -> u32 {
    NOW.load(Relaxed)
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// One event on CPU `cpu` through each API (the Rust one through its clock or `check_at`).
    Check {
        cpu: u8,
        limit: Limit,
        at: bool,
    },
    Forward(u16),
    Seconds(u8),
    Back(u16),
    Set(u32),
    /// The counter's owner adds `v` (on CPU `cpu`) to both counters.
    Add {
        cpu: u8,
        v: i32,
    },
    /// The counter's owner zeroes both counters.
    Zero,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Limit {
    Small(u8),
    Negative(i8),
    Any(i64),
}

impl Limit {
    fn get(self) -> i64 {
        match self {
            Limit::Small(l) => i64::from(l % 16),
            Limit::Negative(l) => -i64::from(l.unsigned_abs()),
            Limit::Any(l) => l,
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    hz: u16,
    start: u32,
    ops: Vec<Op>,
}

/// The documented state of a `struct counter_rate`: the last reset's tick, whether this
/// second went over, and the counter.
#[derive(Debug)]
struct Model {
    hz: u32,
    ticks: u32,
    over: bool,
    count: u64,
}

impl Model {
    fn check(&mut self, now: u32, limit: i64) -> i64 {
        let mut val = if self.over { -1 } else { 0 };
        if now.wrapping_sub(self.ticks) >= self.hz {
            let last = self.count as i64;
            self.count = 0;
            self.over = false;
            self.ticks = now;
            val = if last <= limit { 0 } else { last };
        }
        self.count = self.count.wrapping_add(1);
        if self.over {
            return -1;
        }
        if self.count as i64 > limit {
            self.over = true;
            val = -1;
        }
        val
    }
}

fuzz_target!(
    init: {
        assert_eq!(pcpu_sim_machine_new(NCPUS, 64), PCPU_OK);
    },
    |input: Input| {
        // hz 0 is kept for the Rust API (every call starts a new second); the C hook with 0
        // would fall back to the wall clock, so C runs with 1 then.
        let hz = u32::from(input.hz % 2000);
        NOW.store(input.start, Relaxed);
        pcpu_set_ticks(Some(c_now), hz.max(1));

        let machine = Machine::new(NCPUS);
        let rate = CounterRate::new(machine.alloc().unwrap(), Clock { now, hz })
            .expect("a zone with room for the rate's two slots");
        let mut cr = counter_rate {
            cr_rate: counter_u64_alloc(M_WAITOK),
            cr_lock: 0,
            cr_ticks: 0,
            cr_over: 0,
        };
        assert!(!cr.cr_rate.is_null());
        let mut rust = Model { hz, ticks: 0, over: false, count: 0 };
        let mut c = Model { hz: hz.max(1), ticks: 0, over: false, count: 0 };

        for op in input.ops.iter().take(300) {
            match *op {
                Op::Check { cpu, limit, at } => {
                    let (cpu, limit) = (usize::from(cpu) % NCPUS, limit.get());
                    let t = now();
                    let got = machine.run_on(cpu, || if at { rate.check_at(t, limit) } else { rate.check(limit) });
                    assert_eq!(got, rust.check(t, limit), "Rust at {t}, limit {limit}, {rust:?}");
                    assert_eq!(pcpu_sim_bind(cpu), PCPU_OK);
                    // SAFETY: `cr` has a live counter and is used by nothing else; the thread
                    // holds a CPU of the C machine.
                    let got = unsafe { counter_ratecheck(&mut cr, limit) };
                    pcpu_sim_unbind();
                    assert_eq!(got, c.check(t, limit), "C at {t}, limit {limit}, {c:?}");
                    assert_eq!((cr.cr_lock, cr.cr_ticks as u32, cr.cr_over), (0, c.ticks, -i32::from(c.over)));
                }
                Op::Forward(d) => drop(NOW.fetch_add(u32::from(d), Relaxed)),
                Op::Seconds(s) => drop(NOW.fetch_add(hz.wrapping_mul(u32::from(s)), Relaxed)),
                Op::Back(d) => drop(NOW.fetch_sub(u32::from(d), Relaxed)),
                Op::Set(t) => NOW.store(t, Relaxed),
                Op::Add { cpu, v } => {
                    let cpu = usize::from(cpu) % NCPUS;
                    machine.run_on(cpu, || rate.counter().add(i64::from(v)));
                    assert_eq!(pcpu_sim_bind(cpu), PCPU_OK);
                    // SAFETY: a live handle, on a bound CPU.
                    unsafe { pcpu_counter_add(cr.cr_rate, i64::from(v)) };
                    pcpu_sim_unbind();
                    for m in [&mut rust, &mut c] {
                        m.count = m.count.wrapping_add(i64::from(v) as u64);
                    }
                }
                Op::Zero => {
                    rate.counter().zero();
                    // SAFETY: a live handle.
                    unsafe { counter_u64_zero(cr.cr_rate) };
                    rust.count = 0;
                    c.count = 0;
                }
            }
            assert_eq!(rate.counter().fetch(), rust.count);
            // SAFETY: a live handle.
            assert_eq!(unsafe { counter_u64_fetch(cr.cr_rate) }, c.count);
        }
        // SAFETY: the counter is freed once, and nothing uses `cr` afterwards.
        unsafe { counter_u64_free(cr.cr_rate) };
    }
);
