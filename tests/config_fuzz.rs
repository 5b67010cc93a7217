//! Every configuration input, fuzzed with proptest: `ZoneLayout` fields through
//! `Zone::from_raw_parts` on a real guarded buffer, metadata too short, `Zone::with_capacity`
//! and `Machine::with_capacity` sizes, and the C ABI's setup calls (`pcpu_zone_init` with
//! layouts that must fail and NULLs, `pcpu_zone_cpu_base`, `counter_u64_alloc`,
//! `counter_u64_array_alloc`, `pcpu_strerror`, `pcpu_sysctl_*`).
//!
//! Each property checks the code under test against an oracle written here from the
//! documented rules (the error named is the first rule broken, in `ZoneLayout::validate`'s
//! order), and that a bad input is an `Error` (a `PCPU_E*` code) that touched no memory: the
//! buffer behind a layout is guarded on both sides and compared word by word afterwards.
//! Each prints how many cases it ran (`cargo test --test config_fuzz -- --nocapture`);
//! `PROPTEST_CASES=N` sets the count (default 256 each).

use std::ffi::{c_int, CStr, CString};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use pcpu_counter::capi::*;
use pcpu_counter::sim::capi::*;
use pcpu_counter::sim::Machine;
use pcpu_counter::{Error, Zone, ZoneLayout};
use proptest::prelude::*;
#[path = "common/c_codes.rs"]
mod c_codes;
mod common;
#[path = "common/layout_rules.rs"]
mod layout_rules;
use layout_rules::validate as oracle;

use proptest::test_runner::{TestCaseError, TestError, TestRunner};

/// Runs `test` on `strategy` for `PROPTEST_CASES` (default 256) cases and prints the count;
/// a failure panics with proptest's minimal input.
fn check<S: Strategy>(name: &str, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let config = common::proptest_config();
    let cases = config.cases;
    let calls = AtomicUsize::new(0);
    let start = std::time::Instant::now();
    let result = TestRunner::new(config).run(&strategy, |v| {
        calls.fetch_add(1, Ordering::Relaxed);
        test(v)
    });
    println!(
        "{name}: {cases} cases ({} runs, shrinking included) in {:.2?}",
        calls.load(Ordering::Relaxed),
        start.elapsed()
    );
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, value)) => {
            panic!("{name}: {reason}\nminimal failing input: {value:?}")
        }
        Err(e) => panic!("{name}: {e}"),
    }
}

/// A size or offset: mostly small multiples of 8, also unaligned, 0, huge and overflowing.
fn size(max_words: usize) -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => (0..=max_words).prop_map(|w| w * 8),
        2 => 0..=max_words * 8,
        1 => Just(0usize),
        1 => any::<usize>(),
        1 => (0usize..64).prop_map(|k| usize::MAX - k),
        1 => (0u32..usize::BITS).prop_map(|s| 1usize << s),
    ]
}

fn ncpus() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => 1usize..=8,
        2 => Just(0usize),
        1 => any::<usize>(),
        1 => (0usize..4).prop_map(|k| usize::MAX - k),
        1 => (0u32..usize::BITS).prop_map(|s| 1usize << s),
    ]
}

/// Where the layout's base is: relative to the guarded buffer's usable part, or anywhere.
#[derive(Debug, Clone, Copy)]
enum Base {
    InBuffer(usize),
    Absolute(usize),
}

/// How much metadata the zone is given.
#[derive(Debug, Clone, Copy)]
enum Meta {
    Exact,
    Short(usize),
    Long(usize),
}

fn base() -> impl Strategy<Value = Base> {
    prop_oneof![
        8 => size(256).prop_map(Base::InBuffer),
        1 => Just(Base::Absolute(0)),
        1 => any::<usize>().prop_map(Base::Absolute),
        1 => (0usize..64).prop_map(|k| Base::Absolute(usize::MAX - k)),
    ]
}

