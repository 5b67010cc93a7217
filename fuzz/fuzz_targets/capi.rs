//! The C ABI's setup, counter and registry calls (`src/capi/`, `include/pcpu_counter.h`),
//! called as C calls them, with arbitrary layouts, metadata sizes, wait flags, CPU numbers,
//! handles, names, descriptions and lengths, and NULL wherever the API allows it.
//!
//! The C ABI's state is the process's: the simulated machine (4 CPUs, 256 counters), whose zone
//! is the global zone, is made once, in `init`, where the calls that need them are first checked to
//! fail with `PCPU_ENOTINSTALLED`. Each input leaves the registry empty and frees its counters.
//!
//! Asserts, against a model: every return code is the one the documented rules give, in
//! their order (NULL first, then the handle, the name, the description, the table);
//! `pcpu_zone_init` never writes metadata past `meta_words`; allocation is first fit (the
//! exact handle) and all-or-nothing for arrays; every fetch, zero, array copy and every value
//! a walk reports is the model's, and the walk lists exactly the registered names, in table
//! order, with the very pointers they were registered with, and stops at the callback's
//! first nonzero return, which it returns.
#![no_main]

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr::{null, null_mut};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use pcpu_counter::capi::*;
use pcpu_counter::sim::capi::*;
use pcpu_counter::Protected;

mod common;
use common::{Size, Slot};
// docs/c.md's table of codes.
#[path = "../../tests/common/c_codes.rs"]
mod c_codes;
// The zone layout's documented rules, apart from the product (as the `zone_layout` target).
#[path = "../../tests/common/layout_rules.rs"]
mod layout_rules;

const NCPUS: usize = 4;
const CAPACITY: usize = 256;
/// The machine's zone starts its slots at offset 8: handle `8 + 8 * i` is slot `i`.
const HEADER: usize = 8;
const POISON: u64 = 0x5a5a_5a5a_5a5a_5a5a;

/// A C string argument: NULL, a name from a small pool (so that names repeat), arbitrary
/// bytes (cut at their first NUL, as C reads them), or `len` copies of one byte.
#[derive(Arbitrary, Debug, Clone)]
enum Text {
    Null,
    Pool(u8),
    Bytes(Vec<u8>),
    Repeat(u8, u16),
}

const POOL: [&str; 10] = [
    "rx",
    "tx",
    "net.inet.tcp.drops",
    "é",
    "a",
    "b",
    "errs",
    "x.y",
    "x_y",
    "rx_total",
];

impl Text {
    /// The bytes C sees (without the NUL), or None for NULL.
    fn bytes(&self) -> Option<Vec<u8>> {
        match self {
            Text::Null => None,
            Text::Pool(i) => Some(POOL[usize::from(*i) % POOL.len()].as_bytes().to_vec()),
            Text::Bytes(b) => Some(b.iter().copied().take_while(|&c| c != 0).collect()),
            Text::Repeat(c, n) => Some(vec![(*c).max(1); usize::from(*n) % 320]),
        }
    }
}

/// A counter handle: one the input allocated, an element of one of its arrays, NULL, or any
/// value (which the registry calls must refuse unless it is a slot of the zone).
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Handle {
    Live(u8),
    Element(u8, u8),
    Null,
    Raw(u16),
    Any(usize),
}

#[derive(Arbitrary, Debug)]
enum Op {
    ZoneInit {
        base: Size,
        stride: Size,
        offset: Size,
        len: Size,
        ncpus: Size,
        meta_words: u16,
        null_layout: bool,
        null_meta: bool,
    },
    MachineNew(u16, u16),
    CpuBase(u8, bool),
    Alloc(i32),
    ArrayAlloc {
        n: u16,
        wait: i32,
        null: bool,
    },
    Free(u8),
    ArrayFree(u8),
    Bind(u8),
    Unbind,
    Add(u8, i64),
    ArrayAdd(u8, u8, i64),
    Protected(u8, i64),
    Fetch(u8),
    Zero(u8),
    FetchAndZero(u8),
    ArrayZero(u8),
    ArrayCopy(u8),
    Register {
        name: Text,
        descr: Text,
        handle: Handle,
    },
    RegisterArray {
        name: Text,
        descr: Text,
        array: u8,
        skip: u8,
        n: u8,
        mix: Option<(u8, Handle)>,
        null: bool,
    },
    Remove(Text),
    ZeroName(Text),
    Walk {
        stop_at: u8,
        null: bool,
    },
    Strerror(i32),
    /// Registers `fill.<i>` names on a counter until the table is full, then one more (which
    /// must be `PCPU_EREGFULL`, even for a name already taken).
    Fill(Handle, bool),
}

