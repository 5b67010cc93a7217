//! A named registry of counters, the analogue of FreeBSD's `SYSCTL_COUNTER_U64` and
//! `SYSCTL_COUNTER_U64_ARRAY`: read is fetch, write is zero.
//!
//! A [`Registry`] is fixed-size (`N` entries, no allocation), can be a `static`, and is read
//! with [`Registry::snapshot`], an iterator of [`Stat`] items that allocates nothing: a
//! kernel's stats dump or a `/proc`-like file formats them as it goes.

use core::fmt;

use crate::array::CounterArray;
use crate::early::EarlyCounter;
use crate::Counter;

/// Something a registry can name: one counter or an array of them.
pub trait Statistic: Sync {
    /// Number of values (1 for a counter).
    fn len(&self) -> usize;
    /// Whether there are no values (never, for the crate's types).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Value `i` (below `len`).
    fn value(&self, i: usize) -> u64;
    /// Zeroes value `i` (below `len`).
    fn zero_value(&self, i: usize);
    /// Whether this is an array (its values are listed with their index).
    fn is_array(&self) -> bool {
        false
    }
}

impl Statistic for Counter<'_> {
    fn len(&self) -> usize {
        1
    }
    fn value(&self, _i: usize) -> u64 {
        self.fetch()
    }
    fn zero_value(&self, _i: usize) {
        self.zero()
    }
}

impl Statistic for EarlyCounter {
    fn len(&self) -> usize {
        1
    }
    fn value(&self, _i: usize) -> u64 {
        self.fetch()
    }
    /// Zeroes the per-CPU counter; an early counter not yet given a slot cannot be zeroed
    /// (its early word is only ever added to) and is left as it is.
    fn zero_value(&self, _i: usize) {
        if let Some(counter) = self.counter() {
            counter.zero()
        }
    }
}

impl<const N: usize> Statistic for CounterArray<'_, N> {
    fn len(&self) -> usize {
        N
    }
    fn value(&self, i: usize) -> u64 {
        self.fetch(i)
    }
    fn zero_value(&self, i: usize) {
        self.zero(i)
    }
    fn is_array(&self) -> bool {
        true
    }
}

/// Why a registry call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryError {
    /// All `N` entries are in use.
    Full {
        /// The registry's size.
        capacity: usize,
    },
    /// The name is already registered.
    Duplicate,
    /// No entry has this name.
    NotFound,
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RegistryError::Full { capacity } => {
                write!(f, "registry full: all {capacity} entries are in use")
            }
            RegistryError::Duplicate => write!(f, "a counter with this name is registered"),
            RegistryError::NotFound => write!(f, "no counter with this name is registered"),
        }
    }
}

impl core::error::Error for RegistryError {}

/// One registered name.
#[derive(Clone, Copy)]
struct Entry<'a> {
    name: &'a str,
    description: &'a str,
    stat: &'a dyn Statistic,
}

/// A fixed-size table of named counters and counter arrays.
///
/// ```
/// use pcpu_counter::{array::CounterArray, registry::Registry, sim::Machine};
///
/// let machine = Machine::new(2);
/// let rx = machine.alloc().unwrap();
/// let errors: CounterArray<'_, 2> = CounterArray::new(machine.zone()).unwrap();
/// let stats: Registry<'_, 8> = Registry::new();
/// stats.register("rx", "packets received", &rx).unwrap();
/// stats.register("errors", "errors by kind", &errors).unwrap();
/// machine.run_on(1, || { rx.add(10); errors.add(1, 2) });
///
/// let mut dump = String::new();
/// for s in stats.snapshot() {
///     dump += &format!("{s}\n");
/// }
/// assert_eq!(dump, "rx = 10\nerrors[0] = 0\nerrors[1] = 2\n");
/// stats.zero("rx").unwrap();
/// assert_eq!(rx.fetch(), 0);
/// ```
pub struct Registry<'a, const N: usize> {
    entries: spin::Mutex<[Option<Entry<'a>>; N]>,
}

impl<'a, const N: usize> Registry<'a, N> {
    /// An empty registry with room for `N` names; `const`, so it can be a `static`.
    ///
    /// ```
    /// static STATS: pcpu_counter::registry::Registry<'static, 32> =
    ///     pcpu_counter::registry::Registry::new();
    /// assert_eq!(STATS.snapshot().count(), 0);
    /// ```
    pub const fn new() -> Self {
        Registry {
            entries: spin::Mutex::new([None; N]),
        }
    }

