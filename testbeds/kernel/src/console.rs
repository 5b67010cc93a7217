//! Serial output: `println!` on the arch's serial port, one line at a time across CPUs.

use core::fmt::{self, Write};

use crate::boot;

/// Writes bytes to the serial port, `\n` as `\r\n`.
struct Serial;

impl Write for Serial {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for b in s.bytes() {
            if b == b'\n' {
                boot::putc(b'\r');
            }
            boot::putc(b);
        }
        Ok(())
    }
}

/// Serialises whole lines from several CPUs.
static LOCK: spin::Mutex<()> = spin::Mutex::new(());

/// Prints under the console lock, with this CPU's interrupts off so that a handler cannot
/// spin on a lock its own CPU holds.
pub fn print(args: fmt::Arguments<'_>) {
    let state = boot::irq_save();
    {
        let _line = LOCK.lock();
        let _ = Serial.write_fmt(args);
    }
    // SAFETY: `state` is from the `irq_save` just above, on this CPU.
    unsafe { boot::irq_restore(state) };
}

/// Prints without the lock: for the fault and panic paths, which may run while this CPU
/// holds it. Lines may interleave; the kernel exits right after.
pub fn print_unlocked(args: fmt::Arguments<'_>) {
    let _ = Serial.write_fmt(args);
}

/// `println!` on the serial console.
macro_rules! println {
    ($($arg:tt)*) => {
        $crate::console::print(format_args!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use println;
