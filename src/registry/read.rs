// SPDX-License-Identifier: BSD-2-Clause
//! Reading a [`Registry`]'s values: the [`snapshot`](Registry::snapshot) iterator of
//! [`Stat`]s, the group reads ([`read_into`](Registry::read_into),
//! [`fetch_and_zero_into`](Registry::fetch_and_zero_into)) and their [`Values`] with the
//! Prometheus and OpenMetrics exports, and the C ABI's walk of a copy of the table.

use core::fmt;

use super::table::Entry;
use super::{Registry, RegistryError, Statistic};
use crate::export::Format::{OpenMetrics, Prometheus};
use crate::group::{self, Part};

impl<'a, const N: usize> Registry<'a, N> {
    /// Every registered value, in registration order (slots freed by `unregister` are
    /// reused), read as the iterator reaches them in batches of up to 16 values of up to 4
    /// names, each batch one group read (see [`read_into`](Registry::read_into)). Allocates
    /// nothing and holds the registry's lock only while it copies a batch's entries.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// # let a = machine.alloc().unwrap();
    /// # machine.run_on(0, || a.add(4));
    /// let stats: pcpu_counter::registry::Registry<'_, 4> = Default::default();
    /// stats.register("a", "first", &a).unwrap();
    /// let s = stats.snapshot().next().unwrap();
    /// assert_eq!((s.name, s.description, s.index, s.value), ("a", "first", None, 4));
    /// ```
    pub fn snapshot(&self) -> Snapshot<'_, 'a, N> {
        Snapshot {
            registry: self,
            entry: 0,
            index: 0,
            batch: [None; BATCH_PIECES],
            values: [0; BATCH_VALUES],
            next: 0,
            filled: 0,
        }
    }

    /// Number of values registered now (an array's count each of its elements): the size
    /// of the buffer [`read_into`](Registry::read_into) needs.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// # let (c, a) = (machine.alloc().unwrap(), pcpu_counter::array::CounterArray::<'_, 3>::new(machine.zone()).unwrap());
    /// let stats: pcpu_counter::registry::Registry<'_, 4> = Default::default();
    /// stats.register("c", "one", &c).unwrap();
    /// stats.register("a", "three", &a).unwrap();
    /// assert_eq!(stats.values_len(), 4);
    /// ```
    pub fn values_len(&self) -> usize {
        self.entries
            .lock()
            .iter()
            .flatten()
            .map(|e| e.stat.len())
            .sum()
    }

