//! The C ABI from Rust (feature `capi`): zone exhaustion and all-or-nothing arrays,
//! exact multi-CPU sums through the `extern "C"` functions, the tick hook, and the
//! registry (`pcpu_sysctl_*`).
#![cfg(feature = "capi")]

use std::ptr::null_mut;
use std::sync::Mutex;

use pcpu_counter::capi::*;
use pcpu_counter::sim::capi::*;

#[path = "common/c_codes.rs"]
mod c_codes;

/// The C ABI's machine is per process: tests take turns.
static TURN: Mutex<()> = Mutex::new(());

fn setup() -> std::sync::MutexGuard<'static, ()> {
    let turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    assert_eq!(pcpu_sim_machine_new(4, 8192), PCPU_OK);
    turn
}

/// Allocates counters until the zone is full (`M_NOWAIT` gives NULL); returns them.
fn fill_zone() -> Vec<counter_u64_t> {
    std::iter::from_fn(|| Some(counter_u64_alloc(M_NOWAIT)).filter(|c| !c.is_null())).collect()
}

#[test]
fn a_full_zone_is_null_and_leaks_nothing() {
    let _turn = setup();
    let slots = pcpu_zone_in_use();
    let mut held = fill_zone();
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
fn a_tick_hook_with_hz_0_is_refused_for_the_default_clock() {
    let _turn = setup();
    const FAR: u32 = 0x4000_0000;
    extern "C" fn far() -> u32 {
        FAR
    }
    let mut cr = counter_rate {
        cr_rate: counter_u64_alloc(M_WAITOK),
        cr_lock: 0,
        cr_ticks: 0,
        cr_over: 0,
    };
    assert_eq!(pcpu_sim_bind(1), PCPU_OK);
    // hz 0 would make every event a new second: the hook is not taken, the monotonic
    // millisecond default counts (its ticks are nowhere near FAR).
    pcpu_set_ticks(Some(far), 0);
    assert_ne!(unsafe { counter_ratecheck(&mut cr, 1) }, -1);
    assert_ne!(
        cr.cr_ticks as u32, FAR,
        "the hook was used although hz is 0"
    );
    // With a real hz the same hook is the clock: FAR is a new second, stored as its tick.
    pcpu_set_ticks(Some(far), 10);
    unsafe { counter_ratecheck(&mut cr, 1) };
    assert_eq!(cr.cr_ticks as u32, FAR);
    pcpu_set_ticks(None, 0);
    pcpu_sim_unbind();
    unsafe { counter_u64_free(cr.cr_rate) };
}

#[test]
fn a_second_machine_must_match_the_first() {
    let _turn = setup();
    let (ncpus, capacity) = (pcpu_zone_ncpus(), pcpu_zone_capacity());
    assert_eq!(ncpus, 4);
    // The machine exists: asking again for what it has (or less room) is fine...
    assert_eq!(pcpu_sim_machine_new(ncpus, capacity), PCPU_OK);
    assert_eq!(pcpu_sim_machine_new(ncpus, 1), PCPU_OK);
    // ...other CPUs or more room than it has is not, whatever the other argument.
    assert_eq!(pcpu_sim_machine_new(ncpus + 1, 1), PCPU_EINSTALLED);
    assert_eq!(pcpu_sim_machine_new(ncpus - 1, capacity), PCPU_EINSTALLED);
    assert_eq!(pcpu_sim_machine_new(ncpus, capacity + 1), PCPU_EINSTALLED);
    assert_eq!((pcpu_zone_ncpus(), pcpu_zone_capacity()), (ncpus, capacity));
}

/// `pcpu_strerror` gives each code docs/c.md's text, and "unknown error" for other numbers
/// (-13 among them: the simulation's `PCPU_EBOUND` is outside the product's codes).
#[test]
fn strerror_names_every_code() {
    let _turn = setup();
    assert!(c_codes::CODES.len() > 30, "docs/c.md's table is read");
    for code in -40..=1 {
        let text = unsafe { std::ffi::CStr::from_ptr(pcpu_strerror(code)) };
        let want = c_codes::text_of(code).unwrap_or("unknown error");
        assert_eq!(text.to_str(), Ok(want), "code {code}");
    }
    assert_eq!(c_codes::text_of(PCPU_EBOUND), None);
}

/// What a walk saw: (name, description, values) per registered name.
type Seen = Vec<(String, String, Vec<u64>)>;

unsafe extern "C" fn collect(
    name: *const std::ffi::c_char,
    descr: *const std::ffi::c_char,
    values: *const u64,
    n: usize,
    arg: *mut std::ffi::c_void,
) -> std::ffi::c_int {
    // SAFETY: the walk's pointers are valid during the call; `arg` is a `Seen`.
    unsafe {
        let seen = &mut *arg.cast::<Seen>();
        let text = |s| std::ffi::CStr::from_ptr(s).to_str().unwrap().to_owned();
        seen.push((
            text(name),
            text(descr),
            std::slice::from_raw_parts(values, n).to_vec(),
        ));
    }
    0
}

fn walk() -> Seen {
    let mut seen = Seen::new();
    let rc = unsafe { pcpu_sysctl_walk(Some(collect), (&mut seen as *mut Seen).cast()) };
    assert_eq!(rc, PCPU_OK);
    seen
}

/// The entries of a walk whose names start with `prefix` (other tests' entries aside).
fn walk_prefix(prefix: &str) -> Seen {
    walk()
        .into_iter()
        .filter(|(name, _, _)| name.starts_with(prefix))
        .collect()
}

#[test]
fn registry_walks_exact_values_from_many_cpus() {
    let _turn = setup();
    let c = counter_u64_alloc(M_WAITOK);
    let mut a = [null_mut(); 3];
    assert_eq!(
        unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 3, M_WAITOK) },
        PCPU_OK
    );
    unsafe {
        assert_eq!(
            pcpu_sysctl_add_counter(c"w.rx".as_ptr(), c"packets received".as_ptr(), c),
            PCPU_OK
        );
        assert_eq!(
            pcpu_sysctl_add_counter_array(c"w.err".as_ptr(), std::ptr::null(), a.as_ptr(), 3),
            PCPU_OK
        );
    }
    let (cu, au) = (c as usize, a.map(|h| h as usize));
    std::thread::scope(|s| {
        for t in 0..8usize {
            s.spawn(move || {
                for round in 0..20 {
                    assert_eq!(pcpu_sim_bind((t + round) % 4), PCPU_OK);
                    for _ in 0..50 {
                        unsafe { pcpu_counter_add(cu as counter_u64_t, 1) };
                        unsafe { pcpu_counter_add(au[t % 3] as counter_u64_t, t as i64) };
                    }
                    pcpu_sim_unbind();
                }
            });
        }
    });
    let mut want = [0u64; 3];
    for t in 0..8u64 {
        want[t as usize % 3] += 20 * 50 * t;
    }
    assert_eq!(
        walk_prefix("w."),
        [
            ("w.rx".into(), "packets received".into(), vec![8 * 20 * 50]),
            ("w.err".into(), "".into(), want.to_vec()),
        ]
    );
    // Zero by name zeroes every value of the name, and only those.
    assert_eq!(unsafe { pcpu_sysctl_zero(c"w.err".as_ptr()) }, PCPU_OK);
    let mut out = [9u64; 3];
    unsafe { counter_u64_array_copy(a.as_ptr(), out.as_mut_ptr(), 3) };
    assert_eq!(out, [0; 3]);
    assert_eq!(unsafe { counter_u64_fetch(c) }, 8 * 20 * 50);
    unsafe {
        assert_eq!(pcpu_sysctl_remove(c"w.rx".as_ptr()), PCPU_OK);
        assert_eq!(pcpu_sysctl_remove(c"w.err".as_ptr()), PCPU_OK);
    }
    assert!(walk_prefix("w.").is_empty());
    unsafe { counter_u64_array_free(a.as_mut_ptr(), 3) };
    unsafe { counter_u64_free(c) };
}

