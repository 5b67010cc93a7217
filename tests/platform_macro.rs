//! `set_platform!` expands to the link-time hooks (named with the ABI version, `_pcpu_counter_0_1_*`),
//! each forwarding to the kernel's impl.

use std::sync::atomic::{AtomicUsize, Ordering};

static DEPTH: AtomicUsize = AtomicUsize::new(0);

struct Fake;

// SAFETY: a test double; the crate does not call these hooks under `std` (the simulation
// answers), so only this test does.
unsafe impl pcpu_counter::Platform for Fake {
    fn current_cpu() -> usize {
        3
    }
    fn protect() -> usize {
        DEPTH.fetch_add(1, Ordering::Relaxed)
    }
    unsafe fn unprotect(state: usize) {
        assert_eq!(
            DEPTH.fetch_sub(1, Ordering::Relaxed),
            state + 1,
            "released out of order"
        );
    }
    fn cpu_base() -> usize {
        0x4000 + 3 * 0x100
    }
}

/// A platform that keeps `cpu_base`'s default.
struct Defaults;

// SAFETY: a test double whose hooks are only called by the test below.
unsafe impl pcpu_counter::Platform for Defaults {
    fn current_cpu() -> usize {
        1
    }
    fn protect() -> usize {
        0
    }
    unsafe fn unprotect(_state: usize) {}
}

pcpu_counter::set_platform!(Fake);

#[test]
fn the_macro_defines_forwarding_hooks() {
    assert_eq!(_pcpu_counter_0_1_current_cpu(), 3);
    assert_eq!(_pcpu_counter_0_1_cpu_base(), 0x4300);
    let outer = _pcpu_counter_0_1_protect();
    let inner = _pcpu_counter_0_1_protect();
    assert_eq!((outer, inner), (0, 1));
    // SAFETY: LIFO release of the two `protect`s above.
    unsafe {
        _pcpu_counter_0_1_unprotect(inner);
        _pcpu_counter_0_1_unprotect(outer);
    }
    assert_eq!(DEPTH.load(Ordering::Relaxed), 0);
}

/// `cpu_base`'s default asks the kernel's one area for the current CPU's register value, and
/// says what is wrong while no zone lives there (zones of this binary, made under the
/// simulation, each have an area of their own).
#[test]
fn the_default_cpu_base_is_the_global_areas_register() {
    use pcpu_counter::Platform;
    let err = std::panic::catch_unwind(Defaults::cpu_base).expect_err("no zone lives");
    let msg = err
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .unwrap_or_default();
    assert!(
        msg.contains("or before any zone exists"),
        "unexpected message: {msg}"
    );
}
