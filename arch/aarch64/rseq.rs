// SPDX-License-Identifier: BSD-2-Clause
//! The aarch64 rseq critical section of `pcpu_counter::rseq::RseqCounter::add` (included with
//! `#[path]` by `src/rseq/counter.rs`).
//!
//! ```text
//! 6: adrp x, 3f ; add x, x, :lo12:3f   descriptor
//!    mrs  a, tpidr_el0 ; add a, a, at   the index field (`at` = __rseq_offset + I)
//!    stur x, [a, #8 - I]                arm: rseq_cs = &descriptor
//! 2: ldursw x, [a, #4 - I] ; tbnz x, #63, fail   start_ip; only when CHECK_REGISTERED:
//!                                       cpu_id is -1/-2 while the thread is unregistered
//!    ldr  w, [a] ; cmp ; b.hs fail      cpu_id (I = 4) or mm_cid (I = 24), below nslots
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
pub(crate) unsafe fn try_add<const CHECK_REGISTERED: bool, const INDEX_OFFSET: usize>(
    index_at: isize,
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
            "add {a}, {a}, {at}",
            "stur {d}, [{a}, #{cs}]",
            "2:",
            ".if {check}",
            "ldursw {d}, [{a}, #{cpu}]",
            "tbnz {d}, #63, {fail}",
            ".endif",
            "ldr {d:w}, [{a}]",
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
            cs = const 8 - INDEX_OFFSET as isize,
            cpu = const 4 - INDEX_OFFSET as isize,
            at = in(reg) index_at,
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
