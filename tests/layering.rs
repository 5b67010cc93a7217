//! The code's map holds (docs/design.md, "A map of the code"): no import circle anywhere in
//! `src/` (between the crate's modules, and between the files of `src/capi/` and of
//! `src/registry/`), and the arch primitives (`arch/`) import nothing above them but the
//! platform's hooks and the plain data they return. Reads the sources; the checker itself is
//! shown to catch a circle and an arrow up on graphs made to have them.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// What the platform's backends (`src/platform/{kernel,hosted,sim}.rs`) may import: the area's
/// type (the add's check) and the error type (the hosted backend's panic message).
const BACKENDS_MAY_IMPORT: [&str; 2] = ["area", "error"];

/// What `arch/` may import: the platform's hooks (the portable fallback, the base the platform
/// supplies), the error type `set_cpu_base` returns, and the crate's atomics.
const ARCH_MAY_IMPORT: [&str; 3] = ["platform", "error", "atomic"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A file's code without comments and without its unit tests (`#[cfg(test)] mod tests`).
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
    text.lines()
        .map(|l| l.split("//").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names a file imports from a path prefix (`crate::` or `super::`): the first segment
/// after it, and each top-level name of a `{..}` group.
fn imported(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let after = &rest[at + prefix.len()..];
        let before = rest[..at].chars().last();
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || "_:$".contains(c)) {
            continue; // `$crate::`, `x::crate::`
        }
        if let Some(group) = after.strip_prefix('{') {
            let body = &group[..group.find('}').unwrap_or(group.len())];
            for item in body.split(',') {
                let first = item.trim().split("::").next().unwrap().trim();
                if !first.is_empty() {
                    names.insert(first.to_string());
                }
            }
        } else {
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                names.insert(name);
            }
        }
    }
    names
}

/// The root's re-exports (`pub use module::Item` in `src/lib.rs`): item -> module.
fn root_reexports() -> BTreeMap<String, String> {
    let lib = code_of(&fs::read_to_string(root().join("src/lib.rs")).unwrap());
    let mut map = BTreeMap::new();
    for stmt in lib.split(';') {
        let Some(at) = stmt.find("pub use ") else {
            continue;
        };
        let body = stmt[at + 8..]
            .trim()
            .trim_start_matches('{')
            .trim_end_matches('}');
        for path in body.split(',') {
            let parts: Vec<&str> = path.trim().split("::").collect();
            if let [module, item] = parts[..] {
                map.insert(item.to_string(), module.to_string());
            }
        }
    }
    map
}

/// The crate's modules and the modules each imports: one node per top-level module of `src/`
/// (a folder is one node, `src/sim/` and `src/platform/` included), and one for `arch/`.
fn crate_graph() -> Graph {
    let reexports = root_reexports();
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    rust_files(&root().join("arch"), &mut files);
    let mut graph = Graph::new();
    for file in files {
        let rel = file
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel == "src/lib.rs" || rel.ends_with("/fixture.rs") {
            continue;
        }
        let node = if rel.starts_with("arch/") {
            "arch".to_string()
        } else {
            let name = rel.trim_start_matches("src/").trim_end_matches(".rs");
            name.split('/').next().unwrap().to_string()
        };
        let code = code_of(&fs::read_to_string(&file).unwrap());
        let edges = graph.entry(node.clone()).or_default();
        for name in imported(&code, "crate::") {
            let target = reexports.get(&name).cloned().unwrap_or(name);
            let module = root().join("src").join(&target);
            let known = module.with_extension("rs").exists() || module.is_dir() || target == "arch";
            if known && target != node {
                edges.insert(target);
            }
        }
    }
    graph
}

/// The files of one folder of `src/` and the sibling files each imports (`super::x`).
fn folder_graph(folder: &str) -> Graph {
    let mut files = Vec::new();
    rust_files(&root().join("src").join(folder), &mut files);
    let mut graph = Graph::new();
    for file in &files {
        let name = file.file_stem().unwrap().to_string_lossy().to_string();
        if name == "fixture" {
            continue;
        }
        let code = code_of(&fs::read_to_string(file).unwrap());
        let edges = graph.entry(name.clone()).or_default();
        for sibling in imported(&code, "super::") {
            let exists = files
                .iter()
                .any(|f| f.file_stem().unwrap() == sibling.as_str());
            if exists && sibling != name && sibling != "mod" {
                edges.insert(sibling);
            }
        }
    }
    graph
}

/// The modules that import `module`.
fn importers_of(graph: &Graph, module: &str) -> Vec<String> {
    graph
        .iter()
        .filter(|(_, imports)| imports.contains(module))
        .map(|(importer, _)| importer.clone())
        .collect()
}

/// A circle of the graph, if it has one.
fn circle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        graph: &Graph,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_string());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(graph, next, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(graph, node, &mut Vec::new(), &mut done))
}

fn graph_of(edges: &[(&str, &str)]) -> Graph {
    let mut graph = Graph::new();
    for (from, to) in edges {
        graph
            .entry(from.to_string())
            .or_default()
            .insert(to.to_string());
    }
    graph
}

