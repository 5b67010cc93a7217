//! The docs name only what exists: every repository path (`src/...`, `arch/...`, `tests/...`,
//! `include/...`, `xtask/...`, and the other top folders), every `pcpu_*` name and every
//! feature that `docs/*.md`, `README.md` and the CHANGELOG's Unreleased section mention.
//!
//! - A path exists on disk (a `*` or a `<placeholder>` in it matches any name).
//! - A `pcpu_*` name is a word of the code (a cfg `build.rs` sets, a C function, a symbol);
//!   one inside `cfg(...)` must be a cfg: one `build.rs` sets or Cargo.toml's check-cfg lists.
//!   A name ending in `_` (`pcpu_zone_`) names a family: some word of the code starts with it.
//! - A cargo target (`--example demo`, `--test zone`, `--bench peers`) is a file of its
//!   folder (`examples/demo.rs`, `tests/zone.rs`, `benches/peers.rs` or `benches/peers/`).
//! - A bare file name in backticks (`machine.rs`) is the name of a file of the repository.
//! - A feature (`feature `x``, `features `x`, `y``, `--features x`, and `features = ["x"]` on
//!   a `pcpu-counter = {` line) is declared in one of the repository's `Cargo.toml` files.
//!   Paths through a build's output (`target/`, `fuzz/artifacts/`) are not checked.
//!
//! The CHANGELOG is history: of it only the Unreleased section is read, and in it only lines
//! that do not name an old name (a line with `->`, `instead of`, `renamed`, `removed`, `was`
//! or `no longer`), since a rename's or a removal's old side names what no longer exists.
//! Mentions that are not the crate's on purpose (a mutation run's record of an old file,
//! another crate's feature) are listed in `EXEMPT` with the reason; each must still be in its
//! file and still be dead, so the list cannot go stale either.
//!
//! The checker is shown to fail on a text made to hold each kind of dead name.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Top folders whose paths the docs name.
const ROOTS: [&str; 11] = [
    "src", "arch", "tests", "include", "xtask", "testbeds", "examples", "benches", "fuzz", "docs",
    ".ci",
];

/// Mentions that name what is not the crate's on purpose: (file, mention, why). Each must still
/// be in its file and still be dead without this list, so the list cannot go stale.
const EXEMPT: [(&str, &str, &str); 8] = [
    (
        "docs/mutation.md",
        "src/platform.rs",
        "a mutation run's record of a file since split into src/platform/",
    ),
    (
        "docs/fuzzing.md",
        "platform.rs",
        "a coverage record of a file since split into src/platform/",
    ),
    (
        "docs/mutation.md",
        "src/registry.rs",
        "a mutation run's record of a file since split into src/registry/",
    ),
    (
        "docs/mutation.md",
        "src/arch.rs",
        "a mutation run's record of a file since moved to arch/",
    ),
    (
        "docs/mutation.md",
        "arch/host_base.rs",
        "a mutation run's record that names the file's old place",
    ),
    (
        "docs/mutation.md",
        "arch/atomic_slots.rs",
        "a mutation run's record of a file since folded into arch/defaults.rs",
    ),
    (
        "docs/c.md",
        "pcpu_counter_c",
        "the crate the reader makes in the recipe",
    ),
    (
        "docs/firmware.md",
        "critical-section-impl",
        "rp2040-hal's feature, not this crate's",
    ),
];

/// Path components that name what a build makes (git ignores them): paths through them are
/// not checked.
const BUILD_OUTPUTS: [&str; 3] = ["target", "artifacts", "coverage"];

