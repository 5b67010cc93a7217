//! `libpcpu_counter_capi.a`: the C ABI of `pcpu-counter` (its `capi` module) for host
//! programs, on the host simulation. Every `extern "C"` function is defined in
//! `pcpu_counter::capi`; linking the crate here is all this library does.
#![no_std]

pub use pcpu_counter::capi;
