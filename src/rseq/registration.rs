// SPDX-License-Identifier: BSD-2-Clause
//! Finding the thread's rseq area, registering it where glibc did not, and choosing the add
//! path once per process.
//!
//! glibc (2.35 and later) registers one `struct rseq` area per thread at the thread pointer
//! plus `__rseq_offset` and reports the registered feature size in `__rseq_size`. Both
//! symbols are looked up with `dlsym` at first use, so a binary still links (and takes the
//! fallback) on an older glibc. When `__rseq_size` is 0 (`GLIBC_TUNABLES=glibc.pthread.rseq=0`,
//! or glibc's own registration failed) the area glibc reserved is still there: each thread
//! registers it itself, lazily, from the add's slow path ([`register_current_thread`]).
//! Seen here (glibc 2.36, tunable off): glibc then registers, with its own area and
//! signature, the threads made by a thread this crate registered (it copies the creator's
//! registration state), so most threads find their area registered already (`EBUSY`, which
//! counts as success); threads made by unregistered threads read `cpu_id` -2 and register on
//! their first add.

use core::ffi::CStr;
use core::fmt;
use std::boxed::Box;
use std::sync::OnceLock;

use super::kernels;
use crate::Error;

/// The rseq signature glibc registers, and that the abort handlers carry before them.
#[cfg(target_arch = "x86_64")]
pub(crate) const RSEQ_SIG: u32 = 0x5305_3053;
/// The rseq signature glibc registers (`brk #0x45e0`), and that the abort handlers carry.
#[cfg(target_arch = "aarch64")]
pub(crate) const RSEQ_SIG: u32 = 0xd428_bc00;

/// Offset of `cpu_id` in `struct rseq`.
pub(crate) const CPU_ID_OFFSET: usize = 4;
/// Offset of `mm_cid` in `struct rseq` (Linux 6.3 and later).
pub(crate) const MM_CID_OFFSET: usize = 24;
/// The original `struct rseq` allocation: the length glibc 2.35-2.40 registers, and the
/// shortest registration the kernel accepts.
const ORIG_RSEQ_LEN: usize = 32;
/// `getauxval` key of the kernel's supported rseq feature size.
const AT_RSEQ_FEATURE_SIZE: libc::c_ulong = 27;
/// `getauxval` key of the alignment the kernel requires of a registration longer than 32
/// bytes (the feature size rounded up to a power of two).
const AT_RSEQ_ALIGN: libc::c_ulong = 28;

/// Which per-thread number picks the block an rseq add writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    /// `cpu_id`: the CPU the thread runs on. Every CPU that ever adds touches its block.
    Cpu,
    /// `mm_cid`, the kernel's per-process concurrency ID (Linux 6.3+): a number below the
    /// count of the process's threads running at once, so a process with 4 threads on a
    /// 256-CPU machine only ever touches (about) 4 blocks.
    ConcurrencyId,
}

/// How [`RseqCounter::add`](super::RseqCounter::add) reaches a slot in this process; chosen once
/// (see [`path`](super::path)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// One restartable sequence per add: a non-locked add to the slot of block
    /// `index`, the commit instruction of the critical section.
    Rseq {
        /// The number that picks the block.
        index: Index,
        /// Whether glibc registered the areas (`false`: this crate registers each thread's
        /// area itself on its first add, glibc's own registration being off).
        glibc_registered: bool,
    },
    /// No rseq: `sched_getcpu()` and a locked add to that CPU's block (every add of the
    /// process is locked, so the sums stay exact).
    Fallback {
        /// Why rseq is not used.
        reason: &'static str,
    },
    /// No path: every zone of the process fails with `error` (an unknown
    /// `PCPU_COUNTER_RSEQ` value, [`Error::BadEnvVar`]).
    Unusable {
        /// What zone creation returns.
        error: Error,
    },
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Rseq {
                index,
                glibc_registered,
            } => {
                let index = match index {
                    Index::Cpu => "cpu_id",
                    Index::ConcurrencyId => "mm_cid",
                };
                if *glibc_registered {
                    write!(f, "rseq (index {index}, glibc's registration)")
                } else {
                    let len = own_len();
                    write!(f, "rseq (index {index}, own registration of {len} bytes)")
                }
            }
            Path::Fallback { reason } => {
                write!(f, "fallback: sched_getcpu + locked add ({reason})")
            }
            Path::Unusable { error } => write!(f, "none: no zone can be made ({error})"),
        }
    }
}

