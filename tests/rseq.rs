//! `pcpu_counter::rseq` on real threads: exact sums with more threads than cores, forced
//! migrations, signal handlers that add, fork, thread churn and `fetch_and_zero` racing adds,
//! on whichever path this process uses (`PCPU_COUNTER_RSEQ`, `GLIBC_TUNABLES`); the other
//! profiles in child processes; and the same harness catching two deliberately broken adds
//! written here (never in the crate): the CPU read outside the critical section, and an
//! abort handler that gives up instead of retrying.
//!
//! Run: `cargo test --features rseq --test rseq` (see `.ci/rseq.sh` for the matrix).
#![cfg(all(
    feature = "rseq",
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]

use pcpu_counter::rseq::{self, Index, Path};
use pcpu_counter::Error;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// One harness at a time: the signal handler's target is process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn zone() -> &'static rseq::RseqZone {
    static Z: OnceLock<rseq::RseqZone> = OnceLock::new();
    Z.get_or_init(|| rseq::RseqZone::new(512).unwrap())
}

/// What the harness adds to: a counter's slots, through some add function.
struct Target {
    counter: rseq::RseqCounter<'static>,
    add: fn(&Target, i64),
}

impl Target {
    fn new(add: fn(&Target, i64)) -> Target {
        Target {
            counter: zone().alloc().unwrap(),
            add,
        }
    }
}

/// The slot arithmetic of the broken adds (`mod broken`, x86_64 only).
#[cfg(target_arch = "x86_64")]
impl Target {
    fn slot0(&self) -> usize {
        zone().layout().base + self.counter.offset()
    }
    fn stride(&self) -> usize {
        zone().stride()
    }
    fn nslots(&self) -> usize {
        zone().nslots()
    }
}

fn product_add(t: &Target, v: i64) {
    t.counter.add(v)
}

/// The value each signal handler run adds.
const SIG_V: i64 = 3;
static SIG_TARGET: AtomicPtr<Target> = AtomicPtr::new(core::ptr::null_mut());
static SIG_RUNS: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    let t = SIG_TARGET.load(Ordering::Acquire);
    if !t.is_null() {
        // SAFETY: the harness keeps the target alive until every adder thread is joined.
        let t = unsafe { &*t };
        (t.add)(t, SIG_V);
        SIG_RUNS.fetch_add(1, Ordering::Relaxed);
    }
}

fn install_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: a plain handler for SIGUSR1 with SA_RESTART; the sigaction struct is zeroed.
        unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(
                libc::sigaction(libc::SIGUSR1, &sa, core::ptr::null_mut()),
                0
            );
        }
    });
}

/// The CPUs this process may run on, read once, at the first call, before any thread of the
/// process pinned itself. (Not `available_parallelism`, which reads the calling thread's own
/// affinity: once a thread is pinned it says 1, and every later pin of that thread would go to
/// CPU 0.)
fn allowed_cpus() -> &'static [usize] {
    static CPUS: OnceLock<Vec<usize>> = OnceLock::new();
    CPUS.get_or_init(|| {
        // SAFETY: a zeroed cpu_set_t filled by sched_getaffinity for the calling thread.
        let set = unsafe {
            let mut set: libc::cpu_set_t = core::mem::zeroed();
            let r = libc::sched_getaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &mut set);
            assert_eq!(r, 0, "sched_getaffinity");
            set
        };
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `c` is below CPU_SETSIZE; CPU_ISSET reads the set.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect();
        assert!(!cpus.is_empty());
        cpus
    })
}

fn ncpus() -> usize {
    allowed_cpus().len()
}

/// Pins the calling thread to the `cpu`-th allowed CPU (modulo their number), or to all of
/// them with `None`.
fn pin(cpu: Option<usize>) {
    let cpus = allowed_cpus();
    // SAFETY: a zeroed cpu_set_t filled with CPU_SET, for the calling thread (pid 0).
    let r = unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        match cpu {
            Some(c) => libc::CPU_SET(cpus[c % cpus.len()], &mut set),
            None => cpus.iter().for_each(|&c| libc::CPU_SET(c, &mut set)),
        }
        libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    assert_eq!(
        r,
        0,
        "sched_setaffinity: {}",
        std::io::Error::last_os_error()
    );
}

#[derive(Clone, Copy)]
struct Storm {
    threads: usize,
    adds: usize,
    /// Change the thread's affinity every this many adds (0: never).
    migrate_every: usize,
    signals: bool,
    /// Short-lived threads started and ended while the others add.
    churn: usize,
    /// A thread that runs `fetch_and_zero` in a loop and keeps the deltas.
    zeroer: bool,
}

const STORM: Storm = Storm {
    threads: 32,
    adds: 40_000,
    migrate_every: 2_000,
    signals: true,
    churn: 64,
    zeroer: false,
};

/// Runs the storm on `t`; returns (expected, counted).
fn run(t: &Target, s: Storm) -> (u64, u64) {
    install_handler();
    t.counter.zero();
    SIG_RUNS.store(0, Ordering::Relaxed);
    SIG_TARGET.store(t as *const Target as *mut Target, Ordering::Release);
    let expected = AtomicU64::new(0);
    let finished = AtomicUsize::new(0);
    let stop_killer = AtomicBool::new(false);
    let release = AtomicBool::new(false);
    let zeroed = AtomicU64::new(0);
    let tids: Mutex<Vec<libc::pthread_t>> = Mutex::new(Vec::new());
    std::thread::scope(|sc| {
        for i in 0..s.threads {
            let (expected, finished, release, tids) = (&expected, &finished, &release, &tids);
            sc.spawn(move || {
                // SAFETY: pthread_self has no preconditions.
                tids.lock().unwrap().push(unsafe { libc::pthread_self() });
                let mut mine = 0u64;
                for k in 0..s.adds {
                    if s.migrate_every != 0 && k % s.migrate_every == 0 {
                        pin(Some(i + k / s.migrate_every));
                    }
                    let v = (k % 7) as i64 + 1;
                    (t.add)(t, v);
                    mine += v as u64;
                }
                pin(None);
                expected.fetch_add(mine, Ordering::Relaxed);
                finished.fetch_add(1, Ordering::Release);
                // Stay alive (a target of pthread_kill) until the killer has stopped.
                while !release.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
            });
        }
        let killer = s.signals.then(|| {
            let (tids, stop_killer) = (&tids, &stop_killer);
            sc.spawn(move || {
                let mut n = 0usize;
                while !stop_killer.load(Ordering::Acquire) {
                    let list = tids.lock().unwrap().clone();
                    for tid in list {
                        // SAFETY: the adder threads stay alive until `release`, set only
                        // after this thread stops.
                        unsafe { libc::pthread_kill(tid, libc::SIGUSR1) };
                        n += 1;
                    }
                    std::thread::yield_now();
                }
                n
            })
        });
        if s.churn > 0 {
            let expected = &expected;
            sc.spawn(move || {
                for j in 0..s.churn {
                    std::thread::scope(|c| {
                        c.spawn(|| {
                            for _ in 0..500 {
                                (t.add)(t, 2);
                            }
                        });
                    });
                    expected.fetch_add(1000, Ordering::Relaxed);
                    let _ = j;
                }
            });
        }
        if s.zeroer {
            let (finished, zeroed) = (&finished, &zeroed);
            sc.spawn(move || {
                while finished.load(Ordering::Acquire) < s.threads {
                    zeroed.fetch_add(t.counter.fetch_and_zero(), Ordering::Relaxed);
                }
            });
        }
        while finished.load(Ordering::Acquire) < s.threads {
            std::thread::yield_now();
        }
        stop_killer.store(true, Ordering::Release);
        // The adders leave only after the killer is gone (no pthread_kill of a dead thread).
        if let Some(k) = killer {
            let sent = k.join().unwrap();
            eprintln!("  {sent} signals sent");
        }
        release.store(true, Ordering::Release);
    });
    SIG_TARGET.store(core::ptr::null_mut(), Ordering::Release);
    let expected = expected.into_inner() + SIG_RUNS.load(Ordering::Relaxed) * SIG_V as u64;
    (expected, zeroed.into_inner() + t.counter.fetch())
}

/// glibc's `__rseq_size` (what glibc says it registered; 0 with its registration off), or
/// `None` without the symbol.
fn glibc_rseq_size() -> Option<u32> {
    // SAFETY: dlsym on a NUL-terminated name; the symbol is glibc's constant `unsigned int`.
    unsafe {
        let size = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr());
        (!size.is_null()).then(|| *(size as *const u32))
    }
}

/// The path, and why: on a kernel known to lose rseq adds (`rseq::known_broken_kernel`),
/// the fallback naming the kernel, unless forced.
#[test]
fn reports_the_path() {
    let p = rseq::path();
    let gate = rseq::known_broken_kernel();
    eprintln!(
        "path: {p}; AT_RSEQ_FEATURE_SIZE {}; nslots {}; glibc __rseq_size {:?}; known broken: {}",
        rseq::kernel_feature_size(),
        zone().nslots(),
        glibc_rseq_size(),
        gate.unwrap_or("no")
    );
    match std::env::var("PCPU_COUNTER_RSEQ").as_deref() {
        Ok("off") => assert!(matches!(p, Path::Fallback { .. })),
        Ok("cpu") => assert!(matches!(
            p,
            Path::Rseq {
                index: Index::Cpu,
                ..
            } | Path::Fallback { .. }
        )),
        // Forced: rseq wherever the kernel has it, known broken or not.
        Ok("force") => assert!(
            gate.is_none() || matches!(p, Path::Rseq { .. }),
            "forced, yet {p}"
        ),
        _ => {}
    }
    if let (Some(why), Ok("" | "auto" | "cpu" | "cid") | Err(_)) =
        (gate, std::env::var("PCPU_COUNTER_RSEQ").as_deref())
    {
        assert_eq!(p, Path::Fallback { reason: why });
    }
    if std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.pthread.rseq=0")) {
        assert!(!matches!(
            p,
            Path::Rseq {
                glibc_registered: true,
                ..
            }
        ));
    }
}

#[test]
fn simple_case_global_counter() {
    let c = rseq::RseqCounter::new().unwrap();
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| (0..10_000).for_each(|_| c.inc()));
        }
    });
    assert_eq!(c.fetch(), 80_000);
    c.add(-80_000);
    assert_eq!(c.fetch(), 0);
}

#[test]
fn more_threads_than_cores_migrating_signalled() {
    let _g = serial();
    let t = Target::new(product_add);
    let (expected, got) = run(&t, STORM);
    eprintln!("storm: expected {expected}, counted {got}");
    assert_eq!(got, expected);
}

#[test]
fn fetch_and_zero_racing_adds() {
    let _g = serial();
    let t = Target::new(product_add);
    let (expected, got) = run(
        &t,
        Storm {
            zeroer: true,
            churn: 0,
            ..STORM
        },
    );
    assert_eq!(got, expected, "deltas + final fetch");
}