    /// Registers `stat` under `name` with a one-line `description`.
    ///
    /// Fails with [`RegistryError::Duplicate`] if `name` is taken and with
    /// [`RegistryError::Full`] when all `N` entries are used.
    ///
    /// ```
    /// # use pcpu_counter::registry::{Registry, RegistryError};
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// let (a, b) = (machine.alloc().unwrap(), machine.alloc().unwrap());
    /// let stats: Registry<'_, 1> = Registry::new();
    /// assert_eq!(stats.register("a", "first", &a), Ok(()));
    /// assert_eq!(stats.register("a", "again", &b), Err(RegistryError::Duplicate));
    /// assert_eq!(stats.register("b", "second", &b), Err(RegistryError::Full { capacity: 1 }));
    /// ```
    pub fn register(
        &self,
        name: &'a str,
        description: &'a str,
        stat: &'a dyn Statistic,
    ) -> Result<(), RegistryError> {
        let mut entries = self.entries.lock();
        if entries.iter().flatten().any(|e| e.name == name) {
            return Err(RegistryError::Duplicate);
        }
        let free = entries
            .iter_mut()
            .find(|e| e.is_none())
            .ok_or(RegistryError::Full { capacity: N })?;
        *free = Some(Entry {
            name,
            description,
            stat,
        });
        Ok(())
    }

    /// Removes `name`.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// # let a = machine.alloc().unwrap();
    /// let stats: pcpu_counter::registry::Registry<'_, 4> = Default::default();
    /// stats.register("a", "first", &a).unwrap();
    /// assert_eq!(stats.unregister("a"), Ok(()));
    /// assert!(stats.get("a").is_none());
    /// ```
    pub fn unregister(&self, name: &str) -> Result<(), RegistryError> {
        let mut entries = self.entries.lock();
        let entry = entries
            .iter_mut()
            .find(|e| e.is_some_and(|e| e.name == name))
            .ok_or(RegistryError::NotFound)?;
        *entry = None;
        Ok(())
    }

    /// The statistic registered as `name`.
    ///
    /// ```
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// # let a = machine.alloc().unwrap();
    /// # machine.run_on(0, || a.add(4));
    /// let stats: pcpu_counter::registry::Registry<'_, 4> = Default::default();
    /// stats.register("a", "first", &a).unwrap();
    /// assert_eq!(stats.get("a").map(|s| s.value(0)), Some(4));
    /// ```
    pub fn get(&self, name: &str) -> Option<&'a dyn Statistic> {
        self.find(name).map(|e| e.stat)
    }

    fn find(&self, name: &str) -> Option<Entry<'a>> {
        self.entries
            .lock()
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .copied()
    }

    /// Entry `i` of the table (below `N`), copied under the lock: for the C ABI's walk,
    /// which hands each entry's values to C at once.
    #[cfg(feature = "capi")]
    pub(crate) fn entry(&self, i: usize) -> Option<(&'a str, &'a str, &'a dyn Statistic)> {
        self.entries.lock()[i].map(|e| (e.name, e.description, e.stat))
    }

    /// Zeroes every value registered as `name` (a sysctl write): losslessly, like
    /// [`Counter::zero`].
    ///
    /// ```
    /// # use pcpu_counter::registry::{Registry, RegistryError};
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// # let a = machine.alloc().unwrap();
    /// # machine.run_on(0, || a.add(4));
    /// let stats: Registry<'_, 4> = Registry::new();
    /// stats.register("a", "first", &a).unwrap();
    /// assert_eq!(stats.zero("a"), Ok(()));
    /// assert_eq!(a.fetch(), 0);
    /// assert_eq!(stats.zero("nope"), Err(RegistryError::NotFound));
    /// ```
    pub fn zero(&self, name: &str) -> Result<(), RegistryError> {
        let entry = self.find(name).ok_or(RegistryError::NotFound)?;
        (0..entry.stat.len()).for_each(|i| entry.stat.zero_value(i));
        Ok(())
    }

    /// Every registered value, in registration order (slots freed by `unregister` are
    /// reused), each read when the iterator reaches it. Allocates nothing and holds the
    /// registry's lock only while it copies one entry.
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
        }
    }
}

