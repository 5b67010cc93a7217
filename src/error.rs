// SPDX-License-Identifier: BSD-2-Clause
//! The crate's one error type.

use core::fmt;

/// Everything that can go wrong when a zone is set up or a counter is allocated.
///
/// Bad configuration is always reported with one of these and never turned into a
/// memory access outside the zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The zone was asked for zero CPUs.
    NoCpus,
    /// The per-CPU stride is not a multiple of 8 bytes.
    StrideNotMultipleOf8 {
        /// The stride given, in bytes.
        stride: usize,
    },
    /// The per-CPU stride cannot hold the counter area at its offset.
    StrideTooSmall {
        /// The stride given, in bytes.
        stride: usize,
        /// The bytes each CPU needs: area offset plus area length.
        needed: usize,
    },
    /// An address or offset is not 8-byte aligned.
    Misaligned {
        /// The offending address or offset.
        addr: usize,
    },
    /// The counter area is empty or its length is not a multiple of 8 bytes.
    BadAreaLength {
        /// The length given, in bytes.
        len: usize,
    },
    /// The metadata given to the zone is shorter than [`ZoneLayout::meta_words`](crate::ZoneLayout::meta_words).
    MetaTooSmall {
        /// Words the zone needs (a baseline per slot, a bitmap bit per slot and its summary).
        needed: usize,
        /// Words given.
        has: usize,
    },
    /// The zone needs other per-CPU register values than the zones already carved from the
    /// area: an add to one of its counters would land in another zone's slot.
    AreaMismatch {
        /// The register values of the area's live zones.
        in_force: crate::AreaShape,
        /// The register values this zone needs.
        needed: crate::AreaShape,
    },
    /// The zone's counter area overlaps a live zone of the same area.
    ZoneOverlap {
        /// The counter area's offset in each block.
        offset: usize,
        /// Its length in bytes.
        len: usize,
    },
    /// The area already holds its maximum number of zones.
    TooManyZones {
        /// The maximum (`Area::MAX_ZONES`).
        max: usize,
    },
    /// The zone's address range does not fit in the address space.
    AddressOverflow,
    /// A CPU index is not below the zone's CPU count.
    CpuOutOfRange {
        /// The index given.
        cpu: usize,
        /// The zone's CPU count.
        ncpus: usize,
    },
    /// Every slot of the zone is in use (or no run of the requested length is free).
    ZoneFull {
        /// The zone's capacity, in counters.
        capacity: usize,
    },
    /// A static [`ZoneMemory`](crate::ZoneMemory) was handed to a second zone.
    MemoryInUse,
    /// The global zone was already installed.
    AlreadyInstalled,
    /// No global zone is installed yet (see [`install`](crate::freebsd::install)).
    NotInstalled,
    /// The calling thread is already bound to a simulated CPU (returned only by the host
    /// simulation's `Machine::bind`).
    AlreadyBound,
    /// The zone was asked for more counters than it can hold.
    CapacityTooLarge {
        /// The counters asked for.
        counters: usize,
        /// The most a zone of this kind holds.
        max: usize,
    },
    /// i386: CPU `cpu`'s `%fs` segment, through which the add goes, has a limit below 4 GiB,
    /// but the zone grows: its chunks lie anywhere, at offsets that reach the whole address
    /// space (the bring-up check, [`Zone::check_cpu`](crate::Zone::check_cpu)).
    SegmentTooShort {
        /// The CPU checked.
        cpu: usize,
        /// The segment's byte limit (4 GiB - 1 would span the address space).
        limit: usize,
    },
    /// A zone was given a second chunk source ([`Zone::grow_from`](crate::Zone::grow_from)):
    /// its chunks must go back to the one they came from.
    SourceAlreadySet,
    /// A run of adjacent slots (a counter array) longer than the zone can ever hold in one
    /// piece: its first blocks, or one chunk of a zone that grows.
    RunTooLong {
        /// The run asked for.
        len: usize,
        /// The longest the zone can hold.
        max: usize,
    },
    /// The operating system, the allocator or a zone's chunk source refused the memory a zone
    /// needs.
    OutOfMemory {
        /// The bytes asked for.
        bytes: usize,
    },
    /// A run of slots asked for (a group read) is not inside the zone.
    NotInZone {
        /// The offset of the run's first slot.
        offset: usize,
        /// The number of slots.
        len: usize,
    },
    /// An environment variable the crate reads has a value it does not accept.
    BadEnvVar {
        /// The variable's name.
        var: &'static str,
        /// Its value (non-UTF-8 bytes replaced by U+FFFD).
        value: &'static str,
        /// The values accepted, separated by commas.
        accepted: &'static str,
    },
    /// The rseq add path asked for in code (`rseq::set_path`) cannot run in this process;
    /// the path is left unchosen.
    RseqPathUnavailable {
        /// The path asked for.
        asked: &'static str,
        /// Why it cannot run here.
        reason: &'static str,
    },
    /// The rseq add path asked for in code (`rseq::set_path`) differs from the one the
    /// process already uses: the path is fixed at the first zone (or the first
    /// `rseq::path`), so it must be set before any counter is made.
    RseqPathTooLate {
        /// The path asked for.
        asked: &'static str,
    },
    /// An [`ApproxCounter`](crate::ApproxCounter) batch that is not a power of two from 16
    /// to 2^32.
    BadBatch {
        /// The batch given.
        batch: u64,
    },
    /// A [`LazyCounter`](crate::LazyCounter) threshold above
    /// [`LazyCounter::max_threshold`](crate::LazyCounter::max_threshold).
    BadThreshold {
        /// The threshold given (adds before the move).
        threshold: usize,
        /// The largest threshold the counter can count down from.
        max: usize,
    },
    /// [`arch::set_cpu_base`](crate::arch::set_cpu_base): the per-CPU register cannot hold
    /// this base (x86_64: not a canonical address; i386: above 4 GiB).
    BadCpuBase {
        /// The base given.
        base: usize,
    },
    /// i386's `arch::set_cpu_base`: the selector is null or names the LDT.
    BadSelector {
        /// The selector given.
        selector: u16,
    },
    /// A zone was asked for in a hosted program (Linux, macOS, Windows) without the host
    /// simulation: an ordinary thread has no per-CPU register for the add, so the kernel API
    /// compiles there (kernel code builds and documents on the host) but makes no zone.
    NoCpuRegister,
    /// The bring-up check ([`Zone::check_cpu`](crate::Zone::check_cpu)): a CPU is brought up
    /// whose index is not below the zone's CPU count. The zone was made for fewer CPUs than
    /// run (`ncpus` must count every possible CPU, not those known when the zone is made):
    /// this CPU's adds would be counted by no `fetch`.
    CpuNotInZone {
        /// The CPU brought up.
        cpu: usize,
        /// The zone's CPU count.
        ncpus: usize,
    },
    /// The bring-up check: the platform's `current_cpu` is not the CPU being brought up.
    CpuIndexMismatch {
        /// The CPU brought up.
        cpu: usize,
        /// What `Platform::current_cpu` returned on it.
        current: usize,
    },
    /// The bring-up check: this CPU's per-CPU register holds 0, so it was never set.
    CpuRegisterUnset {
        /// The CPU brought up.
        cpu: usize,
        /// The register the add goes through ([`arch::REGISTER`](crate::arch::REGISTER)).
        register: &'static str,
    },
    /// The bring-up check: this CPU's per-CPU register holds another CPU's block of the zone
    /// (two CPUs' bases swapped, or a wrong CPU index): its adds would count as the other's.
    CpuRegisterForeign {
        /// The CPU brought up.
        cpu: usize,
        /// The CPU whose block the register holds.
        other: usize,
        /// The register the add goes through.
        register: &'static str,
    },
    /// The bring-up check (riscv64): this CPU's block is in the other register than the one
    /// the add reads (`tp` and `gp`; feature `riscv-gp` selects `gp`).
    CpuRegisterWrong {
        /// The CPU brought up.
        cpu: usize,
        /// The register that holds the CPU's block.
        holds_block: &'static str,
        /// The register the add reads.
        add_reads: &'static str,
    },
    /// The bring-up check: this CPU's per-CPU register holds no CPU's block of the zone: the
    /// zone's `base` or `stride` is not the kernel's (or the register belongs to something
    /// else).
    CpuRegisterOutside {
        /// The CPU brought up.
        cpu: usize,
        /// The register the add goes through.
        register: &'static str,
        /// What the register holds.
        found: usize,
        /// What the zone says it must hold: `base + cpu * stride`.
        expected: usize,
    },
    /// Set-up that the CPU cannot write: a CPU's counter area (a zone) or copy of the per-CPU
    /// section (the statics) has an address that no configuration of the target addresses
    /// (x86_64: not canonical). Refused before anything is written
    /// ([`AddressSpace::check_copies`](crate::AddressSpace::check_copies)).
    Unaddressable {
        /// What was set up: `"zone"` (its counter area) or `"statics"` (the CPU's copy).
        what: &'static str,
        /// The first CPU whose range has such an address.
        cpu: usize,
        /// The first such address of its range: the range's start, or where the range runs
        /// into the unaddressable hole.
        addr: usize,
        /// The rule it breaks.
        space: crate::AddressSpace,
    },
    /// Set-up that the CPU cannot write: a CPU's counter area (a zone) or copy of the per-CPU
    /// section (the statics) runs past the end of the address space. Refused before anything
    /// is written.
    WrapsAround {
        /// What was set up: `"zone"` (its counter area) or `"statics"` (the CPU's copy).
        what: &'static str,
        /// The first CPU whose range wraps.
        cpu: usize,
        /// Where its range starts, modulo 2^64 (a start past the end reads as a low address).
        addr: usize,
        /// The range's length in bytes.
        len: usize,
    },
    /// `statics::install`: a CPU's copy of the per-CPU section overlaps the section itself
    /// (the template) without being it: clearing it would erase the early counts, and its
    /// adds would land in template slots that `fetch` sums too. Refused before anything is
    /// written.
    CopyOverlapsTemplate {
        /// The CPU whose copy it is.
        cpu: usize,
        /// Where the copy starts.
        addr: usize,
        /// Where the template starts (`__start_pcpu_counter_statics`).
        template: usize,
        /// The section's length in bytes.
        len: usize,
    },
}