#[test]
fn registry_refuses_bad_names_duplicates_and_a_full_table() {
    let _turn = setup();
    let c = counter_u64_alloc(M_WAITOK);
    let add =
        |name: &std::ffi::CStr| unsafe { pcpu_sysctl_add_counter(name.as_ptr(), c"d".as_ptr(), c) };
    assert_eq!(add(c"r.dup"), PCPU_OK);
    assert_eq!(add(c"r.dup"), PCPU_EEXIST, "a duplicate name is refused");
    assert_eq!(add(c""), PCPU_ENAME);
    assert_eq!(add(c"r.\xff"), PCPU_ENAME, "not UTF-8");
    let long = std::ffi::CString::new("n".repeat(PCPU_SYSCTL_NAME_MAX + 1)).unwrap();
    assert_eq!(add(&long), PCPU_ENAME);
    let longest = std::ffi::CString::new("n".repeat(PCPU_SYSCTL_NAME_MAX)).unwrap();
    assert_eq!(add(&longest), PCPU_OK);
    assert_eq!(unsafe { pcpu_sysctl_remove(longest.as_ptr()) }, PCPU_OK);
    let descr = std::ffi::CString::new("d".repeat(PCPU_SYSCTL_DESCR_MAX + 1)).unwrap();
    assert_eq!(
        unsafe { pcpu_sysctl_add_counter(c"r.descr".as_ptr(), descr.as_ptr(), c) },
        PCPU_ENAME
    );
    unsafe {
        assert_eq!(
            pcpu_sysctl_add_counter(std::ptr::null(), c"d".as_ptr(), c),
            PCPU_EINVAL
        );
        assert_eq!(
            pcpu_sysctl_add_counter(c"r.null".as_ptr(), c"d".as_ptr(), null_mut()),
            PCPU_EINVAL
        );
        assert_eq!(
            pcpu_sysctl_add_counter(c"r.bogus".as_ptr(), c"d".as_ptr(), 0x4 as counter_u64_t),
            PCPU_EINVAL,
            "not a slot of the zone"
        );
        assert_eq!(pcpu_sysctl_remove(c"r.none".as_ptr()), PCPU_ENOENT);
        assert_eq!(pcpu_sysctl_zero(c"r.none".as_ptr()), PCPU_ENOENT);
        assert_eq!(pcpu_sysctl_walk(None, null_mut()), PCPU_EINVAL);
    }
    let mut big = vec![null_mut(); PCPU_SYSCTL_ARRAY_MAX + 1];
    let n = big.len();
    assert_eq!(
        unsafe { counter_u64_array_alloc(big.as_mut_ptr(), n, M_WAITOK) },
        PCPU_OK
    );
    assert_eq!(
        unsafe { pcpu_sysctl_add_counter_array(c"r.big".as_ptr(), c"d".as_ptr(), big.as_ptr(), n) },
        PCPU_EINVAL,
        "over PCPU_SYSCTL_ARRAY_MAX"
    );
    assert_eq!(
        unsafe {
            pcpu_sysctl_add_counter_array(c"r.max".as_ptr(), c"d".as_ptr(), big.as_ptr(), n - 1)
        },
        PCPU_OK
    );
    assert_eq!(walk_prefix("r.max")[0].2.len(), PCPU_SYSCTL_ARRAY_MAX);
    assert_eq!(unsafe { pcpu_sysctl_remove(c"r.max".as_ptr()) }, PCPU_OK);
    unsafe { counter_u64_array_free(big.as_mut_ptr(), n) };

    // Fill the table: the names are borrowed, so they live in `names` until removed.
    let names: Vec<std::ffi::CString> = (0..PCPU_SYSCTL_MAX)
        .map(|i| std::ffi::CString::new(format!("r.fill{i}")).unwrap())
        .collect();
    let added: Vec<&std::ffi::CString> = names.iter().take_while(|n| add(n) == PCPU_OK).collect();
    assert!(!added.is_empty());
    assert_eq!(
        walk().len(),
        PCPU_SYSCTL_MAX,
        "stopped when the table was full"
    );
    assert_eq!(add(c"r.more"), PCPU_EREGFULL);
    for name in &added {
        assert_eq!(unsafe { pcpu_sysctl_remove(name.as_ptr()) }, PCPU_OK);
    }
    assert_eq!(add(c"r.more"), PCPU_OK, "removal frees the entry");
    for name in [c"r.more", c"r.dup"] {
        assert_eq!(unsafe { pcpu_sysctl_remove(name.as_ptr()) }, PCPU_OK);
    }
    unsafe { counter_u64_free(c) };
}

