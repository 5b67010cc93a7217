//! The `percpu` crate (ArceOS) owns the per-CPU register (feature `percpu-crate`): GS base on
//! x86_64, `TPIDR_EL1` on aarch64, `gp` on riscv64. The kernel lets percpu set up its areas
//! (`.percpu`, linked by `boot/percpu.ld`) and its register on every CPU, as ArceOS does, and
//! hosts the zone in a `def_percpu` array inside those areas; it never calls
//! `pcpu_counter::arch::set_cpu_base`. [`check`] then proves that percpu's own per-CPU value
//! and register survived the counting.

use core::sync::atomic::{AtomicU64, Ordering};

use pcpu_counter::{Counter, Error, Zone, ZoneLayout, ZoneMeta};
use pcpu_counter_testbed_protocol as protocol;

use crate::console::println;

#[cfg(all(target_arch = "riscv64", not(feature = "riscv-gp")))]
compile_error!("percpu keeps its per-CPU pointer in gp on riscv64: build with `riscv-gp` too");

/// Counters per CPU.
const SLOTS: usize = 128;

/// This CPU's index: a per-CPU value of the kernel's own, read through percpu.
#[percpu::def_percpu]
static CPU_ID: usize = usize::MAX;

/// The zone's slots: one array in every CPU's percpu area.
#[percpu::def_percpu]
static COUNTERS: [u64; SLOTS] = [0; SLOTS];

/// The zone's metadata: a zero baseline and a bitmap bit per slot.
static META: ZoneMeta<{ ZoneLayout::meta_words_for(SLOTS) }> = ZoneMeta::new();

/// The boot CPU, before any counter exists: percpu copies its template (area 0) into every
/// other area, then points this CPU's register at area 0.
pub fn init_bsp() {
    if let Err(e) = percpu::init_in_place() {
        println!("FAIL setup percpu::init_in_place: {e:?}");
        crate::boot::exit(false)
    }
    // With `percpu-early-check` the boot CPU's register is set later, in `main.rs`'s
    // `enter_cpu`, after the check that runs before the console.
    if cfg!(not(feature = "percpu-early-check")) {
        enter_cpu(0);
    }
    let layout = layout();
    println!(
        "percpu owns the register: {} areas from {:#x}, {} bytes apart ({} bytes each \
         unrounded), counters at offset {} ({} bytes)",
        layout.ncpus,
        layout.base,
        percpu::percpu_area_base(1) - layout.base,
        percpu::percpu_area_size(),
        layout.offset,
        layout.len
    );
}

/// Every CPU, once (the boot CPU from [`init_bsp`]): percpu points the register at this
/// CPU's area, and the kernel records its index there.
pub fn enter_cpu(cpu: usize) {
    percpu::init_percpu_reg(cpu);
    CPU_ID.write_current(cpu);
}

/// The running CPU's index, through percpu.
pub fn cpu_id() -> usize {
    CPU_ID.read_current()
}

/// The zone's layout, from percpu's API alone.
fn layout() -> ZoneLayout {
    let base = percpu::percpu_area_base(0);
    // The areas are `percpu_area_size()` rounded up to 64 apart (the rounding is private to
    // percpu): the stride is the distance between two areas.
    #[cfg(not(feature = "percpu-broken-stride"))]
    let stride = percpu::percpu_area_base(1) - base;
    // The user's pitfall, for the run that must fail (test only).
    #[cfg(feature = "percpu-broken-stride")]
    let stride = percpu::percpu_area_size();
    ZoneLayout {
        base,
        stride,
        offset: COUNTERS.offset(),
        len: core::mem::size_of::<[u64; SLOTS]>(),
        ncpus: percpu::percpu_area_num(),
    }
}

/// The zone, hosted in the percpu areas' `COUNTERS` arrays. Each CPU's bring-up check
/// (`main.rs`) then proves that its block of the zone is where percpu's register points (a
/// zone with the wrong stride would sum other memory than the adds hit).
pub fn make_zone() -> Result<Zone<'static>, Error> {
    // SAFETY: the `COUNTERS` arrays of the percpu areas are used by nothing but this zone (the
    // `COUNTERS` wrapper is never accessed), which is made once, by the boot CPU after
    // `init_bsp`, and lives forever; percpu is not initialised again.
    unsafe { Zone::hosted(layout(), &META) }
}

/// Adds per CPU to the re-init check's counter (times the CPU's index plus one).
const REINIT_ADDS: u64 = 1000;

/// The re-init check's counter, allocated by CPU 0.
static REINIT_COUNTER: spin::Once<Counter<'static>> = spin::Once::new();

/// CPUs whose `CPU_ID` read back through percpu is their index, and whose register is still
/// their percpu area.
static ID_INTACT: AtomicU64 = AtomicU64::new(0);
static REGISTER_INTACT: AtomicU64 = AtomicU64::new(0);

/// Every CPU after the counting checks: a counter added to on every CPU is exact after the
/// point where a second `percpu::init_in_place()` would copy CPU 0's area, counter slots
/// included, over the others' (the `percpu-broken-reinit` build does it there), and percpu's
/// value and register are intact (the crate did not overwrite the kernel's per-CPU pointer or
/// data).
pub fn check(cpu: usize) {
    let n = protocol::ncpus();
    if cpu == 0 {
        match pcpu_counter::freebsd::global_zone().and_then(Zone::alloc) {
            Ok(counter) => REINIT_COUNTER.call_once(|| counter),
            Err(e) => crate::fail_setup("percpu re-init counter", e),
        };
    }
    protocol::barrier(cpu);
    let counter = REINIT_COUNTER.get().expect("allocated before the barrier");
    for _ in 0..REINIT_ADDS {
        counter.add(cpu as i64 + 1);
    }
    protocol::barrier(cpu);
    #[cfg(feature = "percpu-broken-reinit")]
    if cpu == 0 {
        println!("percpu initialised again (percpu-broken-reinit, test only)");
        if let Err(e) = percpu::init_in_place() {
            println!("FAIL setup percpu::init_in_place again: {e:?}");
        }
    }
    protocol::barrier(cpu);
    if cpu_id() == cpu {
        ID_INTACT.fetch_add(1, Ordering::Relaxed);
    }
    if percpu::read_percpu_reg() == percpu::percpu_area_base(cpu) {
        REGISTER_INTACT.fetch_add(1, Ordering::Relaxed);
    }
    protocol::barrier(cpu);
    if cpu == 0 {
        protocol::report(
            "percpu",
            &[
                (
                    "counter added to on every CPU",
                    REINIT_ADDS * protocol::cpus_sum(n as u64),
                    counter.fetch(),
                ),
                (
                    "CPUs reading their own index through percpu",
                    n as u64,
                    ID_INTACT.load(Ordering::Relaxed),
                ),
                (
                    "CPUs whose register is their percpu area",
                    n as u64,
                    REGISTER_INTACT.load(Ordering::Relaxed),
                ),
            ],
            n,
        );
    }
    protocol::barrier(cpu);
}