#[derive(Arbitrary, Debug)]
struct Input {
    ops: Vec<Op>,
}

/// A registered name: its C strings (kept alive here until removed) and what it counts.
struct Entry {
    name: Vec<u8>,
    descr: Vec<u8>,
    name_ptr: *const c_char,
    descr_ptr: *const c_char,
    first: usize,
    n: usize,
    array: bool,
}

struct Model {
    slots: Vec<Slot>,
    used: Vec<bool>,
    /// Handles (offsets) of single counters.
    live: Vec<usize>,
    /// First offset and length of arrays.
    arrays: Vec<(usize, usize)>,
    /// The registry's table.
    table: Vec<Option<Entry>>,
    /// The strings handed to the library, kept until the input ends.
    strings: Vec<Box<[u8]>>,
    bound: Option<usize>,
}

fn slot_index(off: usize) -> usize {
    (off - HEADER) / 8
}

impl Model {
    fn first_fit(&self, n: usize) -> Option<usize> {
        (0..=CAPACITY.checked_sub(n)?).find(|&s| self.used[s..s + n].iter().all(|u| !u))
    }
    fn alloc(&mut self, first: usize, n: usize) {
        for i in first..first + n {
            assert!(!self.used[i]);
            self.used[i] = true;
            self.slots[i] = Slot::new(NCPUS);
        }
    }
    fn free(&mut self, off: usize, n: usize) {
        for i in slot_index(off)..slot_index(off) + n {
            assert!(self.used[i]);
            self.used[i] = false;
        }
    }
    fn slot(&mut self, off: usize) -> &mut Slot {
        &mut self.slots[slot_index(off)]
    }
    /// A C string for `t`, kept alive by the model: the pointer and the bytes before its NUL.
    fn c_string(&mut self, t: &Text) -> (*const c_char, Option<Vec<u8>>) {
        let Some(bytes) = t.bytes() else {
            return (null(), None);
        };
        let mut owned = bytes.clone();
        owned.push(0);
        let owned = owned.into_boxed_slice();
        let ptr = owned.as_ptr().cast();
        self.strings.push(owned);
        (ptr, Some(bytes))
    }
    fn handle(&self, h: Handle) -> usize {
        match h {
            Handle::Live(i) if !self.live.is_empty() => self.live[usize::from(i) % self.live.len()],
            Handle::Element(a, e) if !self.arrays.is_empty() => {
                let (first, n) = self.arrays[usize::from(a) % self.arrays.len()];
                first + 8 * (usize::from(e) % n)
            }
            Handle::Live(_) | Handle::Element(..) | Handle::Null => 0,
            Handle::Raw(v) => usize::from(v),
            Handle::Any(v) => v,
        }
    }
    fn count(&self) -> usize {
        self.table.iter().flatten().count()
    }
}

/// The code a handle gets from the registry calls: `PCPU_EINVAL` unless it is a slot of the
/// zone (allocated or not).
fn slot_ok(off: usize) -> Result<usize, c_int> {
    if off != 0 && off.is_multiple_of(8) && (HEADER..HEADER + 8 * CAPACITY).contains(&off) {
        Ok(off)
    } else {
        Err(PCPU_EINVAL)
    }
}

/// A name's code: NULL `PCPU_EINVAL`; empty, over 63 bytes or not UTF-8 `PCPU_ENAME`.
fn name_ok(b: &Option<Vec<u8>>) -> Result<(), c_int> {
    match b {
        None => Err(PCPU_EINVAL),
        Some(b) if b.is_empty() || b.len() > PCPU_SYSCTL_NAME_MAX => Err(PCPU_ENAME),
        Some(b) => std::str::from_utf8(b).map(drop).map_err(|_| PCPU_ENAME),
    }
}

/// A name's code for registering it: as [`name_ok`], and `PCPU_ENAME` unless it starts
/// with an ASCII letter.
fn register_name_ok(b: &Option<Vec<u8>>) -> Result<(), c_int> {
    name_ok(b)?;
    match b.as_ref().and_then(|b| b.first()) {
        Some(c) if c.is_ascii_alphabetic() => Ok(()),
        _ => Err(PCPU_ENAME),
    }
}

