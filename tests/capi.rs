//! The C ABI from Rust (feature `capi`): zone exhaustion and all-or-nothing arrays,
//! exact multi-CPU sums through the `extern "C"` functions, and the tick hook.
#![cfg(feature = "capi")]

use std::ptr::null_mut;
use std::sync::Mutex;

use pcpu_counter::capi::*;

/// The C ABI's machine is per process: tests take turns.
static TURN: Mutex<()> = Mutex::new(());

fn setup() -> std::sync::MutexGuard<'static, ()> {
    let turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    assert_eq!(pcpu_sim_machine_new(4, 8192), PCPU_OK);
    turn
}

#[test]
fn a_full_zone_is_null_and_leaks_nothing() {
    let _turn = setup();
    let slots = pcpu_zone_in_use();
    let mut held = Vec::new();
    loop {
        let c = counter_u64_alloc(M_NOWAIT);
        if c.is_null() {
            break;
        }
        held.push(c);
    }
    assert_eq!(
        held.len(),
        pcpu_zone_capacity() - slots,
        "stopped at the zone's size"
    );
    assert_eq!(pcpu_zone_in_use(), pcpu_zone_capacity());
    // Handles are slot offsets: distinct, 8-byte aligned, never 0.
    let mut sorted: Vec<usize> = held.iter().map(|&c| c as usize).collect();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), held.len());
    assert!(sorted.iter().all(|&off| off != 0 && off % 8 == 0));
    let mut a = [null_mut(); 3];
    assert_eq!(
        unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 3, M_NOWAIT) },
        PCPU_EFULL
    );
    // Free two (adjacent: the last two allocated): an array of three still fails whole.
    unsafe { counter_u64_free(held.pop().unwrap()) };
    unsafe { counter_u64_free(held.pop().unwrap()) };
    assert_eq!(
        unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 3, M_NOWAIT) },
        PCPU_EFULL
    );
    assert_eq!(a, [null_mut(); 3]);
    assert_eq!(pcpu_zone_in_use(), slots + held.len());
    assert_eq!(
        unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 2, M_NOWAIT) },
        PCPU_OK
    );
    assert_eq!(a[1] as usize, a[0] as usize + 8, "an array is one run");
    unsafe { counter_u64_array_free(a.as_mut_ptr(), 2) };
    for c in held {
        unsafe { counter_u64_free(c) };
    }
    assert_eq!(pcpu_zone_in_use(), slots);
}

#[test]
fn array_handles_are_adjacent_slots() {
    let _turn = setup();
    let mut a = [null_mut(); 4];
    assert_eq!(
        unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 4, M_WAITOK) },
        PCPU_OK
    );
    let slots = pcpu_zone_in_use();
    // Freeing one element frees exactly its slot.
    unsafe { counter_u64_free(a[1]) };
    assert_eq!(pcpu_zone_in_use(), slots - 1);
    a[1] = null_mut();
    unsafe { counter_u64_array_free(a.as_mut_ptr(), 4) };
    assert_eq!(pcpu_zone_in_use(), slots - 4);
    assert_eq!(
        unsafe { counter_u64_array_alloc(null_mut(), 4, M_WAITOK) },
        PCPU_EINVAL
    );
    assert_eq!(
        unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 0, M_WAITOK) },
        PCPU_EINVAL
    );
    assert_eq!(
        unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 4, 0) },
        PCPU_EINVAL
    );
    let mut huge = vec![null_mut(); pcpu_zone_capacity() + 1];
    let n = huge.len();
    assert_eq!(
        unsafe { counter_u64_array_alloc(huge.as_mut_ptr(), n, M_WAITOK) },
        PCPU_EFULL,
        "more than the zone holds fails at once, even waiting"
    );
    assert!(
        counter_u64_alloc(M_ZERO).is_null(),
        "M_ZERO alone is neither wait flag"
    );
    let z = counter_u64_alloc(M_NOWAIT | M_ZERO);
    assert!(!z.is_null());
    unsafe { counter_u64_free(z) };
}

#[test]
fn exact_sums_through_the_c_functions() {
    let _turn = setup();
    let plain = counter_u64_alloc(M_WAITOK) as usize;
    let protected = counter_u64_alloc(M_WAITOK) as usize;
    std::thread::scope(|s| {
        for t in 0..8usize {
            s.spawn(move || {
                let (plain, protected) = (plain as counter_u64_t, protected as counter_u64_t);
                for round in 0..50 {
                    assert_eq!(pcpu_sim_bind((t + round) % 4), PCPU_OK);
                    for _ in 0..100 {
                        unsafe { pcpu_counter_add(plain, t as i64 + 1) };
                    }
                    // Both forms: the nullary one (nesting per CPU) and the explicit state.
                    counter_enter();
                    for _ in 0..50 {
                        unsafe { pcpu_counter_add_protected(protected, -1) };
                    }
                    counter_exit();
                    let state = pcpu_counter_enter_state();
                    for _ in 0..50 {
                        unsafe { pcpu_counter_add_protected(protected, -1) };
                    }
                    unsafe { pcpu_counter_exit_state(state) };
                    pcpu_sim_unbind();
                }
            });
        }
    });
    let (plain, protected) = (plain as counter_u64_t, protected as counter_u64_t);
    assert_eq!(unsafe { counter_u64_fetch(plain) }, 36 * 50 * 100);
    assert_eq!(
        unsafe { counter_u64_fetch(protected) } as i64,
        -(8 * 50 * 100)
    );
    unsafe { counter_u64_zero(plain) };
    assert_eq!(unsafe { counter_u64_fetch(plain) }, 0);
    unsafe { counter_u64_free(plain) };
    unsafe { counter_u64_free(protected) };
}

#[test]
fn ratecheck_follows_the_tick_hook() {
    let _turn = setup();
    static NOW: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(7);
    extern "C" fn ticks() -> u32 {
        NOW.load(std::sync::atomic::Ordering::Relaxed)
    }
    pcpu_set_ticks(Some(ticks), 10);
    let mut cr = counter_rate {
        cr_rate: counter_u64_alloc(M_WAITOK),
        cr_lock: 0,
        cr_ticks: 0,
        cr_over: 0,
    };
    assert_eq!(pcpu_sim_bind(2), PCPU_OK);
    let got: Vec<i64> = (0..4)
        .map(|_| unsafe { counter_ratecheck(&mut cr, 3) })
        .collect();
    assert_eq!(got, [0, 0, 0, -1]);
    NOW.store(17, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(unsafe { counter_ratecheck(&mut cr, 3) }, 4);
    assert_eq!(cr.cr_ticks, 17, "the C struct holds the reset tick");
    pcpu_set_ticks(None, 0); // back to the monotonic default
    pcpu_sim_unbind();
    unsafe { counter_u64_free(cr.cr_rate) };
}

#[test]
fn strerror_names_every_code() {
    let _turn = setup();
    for code in PCPU_EOTHER..=PCPU_OK {
        let text = unsafe { std::ffi::CStr::from_ptr(pcpu_strerror(code)) };
        assert_ne!(text.to_str().unwrap(), "unknown error", "code {code}");
    }
    let text = unsafe { std::ffi::CStr::from_ptr(pcpu_strerror(-99)) };
    assert_eq!(text.to_str(), Ok("unknown error"));
}
