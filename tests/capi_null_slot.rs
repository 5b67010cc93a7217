//! The C ABI never hands out offset 0, C's NULL (`src/capi/slot.rs`): in a zone that starts
//! at offset 0 of the per-CPU area, the first run C would get there keeps its first slot for
//! good and gives the rest back, exactly. Its own test binary: it needs the process's C zone
//! fresh, with nothing allocated yet. The zone is a kernel's (`pcpu_zone_init` on memory of
//! the test's, counters at offset 0 of each block; a simulated machine's zone starts further
//! in); the test only allocates and frees, so no thread needs a CPU of it.
#![cfg(feature = "capi")]

use std::ptr::null_mut;

use pcpu_counter::capi::*;

#[test]
fn a_first_run_at_offset_0_keeps_only_that_slot() {
    const COUNTERS: usize = 64;
    let stride = COUNTERS * 8;
    let memory = std::alloc::Layout::from_size_align(2 * stride, 128).unwrap();
    // SAFETY: a non-zero size; the memory is leaked (a kernel's per-CPU blocks).
    let base = unsafe { std::alloc::alloc_zeroed(memory) } as usize;
    assert_ne!(base, 0);
    let layout = pcpu_zone_layout {
        base,
        stride,
        offset: 0,
        len: stride,
        ncpus: 2,
    };
    let meta = vec![0u64; pcpu_counter::ZoneLayout::meta_words_for(COUNTERS)].leak();
    // SAFETY: the layout names live memory of the test's, and the metadata lives for ever.
    let rc = unsafe { pcpu_zone_init(&layout, meta.as_mut_ptr(), meta.len()) };
    assert_eq!(rc, PCPU_OK);
    assert_eq!(pcpu_zone_in_use(), 0, "nothing allocated yet");
    let capacity = pcpu_zone_capacity();

    // An array first: its run would start at offset 0. Slot 0 is kept, the other 3 slots of
    // that run go back, and the array gets the run after slot 0.
    let mut a = [null_mut(); 4];
    assert_eq!(
        unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 4, M_NOWAIT) },
        PCPU_OK
    );
    let offsets: Vec<usize> = a.iter().map(|&c| c as usize).collect();
    assert_eq!(offsets, [8, 16, 24, 32]);
    assert_eq!(
        pcpu_zone_in_use(),
        5,
        "slot 0 and the array's 4, nothing leaked"
    );

    // Every other slot is still there, once each.
    let mut singles = Vec::new();
    loop {
        let c = counter_u64_alloc(M_NOWAIT);
        if c.is_null() {
            break;
        }
        singles.push(c as usize);
    }
    assert_eq!(singles.len(), capacity - 5);
    assert!(
        singles.iter().all(|&off| off > 32),
        "no slot handed out twice"
    );
    assert_eq!(pcpu_zone_in_use(), capacity);

    // Freed, everything comes back except slot 0.
    for &off in &singles {
        unsafe { counter_u64_free(off as counter_u64_t) };
    }
    unsafe { counter_u64_array_free(a.as_mut_ptr(), 4) };
    assert_eq!(pcpu_zone_in_use(), 1, "slot 0 stays allocated for good");

    // A single counter first would also have been offset 0: with slot 0 held, it is not.
    let c = counter_u64_alloc(M_NOWAIT);
    assert_eq!(c as usize, 8);
    assert_eq!(pcpu_zone_in_use(), 2);
    unsafe { counter_u64_free(c) };
}
