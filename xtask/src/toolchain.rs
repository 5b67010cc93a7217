//! Finding a toolchain that can build for a target (being written).
