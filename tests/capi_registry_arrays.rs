//! The C registry's walk and export of the largest array a name can hold
//! (`PCPU_SYSCTL_ARRAY_MAX` counters): the walk hands the callback all of its values at
//! once, and the export (read in group reads of 16 values, so that its stack stays small:
//! docs/c.md, "Stack use") writes every element with its own index and value, cumulative
//! and as deltas that add up exactly. A piece read with the wrong first element, or one
//! left out, changes the exact text.
#![cfg(feature = "capi")]

use core::ffi::{c_char, c_int, c_void, CStr};
use pcpu_counter::capi::*;
use pcpu_counter::sim::capi::*;

/// Collects `(name, values)` for each name the walk reaches.
unsafe extern "C" fn collect(
    name: *const c_char,
    _: *const c_char,
    v: *const u64,
    n: usize,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: `arg` is the test's vector; `name` a C string and `v` `n` values, per the walk.
    let out = unsafe { &mut *arg.cast::<Vec<(String, Vec<u64>)>>() };
    let name = unsafe { CStr::from_ptr(name) }.to_str().unwrap().to_owned();
    out.push((name, unsafe { core::slice::from_raw_parts(v, n) }.to_vec()));
    0
}

/// The Prometheus text of the counter `one` and the array `big` with these values.
fn expected(one: u64, big: &[u64]) -> String {
    let mut text = format!("# HELP one_total single\n# TYPE one_total counter\none_total {one}\n");
    text += "# HELP big_total every element\n# TYPE big_total counter\n";
    for (i, v) in big.iter().enumerate() {
        text += &format!("big_total{{index=\"{i}\"}} {v}\n");
    }
    text
}

/// Exports with `flags` into a buffer that fits.
fn export(flags: c_int) -> String {
    let mut len = 0usize;
    let rc = unsafe { pcpu_sysctl_export(core::ptr::null_mut(), &mut len, flags) };
    assert_eq!(rc, PCPU_ENOSPC);
    let mut buf = vec![0u8; len];
    assert_eq!(
        unsafe { pcpu_sysctl_export(buf.as_mut_ptr().cast(), &mut len, flags) },
        PCPU_OK
    );
    String::from_utf8(buf[..len].to_vec()).unwrap()
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the C machine reads the early-counter linker set's bounds, extern statics Miri cannot resolve"
)]
fn the_largest_array_is_walked_whole_and_exported_element_by_element() {
    const N: usize = PCPU_SYSCTL_ARRAY_MAX;
    assert_eq!(pcpu_sim_machine_new(3, 256), 0);
    let one = counter_u64_alloc(M_WAITOK);
    let mut a = [core::ptr::null_mut(); N];
    assert_eq!(
        unsafe { counter_u64_array_alloc(a.as_mut_ptr(), N, M_WAITOK) },
        0
    );
    // Element i gets 1000 * (i + 1) + i, spread over the CPUs.
    let mut big: Vec<u64> = (0..N as u64).map(|i| 1000 * (i + 1) + i).collect();
    for (i, &c) in a.iter().enumerate() {
        assert_eq!(pcpu_sim_bind(i % 3), 0);
        unsafe {
            pcpu_counter_add(c, 1000 * (i as i64 + 1));
            pcpu_counter_add(c, i as i64);
        }
        pcpu_sim_unbind();
    }
    assert_eq!(pcpu_sim_bind(2), 0);
    unsafe { pcpu_counter_add(one, 7) };
    pcpu_sim_unbind();
    unsafe {
        assert_eq!(
            pcpu_sysctl_add_counter(c"one".as_ptr(), c"single".as_ptr(), one),
            0
        );
        assert_eq!(
            pcpu_sysctl_add_counter_array(
                c"big".as_ptr(),
                c"every element".as_ptr(),
                a.as_ptr(),
                N
            ),
            0
        );
    }

    let mut got: Vec<(String, Vec<u64>)> = Vec::new();
    let rc = unsafe { pcpu_sysctl_walk(Some(collect), (&mut got as *mut Vec<_>).cast()) };
    assert_eq!(rc, 0);
    assert_eq!(
        got,
        [
            ("one".to_string(), vec![7]),
            ("big".to_string(), big.clone())
        ]
    );

    assert_eq!(export(0), expected(7, &big));
    assert_eq!(export(PCPU_EXPORT_DELTAS), expected(7, &big));
    // Taken: every element reads 0, and the next deltas are the adds made since.
    assert!(a.iter().all(|&c| unsafe { counter_u64_fetch(c) } == 0));
    for (i, &c) in a.iter().enumerate().filter(|(i, _)| i % 15 == 0) {
        assert_eq!(pcpu_sim_bind(1), 0);
        unsafe { pcpu_counter_add(c, i as i64 + 1) };
        pcpu_sim_unbind();
    }
    big = (0..N as u64)
        .map(|i| if i % 15 == 0 { i + 1 } else { 0 })
        .collect();
    assert_eq!(export(PCPU_EXPORT_DELTAS), expected(0, &big));
    assert_eq!(export(0), expected(0, &[0; N]));

    unsafe {
        assert_eq!(pcpu_sysctl_remove(c"one".as_ptr()), 0);
        assert_eq!(pcpu_sysctl_remove(c"big".as_ptr()), 0);
        counter_u64_array_free(a.as_mut_ptr(), N);
        counter_u64_free(one);
    }
}