    /// Every registered value, read as one group into `out`: the entries are copied under
    /// the lock once, then every value held in a zone's slots is read CPU by CPU, each CPU's
    /// slots in order (counters allocated one after another are neighbours: one cache line
    /// per CPU for eight of them). Allocates nothing.
    ///
    /// Fails with [`RegistryError::BufferTooSmall`], reading nothing, if `out` holds fewer
    /// than [`values_len`](Registry::values_len) values.
    ///
    /// ```
    /// # use pcpu_counter::{array::CounterArray, registry::Registry, sim::Machine};
    /// let machine = Machine::new(4);
    /// let (rx, tx) = (machine.alloc().unwrap(), machine.alloc().unwrap());
    /// let errs: CounterArray<'_, 2> = CounterArray::new(machine.zone()).unwrap();
    /// let stats: Registry<'_, 8> = Registry::new();
    /// stats.register("rx", "received", &rx).unwrap();
    /// stats.register("tx", "sent", &tx).unwrap();
    /// stats.register("errs", "errors", &errs).unwrap();
    /// machine.run_on(3, || { rx.add(5); errs.add(1, 2) });
    /// let mut buf = [0; 8];
    /// let values = stats.read_into(&mut buf).unwrap();
    /// assert_eq!(values.values(), [5, 0, 0, 2]);
    /// let names: Vec<_> = values.iter().map(|s| s.to_string()).collect();
    /// assert_eq!(names, ["rx = 5", "tx = 0", "errs[0] = 0", "errs[1] = 2"]);
    /// ```
    pub fn read_into<'o>(
        &self,
        out: &'o mut [u64],
    ) -> Result<Values<'o, 'a, N>, RegistryError<'static>> {
        self.group(out, false)
    }

    /// As [`read_into`](Registry::read_into), and zeroes every value as one step with its
    /// read ([`Counter::fetch_and_zero`](crate::Counter::fetch_and_zero)): the deltas of
    /// successive calls add up exactly, and an add racing with the call is in this delta or
    /// the next, never both; slots are taken 16 at a time in one pass over the CPUs, with no
    /// IPI. An early counter not yet given a slot cannot be zeroed and reports its whole count.
    ///
    /// Fails with [`RegistryError::BufferTooSmall`], taking nothing, if `out` is too small.
    ///
    /// ```
    /// # use pcpu_counter::{registry::Registry, sim::Machine};
    /// # let machine = Machine::new(2);
    /// # let rx = machine.alloc().unwrap();
    /// let stats: Registry<'_, 8> = Registry::new();
    /// stats.register("rx", "received", &rx).unwrap();
    /// machine.run_on(1, || rx.add(5));
    /// let mut buf = [0; 1];
    /// assert_eq!(stats.fetch_and_zero_into(&mut buf).unwrap().values(), [5]);
    /// machine.run_on(0, || rx.add(2));
    /// assert_eq!(stats.fetch_and_zero_into(&mut buf).unwrap().values(), [2]);
    /// assert_eq!(rx.fetch(), 0);
    /// ```
    pub fn fetch_and_zero_into<'o>(
        &self,
        out: &'o mut [u64],
    ) -> Result<Values<'o, 'a, N>, RegistryError<'static>> {
        self.group(out, true)
    }

    fn group<'o>(
        &self,
        out: &'o mut [u64],
        zero: bool,
    ) -> Result<Values<'o, 'a, N>, RegistryError<'static>> {
        let entries = *self.entries.lock();
        let needed = entries.iter().flatten().map(|e| e.stat.len()).sum();
        if out.len() < needed {
            return Err(RegistryError::BufferTooSmall { needed });
        }
        let mut parts = [Part::other(0); N];
        for (part, e) in parts.iter_mut().zip(entries.iter()) {
            if let Some(e) = e {
                *part = part_of(e.stat, 0, e.stat.len());
            }
        }
        let out = &mut out[..needed];
        read_parts(&parts, out, zero);
        let mut at = 0;
        let mut shown = [None; N];
        for ((part, e), shown) in parts.iter().zip(entries.iter()).zip(shown.iter_mut()) {
            let Some(e) = e else { continue };
            if part.zone.is_none() {
                fill_other(e.stat, 0, &mut out[at..at + part.len], zero);
            }
            *shown = Some((*e, part.len, e.stat.is_array()));
            at += part.len;
        }
        Ok(Values {
            entries: shown,
            values: out,
        })
    }
}

/// The entries registered at one moment, by table index, for the C ABI's walk and export,
/// which read the same names twice (a size check, then the export) or hand each name's
/// values to C at once. It holds no copy of the table: a kernel's stack can be 4 KiB
/// (docs/c.md, "Stack use"), and a copy is 48 bytes per entry. The caller keeps every entry
/// of the set from being removed while it uses the set (the C ABI's `LIVE` lock), so entry
/// `i` stays the entry it was; names registered meanwhile are not in the set.
#[cfg(pcpu_c_abi)]
pub(crate) struct Table<'r, 'a, const N: usize> {
    registry: &'r Registry<'a, N>,
    /// Bit `i`: entry `i` was registered.
    present: u64,
}

/// Values a walk hands to its callback at once: an entry's values, at most this many.
#[cfg(pcpu_c_abi)]
pub(crate) const WALK_VALUES: usize = group::CHUNK;

/// Values an export reads in one group read (its buffer is on the stack: 8 bytes each).
#[cfg(pcpu_c_abi)]
const EXPORT_VALUES: usize = 16;

