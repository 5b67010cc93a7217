// SPDX-License-Identifier: BSD-2-Clause
//! The C ABI's error codes: 0 for success, a negative `PCPU_E*` for each failure.

use core::ffi::{c_char, c_int};

use crate::Error;

/// Success.
pub const PCPU_OK: c_int = 0;
/// Zero CPUs (Rust: `Error::NoCpus`).
pub const PCPU_ENOCPUS: c_int = -1;
/// A stride not a multiple of 8 (Rust: `Error::StrideNotMultipleOf8`).
pub const PCPU_ESTRIDE: c_int = -2;
/// A stride too small for the counter area (Rust: `Error::StrideTooSmall`).
pub const PCPU_ESTRIDESMALL: c_int = -3;
/// A misaligned address or offset (Rust: `Error::Misaligned`).
pub const PCPU_EMISALIGNED: c_int = -4;
/// An empty counter area or one not a multiple of 8 bytes (Rust: `Error::BadAreaLength`).
pub const PCPU_EAREA: c_int = -5;
/// Zone metadata too small for the zone (Rust: `Error::MetaTooSmall`).
pub const PCPU_EMETA: c_int = -6;
/// The zone does not fit in the address space (Rust: `Error::AddressOverflow`).
pub const PCPU_EOVERFLOW: c_int = -7;
/// A CPU index out of range (Rust: `Error::CpuOutOfRange`).
pub const PCPU_ECPU: c_int = -8;
/// The zone (or the handle table) is full (Rust: `Error::ZoneFull`).
pub const PCPU_EFULL: c_int = -9;
/// The zone memory already backs a zone (Rust: `Error::MemoryInUse`).
pub const PCPU_EINUSE: c_int = -10;
/// A zone (or simulated machine) is already installed (Rust: `Error::AlreadyInstalled`).
pub const PCPU_EINSTALLED: c_int = -11;
/// No zone is installed yet (Rust: `Error::NotInstalled`).
pub const PCPU_ENOTINSTALLED: c_int = -12;
/// An invalid argument: a NULL pointer, unknown `wait` flags, a zero length.
pub const PCPU_EINVAL: c_int = -14;
/// A failure this version of the header has no code for.
pub const PCPU_EOTHER: c_int = -15;
/// The zone needs other per-CPU register values than the zones of the area in force.
pub const PCPU_EAREAMISMATCH: c_int = -16;
/// The zone's counter area overlaps a live zone of the same area.
pub const PCPU_EOVERLAP: c_int = -17;
/// The area already holds its maximum number of zones.
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

/// The bring-up check: the CPU's index is not below the zone's CPU count (Rust:
/// `Error::CpuNotInZone`).
pub const PCPU_ENOTINZONE: c_int = -25;
/// The bring-up check: the platform's current CPU is another (Rust: `Error::CpuIndexMismatch`).
pub const PCPU_ECPUINDEX: c_int = -26;
/// The bring-up check: the CPU's per-CPU register holds 0 (Rust: `Error::CpuRegisterUnset`).
pub const PCPU_EREGUNSET: c_int = -27;
/// The bring-up check: the register holds another CPU's block (Rust:
/// `Error::CpuRegisterForeign`).
pub const PCPU_EREGFOREIGN: c_int = -28;
/// The bring-up check: riscv64, the block is in the other register, `tp` vs `gp` (Rust:
/// `Error::CpuRegisterWrong`).
pub const PCPU_EREGWRONG: c_int = -29;
/// The bring-up check: the register holds no CPU's block of the zone (Rust:
/// `Error::CpuRegisterOutside`).
pub const PCPU_EREGOUTSIDE: c_int = -30;
/// The zone's chunk hook returned no memory (Rust: `Error::OutOfMemory`).
pub const PCPU_ENOMEM: c_int = -31;
/// The zone already has chunk hooks (Rust: `Error::SourceAlreadySet`).
pub const PCPU_ESOURCE: c_int = -32;
/// The bring-up check, i386: the `%fs` segment does not span 4 GiB, but the zone grows (Rust:
/// `Error::SegmentTooShort`).
pub const PCPU_ESEGLIMIT: c_int = -33;
// The lowest code: the checks of every code (`tests/capi.rs`, `tests/config_fuzz.rs`, the
// `capi` fuzz target) run down to it. A new code goes below it, and they move with it.
/// A CPU's counter area or statics copy has an address the arch cannot have (Rust:
/// `Error::Unaddressable`: on x86_64 one that is not canonical).
pub const PCPU_EUNADDR: c_int = -34;

