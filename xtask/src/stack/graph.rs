//! The call graph of a library and each function's worst-case stack: its own frame plus the
//! deepest of its callees', through direct calls, tail jumps and indirect calls.
//!
//! - A call names a function (local to its member first), or a section `.text.<f>` (the
//!   function in it), or a symbol the library does not define: one of the kernel's hooks
//!   (`pcpu_platform_*`), counted as 0 bytes here (the docs state that the hooks' own stack
//!   comes on top), or anything else, an error.
//! - An indirect call or jump may reach any function whose address the library's data holds
//!   (vtables and function tables; a function's own jump table is not such a reference),
//!   except `core::fmt`'s: those are only called by `core::fmt`'s own formatting code, and
//!   that code must not be reachable (checked: reaching a `core::fmt` function is an error).
//!   A pointer the caller passes (the walk's C callback) is the caller's: 0 bytes here,
//!   stated in the docs. So are the C kernel's chunk hooks, called only from the functions
//!   [`HOOK_CALLERS`] names (their calls through a pointer reach the kernel alone).
//! - The zone's growth table (`src/zone/growth.rs`, which `Zone::grow_from` makes) is called
//!   through only in `Grown`'s methods, never inlined, each calling through its own entry:
//!   `Grown::<name>`'s call through a pointer reaches that module's free function `<name>`
//!   (for every source type the kernel made one for) and nothing else, in a library and in
//!   a linked kernel. In a linked kernel (no relocations say where a pointer goes)
//!   any other call through a pointer is an error.
//! - Recursion is an error: its depth has no bound.

use std::collections::{BTreeSet, HashMap};

use super::depth::Own;
use super::objdump::Function;

/// The kernel's hooks: undefined in the library, defined by the kernel.
pub const HOOKS: &[&str] = &[
    "pcpu_platform_protect",
    "pcpu_platform_unprotect",
    "pcpu_platform_current_cpu",
    "pcpu_platform_panic",
];

/// The functions whose calls through a pointer call the kernel's chunk hooks
/// (`pcpu_zone_grow`'s), counted as the kernel's own as the platform hooks are.
pub const HOOK_CALLERS: &[&str] = &["call_chunk_alloc_hook", "call_chunk_free_hook"];

/// Whether `name` is one of the growth table's functions (`src/zone/growth.rs`'s free
/// functions), which a call through the table may reach.
fn is_growth_path(name: &str) -> bool {
    name.contains("4zone6growth") && !name.contains("5Grown")
}

/// The growth table entry a method of `Grown` (the only code that calls through the table)
/// calls: the mangled identifier after `Grown`, length prefix included (`8take_run`).
fn growth_dispatch(name: &str) -> Option<&str> {
    if !name.contains("4zone6growth") {
        return None;
    }
    let rest = &name[name.find("5Grown")? + "5Grown".len()..];
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let len: usize = rest[..digits].parse().ok()?;
    rest.get(..digits + len)
}

/// Whether `name` is the growth table's function `entry` (`8take_run`).
fn is_growth_entry(name: &str, entry: &str) -> bool {
    is_growth_path(name) && name.contains(&format!("4zone6growth{entry}"))
}

/// A worst case: the bytes, and the path that takes them (function names, outermost first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worst {
    pub bytes: u64,
    pub path: Vec<String>,
}

/// A library's functions, their own frames and their resolved calls.
pub struct Graph {
    names: Vec<String>,
    frames: Vec<Option<u64>>,
    /// Callees by index; `Err(name)` for a symbol the library does not define.
    calls: Vec<Vec<Result<usize, String>>>,
    indirect: Vec<bool>,
    indirect_call: Vec<bool>,
    /// What an indirect call may reach.
    indirect_targets: Vec<usize>,
    /// Functions that are the kernel's own code (a linked kernel's): counted as 0 bytes,
    /// as the C library's hooks are.
    kernel: Vec<bool>,
    /// Whether an indirect call is an error (a linked kernel: no relocations say where the
    /// function pointers point).
    indirect_unbounded: bool,
    memo: HashMap<usize, Result<Worst, String>>,
}

