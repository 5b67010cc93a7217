// SPDX-License-Identifier: BSD-2-Clause
//! Bucket rules: which bucket a value falls in, with shifts and a leading-zero count (no
//! division), and which values each bucket holds.

/// A histogram's bucket rule, picked at creation: `count` buckets from a lowest value, an
/// underflow bucket below them and an overflow bucket above.
///
/// | rule | buckets | the true quantile and the midpoint estimate |
/// |---|---|---|
/// | [`power_of_two`](Buckets::power_of_two) (DTrace `quantize`) | `[2^e, 2^(e+1))` | relative error under 1/2 |
/// | [`log_linear`](Buckets::log_linear) (`llquantize`, HdrHistogram) | each power of two split in `2^k` equal buckets; below `2^(k+1)` one value each | relative error under `2^-(k+1)`; exact below `2^(k+1)` |
/// | [`linear`](Buckets::linear) (`lquantize`) | `[base + i * step, base + (i + 1) * step)`, `step` a power of two | absolute error at most `(step - 1) / 2` |
///
/// The bounds hold for a quantile that falls in a regular bucket (see
/// [`Reading::quantile`](crate::histogram::Reading::quantile)); one in the underflow or the
/// overflow bucket is only known to lie in that bucket's range.
///
/// The bucket of a value is found with a leading-zero count, shifts, a mask and compares:
/// no division and no table. A linear step is a power of two so that its division is a shift.
///
/// ```
/// use pcpu_counter::histogram::Buckets;
/// let b = Buckets::log_linear(2, 0, 16);
/// // 0..8 one value each, then [8, 10), [10, 12), [12, 14), [14, 16), [16, 20), ...
/// assert_eq!(b.range(1 + 9), Some((10, 11)));
/// assert_eq!(b.slot_of(11), 1 + 9);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buckets {
    shape: Shape,
    /// The raw index of bucket 0 (see [`log_raw`]); 0 for a linear rule.
    first: u64,
    count: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// `2^sub_bits` buckets per power of two (0: one bucket per power of two).
    Log { sub_bits: u32 },
    /// Buckets of `1 << shift` values from `base`.
    Linear { base: u64, shift: u32 },
}

/// The largest `sub_bits` of a log-linear rule: 4096 buckets per power of two.
///
/// cbindgen:ignore
pub const MAX_SUB_BITS: u32 = 12;

/// The raw index of `v` among every bucket of a log-linear rule with `2^k` sub-buckets:
/// `v` itself below `2^(k+1)`, then `2^k` buckets per power of two. With `g` the number of
/// significant bits of `v` beyond `k` (0 when `v < 2^k`): `(g << k) + ((v >> (g - 1)) & mask)`,
/// the top `k + 1` bits of `v` with the power of two that tells their place.
#[inline(always)]
const fn log_raw(v: u64, k: u32) -> u64 {
    let bits = 64 - v.leading_zeros();
    let groups = bits.saturating_sub(k);
    let shift = groups.saturating_sub(1);
    ((groups as u64) << k) + ((v >> shift) & ((1 << k) - 1))
}

/// The number of raw indices of a log-linear rule with `2^k` sub-buckets (the one past
/// `log_raw(u64::MAX, k)`).
const fn log_raw_count(k: u32) -> u64 {
    ((65 - k) as u64) << k
}

/// The smallest value of raw index `r` of a log-linear rule, or `None` past `u64::MAX`.
const fn log_lower(r: u64, k: u32) -> Option<u64> {
    let (groups, sub) = (r >> k, r & ((1 << k) - 1));
    if groups == 0 {
        return Some(sub);
    }
    if r >= log_raw_count(k) {
        return None;
    }
    Some(((1 << k) | sub) << (groups - 1))
}