/// What every add of the process needs to know, fixed at first use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    pub(crate) path: Path,
    /// The area's offset from the thread pointer: glibc's `__rseq_offset`, or, for an own
    /// registration longer than glibc's area, the offset of this crate's [`OwnArea`].
    pub(crate) rseq_offset: isize,
    /// Offset of the index field in the area (`cpu_id` or `mm_cid`).
    pub(crate) index_offset: usize,
    /// The possible CPUs: the blocks of a zone made with [`RseqZone::new`](super::RseqZone::new).
    pub(crate) nslots: usize,
}

static CONFIG: OnceLock<Result<Config, Error>> = OnceLock::new();

/// The process's configuration (computed on first call); an error, for every zone of the
/// process, when `PCPU_COUNTER_RSEQ` has a value [`request`] does not accept.
pub(crate) fn config() -> Result<&'static Config, Error> {
    CONFIG
        .get_or_init(|| request().map(choose))
        .as_ref()
        .map_err(|e| *e)
}

/// The environment variable that overrides the path.
const VAR: &str = "PCPU_COUNTER_RSEQ";
/// The values [`VAR`] accepts (unset or empty means `auto`).
const ACCEPTED: &str = "auto, cpu, cid, off, force";

/// What `PCPU_COUNTER_RSEQ` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Request {
    Auto,
    Cpu,
    Cid,
    Off,
    /// rseq (index as `Auto`) even on a kernel of [`kernels::KNOWN_BROKEN`].
    Force,
}

/// The add path a program asks for in code, with [`set_path`](super::set_path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// What the process would choose by itself (as `PCPU_COUNTER_RSEQ=auto`): rseq with
    /// `mm_cid` where offered, else `cpu_id`, else the fallback. Always available.
    Auto,
    /// rseq indexed by `cpu_id` ([`Index::Cpu`]), with glibc's registration or the crate's
    /// own. Unavailable without rseq, and on a kernel known to lose rseq adds
    /// ([`known_broken_kernel`](super::known_broken_kernel); see [`Choice::ForceRseq`]).
    CpuId,
    /// rseq indexed by `mm_cid` ([`Index::ConcurrencyId`]). Unavailable without rseq or on a
    /// kernel that does not offer `mm_cid` (before Linux 6.3), and on a kernel known to lose
    /// rseq adds.
    ConcurrencyId,
    /// rseq with the crate registering each thread's area itself (index as [`Choice::Auto`]
    /// picks it). Available only where glibc's own registration is off
    /// (`GLIBC_TUNABLES=glibc.pthread.rseq=0`): glibc's registered area cannot be
    /// registered twice. Unavailable on a kernel known to lose rseq adds.
    OwnRegistration,
    /// No rseq: `sched_getcpu()` and a locked add. Always available.
    Fallback,
    /// rseq (index as [`Choice::Auto`] picks it) even on a kernel this crate knows to lose
    /// rseq adds ([`known_broken_kernel`](super::known_broken_kernel)), as
    /// `PCPU_COUNTER_RSEQ=force`: for such a kernel with the fix backported. Unavailable
    /// without rseq.
    ForceRseq,
}

impl Choice {
    fn name(self) -> &'static str {
        match self {
            Choice::Auto => "auto",
            Choice::CpuId => "rseq with cpu_id",
            Choice::ConcurrencyId => "rseq with mm_cid",
            Choice::OwnRegistration => "rseq with own registration",
            Choice::Fallback => "fallback",
            Choice::ForceRseq => "rseq forced",
        }
    }

    /// Whether a process on `path` runs as this choice asks (`path` is a chosen one, never
    /// [`Path::Unusable`], which is stored as the error it carries).
    fn satisfied_by(self, path: Path) -> bool {
        match (self, path) {
            (Choice::Auto, _) => true,
            (Choice::CpuId, Path::Rseq { index, .. }) => index == Index::Cpu,
            (Choice::ConcurrencyId, Path::Rseq { index, .. }) => index == Index::ConcurrencyId,
            (
                Choice::OwnRegistration,
                Path::Rseq {
                    glibc_registered, ..
                },
            ) => !glibc_registered,
            (Choice::Fallback, Path::Fallback { .. }) => true,
            (Choice::ForceRseq, Path::Rseq { .. }) => true,
            _ => false,
        }
    }
}