fn meta() -> impl Strategy<Value = Meta> {
    prop_oneof![
        6 => Just(Meta::Exact),
        2 => (1usize..=20).prop_map(Meta::Short),
        1 => (1usize..=20).prop_map(Meta::Long),
    ]
}

/// A value that breaks something: 0, unaligned, huge, overflowing.
fn wild() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        1usize..64,
        any::<usize>(),
        (0usize..64).prop_map(|k| usize::MAX - k),
        (0u32..usize::BITS).prop_map(|s| 1usize << s),
    ]
}

/// `(base, stride, offset, len, ncpus)`: fields drawn independently, a valid layout that
/// fits the buffer, or such a layout with one field replaced by a wild value.
fn layout_fields() -> impl Strategy<Value = (Base, usize, usize, usize, usize)> {
    let shaped = || {
        (
            0usize..=64,
            0usize..=16,
            1usize..=32,
            0usize..=16,
            1usize..=4,
        )
            .prop_map(|(b, o, l, slack, n)| {
                (Base::InBuffer(b * 8), (o + l + slack) * 8, o * 8, l * 8, n)
            })
    };
    let mutated = (shaped(), 0usize..5, wild()).prop_map(|(mut f, field, w)| {
        match field {
            0 => f.0 = Base::InBuffer(w),
            1 => f.1 = w,
            2 => f.2 = w,
            3 => f.3 = w,
            _ => f.4 = w,
        }
        f
    });
    prop_oneof![
        2 => (base(), size(256), size(64), size(128), ncpus()),
        2 => shaped(),
        3 => mutated,
    ]
}

/// Words of guard on each side of the usable part, and of usable part.
const GUARD: usize = 64;
const USABLE: usize = 1024;
const FILL: u64 = 0xA5A5_5A5A_DEAD_BEEF;

/// Whether the byte at `addr` lies in some CPU's counter area of the (valid) layout `l`.
fn in_counter_area(l: &ZoneLayout, addr: usize) -> bool {
    if addr < l.base {
        return false;
    }
    let (cpu, within) = ((addr - l.base) / l.stride, (addr - l.base) % l.stride);
    cpu < l.ncpus && within >= l.offset && within < l.offset + l.len
}

#[derive(Default)]
struct LayoutCounts {
    rejected: AtomicUsize,
    meta_short: AtomicUsize,
    accepted: AtomicUsize,
    valid_elsewhere: AtomicUsize,
}

