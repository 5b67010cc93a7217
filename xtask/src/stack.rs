//! `cargo xtask stack [--markdown] [target ...]`: the worst-case stack of every function of
//! the C library (`target/capi-lib/<target>/libpcpu_counter.a`, as `.ci/capi.sh` builds it),
//! from its disassembly, callees included, checked against the stated bounds:
//!
//! - every exported `pcpu_*` / `counter_*` function: at most [`CALL_LIMIT`] bytes;
//! - the adds and everything an interrupt handler may call ([`IRQ_FUNCTIONS`]): at most
//!   [`IRQ_LIMIT`] bytes.
//!
//! The kernel's hooks and the walk's callback are the kernel's own and come on top (counted
//! as 0 here; docs/c.md says so). Each violation is one line,
//! `FAIL [stack <arch>] <function>: <bytes> bytes > <limit> (<path>)`. Without targets it
//! checks every library under `target/capi-lib/`. `--markdown` prints the table of
//! docs/c.md's "Stack use" (worst case per group of functions, per arch). `--kernels` also
//! checks the Rust QEMU kernels `cargo xtask qemu` built (one per arch, [`KERNELS`]): every
//! function of the crate left out of line in them, against the same 1 KiB (256 bytes for an
//! `add`), the kernel's own code (its hooks, its panic handler) counted as 0. `--rust` also
//! builds `testbeds/pins` in release for x86_64, aarch64 and riscv64 bare metal and checks
//! its probes of the Rust registry's streaming read (`Registry::snapshot`), callees
//! included, against the same 1 KiB (`stack/rust.rs`).
//!
//! The parts: `stack/objdump.rs` reads objdump's output, `stack/frame.rs` what each
//! instruction does to the stack per arch, `stack/depth.rs` a function's own frame,
//! `stack/graph.rs` the call graph and the worst cases.

mod depth;
mod frame;
mod graph;
mod objdump;
mod rust;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use frame::{Arch, Classifier};
use graph::Graph;

/// The bound on any call of the C library, callees included.
pub const CALL_LIMIT: u64 = 1024;
/// The bound on the adds and on everything an interrupt handler may call.
pub const IRQ_LIMIT: u64 = 256;

/// The functions an interrupt handler may call (docs/c.md, "Stack use"): the adds, the
/// protected section around several adds, and the approximate counter's add.
pub const IRQ_FUNCTIONS: &[&str] = &[
    "pcpu_counter_add",
    "pcpu_counter_add_protected",
    "counter_enter",
    "counter_exit",
    "pcpu_counter_enter_state",
    "pcpu_counter_exit_state",
    "pcpu_approx_add",
];

/// docs/c.md's groups: a title and the functions (by prefix) it covers, in table order.
const GROUPS: &[(&str, &[&str])] = &[
    ("adds (`pcpu_counter_add[_protected]`, `counter_enter/exit`, `*_state`, `pcpu_approx_add`)", IRQ_FUNCTIONS),
    ("allocation (`counter_u64_[array_]alloc/free`)", &["counter_u64_alloc", "counter_u64_free", "counter_u64_array_alloc", "counter_u64_array_free"]),
    ("reads and zeroes (`counter_u64_fetch/zero`, `*_array_copy/zero`, `pcpu_counter_fetch_and_zero`, group reads)", &["counter_u64_fetch", "counter_u64_zero", "counter_u64_array_copy", "counter_u64_array_zero", "pcpu_counter_fetch_and_zero", "pcpu_counter_group_"]),
    ("approximate counters (`pcpu_approx_*` but the add)", &["pcpu_approx_"]),
    ("`counter_ratecheck`, `pcpu_set_ticks`", &["counter_ratecheck", "pcpu_set_ticks"]),
    ("setup (`pcpu_zone_*`, `pcpu_set_cpu_base`, `pcpu_early_base`, `pcpu_strerror`)", &["pcpu_zone_", "pcpu_set_cpu_base", "pcpu_early_base", "pcpu_strerror"]),
    ("registry (`pcpu_sysctl_add_*`, `_remove`, `_zero`)", &["pcpu_sysctl_add_", "pcpu_sysctl_remove", "pcpu_sysctl_zero"]),
    ("`pcpu_sysctl_walk` (plus the callback's own stack)", &["pcpu_sysctl_walk"]),
    ("`pcpu_sysctl_export`", &["pcpu_sysctl_export"]),
];