/// Fixes the process's path to `choice`, before the first zone (see
/// [`set_path`](super::set_path)).
pub(crate) fn set_path(choice: Choice) -> Result<Path, Error> {
    match CONFIG.get() {
        Some(Ok(cfg)) => return settled(choice, cfg.path),
        // An unknown `PCPU_COUNTER_RSEQ` value was read first: every zone fails with it.
        Some(Err(e)) => return Err(*e),
        None => {}
    }
    let cfg = match choice {
        Choice::Fallback => fallback("chosen in code (rseq::set_path)"),
        Choice::CpuId => choose(Request::Cpu),
        Choice::ForceRseq => choose(Request::Force),
        Choice::Auto | Choice::ConcurrencyId | Choice::OwnRegistration => choose(Request::Auto),
    };
    if !choice.satisfied_by(cfg.path) {
        let reason = match (choice, cfg.path) {
            (_, Path::Fallback { reason }) => reason,
            (Choice::ConcurrencyId, _) => {
                "the kernel does not offer mm_cid (AT_RSEQ_FEATURE_SIZE below 28)"
            }
            _ => {
                "glibc registers every thread's area (start the process with \
                 GLIBC_TUNABLES=glibc.pthread.rseq=0)"
            }
        };
        return Err(Error::RseqPathUnavailable {
            asked: choice.name(),
            reason,
        });
    }
    match CONFIG.set(Ok(cfg)) {
        Ok(()) => Ok(cfg.path),
        // Another thread chose first.
        Err(_) => match CONFIG.get() {
            Some(Ok(cfg)) => settled(choice, cfg.path),
            Some(Err(e)) => Err(*e),
            None => unreachable!("OnceLock::set failed on an empty cell"),
        },
    }
}

/// The answer to a [`set_path`] that comes after the path was chosen: the path when it is
/// what `choice` asks for (two libraries asking for the same path both succeed).
fn settled(choice: Choice, path: Path) -> Result<Path, Error> {
    if choice.satisfied_by(path) {
        Ok(path)
    } else {
        Err(Error::RseqPathTooLate {
            asked: choice.name(),
        })
    }
}

/// Reads `PCPU_COUNTER_RSEQ`: unset, empty or one of [`ACCEPTED`], exactly (lowercase).
///
/// Anything else, a typo or `CPU`, is an error rather than a guess: the variable exists to
/// pin the path a test or a CI run measures, and a silent `auto` would measure another.
fn request() -> Result<Request, Error> {
    let Some(value) = std::env::var_os(VAR) else {
        return Ok(Request::Auto);
    };
    match value.to_str() {
        Some("" | "auto") => Ok(Request::Auto),
        Some("cpu") => Ok(Request::Cpu),
        Some("cid") => Ok(Request::Cid),
        Some("off") => Ok(Request::Off),
        Some("force") => Ok(Request::Force),
        _ => Err(Error::BadEnvVar {
            var: VAR,
            // Leaked once: the configuration, error included, is made once per process.
            value: Box::leak(value.to_string_lossy().into_owned().into_boxed_str()),
            accepted: ACCEPTED,
        }),
    }
}

/// Looks a data symbol of libc up by name.
fn lookup(name: &CStr) -> *const libc::c_void {
    // SAFETY: `name` is NUL-terminated; RTLD_DEFAULT searches the global scope.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }.cast_const()
}

fn fallback(reason: &'static str) -> Config {
    Config {
        path: Path::Fallback { reason },
        rseq_offset: 0,
        index_offset: CPU_ID_OFFSET,
        nslots: possible_cpus(),
    }
}