#[test]
fn threads_start_and_exit_while_others_add() {
    let _g = serial();
    let t = Target::new(product_add);
    let (expected, got) = run(
        &t,
        Storm {
            threads: 4,
            signals: false,
            churn: 400,
            ..STORM
        },
    );
    assert_eq!(got, expected);
}

/// A forked child starts from the parent's count and counts on its own copy: the parent's
/// adds after the fork do not reach the child, nor the child's the parent.
#[test]
fn fork_child_counts_on_its_own_copy() {
    const N: u64 = 1000;
    const M: u64 = 100_000;
    const P: u64 = 500;
    let _g = serial();
    let c = zone().alloc().unwrap();
    c.add(N as i64);
    // The parent tells the child through this pipe that its own adds after the fork are done.
    let mut fds = [0; 2];
    // SAFETY: a pipe into a two-int array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child of this multi-threaded process only reads a pipe, adds, fetches and
    // calls _exit: system calls, the rseq section (or sched_getcpu and a locked add) and
    // atomic loads, no allocation and no lock (see the module docs on fork).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let mut byte = 0u8;
        // SAFETY: one byte into a local; read is async-signal-safe.
        let code = if unsafe { libc::read(fds[0], (&mut byte as *mut u8).cast(), 1) } != 1 {
            3
        } else if c.fetch() != N {
            1 // The parent's adds after the fork reached the child.
        } else {
            for _ in 0..M {
                c.inc();
            }
            if c.fetch() == N + M {
                0
            } else {
                2
            }
        };
        // SAFETY: leaving the child without running the parent's atexit handlers.
        unsafe { libc::_exit(code) };
    }
    for _ in 0..P {
        c.inc();
    }
    // SAFETY: one byte from a local into the pipe made above.
    assert_eq!(unsafe { libc::write(fds[1], [1u8].as_ptr().cast(), 1) }, 1);
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    // SAFETY: closing the pipe made above.
    unsafe { (libc::close(fds[0]), libc::close(fds[1])) };
    assert!(libc::WIFEXITED(status), "child status {status:#x}");
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "child exit code (1: it read the parent's later adds, 2: it did not read N + M)"
    );
    assert_eq!(c.fetch(), N + P, "the child's adds stay in the child");
}

/// Set (to the test's name) in a child process that runs one test alone.
const CHILD: &str = "PCPU_COUNTER_RSEQ_TEST_CHILD";

fn in_child(name: &str) -> bool {
    std::env::var(CHILD).as_deref() == Ok(name)
}

/// Runs the test `name` alone in a child process of this test binary, with
/// `PCPU_COUNTER_RSEQ` removed and then `env` set; asserts that it ran and passed. Skipped
/// (`false`) where the kernel has no rseq, as under qemu-user (`.ci/cross.sh`), which cannot
/// start a child of an emulated binary.
fn run_child(name: &str, env: &[(&str, &std::ffi::OsStr)]) -> bool {
    if let Path::Fallback { reason } = rseq::path() {
        if reason.contains("ENOSYS") {
            eprintln!("no rseq here ({reason}): {name} not run in a child");
            return false;
        }
    }
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", name, "--test-threads=1"])
        .env_remove("PCPU_COUNTER_RSEQ")
        .env(CHILD, name);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{name} with {env:?}: {}\n{text}",
        out.status
    );
    assert!(
        text.contains("test result: ok. 1 passed"),
        "{name} with {env:?} did not run:\n{text}"
    );
    true
}

/// Zones larger than a zone holds, or than the address space, are errors: the process lives
/// on, and the largest zone and a normal one work.
#[test]
fn oversized_zones_are_errors() {
    const MAX: usize = 1 << 28;
    for (nslots, counters, error) in [
        (
            None,
            4_000_000_000,
            Error::CapacityTooLarge {
                counters: 4_000_000_000,
                max: MAX,
            },
        ),
        (
            None,
            usize::MAX,
            Error::CapacityTooLarge {
                counters: usize::MAX,
                max: MAX,
            },
        ),
        (
            Some(1),
            MAX + 1,
            Error::CapacityTooLarge {
                counters: MAX + 1,
                max: MAX,
            },
        ),
        // usize::MAX + 1 blocks.
        (Some(usize::MAX), 1, Error::AddressOverflow),
        // 2^52 blocks of a page: 2^64 bytes.
        (Some(1 << 52), 1, Error::AddressOverflow),
        // 2^50 blocks of a page, 4 EiB: the sum fits, no address space does (mmap fails).
        (Some(1 << 50), 1, Error::AddressOverflow),
    ] {
        let got = match nslots {
            None => rseq::RseqZone::new(counters),
            Some(n) => rseq::RseqZone::with_slots(n, counters),
        };
        assert_eq!(
            got.unwrap_err(),
            error,
            "{nslots:?} slots, {counters} counters"
        );
    }
    assert_eq!(
        Error::CapacityTooLarge {
            counters: 4_000_000_000,
            max: MAX
        }
        .to_string(),
        "4000000000 counters asked for, but a zone holds at most 268435456"
    );
    // The largest zone: 2 blocks of 2 GiB of address space, 2.2 GB of lazily zeroed metadata.
    let big = rseq::RseqZone::with_slots(1, MAX).unwrap();
    assert_eq!(
        (big.capacity(), big.stride(), big.mapped_bytes()),
        (MAX, 1 << 31, 1 << 32)
    );
    let c = big.alloc().unwrap();
    c.add(7);
    assert_eq!(c.fetch(), 7);
    drop(c);
    drop(big);
    let z = rseq::RseqZone::new(512).unwrap();
    let c = z.alloc().unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| (0..1000).for_each(|_| c.inc()));
        }
    });
    assert_eq!(c.fetch(), 4000);
}

/// The process's virtual size (`VmSize`), in bytes.
fn vm_size() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmSize:")).unwrap();
    let kb = line[7..].trim().trim_end_matches("kB").trim();
    kb.parse::<u64>().unwrap() * 1024
}

/// Sets the process's address-space limit (`RLIMIT_AS`): mappings past it fail.
fn limit_as(bytes: u64) {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: reading and setting this process's own limit.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_AS, &mut r), 0);
        r.rlim_cur = bytes;
        assert_eq!(libc::setrlimit(libc::RLIMIT_AS, &r), 0);
    }
}

/// Runs `refused_memory_child` in a child process (it lowers the address-space limit).
#[test]
fn refused_memory_is_an_error() {
    run_child("refused_memory_child", &[]);
}

/// The address space left (`RLIMIT_AS`), once too small for a zone's mapping and once for
/// its metadata: errors, and after the limit is lifted the same zone works.
#[test]
fn refused_memory_child() {
    if !in_child("refused_memory_child") {
        return;
    }
    const MIB: u64 = 1 << 20;
    // The path is chosen before the limit (dlsym may allocate).
    let _ = rseq::path();
    // 128 MiB of room: a zone of 2^26 counters maps 2 blocks of 512 MiB.
    limit_as(vm_size() + 128 * MIB);
    let mapping = rseq::RseqZone::with_slots(1, 1 << 26).map(|_| ());
    // 352 MiB of room: a zone of 2^24 counters maps 2 blocks of 128 MiB, then its metadata
    // needs 136 MiB more.
    limit_as(vm_size() + 352 * MIB);
    let meta = rseq::RseqZone::with_slots(1, 1 << 24).map(|_| ());
    limit_as(libc::RLIM_INFINITY);
    assert_eq!(
        mapping,
        Err(Error::AddressOverflow),
        "no room for the mapping"
    );
    // The baselines, the bitmap and its summary levels: 2^24 + 2^18 + 2^12 + 2^6 + 1 words.
    let bytes = ((1 << 24) + (1 << 18) + (1 << 12) + (1 << 6) + 1) * 8;
    assert_eq!(
        meta,
        Err(Error::OutOfMemory { bytes }),
        "no room for the metadata"
    );
    assert_eq!(
        Error::OutOfMemory { bytes }.to_string(),
        "out of memory: the 136348168 bytes the zone asked for could not be had"
    );
    let z = rseq::RseqZone::with_slots(1, 1 << 24).unwrap();
    let c = z.alloc().unwrap();
    c.add(3);
    assert_eq!(c.fetch(), 3);
}

/// Every value of `PCPU_COUNTER_RSEQ` other than the documented ones fails every zone, each
/// checked in a child process (the variable is read once per process).
#[test]
fn unknown_env_value_is_an_error() {
    use std::os::unix::ffi::OsStrExt;
    let bad: [&[u8]; 8] = [
        b"CPU",
        b"Off",
        b"AUTO",
        b"fallback",
        b"FORCE",
        b" cpu",
        b"cpu\n",
        b"cp\xffu",
    ];
    for v in bad {
        let v = std::ffi::OsStr::from_bytes(v);
        if !run_child(
            "env_value_child",
            &[("PCPU_COUNTER_RSEQ", v), ("EXPECT", "bad".as_ref())],
        ) {
            return;
        }
    }
    for v in ["cpu", "cid", "off", "auto", "", "force"] {
        run_child(
            "env_value_child",
            &[
                ("PCPU_COUNTER_RSEQ", v.as_ref()),
                ("EXPECT", "good".as_ref()),
            ],
        );
    }
}

/// Run by `unknown_env_value_is_an_error` with a `PCPU_COUNTER_RSEQ` and what to expect.
#[test]
fn env_value_child() {
    if !in_child("env_value_child") {
        return;
    }
    let value = std::env::var_os("PCPU_COUNTER_RSEQ").unwrap();
    let value = value.to_string_lossy();
    if std::env::var("EXPECT").unwrap() == "bad" {
        let err = rseq::RseqZone::new(8).unwrap_err();
        let Error::BadEnvVar {
            var,
            value: v,
            accepted,
        } = err
        else {
            panic!("{err:?}");
        };
        assert_eq!(
            (var, v, accepted),
            ("PCPU_COUNTER_RSEQ", &*value, "auto, cpu, cid, off, force")
        );
        let text = format!(
            "environment variable PCPU_COUNTER_RSEQ={value:?} is not one of the accepted \
             values: auto, cpu, cid, off, force"
        );
        assert_eq!(err.to_string(), text);
        assert_eq!(rseq::RseqZone::with_slots(1, 1).unwrap_err(), err);
        assert_eq!(rseq::RseqCounter::new().unwrap_err(), err);
        assert_eq!(rseq::path(), Path::Unusable { error: err });
        assert_eq!(
            rseq::path().to_string(),
            format!("none: no zone can be made ({text})")
        );
    } else {
        let z = rseq::RseqZone::new(8).unwrap();
        let c = z.alloc().unwrap();
        c.add(5);
        assert_eq!(c.fetch(), 5);
        let p = rseq::path();
        assert_eq!(z.path(), p);
        let off = Path::Fallback {
            reason: "PCPU_COUNTER_RSEQ=off",
        };
        if value == "off" {
            assert_eq!(p, off);
        } else {
            // rseq, or the fallback where the kernel or libc has none.
            assert_ne!(p, off);
            assert!(!matches!(p, Path::Unusable { .. }), "{p}");
        }
        // On a kernel known to lose rseq adds, every value but `force` (and `off`) falls
        // back, naming the kernel; `force` takes rseq.
        if let Some(why) = rseq::known_broken_kernel() {
            if value == "force" {
                assert!(matches!(p, Path::Rseq { .. }), "{p}");
            } else if value != "off" {
                assert_eq!(p, Path::Fallback { reason: why });
            }
        }
        if value == "cpu" {
            assert!(
                !matches!(
                    p,
                    Path::Rseq {
                        index: Index::ConcurrencyId,
                        ..
                    }
                ),
                "{p}"
            );
        }
    }
}

