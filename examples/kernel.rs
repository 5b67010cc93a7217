//! A kernel's wiring in one file, and the same counter code run in host tests.
//!
//! On bare metal (`cargo build --example kernel --target x86_64-unknown-none`) the boot CPU
//! puts a zone on static memory, installs it as the global zone, points its GS base at its
//! block and counts. On the host (`cargo run --example kernel`) the same `NetStats` code runs
//! on four simulated CPUs (feature `sim`, a dev-dependency). The code that counts is written
//! once; only the setup differs, as it does between a kernel and its tests.
#![cfg_attr(target_os = "none", no_std, no_main)]

use pcpu_counter::{Counter, Error, Zone};

/// A driver's statistics: two per-CPU counters.
pub struct NetStats<'z> {
    packets: Counter<'z>,
    bytes: Counter<'z>,
}

impl<'z> NetStats<'z> {
    /// Allocates the counters from `zone` (an error, not a panic, when it is full).
    pub fn new(zone: &'z Zone<'z>) -> Result<Self, Error> {
        Ok(NetStats {
            packets: zone.alloc()?,
            bytes: zone.alloc()?,
        })
    }

    /// The receive path: two adds to this CPU's slots, no lock, no shared cache line.
    pub fn on_receive(&self, len: usize) {
        self.packets.inc();
        self.bytes.add(len as i64);
    }

    /// A batch of packets inside one protected section (FreeBSD's `counter_enter`): free on
    /// x86_64, aarch64 and riscv64, where the guard is zero-sized and links nothing.
    pub fn on_receive_batch(&self, lens: &[usize]) {
        let guard = pcpu_counter::freebsd::counter_enter();
        for &len in lens {
            self.packets.add_protected(&guard, 1);
            self.bytes.add_protected(&guard, len as i64);
        }
        pcpu_counter::freebsd::counter_exit(guard);
    }

    /// `(packets, bytes)` summed over every CPU.
    pub fn totals(&self) -> (u64, u64) {
        (self.packets.fetch(), self.bytes.fetch())
    }
}

// A per-CPU static: its slot in the per-CPU section, no zone or allocation needed. Before
// bring-up (GS base 0) its add reaches the section's template; a kernel with several CPUs
// copies the section per CPU and calls `pcpu_counter::statics::install_section` (docs/kernel.md).
pcpu_counter::percpu_counter!(
    /// Interrupts taken.
    pub static IRQS
);

/// The interrupt path's count, out of line so that CI can read it: one
/// `add qword ptr gs:[rip + IRQS::SLOT], 1` in the bare-metal build.
#[inline(never)]
#[unsafe(no_mangle)]
pub extern "C" fn pcpu_probe_static_inc() {
    IRQS.inc();
}

#[cfg(target_os = "none")]
mod kernel {
    use super::NetStats;
    use pcpu_counter::{arch, freebsd, Zone, ZoneMemory};

    /// Room for 4 CPUs x 64 counters, in the kernel image: no allocator needed.
    static COUNTERS: ZoneMemory<4, 1> = ZoneMemory::new();

    /// The boot CPU's entry (a real kernel gets here from its boot loader; the others CPUs
    /// would call `arch::set_cpu_base` with their own block as they come up).
    #[unsafe(no_mangle)]
    extern "C" fn _start() -> ! {
        // Counted from the first instruction: GS base is still 0, so the add reaches the
        // template.
        super::pcpu_probe_static_inc();
        let zone = freebsd::install(Zone::new(&COUNTERS).expect("fresh static memory"))
            .expect("the first zone installed");
        let base = zone.cpu_base(0).expect("CPU 0 exists");
        // SAFETY: the boot CPU at CPL 0, before it adds; nothing else in this kernel uses GS.
        unsafe { arch::set_cpu_base(base) }.expect("a canonical address");
        let stats = NetStats::new(zone).expect("room for two counters");
        stats.on_receive(1500);
        stats.on_receive_batch(&[60, 40]);
        assert_eq!(stats.totals(), (3, 1600));
        loop {
            core::hint::spin_loop();
        }
    }

    #[panic_handler]
    fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
        loop {
            core::hint::spin_loop();
        }
    }
}

#[cfg(not(target_os = "none"))]
fn main() {
    use pcpu_counter::sim::Machine;

    const CPUS: usize = 4;
    // Before any machine holds the statics, this thread adds to the template (as the boot
    // CPU before bring-up).
    pcpu_probe_static_inc();
    assert_eq!(IRQS.fetch(), 1);
    let machine = Machine::new(CPUS);
    let stats = NetStats::new(machine.zone()).expect("room for two counters");
    std::thread::scope(|s| {
        for cpu in 0..CPUS {
            let (machine, stats) = (&machine, &stats);
            s.spawn(move || {
                machine.run_on(cpu, || {
                    (0..1000).for_each(|_| stats.on_receive(64));
                    stats.on_receive_batch(&[60, 40]);
                })
            });
        }
    });
    assert_eq!(stats.totals(), (4000 + 8, 4000 * 64 + 400));
    println!(
        "kernel example on {CPUS} simulated CPUs: {:?}",
        stats.totals()
    );
}
