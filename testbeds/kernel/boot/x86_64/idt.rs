//! The interrupt descriptor table: every exception prints and fails the run (a fault must not
//! hang until the timeout), the LAPIC timer calls the checks' handler.

use core::ptr::addr_of;

use super::lapic;

/// One 16-byte interrupt gate.
#[derive(Clone, Copy)]
#[repr(C)]
struct Gate {
    offset_low: u16,
    selector: u16,
    ist: u8,
    kind: u8,
    offset_mid: u16,
    offset_high: u32,
    reserved: u32,
}

impl Gate {
    const MISSING: Gate = Gate {
        offset_low: 0,
        selector: 0,
        ist: 0,
        kind: 0,
        offset_mid: 0,
        offset_high: 0,
        reserved: 0,
    };

    /// A present ring-0 interrupt gate (interrupts off on entry) to `handler`.
    fn new(handler: usize) -> Gate {
        Gate {
            offset_low: handler as u16,
            selector: 0x08,
            ist: 0,
            kind: 0x8E,
            offset_mid: (handler >> 16) as u16,
            offset_high: (handler >> 32) as u32,
            reserved: 0,
        }
    }
}

#[repr(C, align(16))]
struct Table([Gate; 256]);

/// Filled once by the boot CPU before any CPU loads it; read-only afterwards.
static TABLE: spin::Once<Table> = spin::Once::new();

extern "C" {
    static x86_fault_stubs: u8;
    static x86_timer_stub: u8;
    static x86_spurious_stub: u8;
}

/// Builds the table (first call) and loads it on this CPU.
pub fn load() {
    let table = TABLE.call_once(|| {
        let mut gates = [Gate::MISSING; 256];
        let stubs = addr_of!(x86_fault_stubs) as usize;
        for (vector, gate) in gates.iter_mut().take(32).enumerate() {
            *gate = Gate::new(stubs + 16 * vector);
        }
        gates[lapic::TIMER_VECTOR as usize] = Gate::new(addr_of!(x86_timer_stub) as usize);
        gates[lapic::SPURIOUS_VECTOR as usize] = Gate::new(addr_of!(x86_spurious_stub) as usize);
        Table(gates)
    });
    #[repr(C, packed)]
    struct Pointer {
        limit: u16,
        base: u64,
    }
    let pointer = Pointer {
        limit: (core::mem::size_of::<Table>() - 1) as u16,
        base: table as *const Table as u64,
    };
    // SAFETY: the table is a valid IDT in a static that lives forever.
    unsafe { core::arch::asm!("lidt [{}]", in(reg) &pointer, options(nostack, readonly)) };
}

/// Any exception: report it and fail the run.
#[no_mangle]
extern "C" fn x86_64_fault(vector: u64, word1: u64, word2: u64) -> ! {
    crate::console::print_unlocked(format_args!(
        "\nFAIL exception vector {vector} (stack {word1:#x} {word2:#x}) on APIC {}\n",
        lapic::id()
    ));
    super::exit(false)
}

/// The LAPIC timer.
#[no_mangle]
extern "C" fn x86_64_timer_irq() {
    crate::checks::timer_tick(super::cpu_id());
    lapic::eoi();
}
