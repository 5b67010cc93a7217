//! C early counters (`COUNTER_U64_DEFINE_EARLY`) as the C macro makes them, from Rust: a
//! `counter_u64_t` variable holding the address of a static word, and that variable's address
//! in the linker set `pcpu_counter_early`. Before the zone exists an add reaches the word;
//! `pcpu_zone_init` refuses a zone without a slot for each of them, then moves each early
//! count into a slot and rewrites the variable, as a C kernel sees it.
//!
//! Its own test binary: the C ABI's zone is made once per process, and these counters must be
//! used before it exists. The zone is a kernel's (`pcpu_zone_init` on memory of the test's),
//! not a simulated machine's: its counters start at offset 0 of each block, whose first slot
//! C never gets (it would read as NULL). No thread holds a simulated CPU of it, so after the
//! move the test reads the counters (`fetch`) but adds no more.
#![cfg(feature = "capi")]

use core::cell::UnsafeCell;
use pcpu_counter::capi::*;

/// The macro's `struct pcpu_early_word`: a 64-bit word, 8-aligned.
#[repr(C, align(8))]
struct EarlyWord(UnsafeCell<u64>);

// SAFETY: only the library reaches the word, atomically (through `counter_u64_t`).
unsafe impl Sync for EarlyWord {}

/// A `counter_u64_t` variable, as C's `static counter_u64_t name = &word`.
struct EarlyVar(UnsafeCell<counter_u64_t>);

// SAFETY: written once by the zone's making (before other threads add), read after.
unsafe impl Sync for EarlyVar {}

/// An entry of the linker set: the address of a variable.
#[repr(transparent)]
struct Entry(*const EarlyVar);

// SAFETY: a constant address.
unsafe impl Sync for Entry {}

/// Early counters in the program: the zone must have `N` slots besides its first.
const N: usize = 16;

static WORDS: [EarlyWord; N] = [const { EarlyWord(UnsafeCell::new(0)) }; N];

/// Variable `i` holds the address of word `i`.
static VARS: [EarlyVar; N] = {
    let mut vars = [const { EarlyVar(UnsafeCell::new(core::ptr::null_mut())) }; N];
    let mut i = 0;
    while i < N {
        let word = core::ptr::addr_of!(WORDS)
            .cast::<EarlyWord>()
            .wrapping_add(i);
        vars[i] = EarlyVar(UnsafeCell::new(word as *mut CounterSlot as counter_u64_t));
        i += 1;
    }
    vars
};

/// The linker set's entries: one per variable.
#[used]
#[link_section = "pcpu_counter_early"]
static ENTRIES: [Entry; N] = {
    let mut entries = [const { Entry(core::ptr::null()) }; N];
    let mut i = 0;
    while i < N {
        entries[i] = Entry(core::ptr::addr_of!(VARS).cast::<EarlyVar>().wrapping_add(i));
        i += 1;
    }
    entries
};

/// Variable `i`'s current value (what C's `name` reads).
fn handle(i: usize) -> counter_u64_t {
    // SAFETY: a live static; only `pcpu_sim_machine_new` writes it, on this thread.
    unsafe { VARS[i].0.get().read_volatile() }
}

fn handles() -> Vec<counter_u64_t> {
    (0..N).map(handle).collect()
}

fn word(i: usize) -> u64 {
    // SAFETY: a live static word, read while nothing adds.
    unsafe { WORDS[i].0.get().read_volatile() }
}

/// A kernel's per-CPU memory for 2 CPUs with `counters` slots at offset 0 of each 128-byte
/// aligned block, and the zone's metadata: both live for ever, as a kernel's do.
fn kernel_memory(counters: usize) -> (pcpu_zone_layout, &'static mut [u64]) {
    let stride = (counters * 8).next_multiple_of(128);
    let layout = std::alloc::Layout::from_size_align(2 * stride, 128).unwrap();
    // SAFETY: a non-zero size; the memory is leaked (a kernel's per-CPU blocks).
    let base = unsafe { std::alloc::alloc_zeroed(layout) } as usize;
    assert_ne!(base, 0);
    let zone = pcpu_zone_layout {
        base,
        stride,
        offset: 0,
        len: counters * 8,
        ncpus: 2,
    };
    let meta = vec![0u64; pcpu_counter::ZoneLayout::meta_words_for(counters)].leak();
    (zone, meta)
}