#[test]
fn zone_layouts_through_from_raw_parts() {
    let counts = LayoutCounts::default();
    let strategy =
        (layout_fields(), meta()).prop_map(|((base, stride, offset, len, ncpus), meta)| {
            (base, stride, offset, len, ncpus, meta)
        });
    check(
        "zone_layouts_through_from_raw_parts",
        strategy,
        |(base, stride, offset, len, ncpus, meta)| {
            let mut backing = vec![FILL; GUARD + USABLE + GUARD];
            let start = backing.as_mut_ptr() as usize;
            let usable = (start + GUARD * 8, start + (GUARD + USABLE) * 8);
            let base = match base {
                Base::InBuffer(delta) => usable.0.wrapping_add(delta),
                Base::Absolute(addr) => addr,
            };
            let layout = ZoneLayout {
                base,
                stride,
                offset,
                len,
                ncpus,
            };
            let expected = oracle(&layout);
            prop_assert_eq!(layout.validate(), expected, "validate({:?})", layout);
            // Every CPU's counter area inside the usable part (the areas grow with the CPU).
            let fits = expected.is_ok() && {
                let first = base as u128 + offset as u128;
                let last =
                    base as u128 + (ncpus as u128 - 1) * stride as u128 + (offset + len) as u128;
                first >= usable.0 as u128 && last <= usable.1 as u128
            };
            if expected.is_ok() && !fits {
                // A valid layout of memory this test does not own: passing it would break
                // `from_raw_parts`'s contract, so only `validate` is checked.
                counts.valid_elsewhere.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            let needed = ZoneLayout::meta_words_for(len / 8);
            let words = match meta {
                // A rejected layout may be huge: its metadata is never looked at.
                _ if expected.is_err() => needed.min(64),
                Meta::Exact => needed,
                Meta::Short(k) => needed.saturating_sub(k),
                Meta::Long(k) => needed + k,
            };
            let mut meta_buf = vec![0u64; words];
            // SAFETY: either the oracle says `layout` breaks a rule, and `from_raw_parts`
            // must refuse it before touching memory (asserted below; even a zone accepted by
            // mistake is only dropped, which reads no block), or every CPU's counter area
            // lies inside the usable part of `backing`, which nothing else touches until
            // the zone is dropped below.
            let made = unsafe { Zone::from_raw_parts(layout, &mut meta_buf) };
            match (expected, made) {
                (Err(want), made) => {
                    prop_assert_eq!(made.err(), Some(want), "{:?}", layout);
                    counts.rejected.fetch_add(1, Ordering::Relaxed);
                }
                (Ok(()), Err(e)) => {
                    prop_assert!(words < needed, "valid {:?} refused: {:?}", layout, e);
                    prop_assert_eq!(e, Error::MetaTooSmall { needed, has: words });
                    counts.meta_short.fetch_add(1, Ordering::Relaxed);
                }
                (Ok(()), Ok(zone)) => {
                    prop_assert!(
                        words >= needed,
                        "zone made with {} of {} meta words",
                        words,
                        needed
                    );
                    prop_assert_eq!(zone.layout(), &layout);
                    prop_assert_eq!(zone.capacity(), len / 8);
                    for cpu in 0..ncpus {
                        prop_assert_eq!(zone.cpu_base(cpu), Ok(base + cpu * stride));
                    }
                    prop_assert_eq!(
                        zone.cpu_base(ncpus),
                        Err(Error::CpuOutOfRange { cpu: ncpus, ncpus })
                    );
                    let all: Vec<_> = std::iter::from_fn(|| zone.alloc().ok()).collect();
                    prop_assert_eq!(all.len(), len / 8, "counters until ZoneFull");
                    prop_assert_eq!(
                        zone.alloc().err(),
                        Some(Error::ZoneFull { capacity: len / 8 })
                    );
                    for c in &all {
                        prop_assert!(zone.holds_offset(c.offset()));
                        prop_assert_eq!(c.fetch(), 0);
                        for cpu in 0..ncpus {
                            prop_assert_eq!(c.cpu_slot(cpu), Ok(0));
                        }
                    }
                    drop(all);
                    prop_assert_eq!(zone.in_use(), 0);
                    drop(zone);
                    counts.accepted.fetch_add(1, Ordering::Relaxed);
                }
            }
            // Nothing outside the counter areas changed; every slot in them was cleared.
            for (i, &word) in backing.iter().enumerate() {
                let addr = start + i * 8;
                let inside = expected.is_ok() && words >= needed && in_counter_area(&layout, addr);
                let want = if inside { 0 } else { FILL };
                prop_assert_eq!(
                    word,
                    want,
                    "word {} ({:#x}) of the buffer, {:?}",
                    i,
                    addr,
                    layout
                );
            }
            Ok(())
        },
    );
    println!(
        "  layouts: {} rejected with the oracle's error, {} valid but metadata too short, {} \
         accepted (filled, checked, freed), {} valid outside the buffer (validate only)",
        counts.rejected.load(Ordering::Relaxed),
        counts.meta_short.load(Ordering::Relaxed),
        counts.accepted.load(Ordering::Relaxed),
        counts.valid_elsewhere.load(Ordering::Relaxed),
    );
    assert!(
        counts.accepted.load(Ordering::Relaxed) > 0,
        "no layout was accepted"
    );
}

/// What `Zone::on_heap(ncpus, counters, header)` must answer: the rounded layout
/// `(stride, len)`, or the error. `None` for a total too big to try here but not an error (it
/// would really be allocated).
fn heap_oracle(
    ncpus: usize,
    counters: usize,
    header: usize,
) -> Option<Result<(usize, usize), Error>> {
    match layout_rules::heap(ncpus, counters, header) {
        Ok((stride, len, total)) => (total <= 4 << 20).then_some(Ok((stride, len))),
        Err(e) => Some(Err(e)),
    }
}

fn heap_sizes() -> impl Strategy<Value = (usize, usize)> {
    (
        prop_oneof![
            6 => 0usize..=16,
            1 => any::<usize>(),
            1 => (0usize..4).prop_map(|k| usize::MAX - k),
            1 => (0u32..usize::BITS).prop_map(|s| 1usize << s),
        ],
        prop_oneof![
            6 => 0usize..=2000,
            1 => any::<usize>(),
            1 => (0usize..130).prop_map(|k| usize::MAX - k),
            1 => (0usize..130).prop_map(|k| usize::MAX / 8 - k),
            1 => (0u32..usize::BITS).prop_map(|s| 1usize << s),
        ],
    )
}

#[test]
fn heap_zone_and_machine_sizes() {
    let tried = AtomicUsize::new(0);
    check(
        "heap_zone_and_machine_sizes",
        heap_sizes(),
        |(ncpus, counters)| {
            for (header, what) in [(0, "Zone::with_capacity"), (8, "Machine::with_capacity")] {
                let Some(want) = heap_oracle(ncpus, counters, header) else {
                    continue;
                };
                tried.fetch_add(1, Ordering::Relaxed);
                let got = if header == 0 {
                    Zone::with_capacity(ncpus, counters).map(|z| {
                        (
                            z.layout().stride,
                            z.layout().len,
                            z.layout().base,
                            z.ncpus(),
                            z.alloc().is_ok(),
                        )
                    })
                } else {
                    Machine::with_capacity(ncpus, counters).map(|m| {
                        let z = m.zone();
                        let ok = m.run_on(ncpus - 1, || {
                            let c = m.alloc().expect("alloc");
                            c.add(5);
                            c.fetch() == 5
                        });
                        (
                            z.layout().stride,
                            z.layout().len,
                            z.layout().base,
                            z.ncpus(),
                            ok,
                        )
                    })
                };
                match (want, got) {
                    (Ok((stride, len)), Ok((s, l, base, n, ok))) => {
                        prop_assert_eq!(
                            (s, l, n),
                            (stride, len, ncpus),
                            "{}({}, {})",
                            what,
                            ncpus,
                            counters
                        );
                        prop_assert!(l / 8 >= counters && base % 128 == 0 && ok);
                    }
                    (want, got) => {
                        prop_assert_eq!(want.err(), got.err(), "{}({}, {})", what, ncpus, counters)
                    }
                }
            }
            Ok(())
        },
    );
    println!("  sizes tried for real: {}", tried.load(Ordering::Relaxed));
}

/// The C ABI has one machine per process: the C properties take turns.
static TURN: Mutex<()> = Mutex::new(());

const C_CPUS: usize = 4;

fn c_setup() -> std::sync::MutexGuard<'static, ()> {
    let turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    assert_eq!(pcpu_sim_machine_new(C_CPUS, 64), PCPU_OK);
    turn
}