#[cfg(pcpu_c_abi)]
impl<'a, const N: usize> Registry<'a, N> {
    /// The entries registered now.
    pub(crate) fn table(&self) -> Table<'_, 'a, N> {
        const { assert!(N <= 64, "a Table's set is one u64") };
        let present = self
            .entries
            .lock()
            .iter()
            .enumerate()
            .filter(|(_, e)| e.is_some())
            .fold(0u64, |set, (i, _)| set | 1 << i);
        Table {
            registry: self,
            present,
        }
    }
}

#[cfg(pcpu_c_abi)]
impl<'a, const N: usize> Table<'_, 'a, N> {
    /// The entries of the set, in table order, each read under the registry's lock alone.
    fn entries(&self) -> impl Iterator<Item = Entry<'a>> + '_ {
        (0..N)
            .filter(|i| self.present & 1 << i != 0)
            // `get`, not an index: no bounds panic (and its formatting) in the C library.
            .filter_map(|i| self.registry.entries.lock().get(i).copied().flatten())
    }

    /// Calls `f(name, description, values, is_array)` for each entry (at most
    /// [`WALK_VALUES`] values of each), its values read just before as one group read.
    /// `Some` from `f` stops the walk and is returned.
    pub(crate) fn for_each<R>(
        &self,
        mut f: impl FnMut(&'a str, &'a str, &[u64], bool) -> Option<R>,
    ) -> Option<R> {
        let mut values = [0u64; WALK_VALUES];
        for e in self.entries() {
            let len = e.stat.len().min(WALK_VALUES);
            read_values::<false>(e.stat, 0, &mut values[..len]);
            if let Some(r) = f(e.name, e.description, &values[..len], e.stat.is_array()) {
                return Some(r);
            }
        }
        None
    }

    /// Writes every entry in `format` (at most [`WALK_VALUES`] values of each), its values
    /// read in group reads of [`EXPORT_VALUES`] (zeroing each value with its read if
    /// `zero`), and OpenMetrics' `# EOF`. With `zero`, a failed write loses the values read.
    pub(crate) fn export(
        &self,
        w: &mut dyn fmt::Write,
        format: crate::export::Format,
        zero: bool,
    ) -> fmt::Result {
        let mut values = [0u64; EXPORT_VALUES];
        for e in self.entries() {
            crate::export::write_header(w, format, e.name, e.description)?;
            let len = e.stat.len().min(WALK_VALUES);
            for first in (0..len).step_by(EXPORT_VALUES) {
                let chunk = &mut values[..(len - first).min(EXPORT_VALUES)];
                if zero {
                    read_values::<true>(e.stat, first, chunk);
                } else {
                    read_values::<false>(e.stat, first, chunk);
                }
                crate::export::write_samples(w, e.name, chunk, e.stat.is_array(), first)?;
            }
        }
        if format == OpenMetrics {
            w.write_str("# EOF\n")?;
        }
        Ok(())
    }

    /// Bytes that [`export`](Table::export) in `format` takes at most: its text with every
    /// value `u64::MAX` (20 digits, the longest), and OpenMetrics' `# EOF` line.
    pub(crate) fn bound(&self, format: crate::export::Format) -> usize {
        struct Count(usize);
        impl fmt::Write for Count {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                self.0 += s.len();
                Ok(())
            }
        }
        let mut count = Count(0);
        for e in self.entries() {
            let len = e.stat.len().min(WALK_VALUES);
            // Counting cannot fail.
            let _ = crate::export::write_header(&mut count, format, e.name, e.description);
            for i in 0..len {
                let _ = crate::export::write_samples(
                    &mut count,
                    e.name,
                    &[u64::MAX],
                    e.stat.is_array(),
                    i,
                );
            }
        }
        count.0
            + if format == OpenMetrics {
                "# EOF\n".len()
            } else {
                0
            }
    }
}

/// Values `first..first + out.len()` of `stat` into `out`, as one group read (zeroing each
/// with its read if `ZERO`: a constant, so that a walk's stack holds no zeroing path).
#[cfg(pcpu_c_abi)]
fn read_values<const ZERO: bool>(stat: &dyn Statistic, first: usize, out: &mut [u64]) {
    let part = part_of(stat, first, out.len());
    if ZERO {
        group::fetch_and_zero(&[part], out);
    } else {
        group::fetch(&[part], out);
    }
    if part.zone.is_none() {
        fill_other(stat, first, out, ZERO);
    }
}

