// SPDX-License-Identifier: BSD-2-Clause
//! Counters as Prometheus / OpenMetrics text, written through [`core::fmt::Write`] (no
//! allocation, `no_std`).
//!
//! [`Registry`](crate::registry::Registry) values are exported with
//! [`Values::write_prometheus`](crate::registry::Values::write_prometheus) or
//! [`write_openmetrics`](crate::registry::Values::write_openmetrics), from a group read:
//! cumulative ([`Registry::read_into`](crate::registry::Registry::read_into)) or as the
//! deltas since the last export ([`Registry::fetch_and_zero_into`](crate::registry::Registry::fetch_and_zero_into)).
//! A delta export's values stay in the caller's buffer, so a writer that fails (a full
//! buffer, a closed socket) loses none of them: write them again from the same
//! [`Values`](crate::registry::Values).
//!
//! Escaping, per the formats:
//! - a metric name keeps ASCII letters, digits and `_`; every other character (`.` of a
//!   sysctl-style name, `-`, a space, `:`, which Prometheus keeps for recording rules, any
//!   non-ASCII character) becomes `_`, and a
//!   name that starts with a digit gets a leading `_`.
//! - a registry accepts only names that export well ([`name_is_valid`]: a name starts with an
//!   ASCII letter, so its metric name does) and that stay apart from every registered name
//!   ([`names_clash`]: `a.b` and `a_b` export as one metric; `x_total` and `x_created` are
//!   names OpenMetrics reserves for the samples of counter `x`). So a registry's export never
//!   holds a metric twice, a name OpenMetrics reserves, or a name that starts with `_`.
//! - help text escapes `\` as `\\` and a line feed as `\n`; OpenMetrics also escapes `"`
//!   as `\"`. An empty description is replaced by the registered name (Prometheus' checker
//!   flags a metric without help).
//! - an array's elements are one series each, labelled `index="<i>"`.

use core::fmt::{self, Write};

/// Which text format to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text exposition format 0.0.4 (`text/plain; version=0.0.4`):
    /// `# HELP x_total ...`, `# TYPE x_total counter`, `x_total 5`.
    Prometheus,
    /// OpenMetrics 1.0 (`application/openmetrics-text; version=1.0.0`): `# TYPE x counter`,
    /// `# HELP x ...`, `x_total 5`, and the exposition ends with `# EOF`.
    OpenMetrics,
}

/// Writes `name` as a metric name: characters outside `[a-zA-Z0-9_]` become `_`, and a
/// leading digit gets a `_` before it.
///
/// ```
/// let mut s = String::new();
/// pcpu_counter::export::write_name(&mut s, "net.inet.tcp-rcv 2").unwrap();
/// s.push(' ');
/// pcpu_counter::export::write_name(&mut s, "9lives").unwrap();
/// assert_eq!(s, "net_inet_tcp_rcv_2 _9lives");
/// ```
pub fn write_name(w: &mut dyn Write, name: &str) -> fmt::Result {
    if name.starts_with(|c: char| c.is_ascii_digit()) || name.is_empty() {
        w.write_char('_')?;
    }
    for c in name.chars() {
        let keep = c.is_ascii_alphanumeric() || c == '_';
        w.write_char(if keep { c } else { '_' })?;
    }
    Ok(())
}

/// The bytes of the metric name [`write_name`] writes for `name` (all ASCII): a `_` first if
/// `name` is empty or starts with a digit, then one byte per character, the character itself
/// if it is an ASCII letter, digit or `_`, else `_`. A character's first byte stands for it
/// (UTF-8's continuation bytes, `0b10xx_xxxx`, are skipped): bytes, not decoded characters,
/// and one small loop, so that a kernel's library stays small (`tests/c/footprint.sh`).
fn metric_bytes(name: &str) -> MetricBytes<'_> {
    let bytes = name.as_bytes();
    MetricBytes {
        lead: bytes.first().is_none_or(u8::is_ascii_digit),
        rest: bytes,
    }
}

/// The iterator [`metric_bytes`] returns.
#[derive(Clone)]
struct MetricBytes<'a> {
    /// A `_` is still to come before the name's own bytes.
    lead: bool,
    rest: &'a [u8],
}

impl Iterator for MetricBytes<'_> {
    type Item = u8;

    #[inline(never)]
    fn next(&mut self) -> Option<u8> {
        if self.lead {
            self.lead = false;
            return Some(b'_');
        }
        loop {
            let (&b, rest) = self.rest.split_first()?;
            self.rest = rest;
            if b & 0xc0 != 0x80 {
                let keep = b.is_ascii_alphanumeric() || b == b'_';
                return Some(if keep { b } else { b'_' });
            }
        }
    }
}