#[test]
fn c_zone_init_refuses_bad_layouts() {
    let _turn = c_setup();
    let mut meta = [0u64; 64];
    // NULLs first.
    let good = pcpu_zone_layout {
        base: 0x1000,
        stride: 64,
        offset: 0,
        len: 64,
        ncpus: 1,
    };
    // SAFETY: NULL pointers are refused before anything is read.
    unsafe {
        assert_eq!(pcpu_zone_init(null(), meta.as_mut_ptr(), 64), PCPU_EINVAL);
        assert_eq!(pcpu_zone_init(&good, null_mut(), 64), PCPU_EINVAL);
        assert_eq!(pcpu_zone_init(null(), null_mut(), 0), PCPU_EINVAL);
    }
    let skipped = AtomicUsize::new(0);
    // The same fields as for `from_raw_parts`, at an address this process never maps.
    let strategy = layout_fields().prop_map(|(base, stride, offset, len, ncpus)| {
        let base = match base {
            Base::InBuffer(delta) => 0x10_0000usize.wrapping_add(delta),
            Base::Absolute(addr) => addr,
        };
        (base, stride, offset, len, ncpus)
    });
    check(
        "c_zone_init_refuses_bad_layouts",
        strategy,
        |(base, stride, offset, len, ncpus)| {
            let layout = ZoneLayout {
                base,
                stride,
                offset,
                len,
                ncpus,
            };
            let Err(want) = oracle(&layout) else {
                // A valid layout would install the process's zone on memory that is not there.
                skipped.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            };
            let c = pcpu_zone_layout {
                base,
                stride,
                offset,
                len,
                ncpus,
            };
            let mut meta = [0u64; 64];
            // SAFETY: the oracle says the layout breaks a rule, so it is refused before any of
            // its memory is touched (asserted); `meta` is 64 writable words.
            let rc = unsafe { pcpu_zone_init(&c, meta.as_mut_ptr(), meta.len()) };
            prop_assert_eq!(rc, c_codes::code_of(&want), "{:?}", layout);
            prop_assert_eq!(
                pcpu_zone_ncpus(),
                C_CPUS,
                "nothing installed: the machine's zone is still the C zone"
            );
            prop_assert_eq!(meta, [0u64; 64]);
            Ok(())
        },
    );
    println!(
        "  valid layouts skipped: {}",
        skipped.load(Ordering::Relaxed)
    );
    assert_eq!(
        pcpu_zone_ncpus(),
        C_CPUS,
        "the machine's zone is still the C zone"
    );
}

