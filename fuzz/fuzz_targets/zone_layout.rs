//! Zone layouts and metadata: `Zone::from_raw_parts_in` on a real, poisoned buffer, several
//! zones carved from one `Area`, `Zone::with_capacity`, `Machine::with_capacity` and
//! `Zone::new` on a `ZoneMemory`, with arbitrary sizes, offsets, alignments and CPU counts.
//!
//! Asserts, against an oracle written from the documented rules (`ZoneLayout::validate`'s
//! order, then the metadata, then the area's shape, overlap and zone count):
//! - every call returns exactly the expected `Result` (the error and its fields);
//! - a zone that is made reports its layout's capacity, CPU count and per-CPU bases, and
//!   `cpu_base` refuses a CPU out of range;
//! - allocation is first fit: `k` counters from an empty zone get offsets `offset + 8 * i`,
//!   each reads 0 on every CPU although the buffer was poisoned, and the zone is full
//!   exactly at its capacity (`ZoneFull`), with nothing lost when the counters drop;
//! - nothing is written outside the zone's slots and metadata: at the end every word of the
//!   block buffer is 0 if it is a slot that was allocated, else still the poison, and every
//!   metadata word past `meta_words` is untouched.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use pcpu_counter::sim::Machine;
use pcpu_counter::{Area, AreaShape, Error, Zone, ZoneLayout, ZoneMemory};

/// The layout rules, shared with the property tests.
#[path = "../../tests/common/layout_rules.rs"]
mod layout_rules;

mod common;
use common::Size;

const POISON: u64 = 0xa5a5_a5a5_a5a5_a5a5;
/// The block buffer, in words (64 KiB).
const BUF_WORDS: usize = 1 << 13;
/// The most metadata words a case is given.
const META_MAX: usize = 1 << 14;
/// The most bytes a heap zone may ask for in a run (beyond that only cases the oracle says
/// fail before allocating are run: libFuzzer treats a huge malloc as a crash).
const HEAP_MAX: usize = 1 << 20;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Cpus {
    Few(u8),
    Any(Size),
}

impl Cpus {
    fn get(self) -> usize {
        match self {
            Cpus::Few(n) => usize::from(n % 17),
            Cpus::Any(s) => s.get(),
        }
    }
}

/// Where the layout's base lies: in the buffer (a byte offset into it), or anywhere.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Base {
    InBuffer(u16),
    Absolute(Size),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Meta {
    Exact,
    Short(u8),
    Long(u8),
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// A zone on the buffer, carved from the input's area.
    Carve {
        base: Base,
        stride: Size,
        offset: Size,
        len: Size,
        ncpus: Cpus,
        meta: Meta,
    },
    /// Drops live zone `i % live`.
    Drop(u8),
    /// Allocates `n` counters from live zone `i % live`, checks them, drops them.
    Alloc { zone: u8, n: u8 },
    /// `Zone::with_capacity` (or `Machine::with_capacity`) with these sizes.
    Heap {
        ncpus: Cpus,
        counters: Size,
        machine: bool,
    },
    /// `Zone::new` on the static memory, twice: the second must be `MemoryInUse`.
    Static,
}

#[derive(Arbitrary, Debug)]
struct Input {
    ops: Vec<Op>,
}

/// The baselines, then the slot bitmap and its summary levels (a bit per word of the level
/// below, up to a level of one word). Counted, not built: a layout may name 2^56 slots.
fn meta_words(capacity: usize) -> usize {
    let (mut words, mut bits) = (0usize, capacity);
    while bits > 0 {
        let count = bits.div_ceil(64);
        words += count;
        if count == 1 {
            break;
        }
        bits = count;
    }
    capacity.saturating_add(words)
}