fn choose(req: Request) -> Config {
    if req == Request::Off {
        return fallback("PCPU_COUNTER_RSEQ=off");
    }
    let off_sym = lookup(c"__rseq_offset");
    let size_sym = lookup(c"__rseq_size");
    if off_sym.is_null() || size_sym.is_null() {
        return fallback("libc has no __rseq_offset/__rseq_size (glibc older than 2.35)");
    }
    // SAFETY: glibc defines `__rseq_offset` as a `ptrdiff_t` and `__rseq_size` as an
    // `unsigned int`, both constant after startup.
    let (glibc_offset, glibc_size) = unsafe {
        (
            off_sym.cast::<isize>().read(),
            size_sym.cast::<libc::c_uint>().read(),
        )
    };
    let glibc_registered = glibc_size != 0;
    // The area the sections read: glibc's, or, when this crate registers threads itself and
    // the kernel asks for more than glibc's 32 bytes, this crate's own.
    let rseq_offset = if glibc_registered || own_len() == ORIG_RSEQ_LEN {
        glibc_offset
    } else {
        own_area().addr().wrapping_sub(thread_pointer().addr()) as isize
    };
    if !glibc_registered {
        // Register the calling thread now: ENOSYS means no rseq on this kernel (or under
        // qemu-user), and the whole process takes the fallback.
        // Another error (EPERM, EINVAL: some other library registered another area) leaves
        // this thread on the shared block, and the other threads try for themselves.
        // SAFETY: the calling thread's area at `rseq_offset` is the one the process
        // registers (glibc's reserved 32 bytes, unused while its own registration is off, or
        // this crate's `OwnArea`).
        if let Err(libc::ENOSYS) = unsafe { register_at(rseq_offset) } {
            return fallback("the kernel has no rseq (ENOSYS)");
        }
    }
    // After the ENOSYS check, so that qemu-user (whose `uname` is the host's release with
    // the guest's arch) reports no rseq rather than a kernel it does not run on.
    if let Some(reason) = gate(req, known_broken_kernel()) {
        return fallback(reason);
    }
    // The registered size that counts, librseq's rule: glibc reports 20 (2.35-2.39, while
    // allocating 32) or 32 (early versions) without asking the kernel, so for those two the
    // usable size is min(32, AT_RSEQ_FEATURE_SIZE); otherwise it is `__rseq_size`. Our own
    // registration covers the kernel's feature size when longer than 32 bytes.
    let size = match glibc_size {
        0 if own_len() > ORIG_RSEQ_LEN => kernel_feature_size(),
        0 | 20 | 32 => kernel_feature_size().min(ORIG_RSEQ_LEN),
        n => n as usize,
    };
    let cid_available = size >= MM_CID_OFFSET + 4;
    let index = match req {
        Request::Cpu => Index::Cpu,
        _ if cid_available => Index::ConcurrencyId,
        _ => Index::Cpu,
    };
    Config {
        path: Path::Rseq {
            index,
            glibc_registered,
        },
        rseq_offset,
        index_offset: match index {
            Index::Cpu => CPU_ID_OFFSET,
            Index::ConcurrencyId => MM_CID_OFFSET,
        },
        nslots: possible_cpus(),
    }
}

/// The fallback's reason when `req` may not take rseq on a kernel whose `known_broken`
/// verdict is given ([`known_broken_kernel`]): every request but `off` (which falls back
/// anyway) and `force`.
fn gate(req: Request, known_broken: Option<&'static str>) -> Option<&'static str> {
    match req {
        Request::Force => None,
        Request::Auto | Request::Cpu | Request::Cid | Request::Off => known_broken,
    }
}

/// Why this process's kernel is known to lose rseq adds ([`kernels::KNOWN_BROKEN`], matched
/// against `uname`'s release and the process's arch), or `None`. Computed once.
pub(crate) fn known_broken_kernel() -> Option<&'static str> {
    static VERDICT: OnceLock<Option<&'static str>> = OnceLock::new();
    *VERDICT.get_or_init(|| {
        let release = uname_release()?;
        let (r, b) = kernels::verdict(std::env::consts::ARCH, &release)?;
        // Leaked once per process, as the configuration that carries it.
        Some(Box::leak(kernels::reason(r, b).into_boxed_str()))
    })
}

/// `uname`'s release (`6.19.11+deb13-cloud-arm64`).
fn uname_release() -> Option<std::string::String> {
    // SAFETY: `utsname` is plain bytes; all zeroes is a valid value.
    let mut u: libc::utsname = unsafe { core::mem::zeroed() };
    // SAFETY: `u` is a writable `utsname`.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    // SAFETY: the kernel NUL-terminates the field; zeroed before, it ends in a NUL anyway.
    let release = unsafe { CStr::from_ptr(u.release.as_ptr()) };
    Some(release.to_string_lossy().into_owned())
}

/// The process's path, or [`Path::Unusable`] with the error every zone gets.
pub(crate) fn path() -> Path {
    match config() {
        Ok(c) => c.path,
        Err(error) => Path::Unusable { error },
    }
}

/// The kernel's supported rseq feature size: `getauxval(AT_RSEQ_FEATURE_SIZE)`, 20 if the
/// kernel does not say (before Linux 6.3).
pub(crate) fn kernel_feature_size() -> usize {
    // SAFETY: getauxval has no preconditions.
    match unsafe { libc::getauxval(AT_RSEQ_FEATURE_SIZE) } {
        0 => 20,
        n => n as usize,
    }
}

