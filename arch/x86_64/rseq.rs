//! The x86_64 rseq critical section of `pcpu_counter::rseq::Counter::add` (included with
//! `#[path]` by `src/rseq/counter.rs`).
//!
//! ```text
//! 6: lea  rcx, [rip + 3f]          descriptor
//!    mov  rax, fs:[0]              thread pointer
//!    add  rax, rseq_offset         the thread's struct rseq
//!    mov  [rax + 8], rcx           arm: rseq_cs = &descriptor
//! 2: mov  ecx, [rax + 4]           start_ip: cpu_id (-1/-2 when unregistered)
//!    and  ecx, 0x80000000          keep only its sign bit
//!    or   ecx, [rax + index]       cpu_id again, or mm_cid (0 when unregistered), so that
//!    cmp  rcx, nslots ; jae 8f     an unregistered thread or an index out of range leaves
//!    imul rcx, stride
//!    add  qword ptr [rcx + slot0], v   the commit: one non-locked add
//! 4:                               post-commit
//! ```
//!
//! The abort handler (section `__rseq_failure`, behind `ud1` + the signature 0x53053053)
//! jumps back to `6:`, re-arming (the kernel cleared `rseq_cs`) and retrying.

/// One add in an rseq critical section; returns `false` (nothing added) when the thread's
/// index is not below `nslots` (unregistered thread, or a CPU the zone does not cover).
///
/// # Safety
/// `rseq_offset` is glibc's `__rseq_offset`; `index_offset` is 4 (`cpu_id`) or 24
/// (`mm_cid`); `slot0 + i * stride` is a live, aligned slot for every `i < nslots`, written
/// only by rseq adds.
#[inline(always)]
pub(crate) unsafe fn try_add(
    rseq_offset: isize,
    index_offset: usize,
    nslots: usize,
    stride: usize,
    slot0: usize,
    v: i64,
) -> bool {
    let done: usize;
    // SAFETY: per the caller; the descriptor and the abort handler follow the kernel's rseq
    // ABI (signature before abort_ip, abort_ip outside [start_ip, start_ip + len)).
    unsafe {
        core::arch::asm!(
            "6:",
            "lea rcx, [rip + 3f]",
            "mov rax, qword ptr fs:[0]",
            "add rax, {roff}",
            "mov qword ptr [rax + 8], rcx",
            "2:",
            "mov ecx, dword ptr [rax + 4]",
            "and ecx, 0x80000000",
            "or ecx, dword ptr [rax + {ioff}]",
            "cmp rcx, {n}",
            "jae 8f",
            "imul rcx, {stride}",
            "add qword ptr [rcx + {slot0}], {v}",
            "4:",
            "mov ecx, 1",
            "jmp 9f",
            "8:",
            "xor ecx, ecx",
            "9:",
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
            roff = in(reg) rseq_offset,
            ioff = in(reg) index_offset,
            n = in(reg) nslots,
            stride = in(reg) stride,
            slot0 = in(reg) slot0,
            v = in(reg) v,
            out("rax") _,
            out("rcx") done,
            options(nostack),
        );
    }
    done != 0
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