#[test]
fn memory_is_lazy() {
    let _g = serial();
    let z = rseq::RseqZone::new(512).unwrap();
    if std::fs::metadata("/proc/self/smaps").is_err() {
        eprintln!("no /proc/self/smaps: skipped");
        return;
    }
    let before = z
        .resident_bytes()
        .expect("smaps is readable: the zone's entry is found");
    let c = z.alloc().unwrap();
    assert_eq!(c.fetch(), 0);
    let read = z.resident_bytes().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            pin(Some(0));
            (0..1000).for_each(|_| c.inc());
        });
    });
    let one = z.resident_bytes().unwrap();
    let one_thread_blocks = (0..=z.nslots())
        .filter(|&b| c.block_slot(b).unwrap() != 0)
        .count();
    std::thread::scope(|s| {
        for i in 0..8 {
            let c = &c;
            s.spawn(move || {
                pin(Some(i));
                (0..1000).for_each(|_| c.inc());
            });
        }
    });
    let all = z.resident_bytes().unwrap();
    eprintln!(
        "memory: mapped {} B ({} blocks of {} B); resident {before} B new, {read} B after alloc \
         and fetch, {one} B after one pinned thread, {all} B after 8 threads; path {}",
        z.mapped_bytes(),
        z.nslots() + 1,
        z.stride(),
        z.path()
    );
    assert_eq!(c.fetch(), 9000);
    assert_eq!(before, 0);
    assert_eq!(read, 0, "alloc and fetch leave untouched blocks unbacked");
    // The blocks the pinned thread's adds went to (its own only: the 8 threads came after).
    let written = one_thread_blocks;
    assert_eq!(
        one,
        written * z.stride(),
        "the blocks one pinned thread wrote are backed, and only they"
    );
    // On one CPU the CPU index is one block. The concurrency ID of a pinned thread may be
    // taken back and handed out again (the kernel compacts the IDs of an mm), so with
    // `mm_cid` its adds may land in more than one block.
    if let Path::Rseq {
        index: Index::Cpu, ..
    } = z.path()
    {
        assert_eq!(written, 1, "one thread on one CPU writes one block");
    }
    assert!(written >= 1);
    assert!(all <= z.mapped_bytes());
}

/// How many blocks N threads use when each wanders over every CPU (re-pinned every 2000 adds):
/// printed for docs/linux.md (`cpu_id` uses the CPUs' blocks; `mm_cid` the concurrency IDs the
/// kernel handed out, which Linux 6.19 keeps per thread while the threads are no more than the
/// CPUs). Asserts the sums, and that on glibc's registration no add reached the shared block.
#[test]
fn blocks_used_by_wandering_threads() {
    const ADDS: u64 = 40_000;
    let _g = serial();
    for threads in [1u64, 2, 4, 8] {
        let z = rseq::RseqZone::new(8).unwrap();
        let c = z.alloc().unwrap();
        // All start together: the threads add at the same time, not one after another.
        let start = std::sync::Barrier::new(threads as usize);
        std::thread::scope(|s| {
            for i in 0..threads as usize {
                let (c, start) = (&c, &start);
                s.spawn(move || {
                    start.wait();
                    for k in 0..ADDS as usize {
                        if k % 2000 == 0 {
                            pin(Some(i + k / 2000));
                        }
                        c.inc();
                    }
                });
            }
        });
        assert_eq!(c.fetch(), threads * ADDS);
        let blocks: Vec<u64> = (0..=z.nslots()).map(|b| c.block_slot(b).unwrap()).collect();
        assert_eq!(blocks.iter().sum::<u64>(), threads * ADDS);
        if let Path::Rseq {
            glibc_registered: true,
            ..
        } = z.path()
        {
            assert_eq!(blocks[z.nslots()], 0, "no add in the shared block");
        }
        let used = blocks.iter().filter(|&&v| v != 0).count();
        eprintln!(
            "blocks: {threads} threads wandering over {} CPUs used {used} of {} blocks {blocks:?}; {}",
            ncpus(),
            z.nslots() + 1,
            z.path()
        );
    }
}

#[test]
fn zone_full_and_reuse() {
    let z = rseq::RseqZone::with_slots(1, 1).unwrap();
    assert_eq!(z.capacity(), 512);
    let cs: Vec<_> = (0..512).map(|_| z.alloc().unwrap()).collect();
    assert!(z.alloc().is_err());
    cs[7].add(5);
    drop(cs);
    let c = z.alloc().unwrap();
    assert_eq!(c.fetch(), 0, "a reused slot reads 0");
    // nslots 1 on a 2-CPU machine: CPU 1's adds take the shared block, still exact.
    std::thread::scope(|s| {
        for i in 0..4 {
            let c = &c;
            s.spawn(move || {
                pin(Some(i));
                (0..5000).for_each(|_| c.inc());
            });
        }
    });
    assert_eq!(c.fetch(), 20_000);
}

/// The other profiles, each in a child process running the storm tests.
#[test]
fn profiles_in_child_processes() {
    if std::env::var_os("PCPU_COUNTER_RSEQ_CHILD").is_some() {
        return;
    }
    if let Path::Fallback { reason } = rseq::path() {
        if reason.contains("ENOSYS") {
            eprintln!("no rseq here ({reason}): profiles skipped");
            return;
        }
    }
    let exe = std::env::current_exe().unwrap();
    let profiles: [(&str, &str, &str); 4] = [
        ("PCPU_COUNTER_RSEQ", "cpu", "index cpu_id"),
        ("PCPU_COUNTER_RSEQ", "cid", "rseq"),
        ("PCPU_COUNTER_RSEQ", "off", "fallback"),
        ("GLIBC_TUNABLES", "glibc.pthread.rseq=0", "own registration"),
    ];
    // On a kernel known to lose rseq adds each rseq profile takes the fallback, naming it.
    let gate = rseq::known_broken_kernel();
    for (var, value, expect) in profiles {
        let expect = match gate {
            Some(why) if value != "off" => why,
            _ => expect,
        };
        let out = std::process::Command::new(&exe)
            .args([
                "--test-threads=1",
                "--nocapture",
                "storm_profile",
                "failed_registration",
                "adds_land_in_the_current_block",
                "unregistered_thread_registers",
            ])
            .env_remove("PCPU_COUNTER_RSEQ")
            .env(var, value)
            .env("PCPU_COUNTER_RSEQ_CHILD", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        let line = text
            .lines()
            .find(|l| l.starts_with("profile:"))
            .unwrap_or("");
        eprintln!("{var}={value}: {line}");
        assert!(out.status.success(), "{var}={value}:\n{text}");
        assert!(line.contains(expect), "{var}={value}: {line}");
    }
}

/// Run by `profiles_in_child_processes` in each child (and harmless on its own).
#[test]
fn storm_profile() {
    let _g = serial();
    let t = Target::new(product_add);
    let (expected, got) = run(&t, STORM);
    eprintln!(
        "profile: {} expected {expected} counted {got}",
        rseq::path()
    );
    assert_eq!(got, expected);
}

/// The signature glibc registers its areas with (and that unregistering one must give).
#[cfg(target_arch = "x86_64")]
const GLIBC_SIG: u32 = 0x5305_3053;
#[cfg(target_arch = "aarch64")]
const GLIBC_SIG: u32 = 0xd428_bc00;

/// The calling thread's glibc rseq area: the thread pointer plus `__rseq_offset`.
fn glibc_area() -> *mut u8 {
    // SAFETY: dlsym of glibc's constant; the thread pointer read has no side effects.
    unsafe {
        let off = *(libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr()) as *const isize);
        let tp: *mut u8;
        #[cfg(target_arch = "x86_64")]
        core::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp);
        #[cfg(target_arch = "aarch64")]
        core::arch::asm!("mrs {}, tpidr_el0", out(reg) tp);
        tp.wrapping_offset(off)
    }
}

/// A thread whose own registration fails adds to the shared block, with locked adds, exactly
/// (only on the own-registration path: `GLIBC_TUNABLES=glibc.pthread.rseq=0`).
#[test]
fn failed_registration_takes_the_shared_block() {
    let Path::Rseq {
        glibc_registered: false,
        ..
    } = rseq::path()
    else {
        eprintln!("glibc registers the areas here: skipped");
        return;
    };
    #[repr(C, align(32))]
    struct Area([u8; 32]);
    let c = zone().alloc().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            // glibc registers threads made by a thread that has an area registered, even with
            // its tunable off (it copies the creator's state): unregister glibc's first.
            let tp_area = glibc_area();
            // SAFETY: unregistering this thread's glibc area (flag 1), with its signature.
            unsafe { libc::syscall(libc::SYS_rseq, tp_area, 32u32, 1, GLIBC_SIG) };
            // Another area registered then: the crate's registration of glibc's area fails
            // (EINVAL). Leaked: the kernel writes it until the thread exits.
            // cpu_id reads RSEQ_CPU_ID_UNINITIALIZED (-1), as librseq initialises its area.
            let mut bytes = [0u8; 32];
            bytes[4..8].copy_from_slice(&(-1i32).to_ne_bytes());
            let other: &'static mut Area = Box::leak(Box::new(Area(bytes)));
            // SAFETY: a 32-byte, 32-aligned area that lives forever, for this thread.
            let r =
                unsafe { libc::syscall(libc::SYS_rseq, other as *mut Area, 32u32, 0, GLIBC_SIG) };
            let errno = std::io::Error::last_os_error();
            assert_eq!(r, 0, "registering another area: {errno}");
            (0..10_000).for_each(|_| c.inc());
        });
    });
    assert_eq!(c.fetch(), 10_000);
    assert_eq!(
        c.block_slot(zone().nslots()),
        Ok(10_000),
        "all in the shared block"
    );
}

/// The deliberately broken adds, for x86_64 (on the rseq kernels they need).
#[cfg(target_arch = "x86_64")]
mod broken {
    use super::*;