/// The calling thread's rseq area (glibc's), at the thread pointer plus `rseq_offset`.
pub(crate) fn area(rseq_offset: isize) -> *mut u8 {
    thread_pointer().wrapping_offset(rseq_offset)
}

#[cfg(target_arch = "x86_64")]
fn thread_pointer() -> *mut u8 {
    let tp: *mut u8;
    // SAFETY: on x86_64 Linux the FS base is the TCB, whose first word points at itself.
    unsafe {
        core::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly, preserves_flags))
    };
    tp
}

#[cfg(target_arch = "aarch64")]
fn thread_pointer() -> *mut u8 {
    let tp: *mut u8;
    // SAFETY: reading TPIDR_EL0 has no side effects.
    unsafe {
        core::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nostack, nomem, preserves_flags))
    };
    tp
}

/// The length this crate registers each thread's area with, where glibc's registration is
/// off: what the kernel asks for, `getauxval(AT_RSEQ_FEATURE_SIZE)` rounded up to
/// `getauxval(AT_RSEQ_ALIGN)`, at least 32 (the original `struct rseq`); a registration that
/// covers the kernel's feature size is what a kernel with the 6.19 rework needs to apply its
/// optimized mode to the thread. 32 (glibc's reserved area, the legacy mode) where that
/// would exceed [`OwnArea`].
pub(crate) fn own_len() -> usize {
    // SAFETY: getauxval has no preconditions.
    let (feature, align) = unsafe {
        (
            libc::getauxval(AT_RSEQ_FEATURE_SIZE),
            libc::getauxval(AT_RSEQ_ALIGN),
        )
    };
    match registration_len(feature as usize, align as usize) {
        len if len <= core::mem::size_of::<OwnArea>() => len,
        _ => ORIG_RSEQ_LEN,
    }
}

/// `feature` rounded up to `align` (0: none given), at least [`ORIG_RSEQ_LEN`].
fn registration_len(feature: usize, align: usize) -> usize {
    feature
        .checked_next_multiple_of(align.max(1))
        .unwrap_or(usize::MAX)
        .max(ORIG_RSEQ_LEN)
}

/// The area this crate registers for a thread when the kernel asks for more than the 32
/// bytes glibc reserves (glibc 2.35-2.40; `__rseq_size` 0, glibc's registration off): 128
/// bytes aligned to 128, which covers kernels whose feature size is up to 128 bytes.
/// `cpu_id` starts at -1 (`RSEQ_CPU_ID_UNINITIALIZED`), so the sections that check the
/// registration refuse a thread that has not registered it yet. Only the kernel writes it,
/// through raw pointers.
#[repr(C, align(128))]
pub(crate) struct OwnArea(core::cell::UnsafeCell<[u32; 32]>);

const fn own_area_init() -> [u32; 32] {
    let mut words = [0; 32];
    words[CPU_ID_OFFSET / 4] = u32::MAX;
    words
}

std::thread_local! {
    // Const-initialised and without a destructor: plain TLS at a fixed offset from the thread
    // pointer in every thread (static TLS: the executable and the libraries loaded with it;
    // `register_at` checks the offset).
    static OWN_AREA: OwnArea = const { OwnArea(core::cell::UnsafeCell::new(own_area_init())) };
}

/// The calling thread's [`OwnArea`].
fn own_area() -> *mut u8 {
    OWN_AREA.with(|a| a.0.get().cast())
}

/// Registers the calling thread's area at `rseq_offset` with the kernel, [`own_len`] bytes
/// long: glibc's reserved area when that is 32, else the thread's [`OwnArea`], refused
/// (`EINVAL`, unregistered) when it does not lie at `rseq_offset` from the thread pointer
/// (a library loaded with `dlopen`, whose TLS is not at one offset in every thread).
///
/// `EBUSY` (this very area is already registered, with this signature) counts as success.
/// Async-signal-safe: one system call, no allocation.
///
/// # Safety
/// glibc's registration is off, and `rseq_offset` is `__rseq_offset` when [`own_len`] is 32
/// (the area there is then glibc's reserved, 32-byte aligned, 32-byte rseq area for this
/// thread).
pub(crate) unsafe fn register_at(rseq_offset: isize) -> Result<(), i32> {
    let area = area(rseq_offset);
    let len = own_len();
    if len != ORIG_RSEQ_LEN && area != own_area() {
        return Err(libc::EINVAL);
    }
    // SAFETY: per the caller (32 bytes) or as checked (the thread's `OwnArea`, aligned to
    // 128, which `len` does not exceed and whose alignment `len`'s is at most), `area` is
    // this thread's rseq area, alive as long as the thread (the kernel unregisters it at
    // thread exit).
    let r = unsafe { libc::syscall(libc::SYS_rseq, area, len as u32, 0, RSEQ_SIG) };
    if r == 0 {
        return Ok(());
    }
    // SAFETY: reading errno right after the failed call.
    match unsafe { *libc::__errno_location() } {
        libc::EBUSY => Ok(()),
        e => Err(e),
    }
}

