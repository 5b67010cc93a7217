// SPDX-License-Identifier: BSD-2-Clause
//! Names each build condition of the crate once, as a `cfg` of its own (as `heapless` and
//! `portable-atomic` do), so that the source says what a condition means instead of spelling
//! out its parts:
//!
//! | cfg | set when | means |
//! |---|---|---|
//! | `pcpu_no_cpu_register` | a hosted target (unix, windows) without feature `sim` | an ordinary thread has no per-CPU register: the kernel API compiles, but no zone can be made (`Error::NoCpuRegister`), so no add can run |
//! | `pcpu_hosted_cpus` | feature `sim` | the platform's CPUs are host threads: `src/platform/` takes its answers from its backend `src/platform/sim.rs` |
//! | `pcpu_base_from_platform` | feature `platform-base` or `sim`, on aarch64 and riscv64 | the add takes the per-CPU base from the platform instead of `TPIDR_EL1`/`tp`/`gp` (which a host thread cannot own, and some kernels keep for themselves) |
//! | `pcpu_unprotected_add` | x86_64, aarch64, riscv64 | the arch's add needs no local protection: `counter_enter`'s guard is zero-sized and links no protection hook |
//! | `pcpu_c_abi` | feature `capi`, where a zone can be made (not `pcpu_no_cpu_register`) | the C ABI (`capi`), whose early counters need the linker's section bounds of an ELF kernel or the simulation's host |
//! | `pcpu_rseq` | feature `rseq` on x86_64/aarch64 Linux | the `rseq` module (Linux programs) |

use std::env;
use std::fs;
use std::path::Path;

/// The manuals in `docs/` rendered into the crate's docs (`pcpu_counter::manual`): the file,
/// and the module that shows it.
const MANUALS: [(&str, &str); 12] = [
    ("counters.md", "counters"),
    ("kernel.md", "kernel"),
    ("c.md", "c"),
    ("linux.md", "linux"),
    ("firmware.md", "firmware"),
    ("reading.md", "reading"),
    ("group.md", "group"),
    ("design.md", "design"),
    ("testing.md", "testing"),
    ("fuzzing.md", "fuzzing"),
    ("mutation.md", "mutation"),
    ("BENCHMARKS.md", "benchmarks"),
];

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=Cargo.toml");
    manuals();
    for name in CFGS {
        println!("cargo::rustc-check-cfg=cfg({name})");
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let declared = declared_features(&manifest);
    let set: Vec<String> = env::vars()
        .map(|(var, _)| var)
        .filter(|var| var.starts_with("CARGO_FEATURE_"))
        .collect();
    check_feature_vars(&declared, &set).unwrap_or_else(|e| panic!("build.rs: {e}"));
    let target = |key: &str| env::var(format!("CARGO_CFG_TARGET_{key}")).unwrap_or_default();
    let feature = |f: &str| {
        assert!(
            declared.iter().any(|d| d == f),
            "build.rs asks for feature `{f}`, which Cargo.toml does not declare"
        );
        set.contains(&feature_var(f))
    };
    for name in cfgs(feature, &target("FAMILY"), &target("OS"), &target("ARCH")) {
        println!("cargo::rustc-cfg={name}");
    }
}

/// Every cfg this script may set (declared to rustc's `check-cfg`).
pub(crate) const CFGS: [&str; 6] = [
    "pcpu_no_cpu_register",
    "pcpu_hosted_cpus",
    "pcpu_base_from_platform",
    "pcpu_unprotected_add",
    "pcpu_c_abi",
    "pcpu_rseq",
];

/// The cfgs of a build (the table above): `feature` says whether a feature of Cargo.toml is
/// on; `family`, `os` and `arch` are the target's (`CARGO_CFG_TARGET_*`).
pub(crate) fn cfgs(
    feature: impl Fn(&str) -> bool,
    family: &str,
    os: &str,
    arch: &str,
) -> Vec<&'static str> {
    let sim = feature("sim");
    let hosted = family.split(',').any(|f| f == "unix" || f == "windows");
    [
        ("pcpu_no_cpu_register", hosted && !sim),
        ("pcpu_hosted_cpus", sim),
        (
            "pcpu_base_from_platform",
            (sim || feature("platform-base")) && matches!(arch, "aarch64" | "riscv64"),
        ),
        (
            "pcpu_unprotected_add",
            matches!(arch, "x86_64" | "aarch64" | "riscv64"),
        ),
        ("pcpu_c_abi", feature("capi") && (sim || !hosted)),
        (
            "pcpu_rseq",
            feature("rseq") && os == "linux" && matches!(arch, "x86_64" | "aarch64"),
        ),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect()
}