impl Buckets {
    /// `count` buckets, each a power of two `[2^e, 2^(e+1))` (a bucket of its own for 0 when
    /// `lowest` is 0), from `lowest`; values below `lowest` count in the underflow bucket,
    /// values past the last bucket in the overflow bucket. `power_of_two(0, 65)` covers every
    /// `u64` (`{0}`, `{1}`, `[2, 4)`, ..., `[2^63, 2^64)`), `power_of_two(1, 64)` the same
    /// with 0 in the underflow bucket.
    ///
    /// # Panics
    /// If `lowest` is neither 0 nor a power of two, `count` is 0, or the buckets go past
    /// `u64::MAX` (the last must start at `2^63` or below). In a `const` the panic is a
    /// compile error.
    ///
    /// ```
    /// use pcpu_counter::histogram::Buckets;
    /// let b = Buckets::power_of_two(1024, 4); // [1024, 2048) ... [8192, 16384)
    /// assert_eq!((b.slot_of(1023), b.slot_of(1024), b.slot_of(16384)), (0, 1, 5));
    /// ```
    pub const fn power_of_two(lowest: u64, count: usize) -> Self {
        Self::log_linear(0, lowest, count)
    }

    /// `count` buckets from `lowest`, with each power of two `[2^e, 2^(e+1))` from `2^(k+1)`
    /// up split into `2^k` equal buckets of `2^(e-k)` values (`k` is `sub_bits`), and one
    /// bucket for each value below `2^(k+1)`: DTrace's `llquantize` with a factor of 2,
    /// HdrHistogram's layout with `k + 1` significant bits. `log_linear(k, 0, (65 - k) << k)`
    /// covers every `u64`.
    ///
    /// # Panics
    /// If `sub_bits` is over [`MAX_SUB_BITS`], `lowest` is not where a bucket starts (a value
    /// below `2^(k+1)`, or the top `k + 1` bits of a power of two and the rest zero), `count`
    /// is 0, or the buckets go past `u64::MAX`. In a `const` the panic is a compile error.
    ///
    /// ```
    /// use pcpu_counter::histogram::Buckets;
    /// let b = Buckets::log_linear(3, 0, 64); // 16 one-value buckets, then 8 per power of two
    /// assert_eq!(b.range(1 + 16), Some((16, 17)));
    /// assert_eq!(b.range(64), Some((960, 1023))); // bucket 63, the last of [512, 1024)
    /// assert_eq!(b.slot_of(1024), 65); // overflow
    /// ```
    pub const fn log_linear(sub_bits: u32, lowest: u64, count: usize) -> Self {
        assert!(
            sub_bits <= MAX_SUB_BITS,
            "histogram: at most 2^12 sub-buckets per power of two"
        );
        let first = log_raw(lowest, sub_bits);
        assert!(
            matches!(log_lower(first, sub_bits), Some(l) if l == lowest),
            "histogram: the lowest value is not where a bucket starts"
        );
        assert!(count > 0, "histogram: a rule needs at least one bucket");
        assert!(
            count as u64 <= log_raw_count(sub_bits) - first,
            "histogram: buckets past u64::MAX"
        );
        Buckets {
            shape: Shape::Log { sub_bits },
            first,
            count,
        }
    }

    /// `count` buckets of `step` values from `base`: bucket `i` holds
    /// `[base + i * step, base + (i + 1) * step)`. `step` is a power of two, so that the
    /// bucket of a value is a subtraction and a shift.
    ///
    /// # Panics
    /// If `step` is not a power of two, `count` is 0, or the last bucket starts past
    /// `u64::MAX`. In a `const` the panic is a compile error.
    ///
    /// ```
    /// use pcpu_counter::histogram::Buckets;
    /// let b = Buckets::linear(100, 8, 3); // [100, 108), [108, 116), [116, 124)
    /// assert_eq!((b.slot_of(99), b.slot_of(107), b.slot_of(116), b.slot_of(124)), (0, 1, 3, 4));
    /// ```
    pub const fn linear(base: u64, step: u64, count: usize) -> Self {
        assert!(
            step.is_power_of_two(),
            "histogram: a linear step must be a power of two"
        );
        assert!(count > 0, "histogram: a rule needs at least one bucket");
        let shift = step.trailing_zeros();
        assert!(
            (count as u64 - 1).leading_zeros() >= shift
                && base.checked_add((count as u64 - 1) << shift).is_some(),
            "histogram: buckets past u64::MAX"
        );
        Buckets {
            shape: Shape::Linear { base, shift },
            first: 0,
            count,
        }
    }