/// The C code of `e`.
pub(crate) fn code(e: Error) -> c_int {
    match e {
        Error::NoCpus => PCPU_ENOCPUS,
        Error::StrideNotMultipleOf8 { .. } => PCPU_ESTRIDE,
        Error::StrideTooSmall { .. } => PCPU_ESTRIDESMALL,
        Error::Misaligned { .. } => PCPU_EMISALIGNED,
        Error::BadAreaLength { .. } => PCPU_EAREA,
        Error::MetaTooSmall { .. } => PCPU_EMETA,
        Error::AreaMismatch { .. } => PCPU_EAREAMISMATCH,
        Error::ZoneOverlap { .. } => PCPU_EOVERLAP,
        Error::TooManyZones { .. } => PCPU_EZONES,
        Error::AddressOverflow => PCPU_EOVERFLOW,
        Error::CpuOutOfRange { .. } => PCPU_ECPU,
        Error::ZoneFull { .. } => PCPU_EFULL,
        Error::MemoryInUse => PCPU_EINUSE,
        Error::AlreadyInstalled => PCPU_EINSTALLED,
        Error::NotInstalled => PCPU_ENOTINSTALLED,
        Error::NotInZone { .. } => PCPU_EINVAL,
        Error::BadBatch { .. } => PCPU_EINVAL,
        Error::CpuNotInZone { .. } => PCPU_ENOTINZONE,
        Error::CpuIndexMismatch { .. } => PCPU_ECPUINDEX,
        Error::CpuRegisterUnset { .. } => PCPU_EREGUNSET,
        Error::CpuRegisterForeign { .. } => PCPU_EREGFOREIGN,
        Error::CpuRegisterWrong { .. } => PCPU_EREGWRONG,
        Error::CpuRegisterOutside { .. } => PCPU_EREGOUTSIDE,
        Error::OutOfMemory { .. } => PCPU_ENOMEM,
        Error::SourceAlreadySet => PCPU_ESOURCE,
        Error::SegmentTooShort { .. } => PCPU_ESEGLIMIT,
        Error::RunTooLong { .. } => PCPU_EFULL,
        Error::Unaddressable { .. } => PCPU_EUNADDR,
        // The codes of the kind: a range past the end, an overlap (the C library keeps one
        // text per code, and a C kernel's existing checks keep working).
        Error::WrapsAround { .. } => PCPU_EOVERFLOW,
        Error::CopyOverlapsTemplate { .. } => PCPU_EOVERLAP,
        #[allow(unreachable_patterns)] // Variants added later map here until given a code.
        _ => PCPU_EOTHER,
    }
}