/// The bitmap and summary words of a zone of `bits` slots with every slot free, top level
/// first and the leaves last: each level's bits clear, the padding past them in its last word
/// set.
fn free_bitmap(bits: usize) -> Vec<u64> {
    let mut levels: Vec<Vec<u64>> = Vec::new();
    let mut bits = bits;
    while bits > 0 {
        let count = bits.div_ceil(64);
        let mut level = vec![0u64; count];
        if bits % 64 != 0 {
            level[count - 1] = u64::MAX << (bits % 64);
        }
        levels.push(level);
        if count == 1 {
            break;
        }
        bits = count;
    }
    levels.into_iter().rev().flatten().collect()
}

/// A live zone of the input and what the oracle knows of it.
struct Live {
    zone: Zone<'static>,
    layout: ZoneLayout,
    meta: *mut [u64],
}

/// What the final memory check needs of every zone that lived: its layout, its metadata and
/// how many slots were ever allocated (first fit from 0, so slots `0..ever`).
struct Record {
    layout: ZoneLayout,
    meta: *mut [u64],
    ever: usize,
}

static STATIC_MEMORY: ZoneMemory<3, 1> = ZoneMemory::new();

/// `Zone::on_heap`'s sizes for `header` bytes before the counters: `Ok((len, total))`, or the
/// error it must return before allocating.
fn heap_oracle(ncpus: usize, counters: usize, header: usize) -> Result<(usize, usize), Error> {
    layout_rules::heap(ncpus, counters, header).map(|(_, len, total)| (len, total))
}

/// A clear error: its message names the values that broke the rule, as `Error`'s `Display`
/// documents them (sizes in decimal, addresses and offsets in hex).
fn check_message(e: &Error) {
    let text = e.to_string();
    let names = |parts: &[String]| {
        for p in parts {
            assert!(
                text.contains(p.as_str()),
                "{e:?}: {text:?} does not name {p}"
            );
        }
    };
    match *e {
        Error::NoCpus => names(&["CPU".into()]),
        Error::StrideNotMultipleOf8 { stride } => names(&[format!("stride {stride} ")]),
        Error::StrideTooSmall { stride, needed } => {
            names(&[format!("stride {stride} "), format!("{needed} bytes")])
        }
        Error::Misaligned { addr } => names(&[format!("{addr:#x} ")]),
        Error::BadAreaLength { len } => names(&[format!("length {len} ")]),
        Error::MetaTooSmall { needed, has } => {
            names(&[format!("{has} words"), format!("needs {needed}")])
        }
        Error::AreaMismatch { in_force, needed } => names(&[
            format!(
                "{:#x} + cpu * {:#x} for {} CPUs, but",
                needed.base, needed.stride, needed.ncpus
            ),
            format!(
                "{:#x} + cpu * {:#x} for {} CPUs",
                in_force.base, in_force.stride, in_force.ncpus
            ),
        ]),
        Error::ZoneOverlap { offset, len } => names(&[format!("offset {offset:#x}, {len} bytes")]),
        Error::TooManyZones { max } => names(&[format!("{max} zones")]),
        Error::AddressOverflow => names(&["address space".into()]),
        Error::Unaddressable {
            what, cpu, addr, ..
        } => names(&[
            format!("{what}: CPU {cpu}'s "),
            format!(" at {addr:#x} is not "),
        ]),
        Error::WrapsAround {
            what,
            cpu,
            addr,
            len,
        } => names(&[
            format!("{what}: CPU {cpu}'s "),
            format!("{len} bytes at {addr:#x} "),
            "wraps around".into(),
        ]),
        Error::CpuOutOfRange { cpu, ncpus } => {
            names(&[format!("CPU {cpu} "), format!("{ncpus} CPUs")])
        }
        Error::ZoneFull { capacity } => names(&[format!("all {capacity} counter slots")]),
        Error::MemoryInUse => names(&["already backs a zone".into()]),
        _ => panic!("{e:?} is no error of a zone's setup"),
    }
}