#[test]
fn c_cpu_base_and_allocation_arguments() {
    let _turn = c_setup();
    let cpu = prop_oneof![4 => 0usize..8, 1 => any::<usize>(), 1 => Just(usize::MAX)];
    let wait = prop_oneof![
        2 => Just(M_NOWAIT),
        2 => Just(M_WAITOK),
        1 => Just(M_NOWAIT | M_ZERO),
        1 => Just(M_WAITOK | M_ZERO),
        1 => Just(M_NOWAIT | M_WAITOK),
        1 => Just(M_ZERO),
        1 => Just(0),
        2 => any::<c_int>(),
    ];
    let n = prop_oneof![6 => 0usize..=70, 1 => any::<usize>(), 1 => Just(usize::MAX)];
    let strategy = (cpu, any::<bool>(), wait, n, any::<bool>());
    const SLACK: usize = 80;
    const SENTINEL: usize = 0x5EED;
    check(
        "c_cpu_base_and_allocation_arguments",
        strategy,
        |(cpu, null_base, wait, n, null_array)| {
            // pcpu_zone_cpu_base
            let mut base = 7usize;
            let out: *mut usize = if null_base { null_mut() } else { &mut base };
            // SAFETY: `out` is NULL or points at `base`.
            let rc = unsafe { pcpu_zone_cpu_base(cpu, out) };
            let want = if null_base {
                PCPU_EINVAL
            } else if cpu >= C_CPUS {
                PCPU_ECPU
            } else {
                PCPU_OK
            };
            prop_assert_eq!(rc, want, "pcpu_zone_cpu_base({}, null {})", cpu, null_base);
            prop_assert_eq!(base != 7, rc == PCPU_OK, "written only on success");

            let valid_wait = matches!(wait & !M_ZERO, M_NOWAIT | M_WAITOK);
            let in_use = pcpu_zone_in_use();
            let capacity = pcpu_zone_capacity();

            // counter_u64_alloc
            let c = counter_u64_alloc(wait);
            prop_assert_eq!(!c.is_null(), valid_wait, "counter_u64_alloc({:#x})", wait);
            // SAFETY: NULL or a fresh handle nobody uses.
            unsafe { counter_u64_free(c) };
            prop_assert_eq!(pcpu_zone_in_use(), in_use);

            // counter_u64_array_alloc: a buffer of SLACK handles filled with a sentinel.
            let mut handles = vec![SENTINEL as counter_u64_t; SLACK];
            let a = if null_array {
                null_mut()
            } else {
                handles.as_mut_ptr()
            };
            let want = if !valid_wait || null_array || n == 0 {
                PCPU_EINVAL
            } else if n >= capacity {
                PCPU_EFULL
            } else {
                PCPU_OK
            };
            // SAFETY: `a` is NULL, or valid for `SLACK` handles, which is `n` whenever the
            // call may write (`n < capacity` = 64 < SLACK); a longer `n` is refused with
            // `PCPU_EFULL` before any write (its contract), which the sentinels check.
            let rc = unsafe { counter_u64_array_alloc(a, n, wait) };
            prop_assert_eq!(
                rc,
                want,
                "counter_u64_array_alloc(null {}, {}, {:#x})",
                null_array,
                n,
                wait
            );
            if rc == PCPU_OK {
                prop_assert_eq!(pcpu_zone_in_use(), in_use + n);
                for i in 0..n {
                    prop_assert_eq!(handles[i] as usize, handles[0] as usize + 8 * i, "one run");
                }
                prop_assert!(handles[n..].iter().all(|&h| h as usize == SENTINEL));
                // SAFETY: the `n` handles just allocated, used by nobody.
                unsafe { counter_u64_array_free(handles.as_mut_ptr(), n) };
            } else {
                prop_assert!(
                    handles.iter().all(|&h| h as usize == SENTINEL),
                    "a refused array wrote a handle"
                );
            }
            prop_assert_eq!(pcpu_zone_in_use(), in_use);
            Ok(())
        },
    );
}