/// Words by which a CHANGELOG entry names an old name on purpose.
const OLD_NAME_MARKERS: [&str; 8] = [
    "->",
    "→",
    "instead of",
    "renamed",
    "removed",
    " was ",
    " gone",
    "no longer",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The docs read, each as (name relative to the root, text to check).
fn docs() -> Vec<(String, String)> {
    let root = root();
    let mut out = Vec::new();
    let mut names: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    names.sort();
    for path in names {
        let name = path.strip_prefix(&root).unwrap().display().to_string();
        out.push((name, fs::read_to_string(&path).unwrap()));
    }
    out.push((
        "README.md".into(),
        fs::read_to_string(root.join("README.md")).unwrap(),
    ));
    let changelog = fs::read_to_string(root.join("CHANGELOG.md")).unwrap();
    out.push(("CHANGELOG.md".into(), unreleased_current_names(&changelog)));
    out
}

/// The CHANGELOG's Unreleased section, without the entries (a `- ` line and the indented
/// lines under it) that name an old name.
fn unreleased_current_names(changelog: &str) -> String {
    let section = changelog
        .lines()
        .skip_while(|l| !(l.starts_with("## ") && l.contains("Unreleased")))
        .skip(1)
        .take_while(|l| !l.starts_with("## "));
    let mut entries: Vec<String> = Vec::new();
    for line in section {
        match entries.last_mut() {
            Some(entry) if line.starts_with(' ') => {
                entry.push('\n');
                entry.push_str(line);
            }
            _ => entries.push(line.to_string()),
        }
    }
    entries
        .into_iter()
        .filter(|e| !OLD_NAME_MARKERS.iter().any(|m| e.contains(m)))
        .filter(|e| !e.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.*<>/-".contains(c)
}

/// The repository paths a text names: each maximal run of path characters that starts with a
/// top folder and a `/`, without a trailing `.` or `/`.
fn paths_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if !is_path_char(chars[i]) || (i > 0 && is_path_char(chars[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_path_char(chars[i]) {
            i += 1;
        }
        let token: String = chars[start..i].iter().collect();
        let token = token.trim_end_matches(['.', '/']);
        if ROOTS.iter().any(|r| token.starts_with(&format!("{r}/"))) {
            out.insert(token.to_string());
        }
    }
    out
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters.
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.starts_with(head)
                && (head.len()..=name.len())
                    .any(|at| name.is_char_boundary(at) && matches(tail, &name[at..]))
        }
    }
}

/// Whether a path exists under `dir`, each component with a `*` or a `<placeholder>` matching
/// any entry.
fn exists(dir: &Path, path: &str) -> bool {
    let (first, rest) = match path.split_once('/') {
        Some((f, r)) => (f, Some(r)),
        None => (path, None),
    };
    let pattern = if first.contains('<') {
        "*".to_string()
    } else {
        first.to_string()
    };
    let candidates: Vec<PathBuf> = if pattern.contains('*') {
        match fs::read_dir(dir) {
            Ok(entries) => entries
                .map(|e| e.unwrap().path())
                .filter(|p| matches(&pattern, &p.file_name().unwrap().to_string_lossy()))
                .collect(),
            Err(_) => Vec::new(),
        }
    } else {
        vec![dir.join(first)]
    };
    candidates.iter().any(|c| match rest {
        None | Some("") => c.exists(),
        Some(rest) => c.is_dir() && exists(c, rest),
    })
}

/// The `pcpu_*` words of a text.
fn pcpu_words(text: &str) -> BTreeSet<String> {
    words(text)
        .filter(|w| w.starts_with("pcpu_"))
        .map(String::from)
        .collect()
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// The `pcpu_*` names a text puts inside `cfg(...)` (`#![cfg(pcpu_x)]`, `cfg(all(pcpu_x, ..))`).
fn cfg_names_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in text.match_indices("cfg(") {
        let mut depth = 0;
        let mut end = at + 3;
        for (i, c) in text[at + 3..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                '\n' | '`' => break,
                _ => {}
            }
            end = at + 3 + i + 1;
            if depth == 0 {
                break;
            }
        }
        let inside = &text[at..end];
        // `pcpu_counter_broken = "..."` is a cfg with values; its values are not names.
        let inside = inside.split('"').step_by(2).collect::<String>();
        out.extend(pcpu_words(&inside));
    }
    out
}

/// Features a text names: `feature `x``, `features `x`, `y` and `z``, `--features x,y`, and
/// `features = ["x", "y"]` on a line that is this crate's dependency (`pcpu-counter = {`).
fn features_in(text: &str) -> BTreeSet<String> {
    let is_feature = |name: &str| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_".contains(c))
    };
    let mut out = BTreeSet::new();
    for line in text.lines() {
        for (at, _) in line.match_indices("feature") {
            let rest = line[at + "feature".len()..].trim_start_matches('s');
            if let Some(mut list) = rest.strip_prefix(" `") {
                // A run of backticked names joined by `, `, ` and ` or ` or `.
                while let Some((name, after)) = list.split_once('`') {
                    if !is_feature(name) {
                        break;
                    }
                    out.insert(name.to_string());
                    match [", `", " and `", " or `"]
                        .iter()
                        .find_map(|sep| after.strip_prefix(sep))
                    {
                        Some(more) => list = more,
                        None => break,
                    }
                }
            } else if line[..at].ends_with("--") {
                let list = rest.trim_start_matches([' ', '=']);
                let list = list.split([' ', '`', ')', '\'']).next().unwrap();
                out.extend(list.split(',').filter(|f| is_feature(f)).map(String::from));
            } else if let Some(list) = rest.trim_start().strip_prefix("= [") {
                if line[..at].contains("pcpu-counter") {
                    let list = &list[..list.find(']').unwrap_or(list.len())];
                    out.extend(
                        list.split(',')
                            .map(|f| f.trim().trim_matches('"'))
                            .filter(|f| is_feature(f))
                            .map(String::from),
                    );
                }
            }
        }
    }
    out
}