    /// The CPU read outside any critical section, then a non-locked add: the commit split
    /// from the CPU check. A thread preempted in between and resumed on another CPU adds
    /// (non-locked) to a slot whose CPU's thread adds to it at the same moment.
    ///
    /// The CPU is read on every 256th add of a thread (a check hoisted out of a loop): with
    /// the read on every add the window is a few instructions and, on 2 cores, the harness
    /// saw no loss in 20 attempts (nor with every 16th); hoisted further it loses adds.
    fn split_add(t: &Target, v: i64) {
        std::thread_local! {
            static CACHED: core::cell::Cell<(usize, usize)> =
                const { core::cell::Cell::new((0, 0)) };
        }
        let (n, cached) = CACHED.with(|c| c.get());
        let cpu = if n % 256 == 0 {
            // SAFETY: sched_getcpu has no preconditions.
            unsafe { libc::sched_getcpu() as usize }
        } else {
            cached
        };
        CACHED.with(|c| c.set((n + 1, cpu)));
        let block = cpu.min(t.nslots());
        let slot = t.slot0() + block * t.stride();
        // SAFETY: `slot` is the target counter's slot in a block of the zone.
        unsafe {
            core::arch::asm!("add qword ptr [{s}], {v}", s = in(reg) slot, v = in(reg) v,
                options(nostack))
        };
    }

    /// glibc's `__rseq_offset` when its registration is on (looked up once: `dlsym` is not
    /// async-signal-safe, and the signal handler adds through `giving_up_add`).
    fn rseq_offset() -> Option<isize> {
        static OFF: OnceLock<Option<isize>> = OnceLock::new();
        *OFF.get_or_init(lookup_rseq_offset)
    }

    fn lookup_rseq_offset() -> Option<isize> {
        // SAFETY: dlsym on NUL-terminated names; the symbols are glibc's constants.
        unsafe {
            let off = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr());
            let size = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr());
            if off.is_null() || size.is_null() || *(size as *const u32) == 0 {
                return None;
            }
            Some(*(off as *const isize))
        }
    }

    /// A correct critical section whose abort handler gives up (leaves as if done) instead
    /// of retrying: every add a signal or preemption aborts is lost. `tests/asm_copies.rs`
    /// checks that its section, descriptor and signature are the product's.
    fn giving_up_add(t: &Target, v: i64) {
        let roff = rseq_offset().unwrap_or(0);
        let (slot0, stride, n) = (t.slot0(), t.stride(), t.nslots());
        let done: usize;
        // SAFETY: as the product's section, except the abort handler (the point).
        unsafe {
            core::arch::asm!(
                "lea rcx, [rip + 3f]",
                "mov rax, qword ptr fs:[0]",
                "add rax, {roff}",
                "mov qword ptr [rax + 8], rcx",
                "2:",
                "mov ecx, dword ptr [rax + 4]",
                "cmp rcx, {n}",
                "jae 8f",
                "imul rcx, {stride}",
                "add qword ptr [rcx + {slot0}], {v}",
                "4:",
                "mov ecx, 1",
                "jmp 9f",
                "8:",
                "xor ecx, ecx",
                "9:",
                ".pushsection __rseq_cs, \"aw\"",
                ".balign 32",
                "3:",
                ".long 0, 0",
                ".quad 2b, 4b - 2b, 5f",
                ".popsection",
                ".pushsection __rseq_failure, \"ax\"",
                ".byte 0x0f, 0xb9, 0x3d",
                ".long 0x53053053",
                "5:",
                "mov ecx, 1",
                "jmp 9b",
                ".popsection",
                roff = in(reg) roff,
                n = in(reg) n,
                stride = in(reg) stride,
                slot0 = in(reg) slot0,
                v = in(reg) v,
                out("rax") _,
                out("rcx") done,
                options(nostack),
            );
        }
        if done == 0 {
            super::product_add(t, v);
        }
    }

    /// How many storms a broken add gets before the harness is declared blind: a count, not
    /// a time. An idle machine catches both broken adds within a few storms; a loaded one,
    /// where the signalling thread and the migrations wait for a core, can need tens.
    const ATTEMPTS: usize = 1000;

    /// Runs the storm on a broken add up to `attempts` times; returns the first loss seen.
    fn first_loss(add: fn(&Target, i64), attempts: usize) -> Option<(usize, u64, u64)> {
        let _g = serial();
        let t = Target::new(add);
        (1..=attempts).find_map(|a| {
            let (expected, got) = run(&t, Storm { churn: 0, ..STORM });
            (got != expected).then_some((a, expected, got))
        })
    }

    #[test]
    fn harness_catches_cpu_read_outside_the_section() {
        let loss = first_loss(split_add, ATTEMPTS);
        eprintln!("split add: {loss:?} (attempt, expected, counted)");
        assert!(
            loss.is_some(),
            "the harness missed a split CPU check and commit in {ATTEMPTS} storms"
        );
    }

    #[test]
    fn harness_catches_abort_handler_that_gives_up() {
        if rseq_offset().is_none() || matches!(rseq::path(), Path::Fallback { .. }) {
            eprintln!("glibc's rseq registration is off: skipped");
            return;
        }
        let loss = first_loss(giving_up_add, ATTEMPTS);
        eprintln!("giving-up abort: {loss:?} (attempt, expected, counted)");
        assert!(
            loss.is_some(),
            "the harness missed an abort handler that does not retry in {ATTEMPTS} storms"
        );
    }
}

/// Signed totals: a gauge that goes below zero reads negative through `fetch_i64`, and the
/// same bits through `fetch`.
#[test]
fn signed_reads() {
    let c = rseq::RseqCounter::new().unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| (0..1000).for_each(|_| c.add(-3)));
        }
    });
    c.add(7);
    assert_eq!(c.fetch_i64(), -11_993);
    assert_eq!(c.fetch(), (-11_993i64) as u64);
    c.add(i64::MAX);
    assert_eq!(c.fetch_i64(), i64::MAX - 11_993);
    assert_eq!(c.fetch_and_zero() as i64, i64::MAX - 11_993);
    assert_eq!(c.fetch_i64(), 0);
    static S: rseq::RseqStaticCounter = rseq::RseqStaticCounter::new();
    S.add(-5);
    assert_eq!((S.fetch_i64(), S.fetch()), (-5, (-5i64) as u64));
}

static HITS: rseq::RseqStaticCounter = rseq::RseqStaticCounter::new();
static BY_KIND: [rseq::RseqStaticCounter; 3] = [const { rseq::RseqStaticCounter::new() }; 3];

/// Static counters, as an outside crate declares them: one line, const, counted from many
/// migrating threads; an array's elements are separate counters; zero and fetch_and_zero.
#[test]
fn static_counters_count() {
    assert_eq!(HITS.error(), None);
    std::thread::scope(|s| {
        for i in 0..8 {
            s.spawn(move || {
                for k in 0..4000 {
                    if k % 1000 == 0 {
                        pin(Some(i + k / 1000));
                    }
                    HITS.inc();
                    BY_KIND[k % 3].add(2);
                }
            });
        }
    });
    assert_eq!(HITS.fetch(), 32_000);
    // 4000 adds per thread: k % 3 is 0 for 1334 of them, 1 and 2 for 1333.
    let kinds: Vec<u64> = BY_KIND.iter().map(|c| c.fetch()).collect();
    assert_eq!(kinds, [8 * 1334 * 2, 8 * 1333 * 2, 8 * 1333 * 2]);
    assert_eq!(BY_KIND[1].fetch_and_zero(), 21_328);
    assert_eq!(BY_KIND[1].fetch(), 0);
    BY_KIND[2].zero();
    BY_KIND[2].add(4);
    assert_eq!(BY_KIND[2].fetch(), 4);
    assert_eq!(BY_KIND[0].fetch(), 21_344, "the others' zeroes leave it");
    assert!(format!("{:?}", BY_KIND[2]).contains("value: 4"));
}

/// A static counter first used when the process-wide zone's slots are all in use and no chunk
/// can be mapped (`mmap` refused under an address-space limit) counts exactly on its atomic
/// and says why (in a child: it fills the process-wide zone and limits the address space).
#[test]
fn static_counter_when_mmap_fails() {
    run_child("static_counter_mmap_fails_child", &[]);
}

#[test]
fn static_counter_mmap_fails_child() {
    if !in_child("static_counter_mmap_fails_child") {
        return;
    }
    static LATE: rseq::RseqStaticCounter = rseq::RseqStaticCounter::new();
    static EARLY: rseq::RseqStaticCounter = rseq::RseqStaticCounter::new();
    EARLY.inc();
    let zone = rseq::process_zone().unwrap();
    assert!(zone.grows());
    let mut held: Vec<_> = (0..rseq::GLOBAL_CAPACITY - 1)
        .map(|_| rseq::RseqCounter::new().unwrap())
        .collect();
    assert_eq!(zone.in_use(), rseq::GLOBAL_CAPACITY);
    assert_eq!(zone.capacity(), rseq::GLOBAL_CAPACITY, "no chunk yet");
    let refused = Error::OutOfMemory {
        bytes: zone.chunk_layout().size(),
    };
    // No room for one more mapping: the next alloc would need a chunk.
    limit_as(vm_size());
    let new = rseq::RseqCounter::new().map(|_| ());
    let late = LATE.error();
    limit_as(libc::RLIM_INFINITY);
    assert_eq!(new, Err(refused));
    assert_eq!(late, Some(refused));
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                (0..1000).for_each(|_| {
                    LATE.add(3);
                    EARLY.add(3);
                })
            });
        }
    });
    assert_eq!(EARLY.error(), None);
    assert_eq!((LATE.fetch(), EARLY.fetch()), (12_000, 12_001));
    LATE.add(-12_005);
    assert_eq!(LATE.fetch_i64(), -5);
    assert_eq!(LATE.fetch_and_zero(), (-5i64) as u64);
    LATE.add(2);
    LATE.zero();
    assert_eq!(LATE.fetch(), 0);
    // With the limit lifted the zone grows again, but a spilled counter keeps its atomic.
    held.push(rseq::RseqCounter::new().unwrap());
    assert_eq!(zone.capacity(), 2 * rseq::GLOBAL_CAPACITY, "one chunk");
    held.last().unwrap().add(7);
    assert_eq!(held.last().unwrap().fetch(), 7);
    LATE.inc();
    assert_eq!((LATE.fetch(), LATE.error()), (1, Some(refused)));
    assert!(format!("{LATE:?}").contains("OutOfMemory"), "{LATE:?}");
}

/// 100,000 static counters live at once in the process-wide zone, which grows by chunks to
/// hold them: first used by four threads at once (each starting at its own quarter), added
/// to from them on changing CPUs, every sum exact, one slot per counter (in a child: it
/// counts the process-wide zone's slots).
#[test]
fn static_counters_by_the_hundred_thousand() {
    run_child("hundred_thousand_statics_child", &[]);
}