pub fn run(args: &[String]) -> Result<(), String> {
    let markdown = args.iter().any(|a| a == "--markdown");
    let kernels = args.iter().any(|a| a == "--kernels");
    let rust = args.iter().any(|a| a == "--rust");
    let mut targets: Vec<String> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .cloned()
        .collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let libs = root.join("target/capi-lib");
    if targets.is_empty() && rust && !libs.exists() {
        println!(
            "stack: no {} (.ci/capi.sh builds it): the Rust registry's read alone",
            libs.display()
        );
    } else if targets.is_empty() {
        let entries = std::fs::read_dir(&libs)
            .map_err(|e| format!("{}: {e} (build the libraries: .ci/capi.sh)", libs.display()))?;
        targets = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|t| Arch::of_target(t).is_some())
            .collect();
        targets.sort();
    }
    let mut failures = Vec::new();
    let mut table: Vec<(String, Vec<Option<u64>>)> = Vec::new();
    for t in &targets {
        let arch = Arch::of_target(t).ok_or_else(|| format!("{t}: no arch known"))?;
        let lib = libs.join(t).join("libpcpu_counter.a");
        let report = check(&lib, arch)?;
        println!("== stack {t} ({})", lib.display());
        let mut largest: Vec<_> = report.frames.clone();
        largest.sort_by_key(|f| std::cmp::Reverse(f.1));
        let top: Vec<String> = largest
            .iter()
            .take(3)
            .map(|(n, b)| format!("{n} {b}"))
            .collect();
        println!("   largest own frames: {}", top.join(", "));
        for (name, worst) in &report.functions {
            match worst {
                Ok(w) => println!("   {name:<36} {:>6}  {}", w.bytes, path(&w.path)),
                Err(e) => println!("   {name:<36}   none  {e}"),
            }
        }
        let short = short_arch(arch);
        failures.extend(violations(&report, short));
        let column: Vec<Option<u64>> = GROUPS
            .iter()
            .map(|(_, members)| {
                report
                    .functions
                    .iter()
                    .filter(|(n, _)| group_of(n).is_some_and(|g| GROUPS[g].1 == *members))
                    .filter_map(|(_, w)| w.as_ref().ok().map(|w| w.bytes))
                    .max()
            })
            .collect();
        table.push((short.to_string(), column));
    }
    if markdown {
        print_markdown(&table);
    }
    let mut kernels_checked = Vec::new();
    if kernels {
        let found = KERNELS
            .iter()
            .map(|(target, elf)| (target, root.join(elf)))
            .filter(|(_, elf)| elf.exists())
            .collect::<Vec<_>>();
        if found.is_empty() {
            return Err("--kernels: no QEMU kernel built (cargo xtask qemu)".into());
        }
        for (target, elf) in found {
            let arch = Arch::of_target(target).ok_or_else(|| format!("{target}: no arch known"))?;
            let disassembly = objdump(arch, &["-d", "--no-show-raw-insn"], &elf)?;
            // The GOT is in .data (testbeds/kernel's link.ld): what `call *x(%rip)` reads.
            let data = objdump(arch, &["-s", "-j", ".data"], &elf)?;
            let got = objdump::words(&data, arch.word());
            let report = analyse_kernel(&disassembly, &got, arch);
            let most = report
                .functions
                .iter()
                .filter_map(|(n, w)| Some((n, w.as_ref().ok()?)))
                .max_by_key(|(_, w)| w.bytes);
            println!(
                "== stack kernel {target} ({}): {} functions of the crate, the deepest {}",
                elf.display(),
                report.functions.len(),
                most.map_or("none".to_string(), |(n, w)| format!(
                    "{} {} bytes ({})",
                    short_name(n),
                    w.bytes,
                    path(&w.path)
                ))
            );
            failures.extend(violations(&report, &format!("kernel {}", short_arch(arch))));
            kernels_checked.push(target.to_string());
        }
    }
    if rust {
        for target in rust::TARGETS {
            let arch = Arch::of_target(target).ok_or_else(|| format!("{target}: no arch known"))?;
            let lib = rust::build(target)?;
            let disassembly =
                rust::objdump_members(arch.objdump(), &["-dr", "--no-show-raw-insn"], &lib)?;
            let relocations = rust::objdump_members(arch.objdump(), &["-r"], &lib)?;
            let report = analyse(
                &disassembly,
                &relocations,
                arch,
                rust::is_probe,
                rust::is_statistic_method,
            );
            println!("== stack Rust registry {target} ({})", lib.display());
            for (name, worst) in &report.functions {
                match worst {
                    Ok(w) => println!("   {name:<36} {:>6}  {}", w.bytes, path(&w.path)),
                    Err(e) => println!("   {name:<36}   none  {e}"),
                }
            }
            if report.functions.is_empty() {
                failures.push(format!(
                    "FAIL [stack rust {}] no {}* function in {}",
                    short_arch(arch),
                    rust::PREFIX,
                    lib.display()
                ));
            }
            failures.extend(violations(&report, &format!("rust {}", short_arch(arch))));
        }
    }
    if failures.is_empty() {
        let kernels = match kernels_checked.as_slice() {
            [] => String::new(),
            k => format!("; Rust kernels: {}", k.join(", ")),
        };
        let kernels = match rust {
            true => format!(
                "{kernels}; the Rust registry's read: {}",
                rust::TARGETS.join(", ")
            ),
            false => kernels,
        };
        println!(
            "stack: every call within {CALL_LIMIT} bytes, the adds and interrupt calls within {IRQ_LIMIT} ({}{kernels})",
            match targets.as_slice() {
                [] => "no C library".to_string(),
                t => t.join(", "),
            }
        );
        Ok(())
    } else {
        for f in &failures {
            println!("{f}");
        }
        Err(format!(
            "{} function(s) over their stack bound",
            failures.len()
        ))
    }
}