/// The text of every file of the code: each top folder but `docs/` (`target/` folders and
/// this test left out), `build.rs`, `Cargo.toml`, `cbindgen.toml`.
fn code_text() -> String {
    fn walk(dir: &Path, out: &mut String) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') || name == ".ci" {
                    walk(&path, out);
                }
            } else if name != "docs_names.rs" {
                if let Ok(text) = fs::read_to_string(&path) {
                    out.push_str(&text);
                    out.push('\n');
                }
            }
        }
    }
    let root = root();
    let mut out = String::new();
    for top in ROOTS.iter().filter(|r| **r != "docs") {
        walk(&root.join(top), &mut out);
    }
    for file in ["build.rs", "Cargo.toml", "cbindgen.toml"] {
        out.push_str(&fs::read_to_string(root.join(file)).unwrap());
    }
    out
}

/// The cfgs a build can have: those `build.rs` sets (its `CFGS`) and Cargo.toml's check-cfg.
fn declared_cfgs() -> BTreeSet<String> {
    let root = root();
    let build = fs::read_to_string(root.join("build.rs")).unwrap();
    let list = build
        .split("const CFGS")
        .nth(1)
        .expect("build.rs lists its cfgs in `const CFGS`");
    let list = &list[list.find('=').unwrap()..list.find("];").unwrap()];
    let mut out: BTreeSet<String> = list
        .split('"')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect();
    let manifest = fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for (at, _) in manifest.match_indices("cfg(") {
        let name = words(&manifest[at + 4..]).next().unwrap();
        out.insert(name.to_string());
    }
    out
}

/// Every feature a `Cargo.toml` of the repository declares or enables.
fn known_features() -> BTreeSet<String> {
    let mut manifests = vec![root().join("Cargo.toml")];
    fn find(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() && path.file_name().unwrap() != "target" {
                find(&path, out);
            } else if path.file_name().unwrap() == "Cargo.toml" {
                out.push(path);
            }
        }
    }
    for top in ["testbeds", "xtask", "fuzz", "examples", "benches"] {
        if root().join(top).is_dir() {
            find(&root().join(top), &mut manifests);
        }
    }
    let mut out = BTreeSet::new();
    for manifest in manifests {
        let text = fs::read_to_string(manifest).unwrap();
        let mut in_features = false;
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                in_features = line == "[features]";
            } else if in_features && !line.starts_with('#') {
                if let Some((name, _)) = line.split_once('=') {
                    out.insert(name.trim().to_string());
                }
            }
        }
    }
    out
}

/// What the code knows: its text, its cfgs, its features, its files' names.
struct Known {
    pcpu_words: BTreeSet<String>,
    cfgs: BTreeSet<String>,
    features: BTreeSet<String>,
    file_names: BTreeSet<String>,
}

impl Known {
    fn of_the_repository() -> Known {
        Known {
            pcpu_words: pcpu_words(&code_text()),
            cfgs: declared_cfgs(),
            features: known_features(),
            file_names: file_names(),
        }
    }
}

/// The names of every file in the repository (`target/` and hidden folders left out).
fn file_names() -> BTreeSet<String> {
    fn walk(dir: &Path, out: &mut BTreeSet<String>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') || name == ".ci" {
                    walk(&path, out);
                }
            } else {
                out.insert(name);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(&root(), &mut out);
    out
}

/// The bare file names a text puts in backticks (`machine.rs`, `header_check.sh`).
fn file_names_in(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| {
            !t.contains('/')
                && [".rs", ".c", ".h", ".sh"].iter().any(|e| {
                    t.strip_suffix(e).is_some_and(|stem| {
                        !stem.is_empty()
                            && stem
                                .chars()
                                .all(|c| c.is_ascii_alphanumeric() || "_-".contains(c))
                    })
                })
        })
        .map(String::from)
        .collect()
}