    /// The number of regular buckets (the underflow and overflow buckets not counted).
    pub const fn count(&self) -> usize {
        self.count
    }

    /// The slots of a histogram with this rule, per CPU: the underflow bucket, the
    /// [`count`](Buckets::count) buckets, the overflow bucket and the sum. Size a
    /// [`Histogram::read`](crate::histogram::Histogram::read) buffer with it.
    ///
    /// ```
    /// # use pcpu_counter::histogram::Buckets;
    /// const RULE: Buckets = Buckets::power_of_two(1, 64);
    /// let buffer = [0u64; RULE.slots()];
    /// assert_eq!(buffer.len(), 67);
    /// ```
    pub const fn slots(&self) -> usize {
        self.count + 3 + STORED_COUNT_SLOTS
    }

    /// The slot of the underflow bucket: 0. Bucket `i` is slot `1 + i`.
    ///
    /// cbindgen:ignore
    pub const UNDERFLOW: usize = 0;

    /// The slot of the overflow bucket.
    pub const fn overflow_slot(&self) -> usize {
        self.count + 1
    }

    /// The slot of the sum of the values observed.
    pub const fn sum_slot(&self) -> usize {
        self.count + 2
    }

    /// The slot that counts `v`: [`UNDERFLOW`](Buckets::UNDERFLOW) (0), `1 + i` for bucket
    /// `i`, or [`overflow_slot`](Buckets::overflow_slot). No division: a leading-zero count,
    /// shifts and compares (a subtraction and a shift for a linear rule).
    #[inline(always)]
    pub const fn slot_of(&self, v: u64) -> usize {
        let (below, index) = match self.shape {
            Shape::Log { sub_bits } => {
                let raw = log_raw(v, sub_bits);
                (raw < self.first, raw.wrapping_sub(self.first))
            }
            Shape::Linear { base, shift } => (v < base, v.wrapping_sub(base) >> shift),
        };
        if below {
            Self::UNDERFLOW
        } else if index < self.count as u64 {
            index as usize + 1
        } else {
            self.count + 1
        }
    }

    /// The values bucket slot `slot` counts, `(lowest, highest)` inclusive, or `None` for an
    /// empty range (the underflow bucket of a rule from 0, the overflow bucket of a rule up
    /// to `u64::MAX`) or a slot that is no bucket.
    pub const fn range(&self, slot: usize) -> Option<(u64, u64)> {
        if slot > self.count + 1 {
            return None;
        }
        let lowest = match slot {
            Self::UNDERFLOW => 0,
            _ => match self.start(slot as u64 - 1) {
                Some(lowest) => lowest,
                None => return None,
            },
        };
        let highest = match self.start(slot as u64) {
            Some(0) => return None,
            Some(next) => next - 1,
            None => u64::MAX,
        };
        match slot <= self.count {
            true => Some((lowest, highest)),
            false => Some((lowest, u64::MAX)),
        }
    }

    /// The smallest value of regular bucket `i` (`i == count` is where the overflow bucket
    /// starts), or `None` past `u64::MAX`.
    const fn start(&self, i: u64) -> Option<u64> {
        match self.shape {
            Shape::Log { sub_bits } => log_lower(self.first + i, sub_bits),
            Shape::Linear { base, shift } => match i.leading_zeros() >= shift {
                true => base.checked_add(i << shift),
                false => None,
            },
        }
    }
}

/// The count slot of the broken variant `histogram_stored_count`; none in the product.
const STORED_COUNT_SLOTS: usize = if cfg!(pcpu_counter_broken = "histogram_stored_count") {
    1
} else {
    0
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_indices_run_without_gaps_across_powers_of_two() {
        for k in 0..=4 {
            for r in 0..log_raw_count(k) {
                let lower = log_lower(r, k).unwrap();
                assert_eq!(log_raw(lower, k), r, "k {k} raw {r}");
                if lower > 0 {
                    assert_eq!(log_raw(lower - 1, k), r - 1, "k {k} raw {r}");
                }
            }
            assert_eq!(log_raw(u64::MAX, k), log_raw_count(k) - 1);
            assert_eq!(log_lower(log_raw_count(k), k), None);
        }
    }
}