#[test]
fn hundred_thousand_statics_child() {
    if !in_child("hundred_thousand_statics_child") {
        return;
    }
    const N: usize = 100_000;
    const THREADS: usize = 4;
    static MANY: [rseq::RseqStaticCounter; N] = [const { rseq::RseqStaticCounter::new() }; N];
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                for round in 0..2 {
                    pin(Some(t + round));
                    for k in 0..N {
                        let i = (k + t * N / THREADS) % N;
                        MANY[i].add(1 + (i % 7) as i64);
                    }
                }
            });
        }
    });
    let wrong: Vec<_> = (0..N)
        .filter(|&i| MANY[i].fetch() != (2 * THREADS * (1 + i % 7)) as u64)
        .collect();
    assert!(
        wrong.is_empty(),
        "{} wrong sums: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(8)]
    );
    assert!(MANY.iter().all(|c| c.error().is_none()), "none spilled");
    let zone = rseq::process_zone().unwrap();
    assert_eq!(
        zone.in_use(),
        N,
        "one slot per counter (the races' losers freed theirs)"
    );
    // The first blocks and 24 chunks of as many slots, and up to one more per other thread:
    // threads that find the zone full at once each map a chunk (the core takes them all).
    let needed = N.div_ceil(rseq::GLOBAL_CAPACITY) * rseq::GLOBAL_CAPACITY;
    let capacity = zone.capacity();
    assert!(
        (needed..=needed + (THREADS - 1) * rseq::GLOBAL_CAPACITY).contains(&capacity),
        "{capacity} slots for {N} counters"
    );
}

/// The chunk (its address) that holds `c`'s slots in `zone`.
fn chunk_of(zone: &rseq::RseqZone, c: &rseq::RseqCounter<'_>) -> usize {
    zone.layout().base.wrapping_add(c.offset()) & !(zone.chunk_layout().align() - 1)
}

/// Whether `addr` lies in one of the process's mappings.
fn mapped(addr: usize) -> bool {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .any(|l| {
            let range = l.split_whitespace().next().unwrap();
            let (a, b) = range.split_once('-').unwrap();
            let (a, b) = (
                usize::from_str_radix(a, 16).unwrap(),
                usize::from_str_radix(b, 16).unwrap(),
            );
            a <= addr && addr < b
        })
}

/// The churn in the process-wide zone: long-lived counters fill the first blocks and a chunk
/// and a half; four threads on changing CPUs each allocate counters (into chunks), add to
/// them, free every other one and allocate as many again (taking slots just freed, which
/// had counts), add to those, add to the long-lived ones, check and free them all. Returns
/// the wrong sums.
fn chunk_churn() -> usize {
    const THREADS: usize = 4;
    const ROUNDS: usize = 8;
    const BATCH: usize = 2000;
    let zone = rseq::process_zone().unwrap();
    let per_chunk = zone.stride() / 8;
    let keep: Vec<_> = (0..rseq::GLOBAL_CAPACITY + per_chunk * 3 / 2)
        .map(|_| rseq::RseqCounter::new().unwrap())
        .collect();
    let bad = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (keep, bad) = (&keep, &bad);
            s.spawn(move || {
                for round in 0..ROUNDS {
                    pin(Some(t + round));
                    let mut mine: Vec<_> = (0..BATCH)
                        .map(|i| (rseq::RseqCounter::new().unwrap(), i + round))
                        .collect();
                    mine.iter().for_each(|(c, v)| c.add(*v as i64));
                    let mut i = 0;
                    mine.retain(|_| {
                        i += 1;
                        i % 2 == 0
                    });
                    for i in 0..BATCH / 2 {
                        let c = rseq::RseqCounter::new().unwrap();
                        c.add((3 * i + 1) as i64);
                        mine.push((c, 3 * i + 1));
                    }
                    keep.iter().for_each(|c| c.inc());
                    let wrong = mine.iter().filter(|(c, v)| c.fetch() != *v as u64).count();
                    bad.fetch_add(wrong, Ordering::Relaxed);
                }
            });
        }
    });
    let want = (THREADS * ROUNDS) as u64;
    bad.load(Ordering::Relaxed) + keep.iter().filter(|c| c.fetch() != want).count()
}

/// The process-wide zone's chunks go back when they empty (bar a spare), and the churn across
/// chunks counts exactly (in a child: it counts the zone's chunks and mappings), on the
/// default path and on the fallback (every add out of line and locked).
#[test]
fn chunks_churn_and_go_back() {
    run_child("chunks_churn_child", &[]);
    run_child(
        "chunks_churn_child",
        &[("PCPU_COUNTER_RSEQ", "off".as_ref())],
    );
}

#[test]
fn chunks_churn_child() {
    if !in_child("chunks_churn_child") {
        return;
    }
    let zone = rseq::process_zone().unwrap();
    let per_chunk = zone.stride() / 8;
    // The first blocks and three chunks, filled; each chunk's counters add like the others.
    let all: Vec<_> = (0..rseq::GLOBAL_CAPACITY + 3 * per_chunk)
        .map(|_| rseq::RseqCounter::new().unwrap())
        .collect();
    assert_eq!(zone.capacity(), 4 * rseq::GLOBAL_CAPACITY);
    let mut chunks: Vec<usize> = all[rseq::GLOBAL_CAPACITY..]
        .iter()
        .map(|c| chunk_of(zone, c))
        .collect();
    chunks.dedup();
    assert_eq!(chunks.len(), 3, "{chunks:x?}");
    std::thread::scope(|s| {
        for t in 0..4 {
            let all = &all;
            s.spawn(move || {
                pin(Some(t));
                all.iter().step_by(97).for_each(|c| c.add(2));
            });
        }
    });
    assert!(all.iter().step_by(97).all(|c| c.fetch() == 8));
    // Emptied, the chunks are unmapped but the last, kept as the spare.
    let _ = mapped(0);
    drop(all);
    assert_eq!((zone.in_use(), zone.capacity()), (0, rseq::GLOBAL_CAPACITY));
    let kept: Vec<_> = chunks.iter().filter(|&&c| mapped(c)).collect();
    assert_eq!(
        kept.len(),
        1,
        "only the spare stays mapped: {kept:x?} of {chunks:x?}"
    );
    // The next chunk needed is the spare.
    let first: Vec<_> = (0..=rseq::GLOBAL_CAPACITY)
        .map(|_| rseq::RseqCounter::new().unwrap())
        .collect();
    assert_eq!(chunk_of(zone, first.last().unwrap()), *kept[0]);
    drop(first);
    assert_eq!(chunk_churn(), 0, "wrong sums in the churn");
    // Every chunk the churn used went back (or is the spare). A chunk mapped by a thread that
    // raced another to grow the zone stays until an alloc needs it: at most one per other
    // thread, never used, so never emptied.
    assert_eq!(zone.in_use(), 0);
    assert!(zone.capacity() <= rseq::GLOBAL_CAPACITY + 3 * per_chunk);
}

/// Runs only in the broken build (`cargo xtask verify --only broken`): the same churn finds a
/// reused chunk slot that was not cleared.
#[cfg(pcpu_counter_broken = "chunk_slot_not_cleared")]
#[test]
fn chunk_churn_catches_an_uncleared_slot() {
    assert!(
        run_child("broken_chunk_churn_child", &[]),
        "the churn runs in a child process"
    );
}

#[cfg(pcpu_counter_broken = "chunk_slot_not_cleared")]
#[test]
fn broken_chunk_churn_child() {
    if !in_child("broken_chunk_churn_child") {
        return;
    }
    let wrong = chunk_churn();
    assert!(wrong > 0, "no wrong sum in the churn");
    eprintln!("the churn saw {wrong} wrong sums");
}

/// A zone of one's own grows when asked (and only then): owned counters past its capacity,
/// from several threads, exact; a second `grow` is an error.
#[test]
fn own_zone_grows_when_asked() {
    use std::sync::Arc;
    let zone = Arc::new(rseq::RseqZone::new(1).unwrap());
    let slots = zone.capacity();
    let first: Vec<_> = (0..slots).map(|_| zone.alloc().unwrap()).collect();
    assert!(matches!(zone.alloc(), Err(Error::ZoneFull { .. })));
    assert!(!zone.grows());
    drop(first);
    zone.grow().unwrap();
    assert_eq!(zone.grow(), Err(Error::SourceAlreadySet));
    let many: Vec<_> = (0..3 * slots + 5)
        .map(|_| rseq::RseqOwnedCounter::new(&zone).unwrap())
        .collect();
    assert_eq!(
        zone.capacity(),
        4 * slots,
        "the first blocks and three chunks"
    );
    std::thread::scope(|s| {
        for t in 0..4 {
            let many = &many;
            s.spawn(move || {
                pin(Some(t));
                many.iter().enumerate().for_each(|(i, c)| c.add(i as i64));
            });
        }
    });
    assert!(many
        .iter()
        .enumerate()
        .all(|(i, c)| c.fetch() == 4 * i as u64));
    assert_eq!(
        zone.adds_inline(),
        rseq::process_zone().unwrap().adds_inline()
    );
    drop(zone);
    drop(many);
    // One per-CPU block: the other CPUs' adds are locked adds to the chunks' shared parts.
    let zone = rseq::RseqZone::with_slots(1, 1).unwrap();
    zone.grow().unwrap();
    let many: Vec<_> = (0..3 * slots).map(|_| zone.alloc().unwrap()).collect();
    std::thread::scope(|s| {
        for t in 0..4 {
            let many = &many;
            s.spawn(move || {
                pin(Some(t));
                many.iter().for_each(|c| c.add(t as i64 + 1));
            });
        }
    });
    assert!(many.iter().all(|c| c.fetch() == 10));
    let last = many.last().unwrap();
    let shared = last.block_slot(1).unwrap();
    assert_eq!(last.block_slot(0).unwrap() + shared, 10);
    if ncpus() > 1 {
        assert!(shared > 0, "a CPU past the first took the shared part");
    }
}

/// Counters add inline (two loads and the critical section) on the paths that need no check
/// per add, in zones with a block for every possible CPU; elsewhere through the out-of-line
/// path, counting exactly all the same. Run in every profile (`.ci/rseq.sh`, the children).
#[test]
fn adds_inline_where_the_path_allows() {
    let path = rseq::path();
    let inline = matches!(
        path,
        Path::Rseq {
            glibc_registered: true,
            ..
        } | Path::Rseq {
            index: Index::Cpu,
            ..
        }
    );
    let z = zone();
    assert_eq!(z.adds_inline(), inline, "{path}");
    assert_eq!(
        rseq::process_zone().unwrap().adds_inline(),
        inline,
        "{path}"
    );
    let more = rseq::RseqZone::with_slots(z.nslots() + 1, 8).unwrap();
    assert_eq!(more.adds_inline(), inline, "{path}: more blocks than CPUs");
    let one = rseq::RseqZone::with_slots(1, 8).unwrap();
    assert_eq!(
        one.adds_inline(),
        inline && z.nslots() == 1,
        "{path}: one block"
    );
    for zone in [&more, &one] {
        let c = zone.alloc().unwrap();
        std::thread::scope(|s| {
            for t in 0..4 {
                let c = &c;
                s.spawn(move || {
                    pin(Some(t));
                    (0..1000).for_each(|_| c.add(3));
                });
            }
        });
        assert_eq!(c.fetch(), 12_000, "{path}");
    }
}

