//! What an ordinary host thread gets under the simulation: a clear panic, in release builds
//! too, never a fault or a count in another machine's slot (`.ci/run` runs this file in
//! release as well).

use pcpu_counter::sim::Machine;
use pcpu_counter::Zone;

/// The message every refused add carries.
const NO_CPU: &str = "holds no simulated CPU";

fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let err = std::panic::catch_unwind(f).expect_err("the add was not refused");
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn an_add_on_a_thread_that_holds_no_cpu_panics_and_changes_nothing() {
    let zone = Zone::with_capacity(4, 64).unwrap();
    let counter = zone.alloc().unwrap();
    let msg = panic_message(std::panic::AssertUnwindSafe(|| counter.add(1)));
    assert!(msg.contains(NO_CPU), "unexpected message: {msg}");
    assert!(
        msg.contains("Machine::bind"),
        "the message says what to do: {msg}"
    );
    assert_eq!(counter.fetch(), 0);
}

#[test]
fn an_add_to_another_machines_counter_panics_and_changes_nothing() {
    let (a, b) = (Machine::new(2), Machine::new(2));
    let (ca, cb) = (a.alloc().unwrap(), b.alloc().unwrap());
    a.run_on(1, || {
        ca.add(5);
        let msg = panic_message(std::panic::AssertUnwindSafe(|| cb.add(1)));
        assert!(
            msg.contains("of this counter's machine"),
            "unexpected message: {msg}"
        );
    });
    assert_eq!((ca.fetch(), cb.fetch()), (5, 0));
}

#[test]
fn a_zone_of_no_machine_refuses_adds_from_a_bound_thread() {
    let machine = Machine::new(1);
    let zone = Zone::with_capacity(1, 8).unwrap();
    let counter = zone.alloc().unwrap();
    machine.run_on(0, || {
        let msg = panic_message(std::panic::AssertUnwindSafe(|| counter.inc()));
        assert!(msg.contains(NO_CPU), "unexpected message: {msg}");
    });
    assert_eq!(counter.fetch(), 0);
}