impl<const N: usize> Default for Registry<'_, N> {
    fn default() -> Self {
        Self::new()
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

/// The iterator of [`Registry::snapshot`].
pub struct Snapshot<'r, 'a, const N: usize> {
    registry: &'r Registry<'a, N>,
    entry: usize,
    index: usize,
}

impl<'a, const N: usize> Iterator for Snapshot<'_, 'a, N> {
    type Item = Stat<'a>;

    fn next(&mut self) -> Option<Stat<'a>> {
        while self.entry < N {
            let entry = self.registry.entries.lock()[self.entry];
            match entry {
                Some(e) if self.index < e.stat.len() => {
                    let index = self.index;
                    self.index += 1;
                    return Some(Stat {
                        name: e.name,
                        description: e.description,
                        index: e.stat.is_array().then_some(index),
                        value: e.stat.value(index),
                    });
                }
                _ => {
                    self.entry += 1;
                    self.index = 0;
                }
            }
        }
        None
    }
}

impl<const N: usize> fmt::Debug for Snapshot<'_, '_, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("entry", &self.entry)
            .field("index", &self.index)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;
    use std::string::ToString;

    /// A statistic of no values: the trait's default `is_empty` says so.
    struct Nothing;
    impl Statistic for Nothing {
        fn len(&self) -> usize {
            0
        }
        fn value(&self, _i: usize) -> u64 {
            unreachable!()
        }
        fn zero_value(&self, _i: usize) {}
    }

    #[test]
    fn statistics_errors_and_debug_output() {
        assert!(Nothing.is_empty());
        assert!(!Nothing.is_array());
        let machine = crate::sim::machine_for_ever(2);
        let c = machine.alloc().unwrap();
        let a: CounterArray<'_, 2> = CounterArray::new(machine.zone()).unwrap();
        let early = EarlyCounter::new();
        early.add(6);
        let stats: Registry<'_, 3> = Registry::new();
        stats.register("c", "a counter", &c).unwrap();
        stats.register("a", "an array", &a).unwrap();
        stats.register("e", "an early counter", &early).unwrap();
        for (name, len, array) in [("c", 1, false), ("a", 2, true), ("e", 1, false)] {
            let s = stats.get(name).unwrap();
            assert_eq!((s.len(), s.is_empty(), s.is_array()), (len, false, array));
        }
        machine.run_on(1, || {
            c.add(3);
            a.add(1, 4);
        });
        assert_eq!(
            format!("{stats:?}"),
            "[Stat { name: \"c\", description: \"a counter\", index: None, value: 3 }, \
             Stat { name: \"a\", description: \"an array\", index: Some(0), value: 0 }, \
             Stat { name: \"a\", description: \"an array\", index: Some(1), value: 4 }, \
             Stat { name: \"e\", description: \"an early counter\", index: None, value: 6 }]"
        );
        let entry = |i| stats.entry(i).map(|(n, d, s)| (n, d, s.value(s.len() - 1)));
        assert_eq!(entry(0), Some(("c", "a counter", 3)));
        assert_eq!(entry(1), Some(("a", "an array", 4)));
        let mut snapshot = stats.snapshot();
        snapshot.next();
        snapshot.next();
        assert_eq!(format!("{snapshot:?}"), "Snapshot { entry: 1, index: 1 }");
        assert_eq!(stats.get("e").map(|s| s.value(0)), Some(6));
        stats.zero("e").unwrap(); // no slot yet: left as it is
        assert_eq!(early.fetch(), 6);
        machine.run_on(0, || early.init(machine.zone())).unwrap();
        stats.zero("e").unwrap();
        assert_eq!(early.fetch(), 0);

        stats.zero("c").unwrap();
        stats.zero("a").unwrap();
        assert_eq!((c.fetch(), a.fetch(1)), (0, 0));
        assert_eq!(stats.unregister("c"), Ok(()));
        assert!(stats.get("c").is_none());
        assert_eq!(stats.unregister("c"), Err(RegistryError::NotFound));
        assert_eq!(
            RegistryError::Full { capacity: 3 }.to_string(),
            "registry full: all 3 entries are in use"
        );
        assert_eq!(
            RegistryError::Duplicate.to_string(),
            "a counter with this name is registered"
        );
        assert_eq!(
            RegistryError::NotFound.to_string(),
            "no counter with this name is registered"
        );
    }
}