#[test]
fn c_strerror_any_int() {
    check(
        "c_strerror_any_int",
        prop_oneof![1 => -40i32..=10, 1 => any::<i32>()],
        |err| {
            let p = pcpu_strerror(err);
            prop_assert!(!p.is_null());
            // SAFETY: `pcpu_strerror` returns a static NUL-terminated string.
            let text = unsafe { CStr::from_ptr(p) }.to_str();
            prop_assert!(text.is_ok(), "not UTF-8");
            let text = text.unwrap();
            prop_assert!(!text.is_empty());
            // docs/c.md's text; -13, the simulation's `PCPU_EBOUND`, is no product code.
            let want = c_codes::text_of(err).unwrap_or("unknown error");
            prop_assert_eq!(text, want, "{}", err);
            Ok(())
        },
    );
}

/// A name or description: what the C side would pass, possibly empty, long or not UTF-8.
fn c_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => proptest::collection::vec(prop_oneof![b'a'..=b'z', Just(b'.'), Just(b'_')], 0..=max),
        1 => proptest::collection::vec(1u8..=255, 0..=max),
        1 => (0usize..=2).prop_map(|k| vec![b'x'; PCPU_SYSCTL_NAME_MAX + k]),
    ]
}

/// What the registry must say of `bytes` as a string of at most `max` bytes.
fn string_rule(bytes: &[u8], max: usize, empty_ok: bool) -> Result<(), c_int> {
    if (bytes.is_empty() && !empty_ok) || bytes.len() > max || std::str::from_utf8(bytes).is_err() {
        Err(PCPU_ENAME)
    } else {
        Ok(())
    }
}

