//! The QEMU test kernels: the crate on real (emulated) SMP hardware.
//!
//! One binary per arch: the arch's boot code (`boot/<arch>/mod.rs` in this bed, with its
//! linker script `boot/<arch>/link.ld`) brings up the CPUs and hands over to this shared part,
//! which wires the crate up as a kernel would and runs [`checks`] on every CPU at once.
//!
//! What each boot module provides (the only arch-specific part):
//!
//! | item | what it does |
//! |---|---|
//! | `NAME` | the machine, for the banner |
//! | `putc`, `exit(pass)`, `halt` | serial output, leaving QEMU with a status, parking a CPU |
//! | `cpu_count` | the number of CPUs the firmware reports |
//! | `cpu_id` | the running CPU's index (read from per-CPU state, never from a global) |
//! | `irq_save` / `irq_restore` | disable this CPU's interrupts and restore them: the local protection |
//! | `timer_start` / `timer_stop` | this CPU's periodic timer; its handler calls [`checks::timer_tick`] |
//! | `make_zone` | the zone on memory the kernel owns |
//! | `set_cpu_base(cpu, base)` | point this CPU's per-CPU register at `base` |
//! | `start_secondaries(n)` | start CPUs `1..n`, each entering [`ap_main`]; returns how many CPUs run |
//!
//! With the feature `percpu-crate` the `percpu` crate owns the per-CPU register instead
//! ([`percpu_crate`]): `make_zone` and `set_cpu_base` are not used, and on x86_64 `cpu_id`
//! reads percpu's value.
//!
//! Local protection is this CPU's interrupt disable (`custom-protection` and
//! [`pcpu_counter::set_platform!`]), not a `critical-section` implementation: the only thing on
//! a CPU of these kernels that can add to a counter behind the running code's back is that
//! CPU's own timer interrupt, and a global lock would serialise every CPU's protected section
//! for nothing.
#![no_std]
#![no_main]
#![warn(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
// With `percpu-crate` the boot modules' own per-CPU blocks (`make_zone`, `set_cpu_base`) are
// not used.
#![cfg_attr(feature = "percpu-crate", allow(dead_code))]

#[cfg(target_arch = "x86_64")]
#[path = "../boot/x86_64/mod.rs"]
mod boot;

#[cfg(target_arch = "aarch64")]
#[path = "../boot/aarch64/mod.rs"]
mod boot;

#[cfg(target_arch = "x86")]
#[path = "../boot/i386/mod.rs"]
mod boot;

#[cfg(target_arch = "riscv64")]
#[path = "../boot/riscv64/mod.rs"]
mod boot;

mod checks;
mod console;
// The growth check: the installed zone grows into chunks of a kernel-owned arena, in the
// builds `build.rs` names.
#[cfg(pcpu_testbed_grow)]
mod grow;
#[cfg(feature = "percpu-crate")]
mod percpu_crate;
// The add's base from `Platform::cpu_base` (feature `platform-base`), its calls counted.
#[cfg(feature = "platform-base")]
mod platform_base;
#[cfg(all(feature = "platform-base", feature = "percpu-crate"))]
compile_error!("platform-base answers from the kernel's own blocks, not percpu's areas");

// The per-CPU statics check (without `percpu-crate`, whose areas GS points at).
#[cfg(all(target_arch = "x86_64", not(feature = "percpu-crate")))]
mod statics;

#[cfg(not(feature = "percpu-crate"))]
use core::sync::atomic::{AtomicUsize, Ordering};

use console::println;
use pcpu_counter::Zone;
#[cfg(not(feature = "percpu-crate"))]
use pcpu_counter::{ZoneLayout, ZoneMeta};

/// The crate's hooks, answered by the boot module.
struct Kernel;

// SAFETY: `cpu_id` reads the running CPU's own per-CPU state, below `checks::MAX_CPUS` (the
// zone's CPU count); `irq_save` disables this CPU's interrupts (the only thing that can run
// in between on a CPU here, the kernels never migrate code), and it nests because
// `irq_restore` restores the saved state instead of enabling.
unsafe impl pcpu_counter::Platform for Kernel {
    fn current_cpu() -> usize {
        boot::cpu_id()
    }
    fn protect() -> usize {
        boot::irq_save()
    }
    unsafe fn unprotect(state: usize) {
        // SAFETY: the crate passes the state of the matching `protect`, in LIFO order.
        unsafe { boot::irq_restore(state) }
    }
    #[cfg(feature = "platform-base")]
    fn cpu_base() -> usize {
        platform_base::cpu_base(boot::cpu_id())
    }
}

pcpu_counter::set_platform!(Kernel);

/// Entry of the boot CPU, once the boot module has its console and interrupt table up
/// (interrupts still off). Never returns: it exits QEMU with the checks' verdict.
pub fn bsp_main() -> ! {
    let wanted = boot::cpu_count().clamp(1, checks::MAX_CPUS);
    println!(
        "pcpu-counter test kernel on {}: {} ({} CPUs)",
        boot::NAME,
        pcpu_counter::arch::NAME,
        wanted
    );
    #[cfg(feature = "percpu-crate")]
    percpu_crate::init_bsp();
    #[cfg(all(target_arch = "x86_64", not(feature = "percpu-crate")))]
    statics::early();
    let zone = match make_zone().and_then(pcpu_counter::freebsd::install) {
        Ok(zone) => zone,
        Err(e) => fail_setup("install", e),
    };
    #[cfg(all(target_arch = "x86_64", not(feature = "percpu-crate")))]
    if let Err(e) = statics::install(zone) {
        fail_setup("statics::install", e)
    }
    enter_cpu(0, zone);
    // What a kernel does once its console is up: report a bring-up check that failed before
    // it could print (the `percpu-early-check` run's), and stop.
    if let Some((cpu, e)) = Zone::first_failed_check() {
        println!("FAIL bring-up check of CPU {cpu} (kept from before the console): {e}");
        boot::exit(false)
    }
    checks::setup();
    let started = boot::start_secondaries(wanted);
    let pass = checks::run_bsp(wanted, started);
    boot::exit(pass)
}