/// The checked functions of one library and their worst cases; every function's own frame.
struct Report {
    functions: Vec<(String, Result<graph::Worst, String>)>,
    frames: Vec<(String, u64)>,
}

/// Disassembles `lib` and computes the worst case of each exported `pcpu_*` / `counter_*`
/// function.
fn check(lib: &Path, arch: Arch) -> Result<Report, String> {
    if !lib.exists() {
        return Err(format!(
            "no {} (build it: testbeds/capi-kernel/build.sh)",
            lib.display()
        ));
    }
    let disassembly = objdump(arch, &["-dr", "--no-show-raw-insn"], lib)?;
    let relocations = objdump(arch, &["-r"], lib)?;
    Ok(analyse(
        &disassembly,
        &relocations,
        arch,
        is_exported,
        |_| true,
    ))
}

/// One `FAIL [stack <arch>] ...` line per function over its bound or without a bound.
fn violations(report: &Report, short: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (name, worst) in &report.functions {
        let limit = limit_of(name);
        match worst {
            Ok(w) if w.bytes > limit => out.push(format!(
                "FAIL [stack {short}] {name}: {} bytes > {limit} ({})",
                w.bytes,
                path(&w.path)
            )),
            Ok(_) => {}
            Err(e) => out.push(format!("FAIL [stack {short}] {name}: {e}")),
        }
    }
    out
}

/// The report of a library from its `objdump -dr` and `objdump -r` texts: the worst case of
/// each function that `wanted` names, a call through a pointer reaching any function whose
/// address the data holds and `reachable` names.
fn analyse(
    disassembly: &str,
    relocations: &str,
    arch: Arch,
    wanted: fn(&str) -> bool,
    reachable: fn(&str) -> bool,
) -> Report {
    let functions = objdump::parse_disassembly(disassembly);
    let owns: Vec<_> = functions
        .iter()
        .map(|f| depth::own(f, &mut Classifier::new(arch), arch.call_push()))
        .collect();
    let data_refs: HashMap<_, _> = objdump::data_references(relocations)
        .into_iter()
        .map(|(member, syms)| (member, syms.into_iter().filter(|s| reachable(s)).collect()))
        .collect();
    let mut graph = Graph::new(&functions, owns, &data_refs);
    let functions = worst_cases(&mut graph, wanted, with_frame);
    let frames = (0..graph.names().len())
        .filter_map(|i| Some((graph.names()[i].clone(), graph.frame(i)?)))
        .collect();
    Report { functions, frames }
}