#[test]
fn c_sysctl_names() {
    let _turn = c_setup();
    // SAFETY: a NULL callback is refused.
    assert_eq!(unsafe { pcpu_sysctl_walk(None, null_mut()) }, PCPU_EINVAL);
    let strategy = (
        c_bytes(80),
        prop_oneof![3 => c_bytes(80).prop_map(Some), 1 => Just(None), 1 => Just(Some(vec![b'd'; 256]))],
        any::<bool>(),
        prop_oneof![3 => Just(0usize), 1 => Just(1usize), 1 => 1usize..64, 1 => any::<usize>()],
    );
    let registered = AtomicUsize::new(0);
    check(
        "c_sysctl_names",
        strategy,
        |(name, descr, null_name, bad_handle)| {
            let name = CString::new(name).expect("no NUL");
            let descr = descr.map(|d| CString::new(d).expect("no NUL"));
            let name_p = if null_name { null() } else { name.as_ptr() };
            let descr_p = descr.as_ref().map_or(null(), |d| d.as_ptr());
            let c = counter_u64_alloc(M_WAITOK);
            prop_assert!(!c.is_null());
            // 0: the real counter; else a value that is no counter of the zone (NULL, offsets
            // off the slots or past the zone).
            let handle = match bad_handle {
                0 => c,
                1 => null_mut(),
                // Past the zone's slots (offsets 8 to 520 on this machine), or unaligned.
                k if k % 2 == 0 => (520 + 8 * (k % 4096)) as counter_u64_t,
                k => k as counter_u64_t,
            };
            let name_rule = if null_name {
                Err(PCPU_EINVAL)
            } else {
                string_rule(name.as_bytes(), PCPU_SYSCTL_NAME_MAX, false)
            };
            let descr_rule = descr.as_ref().map_or(Ok(()), |d| {
                string_rule(d.as_bytes(), PCPU_SYSCTL_DESCR_MAX, true)
            });
            // Registering also asks that the name starts with an ASCII letter (its metric
            // name then does); a lookup asks only the string rule.
            let register_rule = name_rule.and_then(|()| match name.as_bytes().first() {
                Some(b) if b.is_ascii_alphabetic() => Ok(()),
                _ => Err(PCPU_ENAME),
            });
            let want = if bad_handle != 0 {
                PCPU_EINVAL
            } else {
                register_rule.and(descr_rule).err().unwrap_or(PCPU_OK)
            };
            // SAFETY: the strings are NUL-terminated and live until the name is removed below
            // (or for ever, if the removal failed).
            let rc = unsafe { pcpu_sysctl_add_counter(name_p, descr_p, handle) };
            // Every call first, the checks after: a failed check must not leave a registered
            // name whose strings are freed.
            // SAFETY: `name_p` is NULL or the NUL-terminated name; `c` is a live handle that
            // only this case uses, freed once (a registered name does not own it).
            let (zeroed, removed, again) = unsafe {
                let results = (
                    pcpu_sysctl_zero(name_p),
                    pcpu_sysctl_remove(name_p),
                    pcpu_sysctl_remove(name_p),
                );
                counter_u64_free(c);
                results
            };
            let still_registered = rc == PCPU_OK && removed != PCPU_OK;
            let shown = format!("({name:?}, {descr:?}, {handle:?})");
            if still_registered {
                std::mem::forget((name, descr));
            }
            prop_assert_eq!(rc, want, "add_counter{}", shown);
            let lookup =
                name_rule
                    .err()
                    .unwrap_or(if rc == PCPU_OK { PCPU_OK } else { PCPU_ENOENT });
            prop_assert_eq!(zeroed, lookup, "zero{}", shown);
            prop_assert_eq!(removed, lookup, "remove{}", shown);
            let gone = name_rule.err().unwrap_or(PCPU_ENOENT);
            prop_assert_eq!(again, gone, "second remove{}", shown);
            if rc == PCPU_OK {
                registered.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        },
    );
    println!(
        "  names registered and removed: {}",
        registered.load(Ordering::Relaxed)
    );
}