/// What `what`'s range of each CPU is called in the messages.
fn range_name(what: &str) -> &'static str {
    match what {
        "statics" => "copy",
        _ => "counter area",
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::NoCpus => write!(f, "a zone needs at least one CPU"),
            Error::StrideNotMultipleOf8 { stride } => {
                write!(f, "per-CPU stride {stride} is not a multiple of 8 bytes")
            }
            Error::StrideTooSmall { stride, needed } => {
                write!(
                    f,
                    "per-CPU stride {stride} is smaller than the {needed} bytes each CPU needs"
                )
            }
            Error::Misaligned { addr } => write!(f, "{addr:#x} is not 8-byte aligned"),
            Error::BadAreaLength { len } => {
                write!(
                    f,
                    "counter area length {len} is zero or not a multiple of 8 bytes"
                )
            }
            Error::MetaTooSmall { needed, has } => {
                write!(f, "zone metadata has {has} words but the zone needs {needed}")
            }
            Error::AreaMismatch { in_force, needed } => write!(
                f,
                "the zone needs per-CPU registers {:#x} + cpu * {:#x} for {} CPUs, but the area in force has {:#x} + cpu * {:#x} for {} CPUs",
                needed.base, needed.stride, needed.ncpus, in_force.base, in_force.stride, in_force.ncpus
            ),
            Error::ZoneOverlap { offset, len } => write!(
                f,
                "counter area at offset {offset:#x}, {len} bytes, overlaps a live zone of the area"
            ),
            Error::TooManyZones { max } => write!(f, "the area already holds {max} zones"),
            Error::AddressOverflow => write!(f, "the zone does not fit in the address space"),
            Error::CpuOutOfRange { cpu, ncpus } => {
                write!(f, "CPU {cpu} is out of range (the zone has {ncpus} CPUs)")
            }
            Error::ZoneFull { capacity } => {
                write!(
                    f,
                    "zone full: all {capacity} counter slots are in use, and the zone does not \
                     grow (give it a chunk source: Zone::grow_from)"
                )
            }
            Error::SegmentTooShort { cpu, limit } => write!(
                f,
                "CPU {cpu}'s %fs segment ends at {limit:#x}, but the zone grows: its chunks lie \
                 anywhere in the address space, so every CPU's %fs segment must span 4 GiB \
                 (limit 0xfffff with 4 KiB granularity)"
            ),
            Error::SourceAlreadySet => write!(
                f,
                "the zone already has a chunk source (its chunks go back to the one they came from)"
            ),
            Error::RunTooLong { len, max } => write!(
                f,
                "a run of {len} adjacent counters asked for, but the zone holds at most {max} \
                 in one piece (a run stays in one chunk)"
            ),
            Error::MemoryInUse => write!(f, "this zone memory already backs a zone"),
            Error::AlreadyInstalled => write!(f, "the global zone is already installed"),
            Error::NotInstalled => write!(f, "no global zone is installed"),
            Error::AlreadyBound => write!(f, "this thread is already bound to a simulated CPU"),
            Error::CapacityTooLarge { counters, max } => write!(
                f,
                "{counters} counters asked for, but a zone holds at most {max}"
            ),
            Error::OutOfMemory { bytes } => {
                write!(f, "out of memory: the {bytes} bytes the zone asked for could not be had")
            }
            Error::NotInZone { offset, len } => {
                write!(f, "{len} slots from offset {offset:#x} are not all slots of the zone")
            }
            Error::BadEnvVar {
                var,
                value,
                accepted,
            } => write!(
                f,
                "environment variable {var}={value:?} is not one of the accepted values: {accepted}"
            ),
            Error::RseqPathUnavailable { asked, reason } => {
                write!(f, "the rseq add path {asked} is not available here: {reason}")
            }
            Error::RseqPathTooLate { asked } => write!(
                f,
                "the rseq add path {asked} was asked for after the process chose another \
                 (at its first zone or rseq::path call); call rseq::set_path before both"
            ),
            Error::BadBatch { batch } => write!(
                f,
                "approximate counter batch {batch} is not a power of two from 16 to 2^32"
            ),
            Error::BadThreshold { threshold, max } => write!(
                f,
                "lazy counter threshold {threshold} is above the largest, {max} adds"
            ),
            Error::BadCpuBase { base } => write!(
                f,
                "the per-CPU register cannot hold base {base:#x} (not an address this CPU can \
                 use as its per-CPU base)"
            ),
            Error::BadSelector { selector } => write!(
                f,
                "segment selector {selector:#x} is null or names the LDT, not a GDT entry"
            ),
            Error::NoCpuRegister => write!(
                f,
                "no per-CPU register here: a hosted program's threads have none, so it makes no \
                 zone (a Linux program counts with `pcpu_counter::rseq`; kernel code runs in \
                 its host tests under the `sim` dev-dependency)"
            ),
            Error::CpuNotInZone { cpu, ncpus } => write!(
                f,
                "CPU {cpu} is brought up, but the zone was made for {ncpus} CPUs: ncpus must \
                 count every possible CPU, not those known when the zone is made"
            ),
            Error::CpuIndexMismatch { cpu, current } => write!(
                f,
                "CPU {cpu} is brought up, but Platform::current_cpu() returns {current} on it"
            ),
            Error::CpuRegisterUnset { cpu, register } => write!(
                f,
                "CPU {cpu}'s per-CPU register ({register}) holds 0: it was never set on this CPU"
            ),
            Error::CpuRegisterForeign {
                cpu,
                other,
                register,
            } => write!(
                f,
                "CPU {cpu}'s per-CPU register ({register}) holds CPU {other}'s block of the \
                 zone: two CPUs' bases are swapped, or {cpu} is not this CPU's index"
            ),
            Error::CpuRegisterWrong {
                cpu,
                holds_block,
                add_reads,
            } => write!(
                f,
                "CPU {cpu}'s block is in {holds_block}, but this build adds through \
                 {add_reads}: build with{} feature riscv-gp",
                if holds_block == "gp" { "" } else { "out" }
            ),
            Error::CpuRegisterOutside {
                cpu,
                register,
                found,
                expected,
            } => write!(
                f,
                "CPU {cpu}'s per-CPU register ({register}) holds {found:#x}, no CPU's block of \
                 the zone; its block is at {expected:#x} (base + cpu * stride): the zone's \
                 base or stride is not the kernel's"
            ),
            Error::Unaddressable {
                what,
                cpu,
                addr,
                space,
            } => write!(
                f,
                "{what}: CPU {cpu}'s {} at {addr:#x} is not {space}: no CPU can write there",
                range_name(what)
            ),
            Error::WrapsAround {
                what,
                cpu,
                addr,
                len,
            } => write!(
                f,
                "{what}: CPU {cpu}'s {}, {len} bytes at {addr:#x} (modulo 2^64), wraps around \
                 the end of the address space",
                range_name(what)
            ),
            Error::CopyOverlapsTemplate {
                cpu,
                addr,
                template,
                len,
            } => write!(
                f,
                "statics: CPU {cpu}'s copy at {addr:#x} overlaps the template (the section \
                 itself, {len} bytes at {template:#x}): a copy is the template exactly \
                 (register 0) or apart from it"
            ),
        }
    }
}

impl core::error::Error for Error {}