/// The worst case of each function of `graph` that `wanted` names, once each, in name
/// order, each step of its path named by `step` from the step and its own frame.
fn worst_cases(
    graph: &mut Graph,
    wanted: fn(&str) -> bool,
    step: impl Fn(&str, Option<u64>) -> String,
) -> Vec<(String, Result<graph::Worst, String>)> {
    let mut names: Vec<String> = graph
        .names()
        .iter()
        .filter(|n| wanted(n))
        .cloned()
        .collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let f = graph.find(&name).expect("a name of the graph");
            let worst = graph.worst(f).map(|mut w| {
                for s in &mut w.path {
                    let own = graph.find(s).and_then(|g| graph.frame(g));
                    *s = step(s, own);
                }
                w
            });
            (name, worst)
        })
        .collect()
}

/// A step of a path with its own frame: `group::fetch 96`.
fn with_frame(step: &str, own: Option<u64>) -> String {
    match own {
        Some(bytes) => format!("{} {bytes}", short_name(step)),
        None => short_name(step),
    }
}

/// The Rust QEMU kernels `cargo xtask qemu` builds, one per arch: the Rust calls a kernel
/// makes, as the compiler left them out of line.
const KERNELS: &[(&str, &str)] = &[
    (
        "x86_64-unknown-none",
        "target/qemu/x86_64/x86_64-unknown-none/release/kernel",
    ),
    (
        "i586-unknown-none",
        "target/qemu/i386/i586-unknown-none/release/kernel",
    ),
    (
        "aarch64-unknown-none-softfloat",
        "target/qemu/aarch64-llsc/aarch64-unknown-none-softfloat/release/kernel",
    ),
    (
        "riscv64imac-unknown-none-elf",
        "target/qemu/riscv64/riscv64imac-unknown-none-elf/release/kernel",
    ),
];

/// The report of a linked kernel (`objdump -d`): the worst case of each function of the
/// crate in it (not its `Debug` impls, which only formatting calls), the kernel's own code
/// counted as 0 bytes and a call through a pointer an error.
fn analyse_kernel(disassembly: &str, got: &HashMap<u64, u64>, arch: Arch) -> Report {
    let mut functions = objdump::parse_disassembly(disassembly);
    // `call *x(%rip)` through a GOT word: a call of the function the word holds.
    let starts: HashMap<u64, String> = functions
        .iter()
        .map(|f| (f.start, f.name.clone()))
        .collect();
    for insn in functions.iter_mut().flat_map(|f| f.insns.iter_mut()) {
        let through = insn.operands.starts_with('*')
            && (insn.mnemonic.starts_with("call") || insn.mnemonic.starts_with("jmp"));
        let target = insn
            .comment_addr
            .and_then(|a| got.get(&a))
            .and_then(|v| Some((v, starts.get(v)?)));
        if let (true, Some((v, name))) = (through, target) {
            insn.operands = format!("{v:x} <{name}>");
        }
    }
    let owns: Vec<_> = functions
        .iter()
        .map(|f| depth::own(f, &mut Classifier::new(arch), arch.call_push()))
        .collect();
    let mut graph =
        Graph::new(&functions, owns, &HashMap::new()).linked_kernel(|n| !is_library_code(n));
    let functions = worst_cases(
        &mut graph,
        is_crate_function,
        |step, own| match is_library_code(step) {
            true => with_frame(step, own),
            false => format!("{} (the kernel's)", short_name(step)),
        },
    );
    Report {
        functions,
        frames: Vec::new(),
    }
}

/// Whether `name` (legacy or v0 mangling) is a function of the pcpu_counter crate, other than
/// a `core::fmt` impl.
fn is_crate_function(name: &str) -> bool {
    (name.contains("12pcpu_counter") || name.contains("$LT$pcpu_counter.."))
        && !name.contains("core..fmt")
        && !name.contains("4core3fmt")
}

/// Whether `name` is code of the crate or of what it builds on (`core`, `spin`,
/// `compiler_builtins` and the mem functions), not the kernel's.
fn is_library_code(name: &str) -> bool {
    is_crate_function(name)
        || ["core", "spin", "compiler_builtins"]
            .iter()
            .any(|c| name.contains(c))
        || ["memcpy", "memset", "memmove", "memcmp", "bcmp"].contains(&name)
}

/// Whether `name` is a function of the C API.
fn is_exported(name: &str) -> bool {
    name.starts_with("pcpu_") || name.starts_with("counter_")
}

