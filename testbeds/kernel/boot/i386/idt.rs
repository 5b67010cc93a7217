//! The i386 interrupt descriptor table: every exception prints and fails the run, the timer
//! (the PIT's IRQ 0, or the LAPIC timer) calls the checks' handler.

use core::ptr::addr_of;

use super::{lapic, pic};

/// An 8-byte 32-bit interrupt gate to `handler` (ring 0, interrupts off on entry).
const fn gate(handler: u32) -> u64 {
    (handler as u64 & 0xFFFF) | (0x08 << 16) | (0x8E << 40) | ((handler as u64 >> 16) << 48)
}

#[repr(C, align(8))]
struct Table([u64; 256]);

/// Filled once before it is loaded; read-only afterwards.
static TABLE: spin::Once<Table> = spin::Once::new();

extern "C" {
    static i386_fault_stubs: u8;
    static i386_timer_stub: u8;
    static i386_spurious_stub: u8;
}

/// Builds the table and loads it.
pub fn load() {
    let table = TABLE.call_once(|| {
        let mut gates = [0u64; 256];
        let stubs = addr_of!(i386_fault_stubs) as u32;
        for (vector, g) in gates.iter_mut().take(32).enumerate() {
            *g = gate(stubs + 16 * vector as u32);
        }
        gates[pic::IRQ_BASE as usize] = gate(addr_of!(i386_timer_stub) as u32);
        gates[pic::SPURIOUS_VECTOR as usize] = gate(addr_of!(i386_spurious_stub) as u32);
        gates[lapic::TIMER_VECTOR as usize] = gate(addr_of!(i386_timer_stub) as u32);
        gates[lapic::SPURIOUS_VECTOR as usize] = gate(addr_of!(i386_spurious_stub) as u32);
        Table(gates)
    });
    #[repr(C, packed)]
    struct Pointer {
        limit: u16,
        base: u32,
    }
    let pointer = Pointer {
        limit: (core::mem::size_of::<Table>() - 1) as u16,
        base: table as *const Table as u32,
    };
    // SAFETY: the table is a valid IDT in a static that lives forever.
    unsafe { core::arch::asm!("lidt [{}]", in(reg) &pointer, options(nostack, readonly)) };
}

/// Any exception: report it and fail the run.
#[no_mangle]
extern "C" fn i386_fault(vector: u32, word1: u32, word2: u32) -> ! {
    crate::console::print_unlocked(format_args!(
        "\nFAIL exception vector {vector} (stack {word1:#x} {word2:#x})\n"
    ));
    super::exit(false)
}

/// The timer.
#[no_mangle]
extern "C" fn i386_timer_irq() {
    crate::checks::timer_tick(super::cpu_id());
    super::timer_eoi();
}