fn check_zone(zone: &Zone<'_>, l: &ZoneLayout) {
    assert_eq!(zone.layout(), l);
    assert_eq!(zone.capacity(), l.len / 8);
    assert_eq!(zone.ncpus(), l.ncpus);
    assert_eq!(zone.in_use(), 0);
    for cpu in [0, l.ncpus / 2, l.ncpus - 1] {
        assert_eq!(zone.cpu_base(cpu), Ok(l.base + cpu * l.stride));
    }
    assert_eq!(
        zone.cpu_base(l.ncpus),
        Err(Error::CpuOutOfRange {
            cpu: l.ncpus,
            ncpus: l.ncpus
        })
    );
}

/// Allocates `n` counters (first fit), checks each, and the zone full at its capacity.
fn alloc_and_check(zone: &Zone<'_>, n: usize) -> usize {
    let l = *zone.layout();
    let cap = zone.capacity();
    let mut counters = Vec::new();
    for i in 0..n {
        match zone.alloc() {
            Ok(c) => {
                assert!(i < cap, "alloc {i} succeeded in a zone of {cap}");
                assert_eq!(c.offset(), l.offset + 8 * i, "first fit");
                assert_eq!(c.fetch(), 0);
                for cpu in 0..l.ncpus.min(64) {
                    assert_eq!(c.cpu_slot(cpu), Ok(0), "slot cleared on CPU {cpu}");
                }
                assert_eq!(
                    c.cpu_slot(l.ncpus),
                    Err(Error::CpuOutOfRange {
                        cpu: l.ncpus,
                        ncpus: l.ncpus
                    })
                );
                assert_eq!(c.fetch_and_zero(), 0);
                counters.push(c);
            }
            Err(e) => {
                assert_eq!(i, cap, "alloc {i} failed in a zone of {cap}");
                assert_eq!(e, Error::ZoneFull { capacity: cap });
                check_message(&e);
                break;
            }
        }
        assert_eq!(zone.in_use(), counters.len());
    }
    let ever = counters.len();
    drop(counters);
    assert_eq!(zone.in_use(), 0, "dropping the counters frees every slot");
    ever
}

fn heap_case(ncpus: usize, counters: usize, machine: bool) {
    let expect = heap_oracle(ncpus, counters, if machine { 8 } else { 0 });
    if matches!(expect, Ok((_, total)) if total > HEAP_MAX) {
        return;
    }
    let made = if machine {
        Machine::with_capacity(ncpus, counters).map(|m| {
            let z = m.zone();
            (
                z.capacity(),
                z.ncpus(),
                z.layout().offset,
                z.layout().stride,
            )
        })
    } else {
        Zone::with_capacity(ncpus, counters).map(|z| {
            let few = counters.min(4);
            assert_eq!(alloc_and_check(&z, few), few);
            (
                z.capacity(),
                z.ncpus(),
                z.layout().offset,
                z.layout().stride,
            )
        })
    };
    match (expect, made) {
        (Ok((len, total)), Ok((cap, n, offset, stride))) => {
            assert_eq!((cap, n), (len / 8, ncpus));
            assert!(cap >= counters);
            assert_eq!(offset, if machine { 8 } else { 0 });
            assert_eq!(stride % 128, 0, "no two CPUs share a cache line");
            assert_eq!(stride * ncpus, total);
        }
        (Err(want), Err(got)) => {
            assert_eq!(got, want);
            check_message(&got);
        }
        (want, got) => panic!("with_capacity({ncpus}, {counters}): expected {want:?}, got {got:?}"),
    }
}