/// Pieces (runs of one entry's values) of one batch of [`Snapshot`]: 72 bytes each on the
/// iterator's stack.
const BATCH_PIECES: usize = 4;

/// Values of one batch of [`Snapshot`], one group read (one pass over the CPUs, two cache
/// lines of slots per CPU): 8 bytes each on the iterator's stack, which with the batch's
/// pieces and the group read's own frame stays within 1 KiB (`cargo xtask stack --rust`).
const BATCH_VALUES: usize = 16;

/// Values `first..first + len` of `stat` as a part of a group read.
fn part_of<'s>(stat: &'s dyn Statistic, first: usize, len: usize) -> Part<'s> {
    match stat.slots() {
        // SAFETY: `Slots` are made only from a live counter or array, borrowed as long as
        // they are, or (the C library's registry) from a handle its zone resolved, which the
        // C caller keeps live while registered: `slots.off` is a live slot of `slots.zone`.
        Some(slots) => unsafe { Part::beside(slots.zone, slots.off, first, len) },
        None => Part::other(len),
    }
}

/// The group read of `parts` into `out`, zeroing each value with its read if `zero`.
fn read_parts(parts: &[Part<'_>], out: &mut [u64], zero: bool) {
    if zero {
        group::fetch_and_zero(parts, out)
    } else {
        group::fetch(parts, out)
    }
}

/// Values `first..` of a statistic without slots, one by one, into `out`.
fn fill_other(stat: &dyn Statistic, first: usize, out: &mut [u64], zero: bool) {
    for (i, v) in out.iter_mut().enumerate() {
        *v = if zero {
            stat.fetch_and_zero_value(first + i)
        } else {
            stat.value(first + i)
        };
    }
}

impl<const N: usize> fmt::Debug for Registry<'_, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.snapshot()).finish()
    }
}

/// One value of a [`Registry::snapshot`].
///
/// Displays as `name = value`, or `name[index] = value` for an array element.
///
/// ```
/// let s = pcpu_counter::registry::Stat { name: "rx", description: "", index: Some(2), value: 7 };
/// assert_eq!(s.to_string(), "rx[2] = 7");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat<'a> {
    /// The registered name.
    pub name: &'a str,
    /// The registered description.
    pub description: &'a str,
    /// The element index, for an array.
    pub index: Option<usize>,
    /// The value when it was read.
    pub value: u64,
}

impl fmt::Display for Stat<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) => write!(f, "{}[{i}] = {}", self.name, self.value),
            None => write!(f, "{} = {}", self.name, self.value),
        }
    }
}