impl Graph {
    /// The graph of `functions` (with their `own` analyses, in the same order) and the
    /// symbols the data sections of each member point at (`data_refs`).
    pub fn new(
        functions: &[Function],
        owns: Vec<Own>,
        data_refs: &HashMap<String, Vec<String>>,
    ) -> Graph {
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut by_section: HashMap<(&str, &str), usize> = HashMap::new();
        for (i, f) in functions.iter().enumerate() {
            by_name.entry(&f.name).or_default().push(i);
            by_section.entry((&f.member, &f.section)).or_insert(i);
        }
        let resolve = |member: &str, name: &str| -> Option<usize> {
            if name.starts_with(".text") {
                return by_section.get(&(member, name)).copied();
            }
            let found = by_name.get(name)?;
            found
                .iter()
                .copied()
                .find(|&i| functions[i].member == member)
                .or(found.first().copied())
        };
        let mut calls = Vec::new();
        let (mut frames, mut indirect, mut indirect_call) = (Vec::new(), Vec::new(), Vec::new());
        for (f, own) in functions.iter().zip(owns) {
            calls.push(
                own.calls
                    .iter()
                    .map(|c| resolve(&f.member, c).ok_or_else(|| c.clone()))
                    .collect(),
            );
            frames.push(own.frame);
            indirect.push(own.indirect);
            indirect_call.push(own.indirect_call);
        }
        let mut targets = BTreeSet::new();
        for (member, syms) in data_refs {
            for s in syms {
                // The growth table's functions are reached through `Grown`'s methods alone.
                if let Some(i) = resolve(member, s).filter(|&i| {
                    !is_core_fmt(&functions[i].name) && !is_growth_path(&functions[i].name)
                }) {
                    targets.insert(i);
                }
            }
        }
        Graph {
            names: functions.iter().map(|f| f.name.clone()).collect(),
            frames,
            calls,
            indirect,
            indirect_call,
            indirect_targets: targets.into_iter().collect(),
            kernel: vec![false; functions.len()],
            indirect_unbounded: false,
            memo: HashMap::new(),
        }
    }

    /// For a linked kernel: the functions `is_kernel` names are the kernel's own code (0
    /// bytes here, on top of the bound as the hooks are), and a call through a pointer is an
    /// error, but in core's panic entry (`core::panicking`), which calls the kernel's panic
    /// handler so; a jump through a pointer is taken as a jump table (no relocations tell).
    pub fn linked_kernel(mut self, is_kernel: impl Fn(&str) -> bool) -> Graph {
        self.kernel = self.names.iter().map(|n| is_kernel(n)).collect();
        self.indirect_unbounded = true;
        self
    }

    /// The index of the function named `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// The function's own frame.
    pub fn frame(&self, f: usize) -> Option<u64> {
        self.frames[f]
    }

    /// The names of every function, by index.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The worst-case stack of function `f` with everything it calls, or why it has none:
    /// recursion, a frame the checker cannot read, a call of an unknown symbol, or a
    /// `core::fmt` function reached.
    pub fn worst(&mut self, f: usize) -> Result<Worst, String> {
        let mut on_path = Vec::new();
        self.walk(f, &mut on_path)
    }