#[test]
fn registry_walk_stops_at_a_nonzero_return() {
    let _turn = setup();
    unsafe extern "C" fn stop(
        _: *const std::ffi::c_char,
        _: *const std::ffi::c_char,
        _: *const u64,
        _: usize,
        arg: *mut std::ffi::c_void,
    ) -> std::ffi::c_int {
        // SAFETY: `arg` is the test's counter of calls.
        unsafe { *arg.cast::<usize>() += 1 };
        42
    }
    let c = counter_u64_alloc(M_WAITOK);
    unsafe {
        assert_eq!(
            pcpu_sysctl_add_counter(c"s.a".as_ptr(), c"".as_ptr(), c),
            PCPU_OK
        );
        assert_eq!(
            pcpu_sysctl_add_counter(c"s.b".as_ptr(), c"".as_ptr(), c),
            PCPU_OK
        );
    }
    let mut calls = 0usize;
    let rc = unsafe { pcpu_sysctl_walk(Some(stop), (&mut calls as *mut usize).cast()) };
    assert_eq!((rc, calls), (42, 1));
    unsafe {
        assert_eq!(pcpu_sysctl_remove(c"s.a".as_ptr()), PCPU_OK);
        assert_eq!(pcpu_sysctl_remove(c"s.b".as_ptr()), PCPU_OK);
        counter_u64_free(c);
    }
}

