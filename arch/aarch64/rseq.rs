//! The aarch64 rseq critical section of `pcpu_counter::rseq::Counter::add` (included with
//! `#[path]` by `src/rseq/counter.rs`).
//!
//! ```text
//! 6: adrp x, 3f ; add x, x, :lo12:3f   descriptor
//!    mrs  a, tpidr_el0 ; add a, a, rseq_offset
//!    str  x, [a, #8]                    arm: rseq_cs = &descriptor
//! 2: ldrsw x, [a, #4] ; tbnz x, #63, fail   start_ip; only when CHECK_REGISTERED:
//!                                       cpu_id is -1/-2 while the thread is unregistered
//!    ldr  w, [a, index] ; cmp ; b.hs fail   cpu_id or mm_cid, below nslots
//!    madd x, x, stride, slot0
//!    ldr  t, [x] ; add t, t, v
//!    str  t, [x]                        the commit
//! 4:                                    post-commit
//! ```
//!
//! The abort handler (section `__rseq_failure`, behind the signature `brk #0x45e0`,
//! 0xd428bc00) branches back to `6:` and retries. `fail` is an `asm goto` label.

/// One add in an rseq critical section; see the x86_64 version for the contract.
///
/// # Safety
/// As the x86_64 `try_add`.
#[inline(always)]
pub(crate) unsafe fn try_add<const CHECK_REGISTERED: bool>(
    rseq_offset: isize,
    index_offset: usize,
    nslots: usize,
    shift: u32,
    slot0: usize,
    v: i64,
) -> bool {
    // SAFETY: per the caller; the descriptor and abort handler follow the rseq ABI.
    unsafe {
        core::arch::asm!(
            "6:",
            "adrp {d}, 3f",
            "add {d}, {d}, :lo12:3f",
            "mrs {a}, tpidr_el0",
            "add {a}, {a}, {roff}",
            "str {d}, [{a}, #8]",
            "2:",
            ".if {check}",
            "ldrsw {d}, [{a}, #4]",
            "tbnz {d}, #63, {fail}",
            ".endif",
            "ldr {d:w}, [{a}, {ioff}]",
            "cmp {d}, {n}",
            "b.hs {fail}",
            "madd {d}, {d}, {stride}, {slot0}",
            "ldr {t}, [{d}]",
            "add {t}, {t}, {v}",
            "str {t}, [{d}]",
            "4:",
            ".pushsection __rseq_cs, \"aw\"",
            ".balign 32",
            "3:",
            ".long 0, 0",
            ".quad 2b, 4b - 2b, 5f",
            ".popsection",
            ".pushsection __rseq_failure, \"ax\"",
            ".inst 0xd428bc00",
            "5:",
            "b 6b",
            ".popsection",
            check = const CHECK_REGISTERED as u8,
            roff = in(reg) rseq_offset,
            ioff = in(reg) index_offset,
            n = in(reg) nslots,
            stride = in(reg) 1usize << shift,
            slot0 = in(reg) slot0,
            v = in(reg) v,
            d = out(reg) _,
            a = out(reg) _,
            t = out(reg) _,
            fail = label { return false; },
            options(nostack),
        );
    }
    true
}

/// A locked add (the fallback and the shared block).
///
/// # Safety
/// `slot` is a live, aligned slot.
#[inline(always)]
pub(crate) unsafe fn locked_add(slot: *mut u64, v: i64) {
    // SAFETY: per the caller.
    unsafe { core::sync::atomic::AtomicU64::from_ptr(slot) }
        .fetch_add(v as u64, core::sync::atomic::Ordering::Relaxed);
}