    fn walk(&mut self, f: usize, on_path: &mut Vec<usize>) -> Result<Worst, String> {
        if let Some(w) = self.memo.get(&f) {
            return w.clone();
        }
        if let Some(at) = on_path.iter().position(|&g| g == f) {
            let cycle: Vec<&str> = on_path[at..]
                .iter()
                .chain([&f])
                .map(|&g| self.names[g].as_str())
                .collect();
            return Err(format!("recursion: {}", cycle.join(" -> ")));
        }
        let name = self.names[f].clone();
        if self.kernel[f] {
            return Ok(Worst {
                bytes: 0,
                path: vec![name],
            });
        }
        let panic_entry = name.contains("9panicking") || name.contains("core..panicking");
        let hook_caller = HOOK_CALLERS.iter().any(|h| name.contains(h));
        let dispatch = growth_dispatch(&name).map(str::to_string);
        if self.indirect_call[f]
            && self.indirect_unbounded
            && !panic_entry
            && !hook_caller
            && dispatch.is_none()
        {
            return Err(format!(
                "{name} calls through a pointer, which a linked kernel does not bound"
            ));
        }
        if is_core_fmt(&name) {
            return Err(format!(
                "reaches {name} (core::fmt, whose function pointers are not bounded)"
            ));
        }
        let Some(frame) = self.frames[f] else {
            return Err(format!(
                "{name}: the stack pointer moves by an amount not known"
            ));
        };
        on_path.push(f);
        let mut callees: Vec<Result<usize, String>> = self.calls[f].clone();
        if let Some(entry) = &dispatch {
            let table = (0..self.names.len()).filter(|&g| is_growth_entry(&self.names[g], entry));
            callees.extend(table.map(Ok));
        } else if self.indirect[f] && !self.indirect_unbounded && !hook_caller {
            callees.extend(self.indirect_targets.iter().map(|&t| Ok(t)));
        }
        let mut deepest = Worst {
            bytes: 0,
            path: Vec::new(),
        };
        let mut result = Ok(());
        for callee in callees {
            let w = match callee {
                Ok(g) => self.walk(g, on_path),
                Err(sym) if HOOKS.contains(&sym.as_str()) => Ok(Worst {
                    bytes: 0,
                    path: vec![sym],
                }),
                Err(sym) => Err(format!(
                    "{name} calls {sym}, which the library does not define"
                )),
            };
            match w {
                Ok(w) if w.bytes > deepest.bytes || deepest.path.is_empty() => deepest = w,
                Ok(_) => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        on_path.pop();
        let w = result.map(|()| {
            let mut path = vec![name];
            path.extend(deepest.path);
            Worst {
                bytes: frame + deepest.bytes,
                path,
            }
        });
        // A result inside a cycle depends on the path: only memoise outside any cycle.
        if w.is_ok() || on_path.is_empty() {
            self.memo.insert(f, w.clone());
        }
        w
    }
}

/// Whether `name` (a Rust v0 or legacy symbol) is a function of `core::fmt`: its first crate
/// is `core` and the path under it starts with `fmt`.
pub fn is_core_fmt(name: &str) -> bool {
    if name.starts_with("_ZN4core3fmt") {
        return true;
    }
    if !name.starts_with("_R") {
        return false;
    }
    // The first crate root `C<disambiguator>_<len><name>` (v0: `Cs<base62>_`).
    let Some(at) = name.find("Cs") else {
        return false;
    };
    let rest = &name[at + 2..];
    let Some(us) = rest.find('_') else {
        return false;
    };
    rest[us + 1..].starts_with("4core3fmt")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(member: &str, name: &str) -> Function {
        Function {
            member: member.into(),
            section: format!(".text.{name}"),
            name: name.into(),
            start: 0,
            insns: Vec::new(),
        }
    }

    fn own(frame: u64, calls: &[&str], indirect: bool) -> Own {
        Own {
            frame: Some(frame),
            calls: calls.iter().map(|c| c.to_string()).collect(),
            indirect,
            indirect_call: indirect,
        }
    }

    /// A graph of `(name, frame, calls, indirect)`; `vtable` lists the functions data
    /// points at.
    fn graph(nodes: &[(&str, u64, &[&str], bool)], vtable: &[&str]) -> Graph {
        let fs: Vec<_> = nodes.iter().map(|n| function("a.o", n.0)).collect();
        let owns = nodes.iter().map(|n| own(n.1, n.2, n.3)).collect();
        let refs = HashMap::from([(
            "a.o".to_string(),
            vtable.iter().map(|s| s.to_string()).collect(),
        )]);
        Graph::new(&fs, owns, &refs)
    }

    #[test]
    fn worst_case_takes_the_deepest_callee_and_names_the_path() {
        let mut g = graph(
            &[
                ("walk", 5008, &["lock", ".text.read"], false),
                ("lock", 16, &["pcpu_platform_protect"], false),
                ("read", 512, &["memcpy"], false),
                ("memcpy", 8, &[], false),
            ],
            &[],
        );
        let w = g.worst(g.find("walk").unwrap()).unwrap();
        assert_eq!(w.bytes, 5008 + 512 + 8);
        assert_eq!(w.path, ["walk", "read", "memcpy"]);
        let lock = g.worst(g.find("lock").unwrap()).unwrap();
        assert_eq!((lock.bytes, lock.path.len()), (16, 2));
    }

    #[test]
    fn indirect_calls_reach_what_data_points_at_but_not_core_fmt() {
        let fmt = "_RNvXsi_NtNtNtCs32VVFDW9G9S_4core3fmt3num3impjNtB9_7Display3fmt";
        let mut g = graph(
            &[
                ("walk", 100, &[], true),
                ("value", 300, &[], false),
                (fmt, 5000, &[], false),
            ],
            &["value", fmt],
        );
        let w = g.worst(0).unwrap();
        assert_eq!(
            (w.bytes, w.path.as_slice()),
            (400, &["walk".to_string(), "value".into()][..])
        );
        assert!(is_core_fmt(fmt));
        assert!(!is_core_fmt("_RNvXs0_NtNtCseYDf8jhLlY0_12pcpu_counter4capi8registryNtB5_4CBufNtNtCs32VVFDW9G9S_4core3fmt5Write9write_str"));
    }

    #[test]
    fn recursion_unknown_symbols_and_core_fmt_fail() {
        let mut g = graph(&[("a", 8, &["b"], false), ("b", 8, &["a"], false)], &[]);
        assert_eq!(g.worst(0), Err("recursion: a -> b -> a".to_string()));
        let mut g = graph(&[("a", 8, &["strlen"], false)], &[]);
        assert_eq!(
            g.worst(0),
            Err("a calls strlen, which the library does not define".to_string())
        );
        let fmt = "_RNvNtCs32VVFDW9G9S_4core3fmt5write";
        let mut g = graph(&[("a", 8, &[fmt], false), (fmt, 8, &[], false)], &[]);
        assert!(g
            .worst(0)
            .unwrap_err()
            .starts_with("reaches _RNvNtCs32VVFDW9G9S_4core3fmt5write"));
        // A linked kernel: its own code counts 0, a call through a pointer fails.
        let mut g = graph(
            &[
                ("a", 8, &["k", "b"], false),
                ("k", 5000, &[], false),
                ("b", 16, &[], false),
            ],
            &[],
        )
        .linked_kernel(|n| n == "k");
        assert_eq!(g.worst(0).map(|w| w.bytes), Ok(24));
        let mut g = graph(&[("a", 8, &[], true)], &[]).linked_kernel(|_| false);
        assert_eq!(
            g.worst(0),
            Err("a calls through a pointer, which a linked kernel does not bound".to_string())
        );
        // An indirect call from a function that data points at: a cycle through the pointer.
        let mut g = graph(&[("a", 8, &[], true)], &["a"]);
        assert_eq!(g.worst(0), Err("recursion: a -> a".to_string()));
    }
}