fuzz_target!(|input: Input| {
    let buf: &mut [u64] = Box::leak(vec![POISON; BUF_WORDS].into_boxed_slice());
    let buf: *mut [u64] = buf;
    let buf_addr = buf.cast::<u64>() as usize;
    let area: *mut Area = Box::into_raw(Box::new(Area::new()));
    // SAFETY: freed at the end of this input, after every zone carved from it is dropped.
    let area_ref: &'static Area = unsafe { &*area };
    let mut live: Vec<Live> = Vec::new();
    let mut records: Vec<Record> = Vec::new();

    for op in input.ops.iter().take(64) {
        match *op {
            Op::Carve {
                base,
                stride,
                offset,
                len,
                ncpus,
                meta,
            } => {
                let base = match base {
                    Base::InBuffer(b) => buf_addr + usize::from(b),
                    Base::Absolute(s) => s.get(),
                };
                let layout = ZoneLayout {
                    base,
                    stride: stride.get(),
                    offset: offset.get(),
                    len: len.get(),
                    ncpus: ncpus.get(),
                };
                let rules = layout_rules::validate(&layout);
                assert_eq!(layout.validate(), rules, "{layout:x?}");
                let Ok(()) = rules else {
                    // A layout error is found before the memory is looked at.
                    let mut meta = [POISON; 4];
                    // SAFETY: the layout is invalid, so nothing is carved or accessed (the
                    // assertion below stops the input if the zone were made).
                    let got = unsafe { Zone::from_raw_parts_in(area_ref, layout, &mut meta) };
                    assert_eq!(got.err(), rules.err(), "{layout:x?}");
                    check_message(&rules.unwrap_err());
                    assert_eq!(meta, [POISON; 4], "an invalid layout wrote its metadata");
                    continue;
                };
                let needed = meta_words(layout.capacity());
                let words = match meta {
                    Meta::Exact => needed,
                    Meta::Short(k) => needed.saturating_sub(usize::from(k) + 1),
                    Meta::Long(k) => needed + usize::from(k),
                }
                .min(META_MAX);
                let span = (layout.ncpus - 1) * layout.stride + layout.offset + layout.len;
                let in_buffer = base >= buf_addr && base - buf_addr + span <= BUF_WORDS * 8;
                let in_force = area_ref.shape();
                let shape = AreaShape::of(&layout);
                let range = (layout.offset, layout.offset + layout.len);
                let expect = if words < needed {
                    Err(Error::MetaTooSmall { needed, has: words })
                } else if in_force.is_some_and(|s| s != shape) {
                    Err(Error::AreaMismatch {
                        in_force: in_force.unwrap(),
                        needed: shape,
                    })
                } else if live.iter().any(|z| {
                    let r = (z.layout.offset, z.layout.offset + z.layout.len);
                    range.0 < r.1 && r.0 < range.1
                }) {
                    Err(Error::ZoneOverlap {
                        offset: layout.offset,
                        len: layout.len,
                    })
                } else if live.len() == Area::MAX_ZONES {
                    Err(Error::TooManyZones {
                        max: Area::MAX_ZONES,
                    })
                } else {
                    Ok(())
                };
                if expect.is_ok() && !in_buffer {
                    // A valid zone on memory that is not ours: not made (only `validate`).
                    continue;
                }
                let meta: *mut [u64] = Box::into_raw(vec![POISON; words].into_boxed_slice());
                // SAFETY: the blocks are in the buffer (checked above, or the call fails
                // before carving), which outlives every zone; the metadata is freed only
                // after the zone is dropped, and used by nothing else meanwhile.
                let got = unsafe { Zone::from_raw_parts_in(area_ref, layout, &mut *meta) };
                match (expect, got) {
                    (Ok(()), Ok(zone)) => {
                        check_zone(&zone, &layout);
                        assert_eq!(area_ref.shape(), Some(shape));
                        assert_eq!(area_ref.zones(), live.len() + 1);
                        live.push(Live { zone, layout, meta });
                    }
                    (Err(want), Err(got)) => {
                        assert_eq!(got, want, "{layout:x?}");
                        check_message(&got);
                        assert_eq!(
                            area_ref.shape(),
                            in_force,
                            "a refused zone changed the area"
                        );
                        assert_eq!(area_ref.zones(), live.len());
                        // SAFETY: the refused call gave the borrow back.
                        let m = unsafe { &*meta };
                        assert!(
                            m.iter().all(|&w| w == POISON),
                            "a refused zone wrote its metadata"
                        );
                        // SAFETY: allocated above, no longer borrowed.
                        drop(unsafe { Box::from_raw(meta) });
                    }
                    (want, got) => panic!(
                        "{layout:x?} meta {words}: expected {want:?}, got {:?}",
                        got.err()
                    ),
                }
            }
            Op::Drop(i) => {
                if live.is_empty() {
                    continue;
                }
                let z = live.remove(usize::from(i) % live.len());
                let was = area_ref.zones();
                drop(z.zone);
                assert_eq!(area_ref.zones(), was - 1);
                if was == 1 {
                    assert_eq!(
                        area_ref.shape(),
                        None,
                        "the last zone's drop forgets the shape"
                    );
                }
                records.push(Record {
                    layout: z.layout,
                    meta: z.meta,
                    ever: 0,
                });
            }
            Op::Alloc { zone, n } => {
                if live.is_empty() {
                    continue;
                }
                let i = usize::from(zone) % live.len();
                let ever = alloc_and_check(&live[i].zone, usize::from(n));
                records.push(Record {
                    layout: live[i].layout,
                    meta: live[i].meta,
                    ever,
                });
            }
            Op::Heap {
                ncpus,
                counters,
                machine,
            } => heap_case(ncpus.get(), counters.get(), machine),
            Op::Static => {
                let zone = Zone::new(&STATIC_MEMORY).expect("the static memory is free");
                assert_eq!((zone.ncpus(), zone.capacity()), (3, 64));
                let again = Zone::new(&STATIC_MEMORY).err();
                assert_eq!(again, Some(Error::MemoryInUse));
                check_message(&again.unwrap());
                assert_eq!(alloc_and_check(&zone, 65), 64);
            }
        }
    }
    for z in live.drain(..) {
        drop(z.zone);
        records.push(Record {
            layout: z.layout,
            meta: z.meta,
            ever: 0,
        });
    }
    assert_eq!((area_ref.zones(), area_ref.shape()), (0, None));

    // Every word of the buffer: a slot ever allocated is 0, anything else still the poison.
    let mut cleared = vec![false; BUF_WORDS];
    for r in &records {
        let l = r.layout;
        for cpu in 0..l.ncpus {
            for slot in 0..r.ever {
                let addr = l.base + cpu * l.stride + l.offset + 8 * slot;
                cleared[(addr - buf_addr) / 8] = true;
            }
        }
    }
    // SAFETY: every zone is dropped: the buffer is ours alone again.
    let words = unsafe { &*buf };
    for (i, (&w, &c)) in words.iter().zip(&cleared).enumerate() {
        let want = if c { 0 } else { POISON };
        assert_eq!(
            w, want,
            "buffer word {i}: a write outside the allocated slots"
        );
    }
    // Each metadata: the baselines of slots ever allocated 0 and the others untouched, the
    // bitmap and its summary all free, the words past `meta_words` untouched.
    let mut metas: Vec<(*mut [u64], usize, usize)> = Vec::new();
    for r in &records {
        match metas.iter_mut().find(|m| std::ptr::addr_eq(m.0, r.meta)) {
            Some(m) => m.2 = m.2.max(r.ever),
            None => metas.push((r.meta, r.layout.capacity(), r.ever)),
        }
    }
    for (meta, cap, ever) in metas {
        // SAFETY: the zone that used it is dropped.
        let m = unsafe { &*meta };
        let needed = meta_words(cap);
        assert!(
            m[..ever].iter().all(|&w| w == 0),
            "baselines of allocated slots"
        );
        assert!(
            m[ever..cap].iter().all(|&w| w == POISON),
            "baseline of a slot never allocated"
        );
        assert_eq!(
            m[cap..needed],
            free_bitmap(cap)[..],
            "the bitmap and its summary are all free"
        );
        assert!(
            m[needed..].iter().all(|&w| w == POISON),
            "metadata past meta_words written"
        );
        // SAFETY: allocated with `Box::into_raw` in `Carve`, no zone uses it any more.
        drop(unsafe { Box::from_raw(meta) });
    }
    // SAFETY: no zone borrows the area or the buffer any more.
    unsafe {
        drop(Box::from_raw(area));
        drop(Box::from_raw(buf));
    }
});
