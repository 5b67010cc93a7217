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
}

pcpu_counter::set_platform!(Fake);

#[test]
fn the_macro_defines_forwarding_hooks() {
    assert_eq!(_pcpu_counter_0_1_current_cpu(), 3);
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