/// The bound on `name`: the adds' (the C API's, and a kernel's out-of-line `add`) or any
/// call's.
fn limit_of(name: &str) -> u64 {
    let rust_add = is_crate_function(name) && (name.contains("3add17h") || name.ends_with("3add"));
    if IRQ_FUNCTIONS.contains(&name) || rust_add {
        IRQ_LIMIT
    } else {
        CALL_LIMIT
    }
}

/// Whether `name` matches one of `members` (a full name, or a prefix ending in `_`).
fn in_group(name: &str, members: &[&str]) -> bool {
    members
        .iter()
        .any(|m| name == *m || (m.ends_with('_') && name.starts_with(m)))
}

/// The first group of [`GROUPS`] that `name` is in.
fn group_of(name: &str) -> Option<usize> {
    GROUPS
        .iter()
        .position(|(_, members)| in_group(name, members))
}

/// A worst-case path: each function with its own frame.
fn path(steps: &[String]) -> String {
    steps.join(" -> ")
}

/// A Rust v0 symbol's last two path identifiers (`group::add_slots` for
/// `_RNvNtCs..._12pcpu_counter5group9add_slots`); other names as they are.
fn short_name(name: &str) -> String {
    let name = name.split(".llvm.").next().unwrap_or(name);
    if let Some(body) = name.strip_prefix("_ZN") {
        return short_legacy(body).unwrap_or_else(|| name.to_string());
    }
    let Some(body) = name.strip_prefix("_R") else {
        return name.to_string();
    };
    let b = body.as_bytes();
    let (mut idents, mut i) = (Vec::new(), 0);
    while i < b.len() {
        // A crate's disambiguator `Cs<base62>_` and a back reference `B<base62>_` are no
        // identifiers.
        if (b[i] == b'C' && b.get(i + 1) == Some(&b's')) || b[i] == b'B' {
            i += body[i..].find('_').map_or(b.len(), |u| u + 1);
            continue;
        }
        if b[i].is_ascii_digit() {
            let digits = body[i..].bytes().take_while(u8::is_ascii_digit).count();
            let len: usize = body[i..i + digits].parse().unwrap_or(0);
            let start = i + digits + usize::from(body[i + digits..].starts_with('_'));
            if len > 0 && start + len <= b.len() {
                idents.push(&body[start..start + len]);
                i = start + len;
                continue;
            }
        }
        i += 1;
    }
    match idents.as_slice() {
        [.., a, b] => format!("{a}::{b}"),
        [a] => a.to_string(),
        [] => name.to_string(),
    }
}

/// A legacy symbol's (`_ZN12pcpu_counter5group5fetch17h<hash>E`) last two identifiers.
fn short_legacy(mut body: &str) -> Option<String> {
    let mut idents = Vec::new();
    while let Some(digits) =
        Some(body.bytes().take_while(u8::is_ascii_digit).count()).filter(|&d| d > 0)
    {
        let len: usize = body[..digits].parse().ok()?;
        let ident = body.get(digits..digits + len)?;
        body = &body[digits + len..];
        // The hash, `h` and 16 hex digits.
        if !(len == 17 && ident.starts_with('h')) {
            idents.push(ident);
        }
    }
    match idents.as_slice() {
        [.., a, b] => Some(format!("{a}::{b}")),
        [a] => Some(a.to_string()),
        [] => None,
    }
}

fn short_arch(arch: Arch) -> &'static str {
    match arch {
        Arch::X86_64 => "x86_64",
        Arch::I386 => "i386",
        Arch::Aarch64 => "aarch64",
        Arch::Riscv64 => "riscv64",
    }
}

fn print_markdown(table: &[(String, Vec<Option<u64>>)]) {
    let heads: Vec<&str> = table.iter().map(|(a, _)| a.as_str()).collect();
    println!("| functions | {} |", heads.join(" | "));
    println!("|---|{}", "---:|".repeat(heads.len()));
    for (g, (title, _)) in GROUPS.iter().enumerate() {
        let cells: Vec<String> = table
            .iter()
            .map(|(_, col)| col[g].map_or("-".to_string(), |b| b.to_string()))
            .collect();
        println!("| {title} | {} |", cells.join(" | "));
    }
}