/// A static, NUL-terminated description of the code `err` (never NULL).
///
/// ```
/// use pcpu_counter::capi::{pcpu_strerror, PCPU_EFULL};
/// let text = unsafe { core::ffi::CStr::from_ptr(pcpu_strerror(PCPU_EFULL)) };
/// assert_eq!(text.to_str(), Ok("zone full"));
/// ```
#[no_mangle]
pub extern "C" fn pcpu_strerror(err: c_int) -> *const c_char {
    let text: &'static core::ffi::CStr = match err {
        PCPU_OK => c"success",
        PCPU_ENOCPUS => c"a zone needs at least one CPU",
        PCPU_ESTRIDE => c"per-CPU stride is not a multiple of 8 bytes",
        PCPU_ESTRIDESMALL => c"per-CPU stride is too small for the counter area",
        PCPU_EMISALIGNED => c"address or offset is not 8-byte aligned",
        PCPU_EAREA => c"counter area length is zero or not a multiple of 8 bytes",
        PCPU_EMETA => c"zone metadata is too small for the zone",
        PCPU_EOVERFLOW => c"the zone does not fit in the address space",
        PCPU_ECPU => c"CPU index out of range",
        PCPU_EFULL => c"zone full",
        PCPU_EINUSE => c"zone memory already in use",
        PCPU_EINSTALLED => c"already installed",
        PCPU_ENOTINSTALLED => c"no zone installed",
        PCPU_EINVAL => c"invalid argument",
        PCPU_EOTHER => c"an error this header has no code for",
        PCPU_EAREAMISMATCH => {
            c"the zone needs other per-CPU register values than the area in force"
        }
        PCPU_EOVERLAP => c"the zone overlaps a live zone of the area",
        PCPU_EZONES => c"the area holds its maximum number of zones",
        PCPU_EEXIST => c"a counter with this name is registered",
        PCPU_ENOENT => c"no counter with this name is registered",
        PCPU_EREGFULL => c"the counter registry is full",
        PCPU_ENAME => {
            c"name or description empty, too long or not UTF-8, or a name not led by a letter"
        }
        PCPU_ENOSPC => c"the buffer is too small",
        PCPU_ECLASH => c"the name exports as a metric that clashes with a registered name's",
        PCPU_ENOTINZONE => c"CPU index not below the zone's ncpus: count every possible CPU",
        PCPU_ECPUINDEX => c"the platform's current CPU is another",
        PCPU_EREGUNSET => c"the per-CPU register holds 0 (never set)",
        PCPU_EREGFOREIGN => c"the per-CPU register holds another CPU's block (bases swapped?)",
        PCPU_EREGWRONG => c"the CPU's block is in the other register (riscv64 tp vs gp)",
        PCPU_EREGOUTSIDE => c"the per-CPU register holds no CPU's block: wrong base or stride",
        PCPU_ENOMEM => c"the zone's chunk hook gave no memory",
        PCPU_ESOURCE => c"the zone already has chunk hooks",
        PCPU_ESEGLIMIT => c"the %fs segment does not span 4 GiB, but the zone grows",
        PCPU_EUNADDR => c"address no CPU can write",
        _ => c"unknown error",
    };
    text.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AreaShape;

    /// Every `Error` has the code the header documents for it, and the codes are distinct
    /// (bar the catch-all for the variants the header has no code for).
    #[test]
    fn each_error_has_its_code() {
        let shape = AreaShape {
            base: 0,
            stride: 64,
            ncpus: 1,
        };
        let cases = [
            (Error::NoCpus, PCPU_ENOCPUS),
            (Error::StrideNotMultipleOf8 { stride: 12 }, PCPU_ESTRIDE),
            (
                Error::StrideTooSmall {
                    stride: 8,
                    needed: 16,
                },
                PCPU_ESTRIDESMALL,
            ),
            (Error::Misaligned { addr: 4 }, PCPU_EMISALIGNED),
            (Error::BadAreaLength { len: 0 }, PCPU_EAREA),
            (Error::MetaTooSmall { needed: 2, has: 1 }, PCPU_EMETA),
            (
                Error::AreaMismatch {
                    in_force: shape,
                    needed: AreaShape { ncpus: 2, ..shape },
                },
                PCPU_EAREAMISMATCH,
            ),
            (Error::ZoneOverlap { offset: 8, len: 8 }, PCPU_EOVERLAP),
            (Error::TooManyZones { max: 64 }, PCPU_EZONES),
            (Error::AddressOverflow, PCPU_EOVERFLOW),
            (Error::CpuOutOfRange { cpu: 2, ncpus: 2 }, PCPU_ECPU),
            (Error::ZoneFull { capacity: 8 }, PCPU_EFULL),
            (Error::MemoryInUse, PCPU_EINUSE),
            (Error::AlreadyInstalled, PCPU_EINSTALLED),
            (Error::NotInstalled, PCPU_ENOTINSTALLED),
            (Error::NotInZone { offset: 8, len: 2 }, PCPU_EINVAL),
            (Error::CpuNotInZone { cpu: 1, ncpus: 1 }, PCPU_ENOTINZONE),
            (
                Error::CpuIndexMismatch { cpu: 1, current: 0 },
                PCPU_ECPUINDEX,
            ),
            (
                Error::CpuRegisterUnset {
                    cpu: 1,
                    register: "tp",
                },
                PCPU_EREGUNSET,
            ),
            (
                Error::CpuRegisterForeign {
                    cpu: 1,
                    other: 0,
                    register: "tp",
                },
                PCPU_EREGFOREIGN,
            ),
            (
                Error::CpuRegisterWrong {
                    cpu: 1,
                    holds_block: "tp",
                    add_reads: "gp",
                },
                PCPU_EREGWRONG,
            ),
            (
                Error::CpuRegisterOutside {
                    cpu: 1,
                    register: "tp",
                    found: 8,
                    expected: 16,
                },
                PCPU_EREGOUTSIDE,
            ),
            (Error::OutOfMemory { bytes: usize::MAX }, PCPU_ENOMEM),
            (Error::SourceAlreadySet, PCPU_ESOURCE),
            (
                Error::SegmentTooShort {
                    cpu: 1,
                    limit: 0xfff,
                },
                PCPU_ESEGLIMIT,
            ),
            (
                Error::Unaddressable {
                    what: "zone",
                    cpu: 1,
                    addr: usize::MAX,
                    space: crate::AddressSpace::X86_64,
                },
                PCPU_EUNADDR,
            ),
            (
                Error::CapacityTooLarge {
                    counters: 2,
                    max: 1,
                },
                PCPU_EOTHER,
            ),
        ];
        for (e, want) in cases {
            assert_eq!(code(e), want, "{e:?}");
        }
        let mut codes: std::vec::Vec<c_int> =
            cases[..cases.len() - 1].iter().map(|&(_, c)| c).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), cases.len() - 1, "two errors share a code");
        // The set-up refusals that keep the code of their kind.
        let wraps = Error::WrapsAround {
            what: "statics",
            cpu: 1,
            addr: 8,
            len: 16,
        };
        assert_eq!(code(wraps), PCPU_EOVERFLOW);
        let over_template = Error::CopyOverlapsTemplate {
            cpu: 0,
            addr: 0x1008,
            template: 0x1000,
            len: 16,
        };
        assert_eq!(code(over_template), PCPU_EOVERLAP);
    }
}