#[test]
fn registry_callback_may_zero_and_add() {
    let _turn = setup();
    static C: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    unsafe extern "C" fn zero_and_add(
        name: *const std::ffi::c_char,
        _: *const std::ffi::c_char,
        _: *const u64,
        _: usize,
        _: *mut std::ffi::c_void,
    ) -> std::ffi::c_int {
        let c = C.load(std::sync::atomic::Ordering::Relaxed) as counter_u64_t;
        // SAFETY: `name` is the walk's C string; the new name is a literal.
        unsafe {
            if std::ffi::CStr::from_ptr(name) == c"z.a" {
                assert_eq!(pcpu_sysctl_zero(name), PCPU_OK);
                assert_eq!(
                    pcpu_sysctl_add_counter(c"z.b".as_ptr(), c"".as_ptr(), c),
                    PCPU_OK
                );
            }
        }
        0
    }
    let c = counter_u64_alloc(M_WAITOK);
    C.store(c as usize, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(pcpu_sim_bind(0), PCPU_OK);
    unsafe { pcpu_counter_add(c, 11) };
    pcpu_sim_unbind();
    unsafe {
        assert_eq!(
            pcpu_sysctl_add_counter(c"z.a".as_ptr(), c"".as_ptr(), c),
            PCPU_OK
        );
        assert_eq!(pcpu_sysctl_walk(Some(zero_and_add), null_mut()), PCPU_OK);
        assert_eq!(counter_u64_fetch(c), 0);
    }
    let names: Vec<String> = walk_prefix("z.").into_iter().map(|e| e.0).collect();
    assert_eq!(names, ["z.a", "z.b"]);
    unsafe {
        assert_eq!(pcpu_sysctl_remove(c"z.a".as_ptr()), PCPU_OK);
        assert_eq!(pcpu_sysctl_remove(c"z.b".as_ptr()), PCPU_OK);
        counter_u64_free(c);
    }
}

/// `M_WAITOK` on a full zone waits until a slot is freed, as FreeBSD's `counter_u64_alloc`
/// sleeps in `uma_zalloc_pcpu`; `M_NOWAIT` fails at once.
#[test]
fn waitok_waits_for_a_free_slot() {
    let _turn = setup();
    let mut held: Vec<usize> = fill_zone().into_iter().map(|c| c as usize).collect();
    assert!(counter_u64_alloc(M_NOWAIT).is_null());
    let asking = std::sync::atomic::AtomicBool::new(false);
    let got = std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            asking.store(true, std::sync::atomic::Ordering::SeqCst);
            counter_u64_alloc(M_WAITOK) as usize
        });
        while !asking.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::yield_now();
        }
        // Give the waiter time to find the zone full (its result does not depend on it).
        for _ in 0..1000 {
            std::thread::yield_now();
        }
        let freed = held.pop().unwrap();
        // SAFETY: a live counter of this test's.
        unsafe { counter_u64_free(freed as counter_u64_t) };
        (waiter.join().unwrap(), freed)
    });
    assert_eq!(got.0, got.1, "the waiter got the slot that was freed");
    held.push(got.0);
    for c in held {
        // SAFETY: live counters of this test's.
        unsafe { counter_u64_free(c as counter_u64_t) };
    }
}

