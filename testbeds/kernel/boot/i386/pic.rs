//! The legacy 8259 PICs and the 8254 PIT: the i386 kernel's timer (a 486 has no local APIC).

use super::pc::{inb, outb};

/// Vectors of the master PIC's IRQs 0-7 after remapping: IRQ 0 (the PIT) is 0x20.
pub const IRQ_BASE: u8 = 0x20;
/// The master PIC's spurious IRQ 7.
pub const SPURIOUS_VECTOR: u8 = IRQ_BASE + 7;

/// PIT input clock 1.193182 MHz / 120: about 10 kHz.
const DIVISOR: u16 = 120;

/// Remaps the PICs to vectors 0x20-0x2F (off the exception vectors) and masks every IRQ.
pub fn init() {
    for (port, value) in [
        (0x20, 0x11), // ICW1: init, ICW4 follows
        (0xA0, 0x11),
        (0x21, IRQ_BASE), // ICW2: vector base
        (0xA1, IRQ_BASE + 8),
        (0x21, 0x04), // ICW3: slave on IRQ 2
        (0xA1, 0x02),
        (0x21, 0x01), // ICW4: 8086 mode
        (0xA1, 0x01),
        (0x21, 0xFF), // mask all
        (0xA1, 0xFF),
    ] {
        outb(port, value);
    }
}

/// Starts the PIT as a rate generator and unmasks IRQ 0.
pub fn timer_start() {
    outb(0x43, 0x34); // channel 0, lobyte/hibyte, mode 2
    outb(0x40, DIVISOR as u8);
    outb(0x40, (DIVISOR >> 8) as u8);
    outb(0x21, inb(0x21) & !1);
}

/// Masks IRQ 0.
pub fn timer_stop() {
    outb(0x21, inb(0x21) | 1);
}

/// Ends the master PIC's current interrupt.
pub fn eoi() {
    outb(0x20, 0x20);
}
