//! Output over semihosting: `println!` formats into a line buffer and writes it with
//! `SYS_WRITE0` (QEMU sends it to the `-semihosting-config chardev=`, stdout here).
//!
//! Only CPU 0 prints in the normal course (the checks run there); the fault and panic paths
//! print from any CPU, right before exiting.

use core::fmt::{self, Write};

use crate::boot;

/// A line buffer, flushed when full and at the end.
struct Line {
    buf: [u8; 128],
    len: usize,
}

impl Line {
    fn flush(&mut self) {
        self.buf[self.len] = 0;
        boot::write0(&self.buf[..=self.len]);
        self.len = 0;
    }
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for b in s.bytes() {
            if self.len == self.buf.len() - 1 {
                self.flush();
            }
            // SYS_WRITE0 stops at NUL: never put one in the buffer.
            self.buf[self.len] = if b == 0 { b'?' } else { b };
            self.len += 1;
        }
        Ok(())
    }
}

/// Prints `args` (one semihosting call per 127 bytes).
pub fn print(args: fmt::Arguments<'_>) {
    let mut line = Line {
        buf: [0; 128],
        len: 0,
    };
    let _ = line.write_fmt(args);
    line.flush();
}

/// The same, for the fault and panic paths (no lock to skip: the console has none).
pub fn print_unlocked(args: fmt::Arguments<'_>) {
    print(args)
}

/// `println!` over semihosting.
macro_rules! println {
    ($($arg:tt)*) => {
        $crate::console::print(format_args!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use println;