/// The cargo targets a text names: (`--example`, `--test` or `--bench`, the name).
fn targets_in(text: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for kind in ["--example", "--test", "--bench"] {
        for (at, _) in text.match_indices(&format!("{kind} ")) {
            let name: String = text[at + kind.len() + 1..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                .collect();
            if !name.is_empty() {
                out.insert((kind.to_string(), name));
            }
        }
    }
    out
}

/// Whether a cargo target of that kind and name is in the repository.
fn target_exists(root: &Path, kind: &str, name: &str) -> bool {
    let folder = match kind {
        "--example" => "examples",
        "--test" => "tests",
        _ => "benches",
    };
    let dir = root.join(folder);
    dir.join(format!("{name}.rs")).is_file() || dir.join(name).join("main.rs").is_file()
}

/// The dead names of one doc: (the name, what is wrong with it).
fn dead_names(doc: &str, text: &str, known: &Known) -> Vec<(String, String)> {
    let root = root();
    let mut dead = Vec::new();
    for path in paths_in(text) {
        let output = path.split('/').any(|c| BUILD_OUTPUTS.contains(&c));
        if !output && !exists(&root, &path) {
            dead.push((path.clone(), format!("{doc}: path `{path}` does not exist")));
        }
    }
    for (kind, name) in targets_in(text) {
        if !target_exists(&root, &kind, &name) {
            dead.push((
                name.clone(),
                format!("{doc}: `{kind} {name}` names no target"),
            ));
        }
    }
    for name in file_names_in(text) {
        if !known.file_names.contains(&name) {
            dead.push((name.clone(), format!("{doc}: no file is named `{name}`")));
        }
    }
    for name in pcpu_words(text) {
        let alive = if name.ends_with('_') {
            known.pcpu_words.iter().any(|w| w.starts_with(&name))
        } else {
            known.pcpu_words.contains(&name) || known.cfgs.contains(&name)
        };
        if !alive {
            dead.push((
                name.clone(),
                format!("{doc}: `{name}` is no name of the code"),
            ));
        }
    }
    for name in cfg_names_in(text) {
        if !known.cfgs.contains(&name) {
            let why = "is neither set by build.rs nor in Cargo.toml's check-cfg";
            dead.push((name.clone(), format!("{doc}: cfg `{name}` {why}")));
        }
    }
    for name in features_in(text) {
        if !known.features.contains(&name) {
            dead.push((
                name.clone(),
                format!("{doc}: feature `{name}` is in no Cargo.toml"),
            ));
        }
    }
    dead
}

fn exempt(doc: &str, name: &str) -> bool {
    EXEMPT.iter().any(|(f, n, _)| *f == doc && *n == name)
}

#[test]
fn the_docs_name_only_what_exists() {
    let known = Known::of_the_repository();
    let dead: Vec<String> = docs()
        .iter()
        .flat_map(|(doc, text)| {
            dead_names(doc, text, &known)
                .into_iter()
                .filter(|(name, _)| !exempt(doc, name))
                .map(|(_, message)| message)
        })
        .collect();
    assert!(
        dead.is_empty(),
        "{} dead names in the docs:\n{}",
        dead.len(),
        dead.join("\n")
    );
}

#[test]
fn each_exempt_mention_is_still_there_and_still_dead() {
    let known = Known::of_the_repository();
    let docs = docs();
    for (doc, name, why) in EXEMPT {
        let (_, text) = docs.iter().find(|(d, _)| d == doc).unwrap();
        let dead = dead_names(doc, text, &known);
        assert!(
            dead.iter().any(|(n, _)| n == name),
            "{doc} no longer names `{name}` ({why}), or it exists: take it out of EXEMPT"
        );
    }
}

#[test]
fn the_checker_finds_each_kind_of_dead_name() {
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
    let known = Known {
        pcpu_words: set(&["pcpu_zone_init", "pcpu_alive"]),
        cfgs: set(&["pcpu_rseq"]),
        features: set(&["sim", "capi"]),
        file_names: set(&["lib.rs", "machine.rs"]),
    };
    let text = "See `src/lib.rs`, `src/nowhere.rs`, `tests/arch_*.rs`, `tests/arch_*.c`,
`testbeds/kernel/boot/<arch>/`, `testbeds/kernel/nothing/<arch>/`, `fuzz/target/x`.
`src/sim/` (`machine.rs`, `gone.rs`). `cargo test --test zone --test gone`, `--example demo`,
`--example nowhere`, `--bench peers`.
`pcpu_zone_init`, `pcpu_zone_` and `pcpu_gone`; `pcpu_rseq`; `#![cfg(pcpu_alive)]`.
With feature `sim`, features `capi`, `gone` and `lost`, `--features sim,vanished`,
`pcpu-counter = { features = [\"capi\", \"dropped\"] }`, feature `std`, `Clock::now()`.
`other = { features = [\"theirs\"] }`.";
    let dead: Vec<String> = dead_names("made.md", text, &known)
        .into_iter()
        .map(|(_, message)| message)
        .collect();
    assert_eq!(
        dead,
        [
            "made.md: path `src/nowhere.rs` does not exist",
            "made.md: path `testbeds/kernel/nothing/<arch>` does not exist",
            "made.md: path `tests/arch_*.c` does not exist",
            "made.md: `--example nowhere` names no target",
            "made.md: `--test gone` names no target",
            "made.md: no file is named `gone.rs`",
            "made.md: `pcpu_gone` is no name of the code",
            "made.md: cfg `pcpu_alive` is neither set by build.rs nor in Cargo.toml's check-cfg",
            "made.md: feature `dropped` is in no Cargo.toml",
            "made.md: feature `gone` is in no Cargo.toml",
            "made.md: feature `lost` is in no Cargo.toml",
            "made.md: feature `std` is in no Cargo.toml",
            "made.md: feature `vanished` is in no Cargo.toml",
        ]
    );
}

#[test]
fn the_changelog_check_skips_old_names_and_other_releases() {
    let changelog = "# Changelog\n## Unreleased\n### Added\n- `a` -> `b`\n- kept `src/x.rs`\n  \
and `src/y.rs`\n- `src/z.rs`,\n  which is gone\n## 0.1.0\n- `src/old.rs`\n";
    assert_eq!(
        unreleased_current_names(changelog),
        "### Added\n- kept `src/x.rs`\n  and `src/y.rs`"
    );
}

/// The C ABI's sources, whose doc comments cbindgen copies into `include/pcpu_counter.h`.
fn c_abi_sources() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(root().join("src/capi"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.push(root().join("src/sim/capi.rs"));
    files.sort();
    files
}

/// The doc comments of a file's public items whose first paragraph runs past its first line:
/// (the item's line, the comment's first line). cbindgen keeps only a comment's first line
/// (`documentation_length = "short"`), so such a comment reaches the header cut mid-sentence.
fn cut_comments(code: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = code.lines().map(str::trim).collect();
    let mut cut = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        if !lines[at].starts_with("///") {
            at += 1;
            continue;
        }
        let start = at;
        while at < lines.len() && lines[at].starts_with("///") {
            at += 1;
        }
        let item = lines[at..]
            .iter()
            .find(|l| !l.starts_with("#["))
            .copied()
            .unwrap_or("");
        let second = lines.get(start + 1).copied().unwrap_or("");
        if item.starts_with("pub ") && at - start > 1 && second != "///" {
            cut.push((item.to_string(), lines[start].to_string()));
        }
    }
    cut
}

#[test]
fn each_c_declaration_comment_reaches_the_header_whole() {
    let mut cut = Vec::new();
    for file in c_abi_sources() {
        let name = file.strip_prefix(root()).unwrap().display().to_string();
        for (item, first) in cut_comments(&fs::read_to_string(&file).unwrap()) {
            cut.push(format!("{name}: `{item}`: {first}"));
        }
    }
    assert!(
        cut.is_empty(),
        "doc comments whose first line is not a whole paragraph (the header keeps only that \
         line):\n{}",
        cut.join("\n")
    );
}

#[test]
fn a_comment_cut_by_the_header_is_found() {
    let code = "/// Whole.\npub const A: i32 = 1;\n/// Whole.\n///\n/// More.\n#[no_mangle]\n\
pub extern \"C\" fn b() {}\n/// Cut\n/// here.\npub type C = u8;\n/// Private,\n/// two lines.\n\
fn d() {}\n";
    assert_eq!(
        cut_comments(code),
        [("pub type C = u8;".to_string(), "/// Cut".to_string())]
    );
}
