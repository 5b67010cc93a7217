// SPDX-License-Identifier: BSD-2-Clause
//! The [`Registry`] itself: its fixed-size table of names, registration, lookup and zero by
//! name, and [`RegistryError`]. Reading the table's values is `read.rs`'s part.

use core::fmt;

use super::Statistic;
use crate::export;

/// Why a registry call failed. Only [`Registry::register`] names names in its errors (of
/// lifetime `'a`, the registry's); the other calls' errors are `RegistryError<'static>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryError<'a> {
    /// All `N` entries are in use.
    Full {
        /// The registry's size.
        capacity: usize,
    },
    /// The name is already registered.
    Duplicate,
    /// The name cannot be exported: it is empty or does not start with an ASCII letter (see
    /// [`export::name_is_valid`]).
    BadName {
        /// The name refused.
        name: &'a str,
    },
    /// The name's metric name clashes with a registered name's: they are the same (`a.b` and
    /// `a_b`), or one is the other's with `_total` or `_created` after it (see
    /// [`export::names_clash`]).
    Clash {
        /// The name refused.
        name: &'a str,
        /// The registered name it clashes with.
        registered: &'a str,
    },
    /// No entry has this name.
    NotFound,
    /// The buffer handed to a group read holds fewer values than the registry has.
    BufferTooSmall {
        /// The values the registry has now.
        needed: usize,
    },
}

impl fmt::Display for RegistryError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RegistryError::Full { capacity } => {
                write!(f, "registry full: all {capacity} entries are in use")
            }
            RegistryError::Duplicate => write!(f, "a counter with this name is registered"),
            RegistryError::BadName { name } => write!(
                f,
                "{name:?} cannot be exported: a name must start with an ASCII letter"
            ),
            RegistryError::Clash { name, registered } => write!(
                f,
                "{name:?} and the registered {registered:?} export clashing metric names"
            ),
            RegistryError::NotFound => write!(f, "no counter with this name is registered"),
            RegistryError::BufferTooSmall { needed } => {
                write!(
                    f,
                    "the buffer holds fewer than the registry's {needed} values"
                )
            }
        }
    }
}

impl core::error::Error for RegistryError<'_> {}

/// One registered name.
#[derive(Clone, Copy)]
pub(super) struct Entry<'a> {
    pub(super) name: &'a str,
    pub(super) description: &'a str,
    pub(super) stat: &'a dyn Statistic,
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
    pub(super) entries: spin::Mutex<[Option<Entry<'a>>; N]>,
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
    /// Fails with [`RegistryError::BadName`] if `name` is empty or does not start with an
    /// ASCII letter, [`RegistryError::Duplicate`] if `name` is taken,
    /// [`RegistryError::Clash`] if its metric name clashes with a registered name's (`a.b`
    /// and `a_b`; `x` and `x_total` or `x_created`), and [`RegistryError::Full`] when all `N`
    /// entries are used. So every name registered exports as a metric of its own, in both
    /// formats (see [`crate::export`]).
    ///
    /// ```
    /// # use pcpu_counter::registry::{Registry, RegistryError};
    /// # let machine = pcpu_counter::sim::Machine::new(1);
    /// let (a, b) = (machine.alloc().unwrap(), machine.alloc().unwrap());
    /// let stats: Registry<'_, 1> = Registry::new();
    /// assert_eq!(stats.register("a.b", "first", &a), Ok(()));
    /// assert_eq!(stats.register("a.b", "again", &b), Err(RegistryError::Duplicate));
    /// assert_eq!(
    ///     stats.register("a_b", "the same metric", &b),
    ///     Err(RegistryError::Clash { name: "a_b", registered: "a.b" })
    /// );
    /// assert_eq!(stats.register("9x", "", &b), Err(RegistryError::BadName { name: "9x" }));
    /// assert_eq!(stats.register("b", "second", &b), Err(RegistryError::Full { capacity: 1 }));
    /// ```
    pub fn register(
        &self,
        name: &'a str,
        description: &'a str,
        stat: &'a dyn Statistic,
    ) -> Result<(), RegistryError<'a>> {
        if !export::name_is_valid(name) {
            return Err(RegistryError::BadName { name });
        }
        let mut entries = self.entries.lock();
        if entries.iter().flatten().any(|e| e.name == name) {
            return Err(RegistryError::Duplicate);
        }
        if let Some(e) = entries
            .iter()
            .flatten()
            .find(|e| export::names_clash(e.name, name))
        {
            return Err(RegistryError::Clash {
                name,
                registered: e.name,
            });
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
    pub fn unregister(&self, name: &str) -> Result<(), RegistryError<'static>> {
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

    /// Zeroes every value registered as `name` (a sysctl write): losslessly, like
    /// [`Counter::zero`](crate::Counter::zero).
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
    pub fn zero(&self, name: &str) -> Result<(), RegistryError<'static>> {
        let entry = self.find(name).ok_or(RegistryError::NotFound)?;
        (0..entry.stat.len()).for_each(|i| entry.stat.zero_value(i));
        Ok(())
    }
}

impl<const N: usize> Default for Registry<'_, N> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::fixture::Stats;
    use std::string::ToString;

    #[test]
    fn get_zero_and_unregister_by_name() {
        let s = Stats::new();
        let stats = s.registry();
        assert_eq!(stats.get("e").map(|s| s.value(0)), Some(6));
        stats.zero("c").unwrap();
        stats.zero("a").unwrap();
        assert_eq!((s.c.fetch(), s.a.fetch(1)), (0, 0));
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