#[test]
fn early_counts_move_into_slots_when_the_zone_is_made() {
    let early = handles();
    assert_eq!(early[7], core::ptr::addr_of!(WORDS[7]) as counter_u64_t);

    // Before any zone: adds and fetch reach the words themselves. Counter i gets i * 3 + 1
    // in two adds (one negative), the last one nothing.
    for (i, &c) in early.iter().enumerate().take(N - 1) {
        let v = i as i64 * 3 + 1;
        // SAFETY: early counters before any zone exists, as the C macro makes them.
        unsafe {
            pcpu_counter_add(c, v + 2);
            pcpu_counter_add(c, -2);
            assert_eq!(counter_u64_fetch(c), v as u64);
        }
        assert_eq!(word(i), v as u64);
    }
    assert_eq!(word(N - 1), 0);

    // A zone of N slots at offset 0 has room for N - 1 counters of C: refused, and nothing
    // moves.
    let (layout, meta) = kernel_memory(N);
    // SAFETY: the layout names live memory of the test's, and the metadata lives for ever.
    let rc = unsafe { pcpu_zone_init(&layout, meta.as_mut_ptr(), meta.len()) };
    assert_eq!(rc, PCPU_EFULL);
    assert_eq!(handles(), early);
    assert_eq!(word(5), 16);

    // A kernel whose per-CPU register holds something else before the zone (a hart id, a
    // per-CPU pointer from reset) says so: every name becomes word - base, so that the inline
    // add (base + name) and the out-of-line one both reach the word.
    // (0x1234_5000 on a 32-bit target.)
    let base = 0x5555_1234_5000_u64 as usize;
    // SAFETY: no zone, and nothing else adds to these early counters.
    assert_eq!(unsafe { pcpu_early_base(base) }, PCPU_OK);
    for (i, &c) in handles().iter().enumerate() {
        assert_eq!(
            c as usize,
            (early[i] as usize).wrapping_sub(base),
            "counter {i}"
        );
    }
    // SAFETY: an early counter before any zone exists.
    unsafe { pcpu_counter_add(handle(2), 5) };
    assert_eq!(word(2), 7 + 5);
    // SAFETY: as above.
    assert_eq!(unsafe { counter_u64_fetch(handle(2)) }, 12);
    header_add(handle(4), 7, base);
    assert_eq!(word(4), 13 + 7);
    // A base that would make a name NULL (the word's own address) is refused, nothing changes.
    let before = handles();
    // SAFETY: as above.
    assert_eq!(unsafe { pcpu_early_base(early[3] as usize) }, PCPU_EINVAL);
    assert_eq!(handles(), before);
    // Rebasing is relative: back to 0 the names are the words' addresses again.
    // SAFETY: as above.
    assert_eq!(unsafe { pcpu_early_base(0) }, PCPU_OK);
    assert_eq!(handles(), early);
    // The zone is made while the register holds `base`: the move reads word = name + base.
    // SAFETY: as above.
    assert_eq!(unsafe { pcpu_early_base(base) }, PCPU_OK);

    // One slot more fits exactly: the first slot for good, then one per early counter.
    let (layout, meta) = kernel_memory(N + 1);
    // SAFETY: as above.
    let rc = unsafe { pcpu_zone_init(&layout, meta.as_mut_ptr(), meta.len()) };
    assert_eq!(rc, PCPU_OK);
    assert_eq!((pcpu_zone_capacity(), pcpu_zone_in_use()), (N + 1, N + 1));
    let moved = handles();
    let mut offsets = moved.iter().map(|&c| c as usize).collect::<Vec<_>>();
    offsets.sort_unstable();
    assert_eq!(
        offsets,
        (1..=N).map(|i| i * 8).collect::<Vec<_>>(),
        "each variable names a slot of its own, never offset 0"
    );
    // The early counts moved into the slots, and the words were emptied.
    for (i, &c) in moved.iter().enumerate() {
        let want = match i {
            2 => 7 + 5,
            4 => 13 + 7,
            _ if i == N - 1 => 0,
            _ => i as u64 * 3 + 1,
        };
        // SAFETY: a live handle of the C zone.
        assert_eq!(unsafe { counter_u64_fetch(c) }, want, "counter {i}");
        assert_eq!(word(i), 0, "word {i}");
    }
    // The zone is full: C gets no more counters.
    assert!(counter_u64_alloc(M_NOWAIT).is_null());
    // Once the zone exists the early base is of no use.
    // SAFETY: nothing adds.
    assert_eq!(unsafe { pcpu_early_base(0) }, PCPU_EINSTALLED);
    assert_eq!(handles(), moved);
}

/// The header's inline add on x86_64 (`addq v, %gs:(c)`) with this thread's GS base set to
/// `base`, as a kernel's register would hold it; elsewhere (the simulation has no register
/// for C there) the out-of-line add.
#[cfg(target_arch = "x86_64")]
fn header_add(c: counter_u64_t, v: i64, base: usize) {
    set_gs_base(base);
    // SAFETY: GS base + c is the early counter's word (the early base is `base`).
    unsafe {
        core::arch::asm!("add qword ptr gs:[{c}], {v}", c = in(reg) c, v = in(reg) v,
            options(nostack))
    };
    set_gs_base(0);
}

/// This thread's GS base, through arch_prctl(ARCH_SET_GS) (no libc in this test).
#[cfg(target_arch = "x86_64")]
fn set_gs_base(base: usize) {
    let rc: isize;
    // SAFETY: ARCH_SET_GS (0x1001) changes only this thread's GS base, which nothing in this
    // test thread uses (Linux keeps TLS in FS).
    unsafe {
        core::arch::asm!("syscall", inlateout("rax") 158isize => rc, in("rdi") 0x1001,
            in("rsi") base, lateout("rcx") _, lateout("r11") _, options(nostack))
    };
    assert_eq!(rc, 0, "arch_prctl(ARCH_SET_GS)");
}

#[cfg(not(target_arch = "x86_64"))]
fn header_add(c: counter_u64_t, v: i64, _base: usize) {
    // SAFETY: an early counter before any zone exists.
    unsafe { pcpu_counter_add(c, v) };
}
