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
//! invariant) formats its message into a static buffer and calls `pcpu_platform_panic` with
//! it: `len` bytes followed by a NUL (`msg[len] == 0`), so that a kernel's `panic(char *)`
//! can take it as it is.
//! `memcpy`, `memset`, `memmove`, `memcmp` and `bcmp` come with the library
//! (`compiler-builtins-mem`), so its only undefined symbols are those four hooks.
#![no_std]

use core::fmt::{self, Write};
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

/// Formats into a byte slice, cutting what does not fit.
struct Cursor<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl Write for Cursor<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

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
    let mut cursor = Cursor {
        buf: &mut buf[..PANIC_BUF - 1],
        len: 0,
    };
    let _ = write!(cursor, "pcpu_counter: {info}");
    let len = cursor.len;
    buf[len] = 0;
    // SAFETY: `len` bytes of the static buffer are the message, then a NUL; the hook never
    // returns.
    unsafe { pcpu_platform_panic(buf.as_ptr(), len) }
}
