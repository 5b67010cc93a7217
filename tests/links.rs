//! Every link of the README resolves where the README is read: on crates.io (which renders the
//! file as it is, with no repository to resolve a relative link against) and on docs.rs (where
//! it is the crate's front page). So each link is absolute or an anchor of the page, and a
//! link to this crate's docs names a page that the crate's docs have: a module of
//! `src/manual.rs` (the manuals of `docs/`, rendered there) or an item of the crate. The
//! manuals' own links between each other are rewritten by `build.rs` into intra-doc links,
//! which `cargo doc` with `-D warnings` checks (`.ci/run`).

use std::fs;
use std::path::Path;

const DOCS_RS: &str = "https://docs.rs/pcpu-counter/latest/pcpu_counter/";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The targets of the Markdown links `[label](target)` in `text`.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        targets.push(after[..end].to_string());
        rest = &after[end..];
    }
    targets
}

/// The modules `src/manual.rs` declares: the pages under `manual/` that exist.
fn manual_pages() -> Vec<String> {
    let text = fs::read_to_string(root().join("src/manual.rs")).unwrap();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(" {").to_string())
        .collect()
}

/// What is wrong with a README link, if anything.
fn problem(target: &str, pages: &[String]) -> Option<String> {
    if target.starts_with('#') {
        return None;
    }
    if !target.starts_with("https://") {
        return Some(format!(
            "{target}: not absolute (crates.io has no repository to resolve it against)"
        ));
    }
    let Some(path) = target.strip_prefix(DOCS_RS) else {
        return None; // another site: FreeBSD's manual pages and the like
    };
    let page = path.split('#').next().unwrap();
    match page.strip_prefix("manual/") {
        Some(rest) => {
            let module = rest.trim_end_matches("/index.html");
            (!pages.iter().any(|p| p == module)).then(|| {
                format!(
                    "{target}: no module `manual::{module}` in src/manual.rs (it has {pages:?})"
                )
            })
        }
        None => Some(format!(
            "{target}: a page of this crate's docs the check does not know"
        )),
    }
}

#[test]
fn every_readme_link_resolves_on_crates_io_and_docs_rs() {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    let pages = manual_pages();
    let targets = link_targets(&readme);
    assert!(targets.len() > 10, "too few links found: {targets:?}");
    let problems: Vec<String> = targets.iter().filter_map(|t| problem(t, &pages)).collect();
    assert!(
        problems.is_empty(),
        "README links that break:\n{problems:#?}"
    );
}

#[test]
fn every_manual_in_docs_is_rendered_into_the_crate_docs() {
    let pages = manual_pages();
    for entry in fs::read_dir(root().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if let Some(stem) = name.strip_suffix(".md") {
            let module = stem.to_lowercase();
            assert!(
                pages.contains(&module),
                "docs/{name} has no page: add `manual::{module}` to src/manual.rs and build.rs"
            );
        }
    }
}

#[test]
fn the_check_refuses_what_breaks() {
    let pages = vec!["kernel".to_string()];
    assert!(problem("docs/kernel.md", &pages).is_some());
    assert!(problem("./LICENSE", &pages).is_some());
    assert!(problem(&format!("{DOCS_RS}manual/nothing/index.html"), &pages).is_some());
    assert!(problem(&format!("{DOCS_RS}manual/kernel/index.html#hooks"), &pages).is_none());
    assert!(problem("https://man.freebsd.org/cgi/man.cgi?query=counter", &pages).is_none());
    assert_eq!(
        link_targets("a [b](c) and [d](e#f)."),
        vec!["c".to_string(), "e#f".into()]
    );
}
