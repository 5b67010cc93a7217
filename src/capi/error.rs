// SPDX-License-Identifier: BSD-2-Clause
//! The C ABI's error codes: 0 for success, a negative `PCPU_E*` for each failure.
//!
//! The codes, their texts and each [`Error`](crate::Error)'s code are rows of the table in
//! `src/error.rs`. The constants below are that table written out, for cbindgen to copy into
//! the header: `PCPU_COUNTER_BLESS=1 cargo test --lib capi::error` writes them, and the tests
//! (`error/tests.rs`) hold them, the header and docs/c.md's table of codes to the table.

use core::ffi::{c_char, c_int};

pub(crate) use crate::error::code;

// BEGIN PCPU_E*: src/error.rs's table, written out (see above).
/// Success.
pub const PCPU_OK: c_int = 0;
/// Zero CPUs.
///
/// Rust: [`Error::NoCpus`](crate::Error::NoCpus).
pub const PCPU_ENOCPUS: c_int = -1;
/// A stride not a multiple of 8.
///
/// Rust: [`Error::StrideNotMultipleOf8`](crate::Error::StrideNotMultipleOf8).
pub const PCPU_ESTRIDE: c_int = -2;
/// A stride too small for the counter area.
///
/// Rust: [`Error::StrideTooSmall`](crate::Error::StrideTooSmall).
pub const PCPU_ESTRIDESMALL: c_int = -3;
/// A misaligned address or offset.
///
/// Rust: [`Error::Misaligned`](crate::Error::Misaligned).
pub const PCPU_EMISALIGNED: c_int = -4;
/// An empty counter area or one not a multiple of 8 bytes.
///
/// Rust: [`Error::BadAreaLength`](crate::Error::BadAreaLength).
pub const PCPU_EAREA: c_int = -5;
/// Zone metadata too small for the zone.
///
/// Rust: [`Error::MetaTooSmall`](crate::Error::MetaTooSmall).
pub const PCPU_EMETA: c_int = -6;
/// The zone, or a CPU's statics copy, does not fit in the address space.
///
/// Rust: [`Error::AddressOverflow`](crate::Error::AddressOverflow),
/// [`Error::WrapsAround`](crate::Error::WrapsAround).
pub const PCPU_EOVERFLOW: c_int = -7;
/// A CPU index out of range.
///
/// Rust: [`Error::CpuOutOfRange`](crate::Error::CpuOutOfRange).
pub const PCPU_ECPU: c_int = -8;
/// The zone is full, or holds no free run of adjacent slots that long.
///
/// Rust: [`Error::ZoneFull`](crate::Error::ZoneFull),
/// [`Error::RunTooLong`](crate::Error::RunTooLong).
pub const PCPU_EFULL: c_int = -9;
/// The zone memory already backs a zone.
///
/// Rust: [`Error::MemoryInUse`](crate::Error::MemoryInUse).
pub const PCPU_EINUSE: c_int = -10;
/// A zone (or simulated machine) is already installed.
///
/// Rust: [`Error::AlreadyInstalled`](crate::Error::AlreadyInstalled).
pub const PCPU_EINSTALLED: c_int = -11;
/// No zone is installed yet.
///
/// Rust: [`Error::NotInstalled`](crate::Error::NotInstalled).
pub const PCPU_ENOTINSTALLED: c_int = -12;
/// An invalid argument: a NULL pointer, unknown `wait` flags, a zero length.
///
/// Rust: [`Error::NotInZone`](crate::Error::NotInZone),
/// [`Error::BadBatch`](crate::Error::BadBatch).
pub const PCPU_EINVAL: c_int = -14;
/// A failure this version of the header has no code for.
///
/// Rust: [`Error::AlreadyBound`](crate::Error::AlreadyBound),
/// [`Error::CapacityTooLarge`](crate::Error::CapacityTooLarge),
/// [`Error::BadEnvVar`](crate::Error::BadEnvVar),
/// [`Error::RseqPathUnavailable`](crate::Error::RseqPathUnavailable),
/// [`Error::RseqPathTooLate`](crate::Error::RseqPathTooLate),
/// [`Error::BadThreshold`](crate::Error::BadThreshold),
/// [`Error::BadCpuBase`](crate::Error::BadCpuBase),
/// [`Error::BadSelector`](crate::Error::BadSelector),
/// [`Error::NoCpuRegister`](crate::Error::NoCpuRegister).
pub const PCPU_EOTHER: c_int = -15;
/// The zone needs other per-CPU register values than the zones of the area in force.
///
/// Rust: [`Error::AreaMismatch`](crate::Error::AreaMismatch).
pub const PCPU_EAREAMISMATCH: c_int = -16;
/// The zone's counter area overlaps a live zone of the area (or a statics copy the section).
///
/// Rust: [`Error::ZoneOverlap`](crate::Error::ZoneOverlap),
/// [`Error::CopyOverlapsTemplate`](crate::Error::CopyOverlapsTemplate).
pub const PCPU_EOVERLAP: c_int = -17;
/// The area already holds its maximum number of zones.
///
/// Rust: [`Error::TooManyZones`](crate::Error::TooManyZones).
pub const PCPU_EZONES: c_int = -18;
/// A counter registry name is already registered.
pub const PCPU_EEXIST: c_int = -19;
/// No counter is registered under this name.
pub const PCPU_ENOENT: c_int = -20;
/// The counter registry holds its maximum number of names (`PCPU_SYSCTL_MAX`).
pub const PCPU_EREGFULL: c_int = -21;
/// A bad registry name (empty, too long, not UTF-8 or not led by a letter) or description.
pub const PCPU_ENAME: c_int = -22;
/// The caller's buffer is too small (`pcpu_sysctl_export`); nothing was read or zeroed.
pub const PCPU_ENOSPC: c_int = -23;
/// A registry name whose metric name clashes with a registered one's (`a.b` and `a_b`).
pub const PCPU_ECLASH: c_int = -24;
/// The bring-up check: the CPU's index is not below the zone's CPU count.
///
/// Rust: [`Error::CpuNotInZone`](crate::Error::CpuNotInZone).
pub const PCPU_ENOTINZONE: c_int = -25;
/// The bring-up check: the platform's current CPU is another.
///
/// Rust: [`Error::CpuIndexMismatch`](crate::Error::CpuIndexMismatch).
pub const PCPU_ECPUINDEX: c_int = -26;
/// The bring-up check: the CPU's per-CPU register holds 0.
///
/// Rust: [`Error::CpuRegisterUnset`](crate::Error::CpuRegisterUnset).
pub const PCPU_EREGUNSET: c_int = -27;
/// The bring-up check: the register holds another CPU's block.
///
/// Rust: [`Error::CpuRegisterForeign`](crate::Error::CpuRegisterForeign).
pub const PCPU_EREGFOREIGN: c_int = -28;
/// The bring-up check (riscv64): the block is in the other register, `tp` vs `gp`.
///
/// Rust: [`Error::CpuRegisterWrong`](crate::Error::CpuRegisterWrong).
pub const PCPU_EREGWRONG: c_int = -29;
/// The bring-up check: the register holds no CPU's block of the zone.
///
/// Rust: [`Error::CpuRegisterOutside`](crate::Error::CpuRegisterOutside).
pub const PCPU_EREGOUTSIDE: c_int = -30;
/// The zone's chunk hook returned no memory.
///
/// Rust: [`Error::OutOfMemory`](crate::Error::OutOfMemory).
pub const PCPU_ENOMEM: c_int = -31;
/// The zone already has chunk hooks.
///
/// Rust: [`Error::SourceAlreadySet`](crate::Error::SourceAlreadySet).
pub const PCPU_ESOURCE: c_int = -32;
/// The bring-up check (i386): the `%fs` segment does not span 4 GiB, but the zone grows.
///
/// Rust: [`Error::SegmentTooShort`](crate::Error::SegmentTooShort).
pub const PCPU_ESEGLIMIT: c_int = -33;
/// A CPU's counter area or statics copy at an address no CPU can write (x86_64: not canonical).
///
/// Rust: [`Error::Unaddressable`](crate::Error::Unaddressable).
pub const PCPU_EUNADDR: c_int = -34;
/// The chunk hook gave less than asked: the chunk went back, the zone did not grow.
///
/// Rust: [`Error::ShortChunk`](crate::Error::ShortChunk).
pub const PCPU_ESHORTCHUNK: c_int = -35;
// END PCPU_E*

/// A static, NUL-terminated description of the code `err` (never NULL).
///
/// ```
/// use pcpu_counter::capi::{pcpu_strerror, PCPU_EFULL};
/// let text = unsafe { core::ffi::CStr::from_ptr(pcpu_strerror(PCPU_EFULL)) };
/// assert_eq!(text.to_str(), Ok("zone full"));
/// ```
#[no_mangle]
pub extern "C" fn pcpu_strerror(err: c_int) -> *const c_char {
    crate::error::strerror(err).as_ptr()
}

// The table's checks read the header and docs/c.md, which Miri's isolation forbids; they hold
// no unsafe code for Miri to judge.
#[cfg(all(test, not(miri)))]
mod tests;
