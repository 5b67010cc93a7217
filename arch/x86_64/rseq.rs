// SPDX-License-Identifier: BSD-2-Clause
//! The x86_64 rseq critical section of `pcpu_counter::rseq::RseqCounter::add` (included with
//! `#[path]` by `src/rseq/counter.rs`).
//!
//! ```text
//! 6: lea  rdx, [rip + 3f]                   descriptor
//!    mov  fs:[at + 8 - I], rdx              arm: rseq_cs = &descriptor (fs: is the thread
//!                                           pointer; `at` = __rseq_offset + I, the index
//!                                           field's offset from it)
//! 2: cmp  dword fs:[at + 4 - I], 0 ; jl fail   start_ip; only when CHECK_REGISTERED:
//!                                           cpu_id is -1/-2 while the thread is unregistered
//!    mov  edx, fs:[at]                      cpu_id (I = 4) or mm_cid (I = 24)
//!    cmp  rdx, nslots ; jae fail            an index the zone does not cover
//!    shl  rdx, cl                           times the block stride (1 << shift)
//!    add  qword ptr [rdx + slot0], v        the commit: one non-locked add
//! 4:                                        post-commit
//! ```
//!
//! The index field's offset `I` is a constant of the code, not a value the add loads: the
//! caller picks the copy of the section for the process's index.
//!
//! The abort handler (section `__rseq_failure`, behind `ud1` + the signature 0x53053053)
//! jumps back to `6:`, re-arming (the kernel cleared `rseq_cs`) and retrying. `fail` is an
//! `asm goto` label: the fast path carries no result flag.

/// One add in an rseq critical section; returns `false` (nothing added) when the thread's
/// index is not below `nslots` (a CPU the zone does not cover) or, with `CHECK_REGISTERED`,
/// when the thread has no registered area.
///
/// Without `CHECK_REGISTERED` an unregistered thread reads `mm_cid` 0 and would add outside
/// any critical section: leave it off only where every thread is registered before it runs
/// any code (glibc's registration, whose failure on a new thread is fatal), or where the
/// index is `cpu_id`, which reads -1 or -2 on an unregistered thread and so fails the range
/// check.
///
/// # Safety
/// `index_at` is glibc's `__rseq_offset` plus `INDEX_OFFSET`, which is 4 (`cpu_id`) or 24
/// (`mm_cid`); `slot0 + (i << shift)` is a live, aligned slot for every `i < nslots`,
/// written only by rseq adds; without `CHECK_REGISTERED`, the calling thread is registered
/// or `INDEX_OFFSET` is 4 and `nslots` below 2^32 - 2.
#[inline(always)]
pub(crate) unsafe fn try_add<const CHECK_REGISTERED: bool, const INDEX_OFFSET: usize>(
    index_at: isize,
    nslots: usize,
    shift: u32,
    slot0: usize,
    v: i64,
) -> bool {
    // SAFETY: per the caller; the descriptor and the abort handler follow the kernel's rseq
    // ABI (signature before abort_ip, abort_ip outside [start_ip, start_ip + len)).
    unsafe {
        core::arch::asm!(
            "6:",
            "lea rdx, [rip + 3f]",
            "mov qword ptr fs:[{at} + {cs}], rdx",
            "2:",
            ".if {check}",
            "cmp dword ptr fs:[{at} + {cpu}], 0",
            "jl {fail}",
            ".endif",
            "mov edx, dword ptr fs:[{at}]",
            "cmp rdx, {n}",
            "jae {fail}",
            "shl rdx, cl",
            "add qword ptr [rdx + {slot0}], {v}",
            "4:",
            ".pushsection __rseq_cs, \"aw\"",
            ".balign 32",
            "3:",
            ".long 0, 0",
            ".quad 2b, 4b - 2b, 5f",
            ".popsection",
            ".pushsection __rseq_failure, \"ax\"",
            ".byte 0x0f, 0xb9, 0x3d",
            ".long 0x53053053",
            "5:",
            "jmp 6b",
            ".popsection",
            check = const CHECK_REGISTERED as u8,
            cs = const 8 - INDEX_OFFSET as isize,
            cpu = const 4 - INDEX_OFFSET as isize,
            at = in(reg) index_at,
            n = in(reg) nslots,
            in("rcx") shift as usize,
            slot0 = in(reg) slot0,
            v = in(reg) v,
            out("rdx") _,
            fail = label { return false; },
            options(nostack),
        );
    }
    true
}
