//! Per-CPU statics on x86_64 (`percpu_counter!`), the "DPCPU recipe": two statics counted
//! by the boot CPU before bring-up (GS base still 0: the section's template), then by every
//! CPU at once through its copy of the section; the totals must be exact.
//!
//! The copies: CPU `i`'s GS base is its `PerCpu` block (the zone's register value), so its
//! copy of the section lies at that block plus the section's link address, past the kernel
//! image in the identity-mapped RAM (checked). `statics::install_section` carves the template's range
//! out of the kernel's area beside the zone, with the zone's register values.

use pcpu_counter::{statics, Area, AreaShape, Error, Zone};
use pcpu_counter_testbed_protocol as protocol;

pcpu_counter::percpu_counter!(
    /// Counted once per round by every CPU.
    static PACKETS
);
pcpu_counter::percpu_counter!(
    /// Counted `cpu + 1` per round by CPU `cpu`.
    static BYTES
);

/// Adds per CPU per round.
const ROUNDS: u64 = 100_000;
/// What the boot CPU adds to `BYTES` before bring-up.
const EARLY_BYTES: u64 = 5;

/// The boot CPU before bring-up: its GS base is 0, so the adds reach the template.
pub fn early() {
    PACKETS.inc();
    BYTES.add(EARLY_BYTES as i64);
}

/// Installs the statics with the zone's register values; fails if a CPU's copy would lie
/// inside the kernel image.
pub fn install(zone: &Zone<'_>) -> Result<(), Error> {
    extern "C" {
        static __bss_end: u8;
    }
    let layout = zone.layout();
    let (start, stop) = statics::template();
    let image_end = core::ptr::addr_of!(__bss_end) as usize;
    if layout.base.wrapping_add(start) < image_end {
        return Err(Error::ZoneOverlap {
            offset: start,
            len: stop - start,
        });
    }
    // SAFETY: the copies lie past the image, in RAM nothing else uses (checked just above),
    // and no CPU's GS base holds its block yet.
    unsafe { statics::install_section(Area::global(), AreaShape::of(layout)) }
}

/// Every CPU at once: `ROUNDS` adds to each static, then CPU 0 checks the totals.
pub fn run(cpu: usize) {
    let n = protocol::ncpus();
    protocol::barrier(cpu);
    for _ in 0..ROUNDS {
        PACKETS.inc();
        BYTES.add(cpu as i64 + 1);
    }
    protocol::barrier(cpu);
    if cpu == 0 {
        let ids: u64 = (1..=n as u64).sum();
        // Each CPU's copy holds its own adds exactly: an add that missed the copy (the
        // shared template's, say) fails this whatever the timing.
        let own = (0..n)
            .filter(|&c| BYTES.cpu_slot(c) == Ok(ROUNDS * (c as u64 + 1)))
            .count();
        protocol::report(
            "statics",
            &[
                ("packets", 1 + n as u64 * ROUNDS, PACKETS.fetch()),
                ("bytes", EARLY_BYTES + ROUNDS * ids, BYTES.fetch()),
                ("CPU copies holding their own adds", n as u64, own as u64),
            ],
            n,
        );
    }
    protocol::barrier(cpu);
}
