// SPDX-License-Identifier: BSD-2-Clause
//! `libpcpu_counter.a` for kernels written only in C: the C ABI of `pcpu-counter` (its `capi`
//! module, declared in `include/pcpu_counter.h`) as a `no_std` static library, with no
//! allocator and no Rust code required of the kernel.
//!
//! The crate's link-time hooks ([`pcpu_counter::set_platform!`]) call four C functions the
//! kernel defines:
//!
//! ```c
//! uintptr_t pcpu_platform_protect(void);          /* local protection on (save flags + cli); nests */
//! void      pcpu_platform_unprotect(uintptr_t s); /* restore what protect saved */
//! size_t    pcpu_platform_current_cpu(void);      /* the running CPU's index */
//! void      pcpu_platform_panic(const char *msg, size_t len); /* never returns */
//! ```
//!
//! A panic inside the library (a value passed as a counter that is no live counter, a broken
//! invariant) writes its message (without `core::fmt`: its fixed text and where it was
//! raised) into a static buffer and calls `pcpu_platform_panic` with
//! it: `len` bytes followed by a NUL (`msg[len] == 0`), so that a kernel's `panic(char *)`
//! can take it as it is.
//! `memcpy`, `memset`, `memmove`, `memcmp` and `bcmp` come with the library
//! (`compiler-builtins-mem`), so its only undefined symbols are those four hooks.
#![no_std]

use core::sync::atomic::{AtomicBool, Ordering};

pub use pcpu_counter::capi;

extern "C" {
    fn pcpu_platform_protect() -> usize;
    fn pcpu_platform_unprotect(state: usize);
    fn pcpu_platform_current_cpu() -> usize;
    fn pcpu_platform_panic(msg: *const u8, len: usize) -> !;
}

/// The hooks, answered by the C kernel.
struct CKernel;

// SAFETY: the C kernel's hooks carry the contract of `Platform` (documented in the header):
// `pcpu_platform_current_cpu` is the running CPU's index below the zone's CPU count, and
// `pcpu_platform_protect` keeps everything that may add on this CPU from running until the
// matching `pcpu_platform_unprotect`, and nests.
unsafe impl pcpu_counter::Platform for CKernel {
    fn current_cpu() -> usize {
        // SAFETY: a C function without arguments, per the contract above.
        unsafe { pcpu_platform_current_cpu() }
    }
    fn protect() -> usize {
        // SAFETY: as above.
        unsafe { pcpu_platform_protect() }
    }
    unsafe fn unprotect(state: usize) {
        // SAFETY: `state` is from the matching `protect`, in LIFO order (the caller's contract).
        unsafe { pcpu_platform_unprotect(state) }
    }
}

pcpu_counter::set_platform!(CKernel);

/// Bytes of the panic message handed to `pcpu_platform_panic` with its NUL (longer messages
/// are cut at `PANIC_BUF - 1` bytes).
const PANIC_BUF: usize = 256;

/// The first panicking CPU's message. Only the CPU that set [`PANICKING`] writes it.
struct PanicBuf {
    bytes: core::cell::UnsafeCell<[u8; PANIC_BUF]>,
}

// SAFETY: written only by the one CPU that won `PANICKING`, read only by it.
unsafe impl Sync for PanicBuf {}

static BUF: PanicBuf = PanicBuf {
    bytes: core::cell::UnsafeCell::new([0; PANIC_BUF]),
};
static PANICKING: AtomicBool = AtomicBool::new(false);

/// Appends `s` to `buf` at `*len`, cutting what does not fit.
fn put(buf: &mut [u8], len: &mut usize, s: &[u8]) {
    // Iterators, not slicing: a panic here would recurse (and bring `core::fmt`).
    for (to, from) in buf.iter_mut().skip(*len).zip(s) {
        *to = *from;
        *len += 1;
    }
}

/// Appends `n` in decimal.
fn put_u32(buf: &mut [u8], len: &mut usize, mut n: u32) {
    let mut digits = [0u8; 10];
    let mut i = 0;
    // Least significant first, then written out in reverse.
    for d in digits.iter_mut() {
        *d = b'0' + (n % 10) as u8;
        i += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for d in digits.iter().take(i).rev() {
        put(buf, len, core::slice::from_ref(d));
    }
}

/// The message is `pcpu_counter: <message> at <file>:<line>`. A message with arguments is
/// not formatted: `core::fmt` would be most of the library's text (and, on riscv64gc, bring
/// floating-point code); its fixed text (everything the crate's panics say) is kept.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    const NESTED: &core::ffi::CStr = c"pcpu_counter: panic while another CPU panics";
    if PANICKING.swap(true, Ordering::AcqRel) {
        let msg = NESTED.to_bytes();
        // SAFETY: a static NUL-terminated string; the hook never returns.
        unsafe { pcpu_platform_panic(msg.as_ptr(), msg.len()) }
    }
    // SAFETY: this CPU won `PANICKING`: no one else touches the buffer.
    let buf = unsafe { &mut *BUF.bytes.get() };
    // The last byte stays for the NUL.
    let (room, _nul) = buf.split_at_mut(PANIC_BUF - 1);
    let mut len = 0;
    put(room, &mut len, b"pcpu_counter: ");
    let text = info
        .message()
        .as_str()
        .unwrap_or("panic (message with arguments)");
    put(room, &mut len, text.as_bytes());
    if let Some(at) = info.location() {
        put(room, &mut len, b" at ");
        put(room, &mut len, at.file().as_bytes());
        put(room, &mut len, b":");
        put_u32(room, &mut len, at.line());
    }
    if let Some(end) = buf.get_mut(len) {
        *end = 0;
    }
    // SAFETY: `len` bytes of the static buffer are the message, then a NUL; the hook never
    // returns.
    unsafe { pcpu_platform_panic(buf.as_ptr(), len) }
}