/// The variable Cargo sets for an enabled feature: `CARGO_FEATURE_` and the name upper-cased,
/// each `-` an `_` (`platform-base` is `CARGO_FEATURE_PLATFORM_BASE`).
pub(crate) fn feature_var(feature: &str) -> String {
    format!("CARGO_FEATURE_{}", feature.to_uppercase().replace('-', "_"))
}

/// The feature names of a manifest's `[features]` table (one `name = [...]` a line).
pub(crate) fn declared_features(manifest: &str) -> Vec<String> {
    manifest
        .lines()
        .skip_while(|line| line.trim() != "[features]")
        .skip(1)
        .take_while(|line| !line.trim_start().starts_with('['))
        .filter_map(|line| line.split_once('=').map(|(name, _)| name.trim()))
        .filter(|name| !name.is_empty() && !name.starts_with('#'))
        .map(String::from)
        .collect()
}

/// Checks [`feature_var`] against the variables Cargo set (`set`): each must be the variable of
/// a feature the manifest declares (dependencies' implicit features included), so that a
/// spelling this script gets wrong stops the build of every feature set that enables it.
pub(crate) fn check_feature_vars(declared: &[String], set: &[String]) -> Result<(), String> {
    match set
        .iter()
        .find(|var| !declared.iter().any(|f| feature_var(f) == **var))
    {
        Some(var) => Err(format!(
            "Cargo set {var}, which no feature of Cargo.toml maps to through feature_var"
        )),
        None => Ok(()),
    }
}

/// Writes each manual of `docs/` into `OUT_DIR/manual/`, for `src/manual.rs`, with its links
/// made to work where it is read then (docs.rs): a link to another manual becomes an
/// intra-doc link to its module (`crate::manual::c#anchor`, checked by rustdoc), one to the
/// README the crate root's, one to a file of the repository that the package does not ship
/// becomes its text, and the throughput plot is drawn inline. In the repository the files
/// keep their relative links, which work there.
fn manuals() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Path::new(&env::var("OUT_DIR").expect("OUT_DIR")).join("manual");
    fs::create_dir_all(&out).expect("OUT_DIR/manual");
    for (file, module) in MANUALS {
        let path = root.join("docs").join(file);
        println!("cargo::rerun-if-changed={}", path.display());
        // A package without the manuals (a vendored copy that dropped them) still builds.
        let text = fs::read_to_string(&path).unwrap_or_default();
        let svg = root.join("docs/throughput.svg");
        println!("cargo::rerun-if-changed={}", svg.display());
        let text = text.replace(
            "![Throughput against writers, log-log](throughput.svg)",
            &fs::read_to_string(svg).unwrap_or_default(),
        );
        fs::write(out.join(format!("{module}.md")), relink(&text)).expect("OUT_DIR/manual/*.md");
    }
}

/// `text` with every relative Markdown link `[label](target)` rewritten for the crate's docs.
fn relink(text: &str) -> String {
    let mut done = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        let (before, after) = rest.split_at(at);
        let Some(end) = after.find(')') else { break };
        let target = &after[2..end];
        let label_start = before.rfind('[');
        match (rewrite(target), label_start) {
            (Some(Some(new)), _) => {
                done.push_str(before);
                done.push_str("](");
                done.push_str(&new);
                done.push(')');
            }
            (Some(None), Some(start)) => {
                // Not shipped: the label alone.
                done.push_str(&before[..start]);
                done.push_str(&before[start + 1..]);
            }
            _ => {
                done.push_str(before);
                done.push_str(&after[..=end]);
            }
        }
        rest = &after[end + 1..];
    }
    done.push_str(rest);
    done
}

/// What a link target becomes: `None` to leave it (absolute, an anchor in the page),
/// `Some(None)` to drop the link and keep its label, `Some(Some(new))` to replace it.
fn rewrite(target: &str) -> Option<Option<String>> {
    if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
        return None;
    }
    let (file, anchor) = match target.split_once('#') {
        Some((file, anchor)) => (file, format!("#{anchor}")),
        None => (target, String::new()),
    };
    if let Some((_, module)) = MANUALS.iter().find(|(name, _)| *name == file) {
        return Some(Some(format!("crate::manual::{module}{anchor}")));
    }
    match file {
        "../README.md" => Some(Some(format!("crate{anchor}"))),
        "../CHANGELOG.md" => Some(Some(format!("crate::manual::changelog{anchor}"))),
        "../src/platform/mod.rs" => Some(Some("crate::platform".into())),
        _ => Some(None),
    }
}