/// The iterator of [`Registry::snapshot`]: it reads the values in batches of up to 16
/// values of up to 4 entries, each batch as one group read (CPU by CPU), and holds the
/// registry's lock only while it copies a batch's entries.
pub struct Snapshot<'r, 'a, const N: usize> {
    registry: &'r Registry<'a, N>,
    /// The table index and element index of the first value not yet in a batch.
    entry: usize,
    index: usize,
    /// The batch: table index, entry, first element, number of elements.
    batch: [Option<(usize, Entry<'a>, usize, usize)>; BATCH_PIECES],
    values: [u64; BATCH_VALUES],
    /// The next value to hand out: its position in `values`, and its piece of `batch`.
    next: usize,
    filled: usize,
}

impl<'a, const N: usize> Snapshot<'_, 'a, N> {
    /// Copies the next batch's entries under the lock and reads their values as one group.
    fn refill(&mut self) {
        self.batch = [None; BATCH_PIECES];
        let (mut pieces, mut total) = (0, 0);
        {
            let entries = self.registry.entries.lock();
            while self.entry < N && pieces < BATCH_PIECES && total < BATCH_VALUES {
                match entries[self.entry] {
                    Some(e) if self.index < e.stat.len() => {
                        let len = (e.stat.len() - self.index).min(BATCH_VALUES - total);
                        self.batch[pieces] = Some((self.entry, e, self.index, len));
                        pieces += 1;
                        total += len;
                        self.index += len;
                    }
                    _ => {
                        self.entry += 1;
                        self.index = 0;
                    }
                }
            }
        }
        let mut parts = [Part::other(0); BATCH_PIECES];
        for (part, piece) in parts.iter_mut().zip(self.batch.iter().flatten()) {
            *part = part_of(piece.1.stat, piece.2, piece.3);
        }
        group::fetch(&parts, &mut self.values[..total]);
        let mut at = 0;
        for (part, &(_, e, first, len)) in parts.iter().zip(self.batch.iter().flatten()) {
            if part.zone.is_none() {
                fill_other(e.stat, first, &mut self.values[at..at + len], false);
            }
            at += len;
        }
        (self.next, self.filled) = (0, total);
    }

    /// The piece of the batch that holds value `pos`, and the value's element index.
    fn locate(&self, pos: usize) -> Option<(usize, Entry<'a>, usize)> {
        let mut at = 0;
        for &(table, e, first, len) in self.batch.iter().flatten() {
            if pos < at + len {
                return Some((table, e, first + pos - at));
            }
            at += len;
        }
        None
    }
}

impl<'a, const N: usize> Iterator for Snapshot<'_, 'a, N> {
    type Item = Stat<'a>;

    fn next(&mut self) -> Option<Stat<'a>> {
        if self.next == self.filled {
            self.refill();
        }
        let (_, e, index) = self.locate(self.next)?;
        let value = self.values[self.next];
        self.next += 1;
        Some(Stat {
            name: e.name,
            description: e.description,
            index: e.stat.is_array().then_some(index),
            value,
        })
    }
}

impl<const N: usize> fmt::Debug for Snapshot<'_, '_, N> {
    /// Shows where the next value comes from: its entry's table index and element index.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (entry, index) = self
            .locate(self.next)
            .map_or((self.entry, self.index), |(table, _, index)| (table, index));
        f.debug_struct("Snapshot")
            .field("entry", &entry)
            .field("index", &index)
            .finish()
    }
}

/// The values of one group read of a [`Registry`] ([`Registry::read_into`],
/// [`Registry::fetch_and_zero_into`]): the names as they were registered at the read, and the
/// values read, in registration order. Displays in the Prometheus text format (see
/// [`write_prometheus`](Values::write_prometheus)).
pub struct Values<'o, 'a, const N: usize> {
    /// Each entry with its number of values and whether it is an array.
    entries: [Option<(Entry<'a>, usize, bool)>; N],
    values: &'o [u64],
}

impl<'o, 'a, const N: usize> Values<'o, 'a, N> {
    /// The values read, in registration order (an array's elements in order).
    pub fn values(&self) -> &'o [u64] {
        self.values
    }

    /// Every value with its name, as [`Registry::snapshot`] lists them.
    pub fn iter(&self) -> impl Iterator<Item = Stat<'a>> + '_ {
        self.entries().flat_map(|(e, values, array)| {
            values.iter().enumerate().map(move |(i, &value)| Stat {
                name: e.name,
                description: e.description,
                index: array.then_some(i),
                value,
            })
        })
    }

    /// Each entry: name, description, values, whether it is an array.
    fn entries(&self) -> impl Iterator<Item = (Entry<'a>, &'o [u64], bool)> + '_ {
        let mut at = 0;
        self.entries.iter().flatten().map(move |&(e, len, array)| {
            let values = &self.values[at..at + len];
            at += len;
            (e, values, array)
        })
    }