#[test]
fn the_checker_finds_a_circle_and_an_arrow_up() {
    let graph = graph_of(&[("arch", "platform"), ("platform", "zone"), ("zone", "arch")]);
    assert_eq!(
        circle(&graph),
        Some(vec![
            "arch".into(),
            "platform".into(),
            "zone".into(),
            "arch".into()
        ])
    );
    assert_eq!(
        circle(&graph_of(&[("a", "b"), ("b", "c"), ("a", "c")])),
        None
    );
    assert_eq!(
        imported(
            "use crate::{arch, zone::Zone};\nlet m = crate::sim::Machine::new(1);",
            "crate::"
        ),
        BTreeSet::from(["arch".into(), "sim".into(), "zone".into()])
    );
    assert!(imported("$crate::Platform", "crate::").is_empty());
    // The folder loop the platform once closed through the simulation's harness.
    let folder_loop = graph_of(&[("sim", "capi"), ("capi", "platform"), ("platform", "sim")]);
    assert_eq!(
        circle(&folder_loop),
        Some(vec![
            "capi".into(),
            "platform".into(),
            "sim".into(),
            "capi".into()
        ])
    );
    assert_eq!(
        importers_of(&folder_loop, "sim"),
        vec!["platform".to_string()]
    );
}

#[test]
fn no_import_circle_between_the_crates_modules() {
    let graph = crate_graph();
    assert!(graph.len() > 20, "too few modules found: {graph:?}");
    assert!(
        graph["zone"].contains("arch"),
        "the graph misses known arrows: {graph:?}"
    );
    assert_eq!(circle(&graph), None, "{graph:#?}");
}

#[test]
fn arch_imports_nothing_above_it() {
    let graph = crate_graph();
    let above: Vec<&String> = graph["arch"]
        .iter()
        .filter(|m| !ARCH_MAY_IMPORT.contains(&m.as_str()))
        .collect();
    assert!(above.is_empty(), "arch/ imports {above:?}");
}

#[test]
fn no_import_circle_inside_capi_or_registry() {
    for folder in ["capi", "registry"] {
        let graph = folder_graph(folder);
        assert!(graph.len() > 2, "too few files in src/{folder}: {graph:?}");
        assert_eq!(circle(&graph), None, "src/{folder}: {graph:#?}");
    }
}

#[test]
fn no_product_module_imports_the_simulations_harness() {
    let graph = crate_graph();
    assert!(
        graph["sim"].contains("platform"),
        "the graph misses known arrows: {graph:?}"
    );
    assert_eq!(importers_of(&graph, "sim"), Vec::<String>::new());
}

/// The names every backend of the platform defines (`src/platform/mod.rs` lists them).
const BACKEND_NAMES: [&str; 9] = [
    "current_cpu",
    "cpu_base",
    "simulated_register",
    "check_add",
    "check_static_add",
    "own_areas",
    "State",
    "acquire",
    "release",
];

/// The crate-visible functions and types a file defines at its top level or in a `cfg_if!`
/// arm: `pub(crate) [const] [unsafe] fn name`, `pub(crate) type name`, `pub(crate) struct name`.
fn crate_items(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in code.lines() {
        let Some(rest) = line.trim().strip_prefix("pub(crate) ") else {
            continue;
        };
        let rest = rest
            .trim_start_matches("const ")
            .trim_start_matches("unsafe ");
        for kind in ["fn ", "type ", "struct "] {
            if let Some(name) = rest.strip_prefix(kind) {
                let name: String = name
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.insert(name);
            }
        }
    }
    names
}

#[test]
fn the_platforms_backends_define_the_same_names() {
    assert_eq!(
        crate_items("pub(crate) const fn a() {}\npub(crate) unsafe fn b(s: S) {}\nfn c() {}"),
        BTreeSet::from(["a".to_string(), "b".to_string()])
    );
    for backend in ["kernel", "hosted", "sim"] {
        let file = root().join(format!("src/platform/{backend}.rs"));
        let defined = crate_items(&code_of(&fs::read_to_string(&file).unwrap()));
        let missing: Vec<&str> = BACKEND_NAMES
            .into_iter()
            .filter(|name| !defined.contains(*name))
            .collect();
        assert!(
            missing.is_empty(),
            "src/platform/{backend}.rs lacks {missing:?}"
        );
    }
}

#[test]
fn the_platforms_backends_import_nothing_above_the_area() {
    let reexports = root_reexports();
    for backend in ["kernel", "hosted", "sim"] {
        let file = root().join(format!("src/platform/{backend}.rs"));
        let code = code_of(&fs::read_to_string(&file).unwrap());
        let above: Vec<String> = imported(&code, "crate::")
            .into_iter()
            .map(|name| reexports.get(&name).cloned().unwrap_or(name))
            .filter(|module| !BACKENDS_MAY_IMPORT.contains(&module.as_str()))
            .collect();
        assert!(
            above.is_empty(),
            "src/platform/{backend}.rs imports {above:?}"
        );
    }
}
