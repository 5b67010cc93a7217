// SPDX-License-Identifier: BSD-2-Clause
//! Binding a thread to a simulated CPU points its per-CPU register at the CPU's block, with
//! the host's own calls: on x86_64 the real GS base (`arch_prctl(ARCH_SET_GS)`: glibc keeps
//! TLS in FS, so the real `add gs:[off]` runs), on i386 a `%fs` segment (`i386.rs`). Where a
//! host thread cannot own the register (aarch64 `TPIDR_EL1`, riscv64 `tp`/`gp`, the portable
//! fallback's none) the platform supplies the base instead (`platform::backend::cpu_base`).

/// Points this thread's per-CPU register (or the platform's base) at `base`.
///
/// # Safety
/// `base` is a block of a live zone, and nothing else on this thread uses the register.
pub(super) unsafe fn bind(base: usize) {
    crate::platform::backend::set_cpu_base(base);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: per the caller.
    unsafe {
        set_gs_base(base)
    };
    #[cfg(target_arch = "x86")]
    // SAFETY: per the caller.
    unsafe {
        super::i386::bind(base)
    };
}

/// Clears this thread's per-CPU register, so that a stray add faults instead of counting.
///
/// # Safety
/// As [`bind`].
pub(super) unsafe fn unbind() {
    crate::platform::backend::set_cpu_base(0);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: base 0: nothing is reachable through GS.
    unsafe {
        set_gs_base(0)
    };
    #[cfg(target_arch = "x86")]
    // SAFETY: loads the null selector.
    unsafe {
        super::i386::unbind()
    };
}

/// `arch_prctl(ARCH_SET_GS, base)`: only this thread's GS base changes.
///
/// # Safety
/// Nothing else on this thread uses GS.
#[cfg(target_arch = "x86_64")]
unsafe fn set_gs_base(base: usize) {
    const ARCH_SET_GS: libc::c_int = 0x1001;
    // SAFETY: ARCH_SET_GS only changes this thread's GS base.
    let rc = unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_SET_GS, base) };
    assert_eq!(
        rc,
        0,
        "arch_prctl(ARCH_SET_GS) failed: {}",
        std::io::Error::last_os_error()
    );
}