/// Whether `name` is a name a registry accepts: it starts with an ASCII letter, so its
/// metric name starts with that letter. An empty name has no metric name; OpenMetrics
/// reserves names that start with `_`, which any other first character becomes (a digit
/// gets a `_` before it).
///
/// ```
/// use pcpu_counter::export::name_is_valid;
/// assert!(name_is_valid("net.rx") && name_is_valid("café"));
/// assert!(!name_is_valid("") && !name_is_valid("9x") && !name_is_valid("_x"));
/// assert!(!name_is_valid(".x") && !name_is_valid("é"));
/// ```
pub fn name_is_valid(name: &str) -> bool {
    name.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
}

/// The suffixes of a counter's samples in OpenMetrics: `_total`, which the export writes, and
/// `_created`, which the format reserves for a counter's creation time. A counter family `x`
/// owns the names `x`, `x_total` and `x_created`.
pub const COUNTER_SUFFIXES: [&str; 2] = ["_total", "_created"];

/// Whether `a` and `b` cannot both be exported: their metric names are the same (`a.b` and
/// `a_b`, `café` and `cafè`), or one is the other's with a suffix of
/// [`COUNTER_SUFFIXES`] (`x` and `x_total`, `x` and `x.created`). Promtool rejects the first
/// (a second `# HELP` for the metric), OpenMetrics parsers both (the name clashes with the
/// other family's samples). In the Prometheus format every family is `<name>_total`, so the
/// same names are the only clash there; the rule covers both formats.
///
/// ```
/// use pcpu_counter::export::names_clash;
/// assert!(names_clash("a.b", "a_b") && names_clash("x", "x_total"));
/// assert!(names_clash("x.created", "x") && names_clash("x", "x"));
/// assert!(names_clash("9x", "_9x"));
/// assert!(!names_clash("x", "x_count") && !names_clash("x", "x_total_total"));
/// ```
pub fn names_clash(a: &str, b: &str) -> bool {
    extends(a, b) || extends(b, a)
}

/// Whether `long`'s metric name is `short`'s, or `short`'s with a suffix of
/// [`COUNTER_SUFFIXES`].
fn extends(long: &str, short: &str) -> bool {
    let mut rest = metric_bytes(long);
    if !metric_bytes(short).all(|b| rest.next() == Some(b)) {
        return false;
    }
    // What `long` has after `short`: nothing, or a whole suffix.
    let is = |suffix: &str| {
        let mut tail = rest.clone();
        suffix.bytes().all(|b| tail.next() == Some(b)) && tail.next().is_none()
    };
    is("") || COUNTER_SUFFIXES.iter().any(|s| is(s))
}

/// Writes help text escaped for `format` (`\` and line feeds; for OpenMetrics also `"`).
///
/// ```
/// use pcpu_counter::export::{write_help, Format};
/// let mut s = String::new();
/// write_help(&mut s, Format::OpenMetrics, "a \"b\"\\\nc").unwrap();
/// assert_eq!(s, r#"a \"b\"\\\nc"#);
/// ```
pub fn write_help(w: &mut dyn Write, format: Format, help: &str) -> fmt::Result {
    for c in help.chars() {
        match c {
            '\\' => w.write_str("\\\\")?,
            '\n' => w.write_str("\\n")?,
            '"' if format == Format::OpenMetrics => w.write_str("\\\"")?,
            c => w.write_char(c)?,
        }
    }
    Ok(())
}

/// Writes one counter (`values` of one value, `array` false) or counter array as a
/// metric family in `format`, without OpenMetrics' closing `# EOF`. An empty `help` is
/// replaced by `name`.
///
/// ```
/// use pcpu_counter::export::{write_counter, Format};
/// let mut s = String::new();
/// write_counter(&mut s, Format::Prometheus, "drops", "dropped", &[3, 4], true).unwrap();
/// assert_eq!(s, "# HELP drops_total dropped\n# TYPE drops_total counter\n\
///                drops_total{index=\"0\"} 3\ndrops_total{index=\"1\"} 4\n");
/// ```
pub fn write_counter(
    w: &mut dyn Write,
    format: Format,
    name: &str,
    help: &str,
    values: &[u64],
    array: bool,
) -> fmt::Result {
    write_header(w, format, name, help)?;
    write_samples(w, name, values, array, 0)
}

/// The `# HELP` and `# TYPE` lines of [`write_counter`].
pub(crate) fn write_header(
    w: &mut dyn Write,
    format: Format,
    name: &str,
    help: &str,
) -> fmt::Result {
    let suffix = match format {
        Format::Prometheus => "_total",
        Format::OpenMetrics => "",
    };
    let family = |w: &mut dyn Write, what: &str| -> fmt::Result {
        w.write_str(what)?;
        write_name(w, name)?;
        w.write_str(suffix)
    };
    let (first, second) = match format {
        Format::Prometheus => ("# HELP ", "# TYPE "),
        Format::OpenMetrics => ("# TYPE ", "# HELP "),
    };
    for line in [first, second] {
        family(w, line)?;
        if line == "# HELP " {
            w.write_char(' ')?;
            write_help(w, format, if help.is_empty() { name } else { help })?;
        } else {
            w.write_str(" counter")?;
        }
        w.write_char('\n')?;
    }
    Ok(())
}