/// The handles are as small as they need: a counter is its zone and its add's word, a static
/// counter its word and the atomic it counts on when the process-wide zone is full, an owned
/// counter a counter and its zone's `Arc`.
#[test]
fn handles_are_two_words() {
    let word = std::mem::size_of::<usize>();
    assert_eq!(std::mem::size_of::<rseq::RseqCounter<'_>>(), 2 * word);
    assert_eq!(std::mem::size_of::<rseq::RseqStaticCounter>(), 2 * word);
    assert_eq!(std::mem::size_of::<rseq::RseqOwnedCounter>(), 3 * word);
}

/// Static counters first used by several threads at once, each thread adding right at its
/// first use: every race for a slot ends with one slot per counter (the losers free theirs)
/// and every add counted (in a child: it counts the process-wide zone's slots).
#[test]
fn static_counters_first_used_at_once() {
    run_child("static_first_use_child", &[]);
}

/// The first uses raced: per counter, the adds, and the process-wide zone's slots taken.
fn race_first_uses() -> (Vec<u64>, usize) {
    const N: usize = 512;
    static RACED: [rseq::RseqStaticCounter; N] = [const { rseq::RseqStaticCounter::new() }; N];
    let zone = rseq::process_zone().unwrap();
    let before = zone.in_use();
    // Two threads on two CPUs (where there are two), meeting at every counter's first use
    // (a spinning barrier: both leave it at once).
    let threads = 2;
    let arrived = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..threads {
            let arrived = &arrived;
            s.spawn(move || {
                pin(Some(t));
                for (round, c) in RACED.iter().enumerate() {
                    arrived.fetch_add(1, Ordering::SeqCst);
                    while arrived.load(Ordering::SeqCst) < (round + 1) * threads {
                        std::hint::spin_loop();
                    }
                    c.add(1 + t as i64);
                }
            });
        }
    });
    let counts = RACED.iter().map(|c| c.fetch()).collect();
    (counts, zone.in_use() - before)
}

#[test]
fn static_first_use_child() {
    if !in_child("static_first_use_child") {
        return;
    }
    let (counts, taken) = race_first_uses();
    assert!(counts.iter().all(|&c| c == 1 + 2), "{counts:?}");
    assert_eq!(taken, 512, "one slot per static counter");
}

/// Runs only in the broken build (`cargo xtask verify --only broken`): the same race finds a
/// first use whose loser adds to the slot it then frees, instead of the winner's.
#[cfg(pcpu_counter_broken = "static_first_use_keeps_own_slot")]
#[test]
fn the_same_race_catches_a_loser_that_keeps_its_slot() {
    assert!(
        run_child("broken_static_first_use_child", &[]),
        "the race needs rseq (a child process)"
    );
}

#[cfg(pcpu_counter_broken = "static_first_use_keeps_own_slot")]
#[test]
fn broken_static_first_use_child() {
    if !in_child("broken_static_first_use_child") {
        return;
    }
    let (counts, _) = race_first_uses();
    let lost = counts.iter().filter(|&&c| c != 1 + 2).count();
    assert!(lost > 0, "no first use lost an add in 512 races");
}

/// Counters that keep their own zone alive: moved to threads, in a `static`, outliving every
/// other handle of the zone; the zone is unmapped when the last goes.
#[test]
fn owned_counters_keep_their_zone() {
    use std::sync::Arc;
    static KEPT: OnceLock<rseq::RseqOwnedCounter> = OnceLock::new();
    let zone = Arc::new(rseq::RseqZone::new(16).unwrap());
    let counters: Vec<_> = (0..4)
        .map(|_| rseq::RseqOwnedCounter::new(&zone).unwrap())
        .collect();
    KEPT.set(rseq::RseqOwnedCounter::new(&zone).unwrap())
        .unwrap();
    assert_eq!((zone.in_use(), Arc::strong_count(&zone)), (5, 6));
    let weak = Arc::downgrade(&zone);
    drop(zone);
    let handles: Vec<_> = counters
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            std::thread::spawn(move || {
                (0..1000).for_each(|_| {
                    c.add(i as i64 + 1);
                    KEPT.get().unwrap().inc();
                });
                c.fetch()
            })
        })
        .collect();
    let sums: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(sums, [1000, 2000, 3000, 4000]);
    let kept = KEPT.get().unwrap();
    assert_eq!(kept.fetch(), 4000);
    // The four thread's counters are gone, their slots freed; the zone lives on in `KEPT`.
    assert_eq!((kept.zone().in_use(), weak.strong_count()), (1, 1));
    let zone = kept.zone();
    let c = rseq::RseqOwnedCounter::new(zone).unwrap();
    assert_eq!(c.fetch(), 0, "a reused slot reads 0");
    assert_eq!(
        format!("{c:?}"),
        format!("RseqCounter {{ offset: {}, value: 0 }}", c.offset())
    );
    let full: Vec<_> = (1..zone.capacity())
        .map(|_| rseq::RseqOwnedCounter::new(zone))
        .collect();
    assert_eq!(full.iter().filter(|r| r.is_err()).count(), 1);
    assert_eq!(
        rseq::RseqOwnedCounter::new(zone).unwrap_err(),
        Error::ZoneFull {
            capacity: zone.capacity()
        }
    );
    drop(full);
    drop(c);
    // A zone with no other handle goes with its last counter.
    let z = Arc::new(rseq::RseqZone::new(8).unwrap());
    let c = rseq::RseqOwnedCounter::new(&z).unwrap();
    let weak = Arc::downgrade(&z);
    drop(z);
    c.inc();
    assert_eq!((c.fetch(), weak.strong_count()), (1, 1));
    drop(c);
    assert_eq!(weak.strong_count(), 0);
}

/// The path chosen in code (`rseq::set_path`), each case in its own child process (the
/// path is per process): what it gives, over the environment variable; what is unavailable
/// and why, leaving the path unchosen; what comes too late.
#[test]
fn path_chosen_in_code() {
    for (case, env) in [
        ("fallback", None),
        ("fallback-over-env", Some(("PCPU_COUNTER_RSEQ", "cpu"))),
        ("cpu", Some(("PCPU_COUNTER_RSEQ", "off"))),
        ("cid", None),
        ("own", None),
        ("own", Some(("GLIBC_TUNABLES", "glibc.pthread.rseq=0"))),
        ("too-late", None),
        ("bad-env", Some(("PCPU_COUNTER_RSEQ", "CPU"))),
        ("force", None),
        ("force-over-env", Some(("PCPU_COUNTER_RSEQ", "off"))),
        ("force-late", None),
    ] {
        let mut vars: Vec<(&str, &std::ffi::OsStr)> = vec![("CASE", case.as_ref())];
        if let Some((k, v)) = env {
            vars.push((k, v.as_ref()));
        }
        if !run_child("set_path_child", &vars) {
            return;
        }
    }
}