/// Runs the arch's objdump with `args` on `file`.
fn objdump(arch: Arch, args: &[&str], file: &Path) -> Result<String, String> {
    let tool = PathBuf::from(arch.objdump());
    let out = Command::new(&tool)
        .args(args)
        .arg(file)
        .output()
        .map_err(|e| format!("{}: {e}", tool.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {}: {}",
            tool.display(),
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    String::from_utf8(out.stdout).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The issue's riscv64 walk (5,008 bytes in three `addi`s) through the whole checker,
    /// beside an add within its 256 bytes and one that is not: the check fails, naming each.
    #[test]
    fn the_unfixed_walk_fails_with_its_path() {
        let disassembly = "
In archive libpcpu_counter.a:

k.o:     file format elf64-littleriscv


Disassembly of section .text.pcpu_sysctl_walk:

0000000000000000 <pcpu_sysctl_walk>:
   0:\tadd\tsp,sp,-2032
   4:\tsd\tra,2024(sp)
   8:\tadd\tsp,sp,-2048
   c:\tadd\tsp,sp,-928
  10:\tauipc\tra,0x0
\t\t\t10: R_RISCV_CALL_PLT\tpcpu_platform_panic
  14:\tjalr\tra # 10 <pcpu_sysctl_walk+0x10>

Disassembly of section .text.pcpu_counter_add:

0000000000000000 <pcpu_counter_add>:
   0:\tadd\tsp,sp,-16
   4:\tret

Disassembly of section .text.pcpu_counter_add_protected:

0000000000000000 <pcpu_counter_add_protected>:
   0:\tadd\tsp,sp,-272
   4:\tadd\tsp,sp,272
   8:\tret
";
        let report = analyse(disassembly, "", Arch::Riscv64, is_exported, |_| true);
        assert_eq!(
            violations(&report, "riscv64"),
            [
                "FAIL [stack riscv64] pcpu_counter_add_protected: 272 bytes > 256 (pcpu_counter_add_protected 272)",
                "FAIL [stack riscv64] pcpu_sysctl_walk: 5008 bytes > 1024 (pcpu_sysctl_walk 5008 -> pcpu_platform_panic)",
            ]
        );
        assert_eq!(report.functions[0].1.as_ref().map(|w| w.bytes), Ok(16));
    }

    /// `--rust`'s selection: the probes alone are checked, and a call through a pointer on
    /// their paths reaches the `Statistic` methods, not a `Debug` impl's `core::fmt` code.
    #[test]
    fn rust_probes_and_what_their_pointers_reach() {
        assert!(rust::is_probe("pcpu_pin_registry_snapshot"));
        assert!(!rust::is_probe("pcpu_pin_counter_add"));
        assert!(rust::is_statistic_method(
            "_ZN98_$LT$pcpu_counter..early..EarlyCounter$u20$as$u20$pcpu_counter..registry..statistic..Statistic$GT$5value17h273d04ff3e775da6E"
        ));
        assert!(!rust::is_statistic_method(
            "_ZN71_$LT$pcpu_counter..registry..read..Snapshot$LT$_$GT$$u20$as$u20$core..fmt..Debug$GT$3fmt17h0123456789abcdefE"
        ));
    }

    #[test]
    fn limits_and_groups() {
        assert_eq!(limit_of("pcpu_counter_add"), IRQ_LIMIT);
        assert_eq!(limit_of("pcpu_sysctl_walk"), CALL_LIMIT);
        assert_eq!(group_of("pcpu_approx_add"), Some(0));
        assert_eq!(group_of("pcpu_approx_read"), Some(3));
        assert_eq!(group_of("pcpu_counter_group_fetch"), Some(2));
        assert_eq!(group_of("pcpu_sysctl_add_counter_array"), Some(6));
        assert!(is_exported("counter_u64_fetch"));
        assert!(!is_exported("_pcpu_counter_0_1_protect"));
        assert_eq!(
            short_name("_RNvNtCseYDf8jhLlY0_12pcpu_counter5group9add_slots"),
            "group::add_slots"
        );
        assert_eq!(short_name("pcpu_sysctl_walk"), "pcpu_sysctl_walk");
        assert_eq!(
            short_name("_ZN12pcpu_counter5group9add_slots17h1e85e73fb3e1ca22E.llvm.605168"),
            "group::add_slots"
        );
        assert_eq!(
            short_name("_RNvYNtNtNtCseYDf8jhLlY0_12pcpu_counter4capi8registry4CellNtNtNtB8_8registry9statistic9Statistic20fetch_and_zero_valueB8_"),
            "Statistic::fetch_and_zero_value"
        );
    }
}