/// The sample lines of [`write_counter`] for `values`, the first of them element `first` of
/// the array (so an array can be written a piece at a time).
pub(crate) fn write_samples(
    w: &mut dyn Write,
    name: &str,
    values: &[u64],
    array: bool,
    first: usize,
) -> fmt::Result {
    for (i, v) in values.iter().enumerate() {
        write_name(w, name)?;
        w.write_str("_total")?;
        if array {
            w.write_str("{index=\"")?;
            write_decimal(w, (first + i) as u64)?;
            w.write_str("\"}")?;
        }
        w.write_char(' ')?;
        write_decimal(w, *v)?;
        w.write_char('\n')?;
    }
    Ok(())
}

/// Writes a histogram family: `# HELP` and `# TYPE name histogram`, one
/// `name_bucket{le="<highest>"} <cumulative count>` per bucket from `cumulative` (pairs of a
/// bucket's largest value and the values at or below it, in rising order; the pair whose
/// largest value is `u64::MAX` is the `+Inf` bucket, and must be the last), then `name_sum`
/// and `name_count`. Bucket bounds are integers: a bucket `[lowest, highest]` of integer
/// values holds exactly the values `<= highest` not in the buckets before it. `count` is
/// written as given: pass the `+Inf` bucket's cumulative count, as
/// [`Reading::write`](crate::histogram::Reading::write) does, so that the two agree in
/// every scrape. OpenMetrics' closing `# EOF` is the caller's.
///
/// ```
/// use pcpu_counter::export::{write_histogram, Format};
/// let mut s = String::new();
/// write_histogram(&mut s, Format::Prometheus, "lat", "latency", [(0, 1), (u64::MAX, 3)], 3, 70)
///     .unwrap();
/// assert_eq!(s, "# HELP lat latency\n# TYPE lat histogram\nlat_bucket{le=\"0\"} 1\n\
///                lat_bucket{le=\"+Inf\"} 3\nlat_sum 70\nlat_count 3\n");
/// ```
pub fn write_histogram(
    w: &mut dyn Write,
    format: Format,
    name: &str,
    help: &str,
    cumulative: impl IntoIterator<Item = (u64, u64)>,
    count: u64,
    sum: u64,
) -> fmt::Result {
    let (first, second) = match format {
        Format::Prometheus => ("# HELP ", "# TYPE "),
        Format::OpenMetrics => ("# TYPE ", "# HELP "),
    };
    for line in [first, second] {
        w.write_str(line)?;
        write_name(w, name)?;
        if line == "# HELP " {
            w.write_char(' ')?;
            write_help(w, format, if help.is_empty() { name } else { help })?;
        } else {
            w.write_str(" histogram")?;
        }
        w.write_char('\n')?;
    }
    for (highest, below) in cumulative {
        write_name(w, name)?;
        w.write_str("_bucket{le=\"")?;
        match highest {
            u64::MAX => w.write_str("+Inf")?,
            _ => write_decimal(w, highest)?,
        }
        w.write_str("\"} ")?;
        write_decimal(w, below)?;
        w.write_char('\n')?;
    }
    for (suffix, v) in [("_sum ", sum), ("_count ", count)] {
        write_name(w, name)?;
        w.write_str(suffix)?;
        write_decimal(w, v)?;
        w.write_char('\n')?;
    }
    Ok(())
}

/// Writes `v` in decimal through `write_str` alone: no `core::fmt` formatting machinery, so
/// that a C kernel's library stays small (`tests/c/footprint.sh`).
fn write_decimal(w: &mut dyn Write, mut v: u64) -> fmt::Result {
    let mut digits = [0u8; 20]; // u64::MAX has 20
    let mut start = digits.len();
    for d in digits.iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        start -= 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let text = digits.get(start..).unwrap_or_default();
    w.write_str(core::str::from_utf8(text).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    /// `names_clash` compares the very names `write_name` writes.
    #[test]
    fn metric_bytes_are_the_name_write_name_writes() {
        for name in [
            "",
            "a",
            "9x",
            "_9x",
            "a.b",
            "café",
            "é9",
            "x:y-z",
            "日本 語",
            "𝄞a",
            "A_1",
        ] {
            let mut written = alloc::string::String::new();
            super::write_name(&mut written, name).unwrap();
            let bytes: alloc::vec::Vec<u8> = super::metric_bytes(name).collect();
            assert_eq!(
                core::str::from_utf8(&bytes),
                Ok(written.as_str()),
                "{name:?}"
            );
        }
    }

    #[test]
    fn decimal_digits_at_every_width() {
        for v in [
            0,
            7,
            10,
            99,
            100,
            12_345,
            u64::MAX / 10,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut s = alloc::string::String::new();
            super::write_decimal(&mut s, v).unwrap();
            assert_eq!(s, alloc::format!("{v}"));
        }
    }
}