#[test]
fn set_path_child() {
    if !in_child("set_path_child") {
        return;
    }
    let case = std::env::var("CASE").unwrap();
    // (Also inherited from a parent run with glibc's registration off, `.ci/rseq.sh`.)
    let glibc_off =
        std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.pthread.rseq=0"));
    let cid_offered = rseq::kernel_feature_size() >= 28;
    let too_late = |asked| Error::RseqPathTooLate { asked };
    let gate = rseq::known_broken_kernel();
    let chosen = match (case.as_str(), gate) {
        // A kernel known to lose rseq adds: every rseq choice but the forced one is refused
        // with the kernel's reason, leaving the path unchosen; the process falls back.
        ("cpu" | "cid" | "own" | "too-late", Some(why)) => {
            for (choice, asked) in [
                (rseq::Choice::CpuId, "rseq with cpu_id"),
                (rseq::Choice::ConcurrencyId, "rseq with mm_cid"),
                (rseq::Choice::OwnRegistration, "rseq with own registration"),
            ] {
                let e = rseq::set_path(choice).unwrap_err();
                assert_eq!(e, Error::RseqPathUnavailable { asked, reason: why });
                assert_eq!(
                    e.to_string(),
                    format!("the rseq add path {asked} is not available here: {why}")
                );
            }
            // Then the variable chooses (`off` names itself), or the gate.
            let p = rseq::path();
            let reason = match std::env::var("PCPU_COUNTER_RSEQ").as_deref() {
                Ok("off") => "PCPU_COUNTER_RSEQ=off",
                _ => why,
            };
            assert_eq!(p, Path::Fallback { reason });
            p
        }
        ("force" | "force-over-env", _) => {
            let p = rseq::set_path(rseq::Choice::ForceRseq).unwrap();
            assert_eq!(p, rseq_path(cid_offered, glibc_off));
            assert_eq!(
                rseq::set_path(rseq::Choice::Fallback),
                Err(too_late("fallback"))
            );
            assert_eq!(rseq::set_path(rseq::Choice::ForceRseq), Ok(p));
            if gate.is_some() {
                // Forced on a kernel that loses adds of threads racing on a block: one
                // thread's adds only (nothing races them), then no storm.
                let c = rseq::RseqCounter::new().unwrap();
                (0..1000).for_each(|_| c.inc());
                assert_eq!(c.fetch(), 1000);
                eprintln!("{case}: {p} (known broken: {gate:?})");
                return;
            }
            p
        }
        ("force-late", _) => {
            let p = rseq::path();
            match gate {
                Some(why) => {
                    assert_eq!(p, Path::Fallback { reason: why });
                    let e = rseq::set_path(rseq::Choice::ForceRseq).unwrap_err();
                    assert_eq!(e, too_late("rseq forced"));
                    assert_eq!(
                        e.to_string(),
                        "the rseq add path rseq forced was asked for after the process chose \
                         another (at its first zone or rseq::path call); call rseq::set_path \
                         before both"
                    );
                }
                None => assert_eq!(rseq::set_path(rseq::Choice::ForceRseq), Ok(p)),
            }
            p
        }
        (case, _) => match case {
            "fallback" | "fallback-over-env" => {
                let p = rseq::set_path(rseq::Choice::Fallback).unwrap();
                let code = Path::Fallback {
                    reason: "chosen in code (rseq::set_path)",
                };
                assert_eq!(p, code);
                assert_eq!(
                    rseq::set_path(rseq::Choice::CpuId),
                    Err(too_late("rseq with cpu_id"))
                );
                code
            }
            "cpu" => {
                let p = rseq::set_path(rseq::Choice::CpuId).unwrap();
                assert!(
                    matches!(
                        p,
                        Path::Rseq {
                            index: Index::Cpu,
                            glibc_registered
                        } if glibc_registered != glibc_off
                    ),
                    "{p}"
                );
                let e = rseq::set_path(rseq::Choice::Fallback).unwrap_err();
                assert_eq!(e, too_late("fallback"));
                assert_eq!(
                    e.to_string(),
                    "the rseq add path fallback was asked for after the process chose another \
                 (at its first zone or rseq::path call); call rseq::set_path before both"
                );
                if cid_offered {
                    assert_eq!(
                        rseq::set_path(rseq::Choice::ConcurrencyId),
                        Err(too_late("rseq with mm_cid"))
                    );
                }
                p
            }
            "cid" => {
                let r = rseq::set_path(rseq::Choice::ConcurrencyId);
                if cid_offered {
                    let p = r.unwrap();
                    assert_eq!(
                        p,
                        Path::Rseq {
                            index: Index::ConcurrencyId,
                            glibc_registered: !glibc_off
                        }
                    );
                    assert_eq!(
                        rseq::set_path(rseq::Choice::CpuId),
                        Err(too_late("rseq with cpu_id"))
                    );
                    p
                } else {
                    let e = r.unwrap_err();
                    assert_eq!(
                        e,
                        Error::RseqPathUnavailable {
                            asked: "rseq with mm_cid",
                            reason:
                                "the kernel does not offer mm_cid (AT_RSEQ_FEATURE_SIZE below 28)"
                        }
                    );
                    // Unchosen still: another choice is free.
                    rseq::set_path(rseq::Choice::CpuId).unwrap()
                }
            }
            "own" if glibc_off => {
                let p = rseq::set_path(rseq::Choice::OwnRegistration).unwrap();
                assert!(
                    matches!(
                        p,
                        Path::Rseq {
                            glibc_registered: false,
                            ..
                        }
                    ),
                    "{p}"
                );
                p
            }
            "own" => {
                let e = rseq::set_path(rseq::Choice::OwnRegistration).unwrap_err();
                assert_eq!(
                    e.to_string(),
                    "the rseq add path rseq with own registration is not available here: glibc \
                 registers every thread's area (start the process with \
                 GLIBC_TUNABLES=glibc.pthread.rseq=0)"
                );
                // The failed call chose nothing.
                let p = rseq::set_path(rseq::Choice::CpuId).unwrap();
                assert_eq!(
                    rseq::set_path(rseq::Choice::OwnRegistration),
                    Err(too_late("rseq with own registration"))
                );
                p
            }
            "too-late" => {
                let p = rseq::path();
                assert_eq!(
                    rseq::set_path(rseq::Choice::Fallback),
                    Err(too_late("fallback"))
                );
                assert_eq!(p, rseq_path(cid_offered, glibc_off));
                // A choice the path satisfies succeeds, late or not.
                let same = if cid_offered {
                    rseq::Choice::ConcurrencyId
                } else {
                    rseq::Choice::CpuId
                };
                assert_eq!(rseq::set_path(same), Ok(p));
                p
            }
            "bad-env" => {
                let e = rseq::RseqZone::new(1).unwrap_err();
                assert!(matches!(e, Error::BadEnvVar { .. }), "{e:?}");
                assert_eq!(rseq::set_path(rseq::Choice::Fallback), Err(e));
                assert_eq!(rseq::set_path(rseq::Choice::Auto), Err(e));
                return;
            }
            other => panic!("unknown case {other}"),
        },
    };
    assert_eq!(rseq::set_path(rseq::Choice::Auto), Ok(chosen));
    assert_eq!(rseq::path(), chosen);
    let _g = serial();
    let t = Target::new(product_add);
    assert_eq!(t.counter.fetch(), 0);
    let (expected, got) = run(
        &t,
        Storm {
            threads: 8,
            adds: 5000,
            churn: 8,
            ..STORM
        },
    );
    eprintln!("{case}: {chosen}: expected {expected} counted {got}");
    assert_eq!(got, expected);
}

/// The length the crate registers a thread's area with (glibc's registration off): what the
/// kernel asks for, `AT_RSEQ_FEATURE_SIZE` rounded up to `AT_RSEQ_ALIGN`, at least 32; 32 (in
/// glibc's reserved area) where that is over the crate's 128-byte area.
fn own_len_expected() -> usize {
    // SAFETY: getauxval has no preconditions.
    let (feature, align) = unsafe { (libc::getauxval(27), libc::getauxval(28)) };
    let asked = (feature as usize)
        .next_multiple_of((align as usize).max(1))
        .max(32);
    if asked <= 128 {
        asked
    } else {
        32
    }
}

/// The length the calling thread's rseq area is registered with (0: none), as the kernel
/// reports it (`PTRACE_GET_RSEQ_CONFIGURATION`, Linux 5.13+) for a forked child, which
/// inherits the registration of the thread that forked it.
fn registered_len() -> u32 {
    #[repr(C)]
    #[derive(Default)]
    struct Config {
        area: u64,
        len: u32,
        sig: u32,
        flags: u32,
        pad: u32,
    }
    // SAFETY: the child calls only async-signal-safe functions, then exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0);
            libc::raise(libc::SIGSTOP);
            libc::_exit(0);
        }
    }
    assert!(pid > 0, "fork: {}", std::io::Error::last_os_error());
    let mut status = 0;
    // SAFETY: waiting for our child, stopped by its SIGSTOP.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let mut cfg = Config::default();
    // SAFETY: PTRACE_GET_RSEQ_CONFIGURATION (0x420f) writes at most `size_of::<Config>()`
    // bytes into `cfg` for our stopped tracee.
    let r = unsafe {
        libc::ptrace(
            0x420f,
            pid,
            core::mem::size_of::<Config>(),
            &mut cfg as *mut Config,
        )
    };
    let err = std::io::Error::last_os_error();
    // SAFETY: killing and reaping our child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, &mut status, 0);
    }
    assert!(r > 0, "PTRACE_GET_RSEQ_CONFIGURATION: {err}");
    cfg.len
}

/// A thread registered by the crate (glibc's registration off) is registered with the length
/// the kernel asks for, so that a kernel with the 6.19 rework applies its optimized mode; a
/// thread glibc registered has glibc's length (glibc 2.36: 32 bytes, `__rseq_size` 20).
#[test]
fn registers_the_length_the_kernel_asks_for() {
    let p = rseq::path();
    if let Path::Fallback { reason } = p {
        if reason.contains("ENOSYS") {
            eprintln!("no rseq here ({reason}): skipped");
            return;
        }
    }
    let glibc_size = glibc_rseq_size().unwrap_or(0);
    let c = rseq::RseqCounter::new().unwrap();
    // A new thread, registered by glibc at its start or by the crate at its first add.
    let len = std::thread::spawn(move || {
        c.inc();
        registered_len()
    })
    .join()
    .unwrap();
    // SAFETY: getauxval has no preconditions.
    let (feature, align) = unsafe { (libc::getauxval(27), libc::getauxval(28)) };
    eprintln!(
        "registration: {len} bytes; glibc __rseq_size {glibc_size}; AT_RSEQ_FEATURE_SIZE \
         {feature}, AT_RSEQ_ALIGN {align}; path: {p}"
    );
    match p {
        Path::Rseq {
            glibc_registered: false,
            ..
        } => {
            assert_eq!(len as usize, own_len_expected(), "{p}");
            assert!(p
                .to_string()
                .ends_with(&format!("own registration of {len} bytes)")));
        }
        // glibc's: at least the original 32 bytes, and what it says it uses.
        _ if glibc_size != 0 => assert!(len >= 32 && len >= glibc_size, "{len}"),
        // Glibc's registration off and the fallback taken: the crate registered no thread
        // but the first.
        _ => {}
    }
}

/// `kernel_feature_size` is the kernel's `AT_RSEQ_FEATURE_SIZE`, 20 where the kernel does
/// not give it.
#[test]
fn kernel_feature_size_is_the_auxv_value() {
    // SAFETY: getauxval has no preconditions.
    let aux = unsafe { libc::getauxval(27) } as usize;
    let want = if aux == 0 { 20 } else { aux };
    assert_eq!(rseq::kernel_feature_size(), want);
}

/// The handle's own methods: offset (where its slots lie, read through raw memory), zero,
/// fetch_and_zero, Debug; and the zone's Debug.
#[test]
fn counter_offsets_zero_and_debug() {
    let z = rseq::RseqZone::with_slots(1, 16).unwrap();
    let cs: Vec<_> = (0..3).map(|_| z.alloc().unwrap()).collect();
    let offs: Vec<usize> = cs.iter().map(|c| c.offset()).collect();
    assert!(
        offs.iter().all(|&o| o % 8 == 0 && o < z.stride()),
        "{offs:?}"
    );
    assert!(
        offs[0] != offs[1] && offs[1] != offs[2] && offs[0] != offs[2],
        "{offs:?}"
    );
    for (i, c) in cs.iter().enumerate() {
        c.add(10 + i as i64);
    }
    for (i, c) in cs.iter().enumerate() {
        let mut raw = 0u64;
        for block in 0..=z.nslots() {
            let addr = z.layout().base + block * z.stride() + c.offset();
            // SAFETY: the slot of a live counter in a live zone, read while no thread adds.
            raw = raw.wrapping_add(unsafe { (addr as *const u64).read_volatile() });
            assert_eq!(
                c.block_slot(block).unwrap(),
                // SAFETY: as above.
                unsafe { (addr as *const u64).read_volatile() }
            );
        }
        assert_eq!(raw, 10 + i as u64);
    }
    let c = &cs[1];
    assert_eq!(
        format!("{c:?}"),
        format!("RseqCounter {{ offset: {}, value: 11 }}", offs[1])
    );
    c.zero();
    assert_eq!(c.fetch(), 0);
    c.add(5);
    assert_eq!(c.fetch_and_zero(), 5);
    assert_eq!(c.fetch(), 0);
    c.add(2);
    assert_eq!((c.fetch(), cs[0].fetch(), cs[2].fetch()), (2, 10, 12));
    assert_eq!(
        format!("{z:?}"),
        format!(
            "RseqZone {{ nslots: 1, stride: 4096, capacity: 512, path: {:?} }}",
            rseq::path()
        )
    );
}

