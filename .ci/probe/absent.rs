//! Uses the kernel-style API. On a hosted target it is offered only with feature `sim`: without
//! it this must not build, and rustc must say that the items were configured out (see
//! .ci/package.sh). With `sim` it builds, which shows that the failure is about the feature.

use pcpu_counter::freebsd::counter_u64_alloc;
use pcpu_counter::{Counter, Zone};

fn _uses(_zone: &Zone, _counter: &Counter) {}

fn main() {
    let _ = counter_u64_alloc;
    println!("{}", core::any::type_name::<Zone>());
}