/// Entry of every secondary CPU `cpu`, interrupts off, on its own stack.
pub fn ap_main(cpu: usize) -> ! {
    let zone = match pcpu_counter::freebsd::global_zone() {
        Ok(zone) => zone,
        Err(e) => fail_setup("global_zone", e),
    };
    enter_cpu(cpu, zone);
    checks::run_ap(cpu);
    boot::halt()
}

/// A bring-up broken on purpose, for the runs that show the bring-up check catching it
/// (`cargo xtask qemu` builds them with `PCPU_TESTBED_BROKEN_BRINGUP` set):
///
/// | value | the kernel's mistake | the check's error |
/// |---|---|---|
/// | `ncpus` | the zone made for the CPUs known at the time (the boot CPU alone) | `CpuNotInZone` on CPU 1 |
/// | `swap` | CPUs 0 and 1 point their registers at each other's blocks | `CpuRegisterForeign` on CPU 0 |
/// | `register` | riscv64, built with `riscv-gp`: the kernel keeps its block pointer in `tp` | `CpuRegisterWrong` on CPU 0 |
pub const BROKEN_BRINGUP: Option<&str> = option_env!("PCPU_TESTBED_BROKEN_BRINGUP");

/// The kernel's per-CPU blocks, CPU 0's and the distance between two: the kernel's own
/// knowledge of where each CPU's block is, which it points each register at.
#[cfg(not(feature = "percpu-crate"))]
static BLOCKS: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// CPU `cpu`'s block, as the kernel knows it.
#[cfg(not(feature = "percpu-crate"))]
fn block_base(cpu: usize) -> usize {
    BLOCKS[0].load(Ordering::Relaxed) + cpu * BLOCKS[1].load(Ordering::Relaxed)
}

/// The boot module's zone on the kernel's blocks (for the `ncpus` bring-up: the same blocks
/// with a CPU count of 1).
#[cfg(not(feature = "percpu-crate"))]
fn make_zone() -> Result<Zone<'static>, pcpu_counter::Error> {
    let zone = boot::make_zone()?;
    let layout = *zone.layout();
    BLOCKS[0].store(layout.base, Ordering::Relaxed);
    BLOCKS[1].store(layout.stride, Ordering::Relaxed);
    if BROKEN_BRINGUP != Some("ncpus") {
        return Ok(zone);
    }
    drop(zone);
    static META: ZoneMeta<{ ZoneLayout::meta_words_for(4096) }> = ZoneMeta::new();
    // SAFETY: the boot module's zone over these bytes was dropped; nothing else uses them.
    unsafe { Zone::hosted(ZoneLayout { ncpus: 1, ..layout }, &META) }
}

/// With `percpu-crate`: the zone in percpu's areas.
#[cfg(feature = "percpu-crate")]
fn make_zone() -> Result<Zone<'static>, pcpu_counter::Error> {
    percpu_crate::make_zone()
}

/// With `percpu-crate`: percpu points `cpu`'s register at its area, which holds `cpu`'s
/// block of the zone; then the bring-up check.
#[cfg(feature = "percpu-crate")]
fn enter_cpu(cpu: usize, zone: &Zone<'_>) {
    // `percpu-early-check`: the boot CPU's check where a kernel's primary per-CPU init runs
    // it, before the console exists, so the kernel drops its result (the crate keeps the
    // failure for `bsp_main` to report), and, the mistake, before percpu sets the register.
    #[cfg(feature = "percpu-early-check")]
    if cpu == 0 {
        let _ = zone.check_cpu(0);
    }
    percpu_crate::enter_cpu(cpu);
    check_cpu(cpu, zone)
}

/// Points `cpu`'s per-CPU register at its block, as the kernel knows it, and runs the
/// bring-up check: what a kernel does once per CPU.
#[cfg(not(feature = "percpu-crate"))]
fn enter_cpu(cpu: usize, zone: &Zone<'_>) {
    let mut block_cpu = cpu;
    if BROKEN_BRINGUP == Some("swap") && cpu < 2 {
        block_cpu = cpu ^ 1;
    }
    let base = block_base(block_cpu);
    // SAFETY: runs on `cpu` itself, at kernel privilege, before it adds to any counter.
    if let Err(e) = unsafe { boot::set_cpu_base(cpu, base) } {
        fail_setup("set_cpu_base", e)
    }
    check_cpu(cpu, zone)
}

/// The bring-up check on `cpu`: its adds land in its own block of `zone`, or the kernel stops
/// with the check's message.
fn check_cpu(cpu: usize, zone: &Zone<'_>) {
    if let Err(e) = zone.check_cpu(cpu) {
        println!("FAIL bring-up: {e}");
        boot::exit(false)
    }
}

/// Reports a setup error and leaves QEMU with a failure.
fn fail_setup(what: &str, e: pcpu_counter::Error) -> ! {
    println!("FAIL setup {what}: {e:?}");
    boot::exit(false)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    console::print_unlocked(format_args!(
        "\nFAIL panic on CPU {}: {info}\n",
        boot::cpu_id()
    ));
    boot::exit(false)
}
