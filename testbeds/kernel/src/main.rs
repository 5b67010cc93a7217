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
//! Local protection is this CPU's interrupt disable (`custom-protection` and
//! [`pcpu_counter::set_platform!`]), not a `critical-section` implementation: the only thing on
//! a CPU of these kernels that can add to a counter behind the running code's back is that
//! CPU's own timer interrupt, and a global lock would serialise every CPU's protected section
//! for nothing.
#![no_std]
#![no_main]
#![warn(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

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
#[cfg(target_arch = "x86_64")]
mod statics;

use console::println;

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
    #[cfg(target_arch = "x86_64")]
    statics::early();
    let zone = match boot::make_zone().and_then(pcpu_counter::freebsd::install) {
        Ok(zone) => zone,
        Err(e) => fail_setup("install", e),
    };
    #[cfg(target_arch = "x86_64")]
    if let Err(e) = statics::install(zone) {
        fail_setup("statics::install", e)
    }
    enter_cpu(0, zone);
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

/// Points `cpu`'s per-CPU register at its block of `zone`: what a kernel does once per CPU.
fn enter_cpu(cpu: usize, zone: &pcpu_counter::Zone<'_>) {
    match zone.cpu_base(cpu) {
        Ok(base) => {
            // SAFETY: runs on `cpu` itself, at kernel privilege, before it adds to any counter.
            if let Err(e) = unsafe { boot::set_cpu_base(cpu, base) } {
                fail_setup("set_cpu_base", e)
            }
        }
        Err(e) => fail_setup("cpu_base", e),
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
