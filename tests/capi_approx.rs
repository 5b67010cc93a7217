//! `struct pcpu_approx` through the C ABI (feature `capi`): exact sums and the bound from
//! several CPUs at once, `compare`, lossless `fetch_and_zero`, and errors that allocate
//! nothing.
#![cfg(feature = "capi")]

use std::mem::MaybeUninit;
use std::sync::Mutex;

use pcpu_counter::capi::*;
use pcpu_counter::sim::capi::*;

/// The C ABI's machine is per process: tests take turns.
static TURN: Mutex<()> = Mutex::new(());

fn setup() -> std::sync::MutexGuard<'static, ()> {
    let turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    assert_eq!(pcpu_sim_machine_new(4, 256), PCPU_OK);
    turn
}

/// Sum of every CPU's raw slot remainder below `batch` (what the approximate value lacks).
fn remainders(a: &pcpu_approx, batch: u64) -> u64 {
    (0..4)
        .map(|cpu| {
            let mut base = 0usize;
            assert_eq!(unsafe { pcpu_zone_cpu_base(cpu, &mut base) }, PCPU_OK);
            let slot = (base + a.pa_counter as usize) as *const u64;
            // SAFETY: the counter's slot in CPU `cpu`'s block of the live zone.
            unsafe { std::ptr::read_volatile(slot) & (batch - 1) }
        })
        .fold(0, u64::wrapping_add)
}

#[test]
fn four_cpus_add_at_once_and_the_values_add_up() {
    let _turn = setup();
    let mut a = MaybeUninit::<pcpu_approx>::uninit();
    assert_eq!(unsafe { pcpu_approx_init(a.as_mut_ptr(), 32) }, PCPU_OK);
    let a = unsafe { a.assume_init_mut() };
    let (mut under, mut over) = (0, 7);
    unsafe { pcpu_approx_accuracy(a, &mut under, &mut over) };
    assert_eq!((under, over), (4 * 31, 0));
    let p = a as *mut pcpu_approx as usize;
    std::thread::scope(|s| {
        for cpu in 0..4 {
            s.spawn(move || {
                assert_eq!(pcpu_sim_bind(cpu), 0);
                for i in 0..10_000i64 {
                    unsafe { pcpu_approx_add(p as *mut pcpu_approx, i % 7 - 2) };
                }
                pcpu_sim_unbind();
            });
        }
    });
    let each: i64 = (0..10_000i64).map(|i| i % 7 - 2).sum();
    let precise = unsafe { pcpu_approx_precise(a) };
    assert_eq!(precise, 4 * each as u64);
    let approx = unsafe { pcpu_approx_read(a) };
    assert_eq!(approx, precise.wrapping_sub(remainders(a, 32)));
    assert!(precise - approx <= under);
    // Far below and far above: from the one load; at the value: the precise sum.
    assert_eq!(unsafe { pcpu_approx_compare(a, -1) }, 1);
    assert_eq!(unsafe { pcpu_approx_compare(a, i64::MAX) }, -1);
    assert_eq!(unsafe { pcpu_approx_compare(a, precise as i64) }, 0);
    assert_eq!(unsafe { pcpu_approx_compare(a, precise as i64 + 1) }, -1);
    assert_eq!(unsafe { pcpu_approx_fetch_and_zero(a) }, precise);
    assert_eq!(unsafe { pcpu_approx_precise(a) }, 0);
    assert_eq!(
        unsafe { pcpu_approx_read(a) },
        0u64.wrapping_sub(remainders(a, 32))
    );
    let in_use = pcpu_zone_in_use();
    unsafe { pcpu_approx_free(a) };
    assert_eq!(pcpu_zone_in_use(), in_use - 2, "both slots returned");
    unsafe { pcpu_approx_free(std::ptr::null_mut()) };
}

#[test]
fn bad_batches_and_a_full_zone_allocate_nothing() {
    let _turn = setup();
    let in_use = pcpu_zone_in_use();
    let mut a = MaybeUninit::<pcpu_approx>::uninit();
    for batch in [0, 1, 8, 24, (1 << 32) + 1, 1 << 33] {
        assert_eq!(
            unsafe { pcpu_approx_init(a.as_mut_ptr(), batch) },
            PCPU_EINVAL
        );
    }
    assert_eq!(pcpu_zone_in_use(), in_use);
    // Leave exactly one free slot: the second slot cannot be had, the first is returned.
    let mut held = Vec::new();
    while pcpu_zone_in_use() < pcpu_zone_capacity() - 1 {
        held.push(counter_u64_alloc(M_NOWAIT));
    }
    assert_eq!(unsafe { pcpu_approx_init(a.as_mut_ptr(), 16) }, PCPU_EFULL);
    assert_eq!(pcpu_zone_in_use(), pcpu_zone_capacity() - 1);
    for c in held {
        unsafe { counter_u64_free(c) };
    }
    assert_eq!(pcpu_zone_in_use(), in_use);
}