/// Where an add lands, on each path: a thread pinned to a CPU adds to that CPU's block with
/// the `cpu_id` index and the fallback, to a block below `nslots` with `mm_cid`, and never
/// to the shared block while it is registered (the profiles run it in child processes: own
/// registration, `cpu_id`, the fallback).
#[test]
fn adds_land_in_the_current_block() {
    let _g = serial();
    let z = rseq::RseqZone::new(8).unwrap();
    let n = z.nslots();
    let path = rseq::path();
    for k in 0..ncpus().min(4) {
        let c = z.alloc().unwrap();
        let cpu = allowed_cpus()[k];
        std::thread::scope(|s| {
            s.spawn(|| {
                pin(Some(k));
                (0..100).for_each(|_| c.add(3));
            });
        });
        let blocks: Vec<u64> = (0..=n).map(|b| c.block_slot(b).unwrap()).collect();
        let nonzero: Vec<usize> = (0..=n).filter(|&b| blocks[b] != 0).collect();
        assert_eq!(c.fetch(), 300);
        match path {
            Path::Rseq {
                index: Index::ConcurrencyId,
                ..
            } => assert!(nonzero.iter().all(|&b| b < n), "{path}: {nonzero:?}"),
            Path::Fallback { reason } if reason.contains("ENOSYS") => {}
            // `cpu_id`, or sched_getcpu on the fallback: the pinned CPU's block.
            _ => assert_eq!(nonzero, [cpu], "{path}: blocks {blocks:?}"),
        }
    }
}

/// On the fallback, a CPU at or past the zone's `nslots` adds to the shared block, a CPU
/// below it to its own (in a child: the path is chosen in code).
#[test]
fn fallback_blocks() {
    run_child("fallback_blocks_child", &[]);
}

#[test]
fn fallback_blocks_child() {
    if !in_child("fallback_blocks_child") {
        return;
    }
    rseq::set_path(rseq::Choice::Fallback).unwrap();
    let z = rseq::RseqZone::with_slots(1, 8).unwrap();
    for k in 0..ncpus().min(4) {
        let c = z.alloc().unwrap();
        let cpu = allowed_cpus()[k];
        std::thread::scope(|s| {
            s.spawn(|| {
                pin(Some(k));
                (0..100).for_each(|_| c.add(3));
            });
        });
        let want = if cpu == 0 { [300, 0] } else { [0, 300] };
        assert_eq!(
            [c.block_slot(0).unwrap(), c.block_slot(1).unwrap()],
            want,
            "CPU {cpu}"
        );
    }
}

/// A dropped zone gives back its mapping and its metadata (in a child, one thread: the
/// process's virtual size is then exact).
#[test]
fn dropped_zone_unmaps() {
    run_child("dropped_zone_unmaps_child", &[]);
}

#[test]
fn dropped_zone_unmaps_child() {
    if !in_child("dropped_zone_unmaps_child") {
        return;
    }
    fn vm_kib() -> u64 {
        let s = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = s.lines().find(|l| l.starts_with("VmSize:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
    fn mapped(addr: usize) -> bool {
        std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .any(|l| {
                let (a, b) = l
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .split_once('-')
                    .unwrap();
                let (a, b) = (
                    usize::from_str_radix(a, 16).unwrap(),
                    usize::from_str_radix(b, 16).unwrap(),
                );
                a <= addr && addr < b
            })
    }
    // A first zone and a warm-up of what the reads allocate.
    drop(rseq::RseqZone::new(8).unwrap());
    let _ = (vm_kib(), mapped(0));
    let before = vm_kib();
    // 2^22 counters: 32 MiB blocks each, and about 32.5 MiB of metadata (its own mmap).
    let z = rseq::RseqZone::with_slots(1, 1 << 22).unwrap();
    let (base, end) = (z.layout().base, z.layout().base + z.mapped_bytes() - 1);
    let guard_after = end + 1;
    assert!(mapped(base) && mapped(end));
    let during = vm_kib();
    assert!(
        during >= before + 2 * 32 * 1024 + 32 * 1024,
        "{before} -> {during} KiB"
    );
    drop(z);
    assert!(!mapped(base) && !mapped(end) && !mapped(guard_after) && !mapped(base - 4096));
    // (A little slack for the heap the reads grew meanwhile; the zone was 96 MiB.)
    let after = vm_kib();
    assert!(
        after <= before + 1024,
        "{before} -> {during} -> {after} KiB"
    );
}

/// A kernel without rseq, made so for a child process by a seccomp filter that answers
/// `rseq` with `ENOSYS`, with glibc's registration off (glibc registered nothing before the
/// filter): the process takes the fallback, says why, counts exactly, and `set_path` refuses
/// the rseq paths with that reason.
#[test]
fn no_rseq_in_the_kernel() {
    run_child(
        "no_rseq_child",
        &[("GLIBC_TUNABLES", "glibc.pthread.rseq=0".as_ref())],
    );
}

#[test]
fn no_rseq_child() {
    if !in_child("no_rseq_child") {
        return;
    }
    const ENOSYS_REASON: &str = "the kernel has no rseq (ENOSYS)";
    // BPF: load the syscall number; rseq -> ERRNO(ENOSYS), else allow.
    let filter = [
        libc::sock_filter {
            code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
            jt: 0,
            jf: 0,
            k: 0,
        },
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: libc::SYS_rseq as u32,
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        },
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: prctl with a valid filter program that outlives the call (the kernel copies it).
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const _
            ),
            0,
            "seccomp: {}",
            std::io::Error::last_os_error()
        );
    }
    for choice in [
        rseq::Choice::CpuId,
        rseq::Choice::ConcurrencyId,
        rseq::Choice::OwnRegistration,
    ] {
        let e = rseq::set_path(choice).unwrap_err();
        let Error::RseqPathUnavailable { reason, .. } = e else {
            panic!("{e:?}");
        };
        assert_eq!(reason, ENOSYS_REASON);
    }
    assert_eq!(
        rseq::path(),
        Path::Fallback {
            reason: ENOSYS_REASON
        }
    );
    let c = rseq::RseqCounter::new().unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| (0..1000).for_each(|_| c.add(2)));
        }
    });
    assert_eq!(c.fetch(), 8000);
}

/// The test binary's allocator: the system's, counting per thread the bytes allocated and
/// not freed, for `dropped_zone_frees_its_heap`.
struct Counting;

std::thread_local! {
    // Const-initialised, no destructor: usable from the allocator at any time.
    static NET: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
}

fn net_heap() -> isize {
    NET.with(|n| n.get())
}

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        NET.with(|n| n.set(n.get() + layout.size() as isize));
        // SAFETY: the caller's contract, forwarded.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        NET.with(|n| n.set(n.get() + layout.size() as isize));
        // SAFETY: the caller's contract, forwarded.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        NET.with(|n| n.set(n.get() - layout.size() as isize));
        // SAFETY: the caller's contract, forwarded.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new: usize) -> *mut u8 {
        NET.with(|n| n.set(n.get() + new as isize - layout.size() as isize));
        // SAFETY: the caller's contract, forwarded.
        unsafe { std::alloc::System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A zone dropped gives its heap back: its metadata and its core zone (counted per thread,
/// so that other tests' allocations do not show).
#[test]
fn dropped_zone_frees_its_heap() {
    drop(rseq::RseqZone::new(8).unwrap());
    let before = net_heap();
    let z = rseq::RseqZone::with_slots(1, 1 << 16).unwrap();
    let c = z.alloc().unwrap();
    c.inc();
    drop(c);
    assert!(
        net_heap() >= before + 8 * (1 << 16),
        "{before} -> {}",
        net_heap()
    );
    drop(z);
    assert_eq!(net_heap(), before);
}

/// On the own-registration path, a thread with no registered area registers glibc's area on
/// its first add and adds to the per-CPU blocks, not the shared one (run in the
/// own-registration profile's child; `GLIBC_TUNABLES=glibc.pthread.rseq=0`).
#[test]
fn unregistered_thread_registers_on_its_first_add() {
    let Path::Rseq {
        glibc_registered: false,
        ..
    } = rseq::path()
    else {
        eprintln!("not the own-registration path: skipped");
        return;
    };
    // cpu_id (offset 4), read volatile as the kernel writes it.
    // SAFETY: the area is this thread's, 32 bytes.
    let cpu_id = || unsafe { (glibc_area().wrapping_add(4) as *const i32).read_volatile() };
    let _g = serial();
    let c = zone().alloc().unwrap();
    if own_len_expected() != 32 {
        // The crate registers an area of its own (the kernel asks for more than glibc's 32
        // bytes): glibc's stays unregistered, and the new thread registers on its first add.
        std::thread::scope(|s| {
            s.spawn(|| {
                assert_eq!(registered_len(), 0, "a new thread starts unregistered");
                (0..1000).for_each(|_| c.add(3));
                assert_eq!(registered_len() as usize, own_len_expected());
            });
        });
        assert_eq!(c.fetch(), 3000);
        assert_eq!(c.block_slot(zone().nslots()), Ok(0));
        return;
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            // glibc registers threads made by a registered thread (it copies the creator's
            // state): unregister this one's area, so that it starts as a thread made by an
            // unregistered one.
            if cpu_id() >= 0 {
                // SAFETY: unregistering this thread's glibc area (flag 1), with its signature.
                let r = unsafe { libc::syscall(libc::SYS_rseq, glibc_area(), 32u32, 1, GLIBC_SIG) };
                assert_eq!(r, 0, "unregister: {}", std::io::Error::last_os_error());
            }
            assert!(cpu_id() < 0, "unregistered: cpu_id {}", cpu_id());
            (0..1000).for_each(|_| c.add(3));
            assert!(cpu_id() >= 0, "registered by the first add");
        });
    });
    assert_eq!(c.fetch(), 3000);
    assert_eq!(
        c.block_slot(zone().nslots()),
        Ok(0),
        "no add took the shared block"
    );
}

/// The rseq path a process takes by itself where rseq works: `mm_cid` where the kernel offers
/// it, else `cpu_id`; glibc's registration unless it is turned off.
fn rseq_path(cid_offered: bool, glibc_off: bool) -> Path {
    let index = if cid_offered {
        Index::ConcurrencyId
    } else {
        Index::Cpu
    };
    Path::Rseq {
        index,
        glibc_registered: !glibc_off,
    }
}

/// The face's former names still build and are the same types and zone as the `Rseq` names:
/// a counter made through them counts, and the old process-wide zone is the new one.
#[test]
#[allow(deprecated)]
fn former_names_are_the_rseq_names() {
    static OLD_STATIC: rseq::StaticCounter = rseq::StaticCounter::new();
    OLD_STATIC.add(3);
    let new_static: &rseq::RseqStaticCounter = &OLD_STATIC;
    assert_eq!(new_static.fetch(), 3);

    let old: rseq::Counter<'static> = rseq::Counter::new().unwrap();
    old.add(5);
    let new: &rseq::RseqCounter<'static> = &old;
    assert_eq!(new.fetch(), 5);

    assert!(std::ptr::eq(
        rseq::global_zone().unwrap(),
        rseq::process_zone().unwrap()
    ));

    let zone: std::sync::Arc<rseq::Zone> = std::sync::Arc::new(rseq::RseqZone::new(4).unwrap());
    let owned: rseq::OwnedCounter = rseq::RseqOwnedCounter::new(&zone).unwrap();
    owned.add(7);
    assert_eq!((owned.fetch(), zone.in_use()), (7, 1));
}
