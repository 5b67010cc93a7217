//! The FreeBSD-named API on the global zone (one global zone per process: one test).

use pcpu_counter::freebsd::*;
use pcpu_counter::sim::Machine;
use pcpu_counter::{Error, Zone};

#[test]
fn freebsd_names_on_the_global_zone() {
    assert_eq!(global_zone().unwrap_err(), Error::NotInstalled);
    assert!(
        counter_u64_alloc(Wait::NoWait).is_none(),
        "no zone installed yet"
    );
    let machine = Machine::with_global_zone(4, 16).unwrap();
    assert!(core::ptr::eq(global_zone().unwrap(), machine.zone()));
    assert_eq!(
        install(Zone::with_capacity(1, 8).unwrap()).unwrap_err(),
        Error::AlreadyInstalled
    );
    assert!(Machine::with_global_zone(2, 8).is_err());

    let c: CounterU64 = counter_u64_alloc(Wait::WaitOk).unwrap();
    assert_eq!(counter_u64_fetch(&c), 0);
    std::thread::scope(|s| {
        for cpu in 0..4 {
            let (machine, c) = (&machine, &c);
            s.spawn(move || {
                machine.run_on(cpu, || {
                    for _ in 0..1000 {
                        counter_u64_add(c, 3);
                    }
                    let guard = counter_enter();
                    counter_u64_add_protected(&guard, c, -1);
                    counter_exit(guard);
                })
            });
        }
    });
    assert_eq!(counter_u64_fetch(&c), 4 * (3000 - 1));
    counter_u64_zero(&c);
    assert_eq!(counter_u64_fetch(&c), 0);

    // Fill the zone: NoWait fails at once, WaitOk waits until a slot is freed.
    let rest: Vec<_> = (1..16)
        .map(|_| counter_u64_alloc(Wait::NoWait).unwrap())
        .collect();
    assert!(counter_u64_alloc(Wait::NoWait).is_none());
    let freed_by_other = std::thread::scope(|s| {
        let waiter = s.spawn(|| counter_u64_alloc(Wait::WaitOk));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !waiter.is_finished(),
            "WaitOk returned while the zone was full"
        );
        counter_u64_free(c);
        waiter.join().unwrap()
    });
    let reused = freed_by_other.expect("WaitOk got the freed slot");
    assert_eq!(counter_u64_fetch(&reused), 0, "a reused slot starts at 0");
    counter_u64_free(None);
    counter_u64_free(reused);
    drop(rest);
    assert_eq!(machine.zone().in_use(), 0);
}