/// Per-thread state of this crate's own registration (used only when glibc's is off).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Own {
    Untried,
    /// Registered (its out-of-range adds go to the shared block without a system call).
    Registered,
    Failed,
}

std::thread_local! {
    // Const-initialised and without a destructor: a plain TLS variable, safe to touch from a
    // signal handler.
    static OWN: core::cell::Cell<Own> = const { core::cell::Cell::new(Own::Untried) };
}

/// From the slow path of a thread whose index read out of range: registers its area once
/// (only when glibc's registration is off). Returns whether the fast path may be retried
/// (`false` once tried: registered, or failed).
pub(crate) fn register_current_thread(rseq_offset: isize) -> bool {
    if OWN.with(|s| s.get()) != Own::Untried {
        // Registered already: the index was out of range (a zone with fewer slots than
        // CPUs), and the caller takes the shared block.
        return false;
    }
    // SAFETY: called only when glibc's registration is off, with the process's area offset
    // (`__rseq_offset` when `own_len` is 32).
    match unsafe { register_at(rseq_offset) } {
        Ok(()) => {
            OWN.with(|s| s.set(Own::Registered));
            true
        }
        Err(_) => {
            OWN.with(|s| s.set(Own::Failed));
            false
        }
    }
}

/// Number of possible CPUs: `/sys/devices/system/cpu/possible` (ranges such as `0-3,8`),
/// else `sysconf(_SC_NPROCESSORS_CONF)`.
pub(crate) fn possible_cpus() -> usize {
    if let Ok(s) = std::fs::read_to_string("/sys/devices/system/cpu/possible") {
        if let Some(n) = parse_cpu_list(s.trim()) {
            return n;
        }
    }
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as usize
}

/// One more than the highest CPU of a kernel CPU list (`0-3,8` → 9).
pub(crate) fn parse_cpu_list(s: &str) -> Option<usize> {
    let mut max = None;
    for part in s.split(',') {
        let last = part.rsplit('-').next()?.trim().parse::<usize>().ok()?;
        max = Some(max.map_or(last, |m: usize| m.max(last)));
    }
    max.map(|m| m + 1)
}

#[cfg(test)]
mod tests {
    /// The length of the crate's own registration: the kernel's feature size rounded up to
    /// its alignment, never below 32.
    #[test]
    fn registration_lengths() {
        for (feature, align, len) in [
            (0, 0, 32),
            (20, 0, 32),
            (28, 32, 32),
            (32, 32, 32),
            (33, 64, 64),
            (65, 128, 128),
            (129, 256, 256),
            (usize::MAX, 64, usize::MAX),
        ] {
            assert_eq!(
                super::registration_len(feature, align),
                len,
                "{feature} {align}"
            );
        }
    }

    /// The gate: every request but `force` falls back on a known-broken kernel; none does
    /// elsewhere.
    #[test]
    fn the_gate_applies_unless_forced() {
        use super::Request::*;
        let why = Some("Linux 6.19.11 aborts no rseq section on arm64");
        for (req, gated) in [
            (Auto, true),
            (Cpu, true),
            (Cid, true),
            (Off, true),
            (Force, false),
        ] {
            assert_eq!(
                super::gate(req, why),
                if gated { why } else { None },
                "{req:?}"
            );
            assert_eq!(super::gate(req, None), None, "{req:?}");
        }
    }

    /// `/sys/devices/system/cpu/possible`'s format: ranges and single CPUs, the count is the
    /// highest CPU plus one.
    #[test]
    fn cpu_list_parsing() {
        assert_eq!(super::parse_cpu_list("0-3,8"), Some(9));
        assert_eq!(super::parse_cpu_list("0"), Some(1));
        assert_eq!(super::parse_cpu_list("0-255"), Some(256));
        assert_eq!(super::parse_cpu_list("x"), None);
    }
}
