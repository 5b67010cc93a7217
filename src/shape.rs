// SPDX-License-Identifier: BSD-2-Clause
//! The register values of a per-CPU area: plain data, at the bottom of the crate (the error
//! type names it).

/// The register values of an area: CPU `i`'s per-CPU register holds `base + i * stride`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AreaShape {
    /// CPU 0's register value.
    pub base: usize,
    /// Bytes from one CPU's block to the next.
    pub stride: usize,
    /// Number of CPUs.
    pub ncpus: usize,
}