/// Whether two registrable names clash as metric names: each character outside
/// `[A-Za-z0-9_]` read as `_`, they are equal, or one is the other with `_total` or
/// `_created` after it.
fn names_clash(a: &[u8], b: &[u8]) -> bool {
    let metric = |n: &[u8]| -> String {
        let n = std::str::from_utf8(n).expect("registered names are UTF-8");
        n.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let (a, b) = (metric(a), metric(b));
    ["", "_total", "_created"]
        .iter()
        .any(|s| a == format!("{b}{s}") || b == format!("{a}{s}"))
}

/// A description's code: NULL is ""; over 255 bytes or not UTF-8 `PCPU_ENAME`.
fn descr_ok(b: &Option<Vec<u8>>) -> Result<(), c_int> {
    match b {
        None => Ok(()),
        Some(b) if b.len() > PCPU_SYSCTL_DESCR_MAX => Err(PCPU_ENAME),
        Some(b) => std::str::from_utf8(b).map(drop).map_err(|_| PCPU_ENAME),
    }
}

fn validate_code(l: &pcpu_zone_layout) -> Result<(), c_int> {
    let layout = pcpu_counter::ZoneLayout {
        base: l.base,
        stride: l.stride,
        offset: l.offset,
        len: l.len,
        ncpus: l.ncpus,
    };
    // docs/c.md's codes for the rules' errors.
    layout_rules::validate(&layout).map_err(|e| c_codes::code_of(&e))
}

/// One callback of a walk: the name (pointer and text), the description (the same) and the
/// values.
type WalkCall = (*const c_char, Vec<u8>, *const c_char, Vec<u8>, Vec<u64>);

/// What a walk saw.
struct Walked {
    calls: Vec<WalkCall>,
    stop_at: usize,
}

unsafe extern "C" fn collect(
    name: *const c_char,
    descr: *const c_char,
    values: *const u64,
    n: usize,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: `arg` is the `Walked` the walk was started with; the strings and values are
    // valid during the call (the walk's contract).
    unsafe {
        let w = &mut *arg.cast::<Walked>();
        let text = |p| CStr::from_ptr(p).to_bytes().to_vec();
        let values = std::slice::from_raw_parts(values, n).to_vec();
        w.calls.push((name, text(name), descr, text(descr), values));
        if w.calls.len() == w.stop_at + 1 {
            1000 + w.stop_at as c_int
        } else {
            0
        }
    }
}

fuzz_target!(
    init: {
        // Before any zone: the calls that need one say so.
        assert_eq!(counter_u64_alloc(M_NOWAIT), null_mut());
        assert_eq!((pcpu_zone_capacity(), pcpu_zone_in_use(), pcpu_zone_ncpus()), (0, 0, 0));
        let mut base = 0usize;
        // SAFETY: valid pointers, or NULL where allowed.
        unsafe {
            assert_eq!(pcpu_zone_cpu_base(0, &mut base), PCPU_ENOTINSTALLED);
            assert_eq!(pcpu_zone_cpu_base(0, null_mut()), PCPU_EINVAL);
            assert_eq!(pcpu_sysctl_add_counter(c"a".as_ptr(), null(), 8 as counter_u64_t), PCPU_ENOTINSTALLED);
            let mut a = [null_mut(); 2];
            assert_eq!(counter_u64_array_alloc(a.as_mut_ptr(), 2, M_NOWAIT), PCPU_ENOTINSTALLED);
        }
        assert_eq!(pcpu_sim_bind(0), PCPU_ENOTINSTALLED);
        assert_eq!(pcpu_sim_machine_new(NCPUS, CAPACITY), PCPU_OK);
        assert_eq!(pcpu_zone_capacity(), CAPACITY);
        // The machine's zone is the global zone: every later init is EINSTALLED.
        let (mut blocks, mut meta) = ([0u64; 2 * 16], [0u64; 32]);
        let layout = pcpu_zone_layout {
            base: blocks.as_mut_ptr() as usize,
            stride: 128,
            offset: 0,
            len: 128,
            ncpus: 2,
        };
        // SAFETY: the call is refused (a zone is installed) before the memory is used.
        let rc = unsafe { pcpu_zone_init(&layout, meta.as_mut_ptr(), meta.len()) };
        assert_eq!(rc, PCPU_EINSTALLED);
        // The C ABI allocates from the simulated machine.
        assert_eq!(pcpu_zone_capacity(), CAPACITY);
    },
    |input: Input| {
        let mut m = Model {
            slots: vec![Slot::new(NCPUS); CAPACITY],
            used: vec![false; CAPACITY],
            live: Vec::new(),
            arrays: Vec::new(),
            table: (0..PCPU_SYSCTL_MAX).map(|_| None).collect(),
            strings: Vec::new(),
            bound: None,
        };
        for op in input.ops.iter().take(200) {
            step(&mut m, op);
            assert_eq!(pcpu_zone_in_use(), m.used.iter().filter(|&&u| u).count());
        }
        // Leave the process as it was: no name, no counter, no CPU held.
        for e in m.table.iter().flatten() {
            // SAFETY: a NUL-terminated name the model keeps alive.
            assert_eq!(unsafe { pcpu_sysctl_remove(e.name_ptr) }, PCPU_OK);
        }
        let mut walked = Walked { calls: Vec::new(), stop_at: usize::MAX };
        // SAFETY: `collect` takes a `Walked`.
        assert_eq!(unsafe { pcpu_sysctl_walk(Some(collect), (&raw mut walked).cast()) }, 0);
        assert!(walked.calls.is_empty(), "the registry is empty");
        pcpu_sim_unbind();
        // SAFETY: live handles, each freed once.
        unsafe {
            for &c in &m.live {
                counter_u64_free(c as counter_u64_t);
            }
            for &(first, n) in &m.arrays {
                let mut a: Vec<counter_u64_t> = (0..n).map(|i| (first + 8 * i) as counter_u64_t).collect();
                counter_u64_array_free(a.as_mut_ptr(), n);
            }
        }
        assert_eq!(pcpu_zone_in_use(), 0);
    }
);

fn step(m: &mut Model, op: &Op) {
    match op {
        &Op::ZoneInit {
            base,
            stride,
            offset,
            len,
            ncpus,
            meta_words,
            null_layout,
            null_meta,
        } => {
            let layout = pcpu_zone_layout {
                base: base.get(),
                stride: stride.get(),
                offset: offset.get(),
                len: len.get(),
                ncpus: ncpus.get(),
            };
            let words = usize::from(meta_words) % 4096;
            let mut meta = vec![POISON; words + 1];
            let capacity = layout.len / 8;
            let needed = capacity + bitmap_words(capacity);
            let expect = if null_layout || null_meta {
                PCPU_EINVAL
            } else if let Err(e) = validate_code(&layout) {
                e
            } else if words < needed {
                PCPU_EMETA
            } else if Protected::enter().holds_protection() && layout.ncpus > PCPU_NEST_CPUS {
                PCPU_ECPU
            } else {
                PCPU_EINSTALLED
            };
            let lp: *const pcpu_zone_layout = if null_layout { null() } else { &layout };
            let mp = if null_meta {
                null_mut()
            } else {
                meta.as_mut_ptr()
            };
            // SAFETY: the global zone is installed (init), so no call succeeds and the layout's
            // memory is never used; the metadata is `words` real words.
            let rc = unsafe { pcpu_zone_init(lp, mp, words) };
            assert_eq!(rc, expect, "{layout:x?}, {words} words");
            let untouched = if expect == PCPU_EINSTALLED { needed } else { 0 };
            assert!(
                meta[untouched..].iter().all(|&w| w == POISON),
                "metadata written past what the zone needs"
            );
        }
        &Op::MachineNew(ncpus, counters) => {
            let (ncpus, counters) = (usize::from(ncpus % 8), usize::from(counters % 512));
            let want = if ncpus == NCPUS && counters <= CAPACITY {
                PCPU_OK
            } else {
                PCPU_EINSTALLED
            };
            assert_eq!(pcpu_sim_machine_new(ncpus, counters), want);
        }
        &Op::CpuBase(cpu, null) => {
            let cpu = usize::from(cpu % 8);
            let mut base = 0usize;
            let p = if null { null_mut() } else { &raw mut base };
            // SAFETY: NULL or a valid `usize`.
            let rc = unsafe { pcpu_zone_cpu_base(cpu, p) };
            let want = if null {
                PCPU_EINVAL
            } else if cpu >= NCPUS {
                PCPU_ECPU
            } else {
                PCPU_OK
            };
            assert_eq!(rc, want);
            if rc == PCPU_OK && cpu > 0 {
                let mut b0 = 0usize;
                // SAFETY: a valid `usize`.
                assert_eq!(unsafe { pcpu_zone_cpu_base(0, &mut b0) }, PCPU_OK);
                assert!(
                    base > b0
                        && (base - b0).is_multiple_of(cpu)
                        && ((base - b0) / cpu).is_multiple_of(128)
                );
            }
        }
        &Op::Alloc(wait) => {
            let known = matches!(wait & !M_ZERO, M_NOWAIT | M_WAITOK);
            let want = m.first_fit(1);
            if wait & !M_ZERO == M_WAITOK && want.is_none() {
                return; // M_WAITOK waits for a free slot: for ever here.
            }
            let c = counter_u64_alloc(wait) as usize;
            match (known, want) {
                (true, Some(first)) => {
                    assert_eq!(c, HEADER + 8 * first, "first fit");
                    m.alloc(first, 1);
                    m.live.push(c);
                    // SAFETY: a live handle.
                    assert_eq!(unsafe { counter_u64_fetch(c as counter_u64_t) }, 0);
                }
                _ => assert_eq!(c, 0, "alloc({wait:#x}) with {want:?} free"),
            }
        }
        &Op::ArrayAlloc { n, wait, null } => {
            let n = usize::from(n % 300);
            let known = matches!(wait & !M_ZERO, M_NOWAIT | M_WAITOK);
            let want = m.first_fit(n.max(1));
            let expect = if !known || null || n == 0 {
                Err(PCPU_EINVAL)
            } else if n >= CAPACITY {
                Err(PCPU_EFULL)
            } else if let Some(first) = want {
                Ok(first)
            } else if wait & !M_ZERO == M_WAITOK {
                return; // Waits for a run that only a free could make.
            } else {
                Err(PCPU_EFULL)
            };
            let mut a = vec![null_mut::<CounterSlot>(); n];
            let p = if null { null_mut() } else { a.as_mut_ptr() };
            // SAFETY: NULL or valid for `n` handles.
            let rc = unsafe { counter_u64_array_alloc(p, n, wait) };
            match expect {
                Ok(first) => {
                    assert_eq!(rc, PCPU_OK);
                    for (i, &c) in a.iter().enumerate() {
                        assert_eq!(c as usize, HEADER + 8 * (first + i), "element {i}");
                    }
                    m.alloc(first, n);
                    m.arrays.push((HEADER + 8 * first, n));
                    let mut out = vec![1u64; n];
                    // SAFETY: `n` live handles and `n` values.
                    unsafe { counter_u64_array_copy(a.as_ptr(), out.as_mut_ptr(), n) };
                    assert!(out.iter().all(|&v| v == 0));
                }
                Err(e) => {
                    assert_eq!(rc, e, "array_alloc({n}, {wait:#x}, null {null})");
                    assert!(
                        a.iter().all(|c| c.is_null()),
                        "a failed array alloc left a handle"
                    );
                }
            }
        }
        &Op::Free(i) => {
            if !m.live.is_empty() {
                let c = m.live.swap_remove(usize::from(i) % m.live.len());
                m.free(c, 1);
                // SAFETY: a live handle, freed once; NULL is fine.
                unsafe {
                    counter_u64_free(c as counter_u64_t);
                    counter_u64_free(null_mut());
                }
            }
        }
        &Op::ArrayFree(i) => {
            if !m.arrays.is_empty() {
                let (first, n) = m.arrays.swap_remove(usize::from(i) % m.arrays.len());
                m.free(first, n);
                let mut a: Vec<counter_u64_t> =
                    (0..n).map(|i| (first + 8 * i) as counter_u64_t).collect();
                a.push(null_mut());
                // SAFETY: live handles and a NULL.
                unsafe { counter_u64_array_free(a.as_mut_ptr(), n + 1) };
            }
        }
        &Op::Bind(cpu) => {
            let cpu = usize::from(cpu % 6);
            let want = if cpu >= NCPUS {
                PCPU_ECPU
            } else if m.bound.is_some() {
                PCPU_EBOUND
            } else {
                PCPU_OK
            };
            assert_eq!(pcpu_sim_bind(cpu), want);
            if want == PCPU_OK {
                m.bound = Some(cpu);
            }
        }
        Op::Unbind => {
            pcpu_sim_unbind();
            m.bound = None;
        }
        &Op::Add(i, v) => {
            let (Some(cpu), false) = (m.bound, m.live.is_empty()) else {
                return;
            };
            let c = m.live[usize::from(i) % m.live.len()];
            // SAFETY: a live handle, on a bound CPU.
            unsafe { pcpu_counter_add(c as counter_u64_t, v) };
            let s = m.slot(c);
            s.cpu[cpu] = s.cpu[cpu].wrapping_add(v as u64);
            let want = s.fetch();
            // SAFETY: a live handle.
            assert_eq!(unsafe { counter_u64_fetch(c as counter_u64_t) }, want);
        }
        &Op::ArrayAdd(i, e, v) => {
            let (Some(cpu), false) = (m.bound, m.arrays.is_empty()) else {
                return;
            };
            let (first, n) = m.arrays[usize::from(i) % m.arrays.len()];
            let c = first + 8 * (usize::from(e) % n);
            // SAFETY: a live handle, on a bound CPU.
            unsafe { pcpu_counter_add(c as counter_u64_t, v) };
            let s = m.slot(c);
            s.cpu[cpu] = s.cpu[cpu].wrapping_add(v as u64);
        }
        &Op::Protected(i, v) => {
            let (Some(cpu), false) = (m.bound, m.live.is_empty()) else {
                return;
            };
            let c = m.live[usize::from(i) % m.live.len()];
            // SAFETY: a live handle, on a bound CPU, inside counter_enter/counter_exit.
            unsafe {
                counter_enter();
                pcpu_counter_add_protected(c as counter_u64_t, v);
                let state = pcpu_counter_enter_state();
                pcpu_counter_add_protected(c as counter_u64_t, v);
                pcpu_counter_exit_state(state);
                counter_exit();
            }
            let s = m.slot(c);
            s.cpu[cpu] = s.cpu[cpu].wrapping_add((v as u64).wrapping_mul(2));
        }
        &Op::Fetch(i) => {
            if !m.live.is_empty() {
                let c = m.live[usize::from(i) % m.live.len()];
                // SAFETY: a live handle.
                let got = unsafe { counter_u64_fetch(c as counter_u64_t) };
                assert_eq!(got, m.slot(c).fetch());
            }
        }
        &Op::Zero(i) => {
            if !m.live.is_empty() {
                let c = m.live[usize::from(i) % m.live.len()];
                // SAFETY: a live handle.
                unsafe { counter_u64_zero(c as counter_u64_t) };
                m.slot(c).fetch_and_zero();
                // SAFETY: a live handle.
                assert_eq!(unsafe { counter_u64_fetch(c as counter_u64_t) }, 0);
            }
        }
        &Op::FetchAndZero(i) => {
            if !m.live.is_empty() {
                let c = m.live[usize::from(i) % m.live.len()];
                let want = m.slot(c).fetch_and_zero();
                // SAFETY: a live handle.
                let got = unsafe { pcpu_counter_fetch_and_zero(c as counter_u64_t) };
                assert_eq!(got, want);
            }
        }
        &Op::ArrayZero(i) | &Op::ArrayCopy(i) => {
            if m.arrays.is_empty() {
                return;
            }
            let (first, n) = m.arrays[usize::from(i) % m.arrays.len()];
            let a: Vec<counter_u64_t> = (0..n).map(|i| (first + 8 * i) as counter_u64_t).collect();
            if matches!(op, Op::ArrayZero(_)) {
                // SAFETY: `n` live handles.
                unsafe { counter_u64_array_zero(a.as_ptr(), n) };
                (0..n).for_each(|i| {
                    m.slot(first + 8 * i).fetch_and_zero();
                });
            }
            let mut out = vec![POISON; n + 1];
            // SAFETY: `n` live handles, `n + 1` values.
            unsafe { counter_u64_array_copy(a.as_ptr(), out.as_mut_ptr(), n) };
            let want: Vec<u64> = (0..n).map(|i| m.slot(first + 8 * i).fetch()).collect();
            assert_eq!(out[..n], want[..]);
            assert_eq!(out[n], POISON, "array copy wrote past n");
        }
        Op::Register {
            name,
            descr,
            handle,
        } => {
            let c = m.handle(*handle);
            let (np, nb) = m.c_string(name);
            let (dp, db) = m.c_string(descr);
            let expect = slot_ok(c)
                .and_then(|_| register_name_ok(&nb))
                .and_then(|()| descr_ok(&db));
            register(m, expect, np, nb, dp, db, c, 1, false, || {
                // SAFETY: NUL-terminated strings the model keeps until they are removed.
                unsafe { pcpu_sysctl_add_counter(np, dp, c as counter_u64_t) }
            });
        }
        Op::RegisterArray {
            name,
            descr,
            array,
            skip,
            n,
            mix,
            null: null_a,
        } => {
            let Some(&(first, len)) = m.arrays.get(usize::from(*array) % m.arrays.len().max(1))
            else {
                return;
            };
            let skip = usize::from(*skip) % len;
            let mut a: Vec<usize> = (skip..len).map(|i| first + 8 * i).collect();
            let n = usize::from(*n) % (a.len() + 2);
            a.resize(n.max(a.len()), 0);
            if let Some((at, h)) = mix {
                if !a.is_empty() {
                    let at = usize::from(*at) % a.len();
                    a[at] = m.handle(*h);
                }
            }
            let a: Vec<counter_u64_t> = a.into_iter().map(|c| c as counter_u64_t).collect();
            let (np, nb) = m.c_string(name);
            let (dp, db) = m.c_string(descr);
            let handles = || -> Result<usize, c_int> {
                if *null_a || n == 0 || n > PCPU_SYSCTL_ARRAY_MAX {
                    return Err(PCPU_EINVAL);
                }
                let first = slot_ok(a[0] as usize)?;
                for (i, &c) in a[..n].iter().enumerate() {
                    if slot_ok(c as usize)? != first + 8 * i {
                        return Err(PCPU_EINVAL);
                    }
                }
                Ok(first)
            };
            let got_first = handles();
            let expect = got_first
                .and_then(|_| register_name_ok(&nb))
                .and_then(|()| descr_ok(&db));
            let ap = if *null_a { null() } else { a.as_ptr() };
            register(
                m,
                expect,
                np,
                nb,
                dp,
                db,
                got_first.unwrap_or(0),
                n,
                true,
                || {
                    // SAFETY: NULL or `n` handles; the strings as for a counter.
                    unsafe { pcpu_sysctl_add_counter_array(np, dp, ap, n) }
                },
            );
        }
        Op::Remove(name) | Op::ZeroName(name) => {
            let (np, nb) = m.c_string(name);
            let at = nb.as_ref().and_then(|b| {
                m.table
                    .iter()
                    .position(|e| e.as_ref().is_some_and(|e| &e.name == b))
            });
            let expect = name_ok(&nb).and_then(|()| at.ok_or(PCPU_ENOENT));
            if let Op::Remove(_) = op {
                // SAFETY: NULL or a NUL-terminated string.
                let rc = unsafe { pcpu_sysctl_remove(np) };
                assert_eq!(rc, expect.map_or_else(|e| e, |_| PCPU_OK), "remove {nb:?}");
                if let Ok(at) = expect {
                    m.table[at] = None;
                }
            } else {
                // SAFETY: NULL or a NUL-terminated string.
                let rc = unsafe { pcpu_sysctl_zero(np) };
                assert_eq!(rc, expect.map_or_else(|e| e, |_| PCPU_OK), "zero {nb:?}");
                if let Ok(at) = expect {
                    let (first, n) = m.table[at].as_ref().map(|e| (e.first, e.n)).unwrap();
                    (0..n).for_each(|i| {
                        m.slot(first + 8 * i).fetch_and_zero();
                    });
                }
            }
        }
        &Op::Walk { stop_at, null } => {
            let mut walked = Walked {
                calls: Vec::new(),
                stop_at: usize::from(stop_at % 70),
            };
            let cb: pcpu_sysctl_walk_fn = if null { None } else { Some(collect) };
            // SAFETY: `collect` takes a `Walked`.
            let rc = unsafe { pcpu_sysctl_walk(cb, (&raw mut walked).cast()) };
            if null {
                assert_eq!(rc, PCPU_EINVAL);
                return;
            }
            let entries: Vec<&Entry> = m.table.iter().flatten().collect();
            let seen = entries.len().min(walked.stop_at + 1);
            let want_rc = if walked.stop_at < entries.len() {
                1000 + walked.stop_at as c_int
            } else {
                0
            };
            assert_eq!(rc, want_rc);
            assert_eq!(walked.calls.len(), seen);
            let values: Vec<Vec<u64>> = entries[..seen]
                .iter()
                .map(|e| {
                    (0..e.n)
                        .map(|i| m.slots[slot_index(e.first) + i].fetch())
                        .collect()
                })
                .collect();
            for ((call, e), want) in walked.calls.iter().zip(&entries).zip(values) {
                assert_eq!(
                    (call.0, &call.1),
                    (e.name_ptr, &e.name),
                    "the name as registered"
                );
                assert_eq!(&call.3, &e.descr);
                if !e.descr_ptr.is_null() {
                    assert_eq!(call.2, e.descr_ptr, "the description as registered");
                }
                assert_eq!(call.4, want, "values of {:?} (array {})", e.name, e.array);
            }
        }
        &Op::Fill(handle, taken) => {
            let c = m.handle(handle);
            if slot_ok(c).is_err() {
                return;
            }
            let mut i = 0;
            while m.count() < PCPU_SYSCTL_MAX {
                let name = Text::Bytes(format!("fill.{i}").into_bytes());
                i += 1;
                let (np, nb) = m.c_string(&name);
                let expect = register_name_ok(&nb);
                register(m, expect, np, nb, null(), None, c, 1, false, || {
                    // SAFETY: a NUL-terminated name the model keeps until it is removed.
                    unsafe { pcpu_sysctl_add_counter(np, null(), c as counter_u64_t) }
                });
            }
            let name = if taken {
                let first = m.table.iter().flatten().next().unwrap();
                Text::Bytes(first.name.clone())
            } else {
                Text::Bytes(b"one.more".to_vec())
            };
            let (np, nb) = m.c_string(&name);
            register(m, Ok(()), np, nb, null(), None, c, 1, false, || {
                // SAFETY: as above.
                unsafe { pcpu_sysctl_add_counter(np, null(), c as counter_u64_t) }
            });
        }
        &Op::Strerror(code) => {
            let p = pcpu_strerror(code);
            assert!(!p.is_null());
            // SAFETY: never NULL, a static NUL-terminated string.
            let text = unsafe { CStr::from_ptr(p) }.to_str().expect("UTF-8");
            assert!(!text.is_empty());
            // docs/c.md's text; -13, the simulation's `PCPU_EBOUND`, is no product code.
            let want = c_codes::text_of(code).unwrap_or("unknown error");
            assert_eq!(text, want, "pcpu_strerror({code})");
        }
    }
}

/// Runs a registration and checks it against the model: `expect` is the code of the checks
/// before the table (handles, name, description); then a full table is `PCPU_EREGFULL` and a
/// name taken `PCPU_EEXIST`, and a name that clashes with a registered one `PCPU_ECLASH`.
#[allow(clippy::too_many_arguments)]
fn register(
    m: &mut Model,
    expect: Result<(), c_int>,
    np: *const c_char,
    nb: Option<Vec<u8>>,
    dp: *const c_char,
    db: Option<Vec<u8>>,
    first: usize,
    n: usize,
    array: bool,
    call: impl FnOnce() -> c_int,
) {
    let rc = call();
    let want = match expect {
        Err(e) => e,
        Ok(()) if m.count() == PCPU_SYSCTL_MAX => PCPU_EREGFULL,
        Ok(())
            if m.table
                .iter()
                .flatten()
                .any(|e| Some(&e.name) == nb.as_ref()) =>
        {
            PCPU_EEXIST
        }
        Ok(())
            if m.table
                .iter()
                .flatten()
                .any(|e| names_clash(&e.name, nb.as_deref().unwrap_or_default())) =>
        {
            PCPU_ECLASH
        }
        Ok(()) => PCPU_OK,
    };
    assert_eq!(rc, want, "register {nb:?} / {db:?} on {first:#x}+{n}");
    if rc == PCPU_OK {
        let free = m.table.iter().position(Option::is_none).unwrap();
        m.table[free] = Some(Entry {
            name: nb.unwrap(),
            descr: db.unwrap_or_default(),
            name_ptr: np,
            descr_ptr: dp,
            first,
            n,
            array,
        });
    }
}

/// Words of the slot bitmap over `bits` slots and its summary levels: `ceil(bits / 64)` words,
/// then a bit per word of the level below until a level of one word.
fn bitmap_words(bits: usize) -> usize {
    match bits {
        0 => 0,
        1..=64 => 1,
        _ => bits.div_ceil(64) + bitmap_words(bits.div_ceil(64)),
    }
}
