//! The virt machine's GICv2 (distributor at 0x0800_0000, CPU interface at 0x0801_0000): just
//! enough to take one private peripheral interrupt, the EL1 virtual timer (INTID 27).

const GICD: usize = 0x0800_0000;
const GICC: usize = 0x0801_0000;

const GICD_CTLR: usize = 0x000;
const GICD_ISENABLER: usize = 0x100;
const GICD_IPRIORITYR: usize = 0x400;
const GICC_CTLR: usize = 0x000;
const GICC_PMR: usize = 0x004;
const GICC_IAR: usize = 0x00C;
const GICC_EOIR: usize = 0x010;

/// The EL1 virtual timer's PPI.
pub const TIMER_INTID: u32 = 27;
/// What the acknowledge register reads when nothing is pending.
pub const SPURIOUS: u32 = 1023;

fn write32(addr: usize, value: u32) {
    // SAFETY: a GIC register of the virt machine (MMU off: physical addresses).
    unsafe { (addr as *mut u32).write_volatile(value) }
}

fn read32(addr: usize) -> u32 {
    // SAFETY: as in `write32`.
    unsafe { (addr as *const u32).read_volatile() }
}

/// Enables the distributor (boot CPU, once).
pub fn init_distributor() {
    write32(GICD + GICD_CTLR, 1);
}

/// Enables this CPU's interface and its (banked) timer PPI.
pub fn init_cpu() {
    // SAFETY: a byte of the banked priority registers of this CPU.
    unsafe { ((GICD + GICD_IPRIORITYR + TIMER_INTID as usize) as *mut u8).write_volatile(0x80) };
    write32(GICD + GICD_ISENABLER, 1 << TIMER_INTID);
    write32(GICC + GICC_PMR, 0xFF);
    write32(GICC + GICC_CTLR, 1);
}

/// Acknowledges the highest-priority pending interrupt; returns its IAR value.
pub fn acknowledge() -> u32 {
    read32(GICC + GICC_IAR)
}

/// Ends the interrupt `iar` came from.
pub fn end(iar: u32) {
    write32(GICC + GICC_EOIR, iar);
}