    /// Writes the values in the Prometheus text exposition format (version 0.0.4, what
    /// `promtool check metrics` checks and every Prometheus scrapes): for each name a `# HELP`
    /// line, a `# TYPE <name>_total counter` line, and `<name>_total <value>`, or for an
    /// array one series per element labelled `index`: `<name>_total{index="3"} <value>`.
    /// See [`crate::export`] for how names and help text are escaped.
    ///
    /// ```
    /// # use pcpu_counter::{array::CounterArray, registry::Registry, sim::Machine};
    /// let machine = Machine::new(2);
    /// let rx = machine.alloc().unwrap();
    /// let errs: CounterArray<'_, 2> = CounterArray::new(machine.zone()).unwrap();
    /// let stats: Registry<'_, 8> = Registry::new();
    /// stats.register("net.rx", "packets received", &rx).unwrap();
    /// stats.register("errs", "errors by kind", &errs).unwrap();
    /// machine.run_on(1, || { rx.add(5); errs.add(1, 2) });
    /// let mut buf = [0; 3];
    /// let mut text = String::new();
    /// stats.read_into(&mut buf).unwrap().write_prometheus(&mut text).unwrap();
    /// assert_eq!(text, "\
    /// ## HELP net_rx_total packets received
    /// ## TYPE net_rx_total counter
    /// net_rx_total 5
    /// ## HELP errs_total errors by kind
    /// ## TYPE errs_total counter
    /// errs_total{index=\"0\"} 0
    /// errs_total{index=\"1\"} 2
    /// ");
    /// ```
    pub fn write_prometheus(&self, w: &mut dyn fmt::Write) -> fmt::Result {
        for (e, values, array) in self.entries() {
            crate::export::write_counter(w, Prometheus, e.name, e.description, values, array)?;
        }
        Ok(())
    }

    /// Writes the values in the OpenMetrics 1.0 text format: for each name `# TYPE <name>
    /// counter`, `# HELP <name> ...`, then `<name>_total <value>` (arrays labelled `index`),
    /// and `# EOF` at the end. See [`crate::export`] for the escaping.
    ///
    /// ```
    /// # use pcpu_counter::{registry::Registry, sim::Machine};
    /// # let machine = Machine::new(2);
    /// # let rx = machine.alloc().unwrap();
    /// let stats: Registry<'_, 8> = Registry::new();
    /// stats.register("rx", "packets \"in\"", &rx).unwrap();
    /// machine.run_on(1, || rx.add(5));
    /// let mut text = String::new();
    /// stats.read_into(&mut [0; 1]).unwrap().write_openmetrics(&mut text).unwrap();
    /// assert_eq!(text, "# TYPE rx counter\n# HELP rx packets \\\"in\\\"\nrx_total 5\n# EOF\n");
    /// ```
    pub fn write_openmetrics(&self, w: &mut dyn fmt::Write) -> fmt::Result {
        for (e, values, array) in self.entries() {
            crate::export::write_counter(w, OpenMetrics, e.name, e.description, values, array)?;
        }
        w.write_str("# EOF\n")
    }
}

impl<const N: usize> fmt::Display for Values<'_, '_, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_prometheus(f)
    }
}

impl<const N: usize> fmt::Debug for Values<'_, '_, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::registry::fixture::Stats;
    use std::format;

    #[test]
    fn debug_output_and_the_c_walk() {
        let s = Stats::new();
        let stats = s.registry();
        assert_eq!(
            format!("{stats:?}"),
            "[Stat { name: \"c\", description: \"a counter\", index: None, value: 3 }, \
             Stat { name: \"a\", description: \"an array\", index: Some(0), value: 0 }, \
             Stat { name: \"a\", description: \"an array\", index: Some(1), value: 4 }, \
             Stat { name: \"e\", description: \"an early counter\", index: None, value: 6 }]"
        );
        #[cfg(pcpu_c_abi)]
        {
            let mut seen = std::vec::Vec::new();
            let stop = stats.table().for_each(|n, d, v, array| {
                seen.push((n, d, v.to_vec(), array));
                (n == "e").then_some(v[0])
            });
            assert_eq!(stop, Some(6));
            assert_eq!(
                seen,
                [
                    ("c", "a counter", std::vec![3], false),
                    ("a", "an array", std::vec![0, 4], true),
                    ("e", "an early counter", std::vec![6], false),
                ]
            );
        }
        let mut snapshot = stats.snapshot();
        snapshot.next();
        snapshot.next();
        assert_eq!(format!("{snapshot:?}"), "Snapshot { entry: 1, index: 1 }");
    }
}
