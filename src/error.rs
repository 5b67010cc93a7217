// SPDX-License-Identifier: BSD-2-Clause
//! The crate's one error type and the C ABI's codes, written once: the table below.
//!
//! Each row of `error_table!` is one error: a Rust variant (its fields, its `Display` message,
//! the C code it returns), or a C code (its name, number, the header's line and
//! `pcpu_strerror`'s text). The macro makes the `Error` enum, its `Display`, and, with the C
//! ABI, `code` and `strerror` from them. The rest is text that tests hold to the table
//! (`src/capi/error/tests.rs`): the `PCPU_E*` constants in `src/capi/error.rs` and docs/c.md's
//! table of codes (both written by `PCPU_COUNTER_BLESS=1 cargo test --lib capi::error`), and
//! the header's defines (cbindgen writes them from the constants). A new code is a row here,
//! then that command and cbindgen; the tests fail until both ran.

use core::fmt;

/// Builds the error type and its C codes from the table: see the module's documentation.
macro_rules! error_table {
    (
        $(#[$enum_meta:meta])*
        pub enum Error {
            $(
                $(#[$variant_meta:meta])*
                $variant:ident $({ $($(#[$field_meta:meta])* $field:ident: $field_ty:ty,)* })?
                    => $code:ident, $message:literal $(, $argument:expr)*;
            )*
        }
        codes {
            $($(#[doc = $doc:literal])* $name:ident = $number:literal, $text:literal;)*
        }
    ) => {
        $(#[$enum_meta])*
        pub enum Error {
            $(
                $(#[$variant_meta])*
                $variant $({ $($(#[$field_meta])* $field: $field_ty,)* })?,
            )*
        }

        impl fmt::Display for Error {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match *self {
                    $(
                        Error::$variant $({ $($field),* })? =>
                            write!(f, $message $(, $argument)*),
                    )*
                }
            }
        }

        /// The C codes by name: the C ABI's `PCPU_E*` constants are these, written out.
        #[cfg(pcpu_c_abi)]
        mod c_code {
            $(pub(crate) const $name: core::ffi::c_int = $number;)*
        }

        /// The C code of `e`.
        #[cfg(pcpu_c_abi)]
        pub(crate) fn code(e: Error) -> core::ffi::c_int {
            match e {
                $(Error::$variant { .. } => c_code::$code,)*
            }
        }

        /// A static description of the C code `code` (a fixed text: no `core::fmt` in the C
        /// library).
        #[cfg(pcpu_c_abi)]
        pub(crate) fn strerror(code: core::ffi::c_int) -> &'static core::ffi::CStr {
            match code {
                $(c_code::$name => $text,)*
                _ => c"unknown error",
            }
        }

        /// The table as data, for the tests that hold the constants, the header and the docs to
        /// it.
        #[cfg(all(test, pcpu_c_abi))]
        pub(crate) mod table {
            /// A C code's row.
            pub(crate) struct Code {
                pub name: &'static str,
                pub number: i32,
                /// The doc lines, each with its leading space.
                pub doc: &'static [&'static str],
                pub text: &'static core::ffi::CStr,
            }

            /// The C codes, in the table's order.
            pub(crate) const CODES: &[Code] = &[
                $(Code { name: stringify!($name), number: $number, doc: &[$($doc),*], text: $text },)*
            ];

            /// Each variant's name and the name of its C code, in the table's order.
            pub(crate) const ERRORS: &[(&str, &str)] = &[$((stringify!($variant), stringify!($code)),)*];
        }
    };
}

error_table! {
    /// Everything that can go wrong when a zone is set up or a counter is allocated.
    ///
    /// Bad configuration is always reported with one of these and never turned into a
    /// memory access outside the zone.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum Error {
        /// The zone was asked for zero CPUs.
        NoCpus => PCPU_ENOCPUS, "a zone needs at least one CPU";
        /// The per-CPU stride is not a multiple of 8 bytes.
        StrideNotMultipleOf8 {
            /// The stride given, in bytes.
            stride: usize,
        } => PCPU_ESTRIDE, "per-CPU stride {stride} is not a multiple of 8 bytes";
        /// The per-CPU stride cannot hold the counter area at its offset.
        StrideTooSmall {
            /// The stride given, in bytes.
            stride: usize,
            /// The bytes each CPU needs: area offset plus area length.
            needed: usize,
        } => PCPU_ESTRIDESMALL,
            "per-CPU stride {stride} is smaller than the {needed} bytes each CPU needs";
        /// An address or offset is not 8-byte aligned.
        Misaligned {
            /// The offending address or offset.
            addr: usize,
        } => PCPU_EMISALIGNED, "{addr:#x} is not 8-byte aligned";
        /// The counter area is empty or its length is not a multiple of 8 bytes.
        BadAreaLength {
            /// The length given, in bytes.
            len: usize,
        } => PCPU_EAREA, "counter area length {len} is zero or not a multiple of 8 bytes";
        /// The metadata given to the zone is shorter than [`ZoneLayout::meta_words`](crate::ZoneLayout::meta_words).
        MetaTooSmall {
            /// Words the zone needs (a baseline per slot, a bitmap bit per slot and its summary).
            needed: usize,
            /// Words given.
            has: usize,
        } => PCPU_EMETA, "zone metadata has {has} words but the zone needs {needed}";
        /// The zone needs other per-CPU register values than the zones already carved from the
        /// area: an add to one of its counters would land in another zone's slot.
        AreaMismatch {
            /// The register values of the area's live zones.
            in_force: crate::AreaShape,
            /// The register values this zone needs.
            needed: crate::AreaShape,
        } => PCPU_EAREAMISMATCH,
            "the zone needs per-CPU registers {:#x} + cpu * {:#x} for {} CPUs, but the area in \
             force has {:#x} + cpu * {:#x} for {} CPUs",
            needed.base, needed.stride, needed.ncpus,
            in_force.base, in_force.stride, in_force.ncpus;
        /// The zone's counter area overlaps a live zone of the same area.
        ZoneOverlap {
            /// The counter area's offset in each block.
            offset: usize,
            /// Its length in bytes.
            len: usize,
        } => PCPU_EOVERLAP,
            "counter area at offset {offset:#x}, {len} bytes, overlaps a live zone of the area";
        /// The area already holds its maximum number of zones.
        TooManyZones {
            /// The maximum (`Area::MAX_ZONES`).
            max: usize,
        } => PCPU_EZONES, "the area already holds {max} zones";
        /// The zone's address range does not fit in the address space.
        AddressOverflow => PCPU_EOVERFLOW, "the zone does not fit in the address space";
        /// A CPU index is not below the zone's CPU count.
        CpuOutOfRange {
            /// The index given.
            cpu: usize,
            /// The zone's CPU count.
            ncpus: usize,
        } => PCPU_ECPU, "CPU {cpu} is out of range (the zone has {ncpus} CPUs)";
        /// Every slot of the zone is in use (or no run of the requested length is free).
        ZoneFull {
            /// The zone's capacity, in counters.
            capacity: usize,
        } => PCPU_EFULL,
            "zone full: all {capacity} counter slots are in use, and the zone does not grow \
             (give it a chunk source: Zone::grow_from)";
        /// A static [`ZoneMemory`](crate::ZoneMemory) was handed to a second zone.
        MemoryInUse => PCPU_EINUSE, "this zone memory already backs a zone";
        /// The global zone was already installed.
        AlreadyInstalled => PCPU_EINSTALLED, "the global zone is already installed";
        /// No global zone is installed yet (see [`install`](crate::freebsd::install)).
        NotInstalled => PCPU_ENOTINSTALLED, "no global zone is installed";
        /// The calling thread is already bound to a simulated CPU (returned only by the host
        /// simulation's `Machine::bind`).
        AlreadyBound => PCPU_EOTHER, "this thread is already bound to a simulated CPU";
        /// The zone was asked for more counters than it can hold.
        CapacityTooLarge {
            /// The counters asked for.
            counters: usize,
            /// The most a zone of this kind holds.
            max: usize,
        } => PCPU_EOTHER, "{counters} counters asked for, but a zone holds at most {max}";
        /// i386: CPU `cpu`'s `%fs` segment, through which the add goes, has a limit below 4 GiB,
        /// but the zone grows: its chunks lie anywhere, at offsets that reach the whole address
        /// space (the bring-up check, [`Zone::check_cpu`](crate::Zone::check_cpu)).
        SegmentTooShort {
            /// The CPU checked.
            cpu: usize,
            /// The segment's byte limit (4 GiB - 1 would span the address space).
            limit: usize,
        } => PCPU_ESEGLIMIT,
            "CPU {cpu}'s %fs segment ends at {limit:#x}, but the zone grows: its chunks lie \
             anywhere in the address space, so every CPU's %fs segment must span 4 GiB \
             (limit 0xfffff with 4 KiB granularity)";
        /// A zone was given a second chunk source ([`Zone::grow_from`](crate::Zone::grow_from)):
        /// its chunks must go back to the one they came from.
        SourceAlreadySet => PCPU_ESOURCE,
            "the zone already has a chunk source (its chunks go back to the one they came from)";
        /// A run of adjacent slots (a counter array) longer than the zone can ever hold in one
        /// piece: its first blocks, or one chunk of a zone that grows.
        RunTooLong {
            /// The run asked for.
            len: usize,
            /// The longest the zone can hold.
            max: usize,
        } => PCPU_EFULL,
            "a run of {len} adjacent counters asked for, but the zone holds at most {max} in \
             one piece (a run stays in one chunk)";
        /// The operating system, the allocator or a zone's chunk source refused the memory a zone
        /// needs.
        OutOfMemory {
            /// The bytes asked for.
            bytes: usize,
        } => PCPU_ENOMEM, "out of memory: the {bytes} bytes the zone asked for could not be had";
        /// A zone's chunk source gave a chunk shorter than the zone asked for (a page for a
        /// bigger chunk): the chunk went back to the source and the zone is unchanged. A chunk's
        /// size is known before the zone exists:
        /// [`ZoneLayout::chunk_layout_for`](crate::ZoneLayout::chunk_layout_for).
        ShortChunk {
            /// The bytes asked for.
            asked: usize,
            /// The bytes the source said it gave.
            given: usize,
        } => PCPU_ESHORTCHUNK,
            "the chunk source gave {given} bytes for a chunk of {asked}: it went back, and the \
             zone did not grow (a chunk is ZoneLayout::chunk_layout_for's size)";
        /// A run of slots asked for (a group read) is not inside the zone.
        NotInZone {
            /// The offset of the run's first slot.
            offset: usize,
            /// The number of slots.
            len: usize,
        } => PCPU_EINVAL, "{len} slots from offset {offset:#x} are not all slots of the zone";
        /// An environment variable the crate reads has a value it does not accept.
        BadEnvVar {
            /// The variable's name.
            var: &'static str,
            /// Its value (non-UTF-8 bytes replaced by U+FFFD).
            value: &'static str,
            /// The values accepted, separated by commas.
            accepted: &'static str,
        } => PCPU_EOTHER,
            "environment variable {var}={value:?} is not one of the accepted values: {accepted}";
        /// The rseq add path asked for in code (`rseq::set_path`) cannot run in this process;
        /// the path is left unchosen.
        RseqPathUnavailable {
            /// The path asked for.
            asked: &'static str,
            /// Why it cannot run here.
            reason: &'static str,
        } => PCPU_EOTHER, "the rseq add path {asked} is not available here: {reason}";
        /// The rseq add path asked for in code (`rseq::set_path`) differs from the one the
        /// process already uses: the path is fixed at the first zone (or the first
        /// `rseq::path`), so it must be set before any counter is made.
        RseqPathTooLate {
            /// The path asked for.
            asked: &'static str,
        } => PCPU_EOTHER,
            "the rseq add path {asked} was asked for after the process chose another (at its \
             first zone or rseq::path call); call rseq::set_path before both";
        /// An [`ApproxCounter`](crate::ApproxCounter) batch that is not a power of two from 16
        /// to 2^32.
        BadBatch {
            /// The batch given.
            batch: u64,
        } => PCPU_EINVAL,
            "approximate counter batch {batch} is not a power of two from 16 to 2^32";
        /// A [`LazyCounter`](crate::LazyCounter) threshold above
        /// [`LazyCounter::max_threshold`](crate::LazyCounter::max_threshold).
        BadThreshold {
            /// The threshold given (adds before the move).
            threshold: usize,
            /// The largest threshold the counter can count down from.
            max: usize,
        } => PCPU_EOTHER, "lazy counter threshold {threshold} is above the largest, {max} adds";
        /// [`arch::set_cpu_base`](crate::arch::set_cpu_base): the per-CPU register cannot hold
        /// this base (x86_64: not a canonical address; i386: above 4 GiB).
        BadCpuBase {
            /// The base given.
            base: usize,
        } => PCPU_EOTHER,
            "the per-CPU register cannot hold base {base:#x} (not an address this CPU can use \
             as its per-CPU base)";
        /// i386's `arch::set_cpu_base`: the selector is null or names the LDT.
        BadSelector {
            /// The selector given.
            selector: u16,
        } => PCPU_EOTHER,
            "segment selector {selector:#x} is null or names the LDT, not a GDT entry";
        /// A zone was asked for in a hosted program (Linux, macOS, Windows) without the host
        /// simulation: an ordinary thread has no per-CPU register for the add, so the kernel API
        /// compiles there (kernel code builds and documents on the host) but makes no zone.
        NoCpuRegister => PCPU_EOTHER,
            "no per-CPU register here: a hosted program's threads have none, so it makes no \
             zone (a Linux program counts with `pcpu_counter::rseq`; kernel code runs in its \
             host tests under the `sim` dev-dependency)";
        /// The bring-up check ([`Zone::check_cpu`](crate::Zone::check_cpu)): a CPU is brought up
        /// whose index is not below the zone's CPU count. The zone was made for fewer CPUs than
        /// run (`ncpus` must count every possible CPU, not those known when the zone is made):
        /// this CPU's adds would be counted by no `fetch`.
        CpuNotInZone {
            /// The CPU brought up.
            cpu: usize,
            /// The zone's CPU count.
            ncpus: usize,
        } => PCPU_ENOTINZONE,
            "CPU {cpu} is brought up, but the zone was made for {ncpus} CPUs: ncpus must count \
             every possible CPU, not those known when the zone is made";
        /// The bring-up check: the platform's `current_cpu` is not the CPU being brought up.
        CpuIndexMismatch {
            /// The CPU brought up.
            cpu: usize,
            /// What `Platform::current_cpu` returned on it.
            current: usize,
        } => PCPU_ECPUINDEX,
            "CPU {cpu} is brought up, but Platform::current_cpu() returns {current} on it";
        /// The bring-up check: this CPU's per-CPU register holds 0, so it was never set.
        CpuRegisterUnset {
            /// The CPU brought up.
            cpu: usize,
            /// The register the add goes through ([`arch::REGISTER`](crate::arch::REGISTER)).
            register: &'static str,
        } => PCPU_EREGUNSET,
            "CPU {cpu}'s per-CPU register ({register}) holds 0: it was never set on this CPU";
        /// The bring-up check: this CPU's per-CPU register holds another CPU's block of the zone
        /// (two CPUs' bases swapped, or a wrong CPU index): its adds would count as the other's.
        CpuRegisterForeign {
            /// The CPU brought up.
            cpu: usize,
            /// The CPU whose block the register holds.
            other: usize,
            /// The register the add goes through.
            register: &'static str,
        } => PCPU_EREGFOREIGN,
            "CPU {cpu}'s per-CPU register ({register}) holds CPU {other}'s block of the zone: \
             two CPUs' bases are swapped, or {cpu} is not this CPU's index";
        /// The bring-up check (riscv64): this CPU's block is in the other register than the one
        /// the add reads (`tp` and `gp`; feature `riscv-gp` selects `gp`).
        CpuRegisterWrong {
            /// The CPU brought up.
            cpu: usize,
            /// The register that holds the CPU's block.
            holds_block: &'static str,
            /// The register the add reads.
            add_reads: &'static str,
        } => PCPU_EREGWRONG,
            "CPU {cpu}'s block is in {holds_block}, but this build adds through {add_reads}: \
             build with{} feature riscv-gp",
            if holds_block == "gp" { "" } else { "out" };
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
        } => PCPU_EREGOUTSIDE,
            "CPU {cpu}'s per-CPU register ({register}) holds {found:#x}, no CPU's block of the \
             zone; its block is at {expected:#x} (base + cpu * stride): the zone's base or \
             stride is not the kernel's";
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
        } => PCPU_EUNADDR,
            "{what}: CPU {cpu}'s {} at {addr:#x} is not {space}: no CPU can write there",
            range_name(what);
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
        } => PCPU_EOVERFLOW,
            "{what}: CPU {cpu}'s {}, {len} bytes at {addr:#x} (modulo 2^64), wraps around the \
             end of the address space",
            range_name(what);
        /// `statics::install_section`: a CPU's copy of the per-CPU section overlaps the section itself
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
        } => PCPU_EOVERLAP,
            "statics: CPU {cpu}'s copy at {addr:#x} overlaps the template (the section itself, \
             {len} bytes at {template:#x}): a copy is the template exactly (register 0) or \
             apart from it";
    }

    // The C codes: 0 for success, a negative number for each failure, and the header's line
    // (one sentence: cbindgen copies the first line). A C code without a variant is a check of
    // the C API itself (a NULL pointer, the registry's names); a variant without a code of its
    // own returns `PCPU_EOTHER`. -13 is the host simulation's `PCPU_EBOUND` (`sim::capi`),
    // outside the product's ABI.
    codes {
        /// Success.
        PCPU_OK = 0, c"success";
        /// Zero CPUs.
        PCPU_ENOCPUS = -1, c"a zone needs at least one CPU";
        /// A stride not a multiple of 8.
        PCPU_ESTRIDE = -2, c"per-CPU stride is not a multiple of 8 bytes";
        /// A stride too small for the counter area.
        PCPU_ESTRIDESMALL = -3, c"per-CPU stride is too small for the counter area";
        /// A misaligned address or offset.
        PCPU_EMISALIGNED = -4, c"address or offset is not 8-byte aligned";
        /// An empty counter area or one not a multiple of 8 bytes.
        PCPU_EAREA = -5, c"counter area length is zero or not a multiple of 8 bytes";
        /// Zone metadata too small for the zone.
        PCPU_EMETA = -6, c"zone metadata is too small for the zone";
        /// The zone, or a CPU's statics copy, does not fit in the address space.
        PCPU_EOVERFLOW = -7, c"the zone does not fit in the address space";
        /// A CPU index out of range.
        PCPU_ECPU = -8, c"CPU index out of range";
        /// The zone is full, or holds no free run of adjacent slots that long.
        PCPU_EFULL = -9, c"zone full";
        /// The zone memory already backs a zone.
        PCPU_EINUSE = -10, c"zone memory already in use";
        /// A zone (or simulated machine) is already installed.
        PCPU_EINSTALLED = -11, c"already installed";
        /// No zone is installed yet.
        PCPU_ENOTINSTALLED = -12, c"no zone installed";
        /// An invalid argument: a NULL pointer, unknown `wait` flags, a zero length.
        PCPU_EINVAL = -14, c"invalid argument";
        /// A failure this version of the header has no code for.
        PCPU_EOTHER = -15, c"an error this header has no code for";
        /// The zone needs other per-CPU register values than the zones of the area in force.
        PCPU_EAREAMISMATCH = -16,
            c"the zone needs other per-CPU register values than the area in force";
        /// The zone's counter area overlaps a live zone of the area (or a statics copy the section).
        PCPU_EOVERLAP = -17, c"the zone overlaps a live zone of the area";
        /// The area already holds its maximum number of zones.
        PCPU_EZONES = -18, c"the area holds its maximum number of zones";
        /// A counter registry name is already registered.
        PCPU_EEXIST = -19, c"a counter with this name is registered";
        /// No counter is registered under this name.
        PCPU_ENOENT = -20, c"no counter with this name is registered";
        /// The counter registry holds its maximum number of names (`PCPU_SYSCTL_MAX`).
        PCPU_EREGFULL = -21, c"the counter registry is full";
        /// A bad registry name (empty, too long, not UTF-8 or not led by a letter) or description.
        PCPU_ENAME = -22,
            c"name or description empty, too long or not UTF-8, or a name not led by a letter";
        /// The caller's buffer is too small (`pcpu_sysctl_export`); nothing was read or zeroed.
        PCPU_ENOSPC = -23, c"the buffer is too small";
        /// A registry name whose metric name clashes with a registered one's (`a.b` and `a_b`).
        PCPU_ECLASH = -24,
            c"the name exports as a metric that clashes with a registered name's";
        /// The bring-up check: the CPU's index is not below the zone's CPU count.
        PCPU_ENOTINZONE = -25,
            c"CPU index not below the zone's ncpus: count every possible CPU";
        /// The bring-up check: the platform's current CPU is another.
        PCPU_ECPUINDEX = -26, c"the platform's current CPU is another";
        /// The bring-up check: the CPU's per-CPU register holds 0.
        PCPU_EREGUNSET = -27, c"the per-CPU register holds 0 (never set)";
        /// The bring-up check: the register holds another CPU's block.
        PCPU_EREGFOREIGN = -28,
            c"the per-CPU register holds another CPU's block (bases swapped?)";
        /// The bring-up check (riscv64): the block is in the other register, `tp` vs `gp`.
        PCPU_EREGWRONG = -29, c"the CPU's block is in the other register (riscv64 tp vs gp)";
        /// The bring-up check: the register holds no CPU's block of the zone.
        PCPU_EREGOUTSIDE = -30,
            c"the per-CPU register holds no CPU's block: wrong base or stride";
        /// The zone's chunk hook returned no memory.
        PCPU_ENOMEM = -31, c"the zone's chunk hook gave no memory";
        /// The zone already has chunk hooks.
        PCPU_ESOURCE = -32, c"the zone already has chunk hooks";
        /// The bring-up check (i386): the `%fs` segment does not span 4 GiB, but the zone grows.
        PCPU_ESEGLIMIT = -33, c"the %fs segment does not span 4 GiB, but the zone grows";
        /// A CPU's counter area or statics copy at an address no CPU can write (x86_64: not canonical).
        PCPU_EUNADDR = -34, c"address no CPU can write";
        /// The chunk hook gave less than asked: the chunk went back, the zone did not grow.
        PCPU_ESHORTCHUNK = -35, c"the chunk hook gave less than asked";
    }
}

/// What `what`'s range of each CPU is called in the messages.
fn range_name(what: &str) -> &'static str {
    match what {
        "statics" => "copy",
        _ => "counter area",
    }
}

impl core::error::Error for Error {}