/// `pcpu_zone_init` refuses counter areas the CPU cannot write (the zone's layout checks),
/// before anything is written and whatever zone is installed: `PCPU_EOVERFLOW` for CPU 3's
/// area past the end of the address space (`Error::WrapsAround`), `PCPU_EUNADDR` on x86_64
/// for a non-canonical one.
#[test]
fn zone_init_refuses_areas_it_cannot_write() {
    let _turn = setup();
    let mut meta = [0u64; 600];
    let blocks = |base| pcpu_zone_layout {
        base,
        stride: 0x1000,
        offset: 64,
        len: 512,
        ncpus: 4,
    };
    let init = |l: pcpu_zone_layout, meta: &mut [u64]| {
        // SAFETY: every layout here is refused before any memory is touched.
        unsafe { pcpu_zone_init(&l, meta.as_mut_ptr(), meta.len()) }
    };
    assert_eq!(init(blocks(usize::MAX - 0x30ff), &mut meta), PCPU_EOVERFLOW);
    #[cfg(target_arch = "x86_64")]
    assert_eq!(init(blocks(0xffff_0000_0045_9000), &mut meta), PCPU_EUNADDR);
    assert_eq!(meta, [0u64; 600]);
    let text = |code| {
        unsafe { std::ffi::CStr::from_ptr(pcpu_strerror(code)) }
            .to_str()
            .unwrap()
    };
    assert_eq!(text(PCPU_EUNADDR), "address no CPU can write");
}

/// The first failed bring-up check, from C: 0 while none failed, then the first failure's
/// code and CPU, not replaced by a later one. (The only test of this binary whose checks
/// fail.)
#[test]
fn the_first_failed_check_is_kept_for_c() {
    let _turn = setup();
    let mut cpu = usize::MAX;
    assert_eq!(pcpu_sim_bind(1), PCPU_OK);
    // SAFETY (the calls below): on a bound simulated CPU; `cpu` is writable.
    unsafe {
        assert_eq!(pcpu_cpu_check(1), PCPU_OK);
        assert_eq!(pcpu_cpu_check_first_failure(&mut cpu), PCPU_OK);
        assert_eq!(cpu, usize::MAX);
        assert_eq!(pcpu_cpu_check(0), PCPU_EREGFOREIGN);
        assert_eq!(pcpu_cpu_check(4), PCPU_ENOTINZONE);
        assert_eq!(pcpu_cpu_check_first_failure(&mut cpu), PCPU_EREGFOREIGN);
        assert_eq!(cpu, 0);
        assert_eq!(pcpu_cpu_check_first_failure(null_mut()), PCPU_EREGFOREIGN);
    }
    pcpu_sim_unbind();
}
