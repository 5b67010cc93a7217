//! The generated parts of a hand-written document: each is the text between a line
//! `<!-- bench:NAME -->` and the next line `<!-- /bench -->`, and only that text is replaced.
//! Every block the bench makes has exactly one marker and every marker a block, so neither
//! side can drift from the other.

/// One generated part: its marker's name and its text (whole lines).
pub type Block = (&'static str, String);

const CLOSE: &str = "<!-- /bench -->";

/// The name of a line that opens a block (`<!-- bench:NAME -->`).
fn opening(line: &str) -> Option<&str> {
    line.trim()
        .strip_prefix("<!-- bench:")?
        .strip_suffix("-->")
        .map(str::trim)
}

/// `template` with the text of each marked block replaced by the block of that name.
pub fn fill(template: &str, blocks: &[Block]) -> Result<String, String> {
    let mut out = String::new();
    let mut used: Vec<&str> = Vec::new();
    let mut inside: Option<&str> = None;
    for line in template.lines() {
        match inside {
            Some(name) => {
                if line.trim() == CLOSE {
                    out.push_str(line);
                    out.push('\n');
                    inside = None;
                } else if opening(line).is_some() {
                    return Err(format!(
                        "block `{name}` is not closed before the next opens"
                    ));
                }
            }
            None => {
                out.push_str(line);
                out.push('\n');
                if let Some(name) = opening(line) {
                    let (key, text) =
                        blocks.iter().find(|(key, _)| *key == name).ok_or_else(|| {
                            format!("the document has a block `{name}` the bench does not make")
                        })?;
                    if used.contains(key) {
                        return Err(format!("block `{name}` is in the document twice"));
                    }
                    used.push(key);
                    out.push_str(text);
                    if !text.is_empty() && !text.ends_with('\n') {
                        out.push('\n');
                    }
                    inside = Some(key);
                } else if line.trim() == CLOSE {
                    return Err("a block closes that never opened".into());
                }
            }
        }
    }
    if let Some(name) = inside {
        return Err(format!("block `{name}` is never closed"));
    }
    let missing: Vec<&str> = blocks
        .iter()
        .map(|(key, _)| *key)
        .filter(|key| !used.contains(key))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the document has no marker for the bench's blocks {}",
            missing.join(", ")
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks() -> Vec<Block> {
        vec![("a", "| 1 |\n".into()), ("b", "two\nlines\n".into())]
    }

    #[test]
    fn only_the_text_between_markers_is_replaced() {
        let template = "# Title\n\nProse.\n<!-- bench:a -->\n| old |\n| rows |\n<!-- /bench -->\n\
More prose.\n<!-- bench:b -->\n<!-- /bench -->\nEnd.\n";
        assert_eq!(
            fill(template, &blocks()).unwrap(),
            "# Title\n\nProse.\n<!-- bench:a -->\n| 1 |\n<!-- /bench -->\nMore prose.\n\
<!-- bench:b -->\ntwo\nlines\n<!-- /bench -->\nEnd.\n"
        );
    }

    #[test]
    fn a_filled_document_fills_again_to_itself() {
        let template = "x\n<!-- bench:a -->\n<!-- /bench -->\n<!-- bench:b -->\n<!-- /bench -->\n";
        let once = fill(template, &blocks()).unwrap();
        assert_eq!(fill(&once, &blocks()).unwrap(), once);
    }

    #[test]
    fn markers_and_blocks_must_match() {
        let both = "<!-- bench:a -->\n<!-- /bench -->\n<!-- bench:b -->\n<!-- /bench -->\n";
        assert!(fill(both, &blocks()).is_ok());
        let only_a = "<!-- bench:a -->\n<!-- /bench -->\n";
        assert_eq!(
            fill(only_a, &blocks()),
            Err("the document has no marker for the bench's blocks b".into())
        );
        let unknown = format!("{both}<!-- bench:c -->\n<!-- /bench -->\n");
        assert_eq!(
            fill(&unknown, &blocks()),
            Err("the document has a block `c` the bench does not make".into())
        );
        let twice = format!("{both}<!-- bench:a -->\n<!-- /bench -->\n");
        assert_eq!(
            fill(&twice, &blocks()),
            Err("block `a` is in the document twice".into())
        );
        assert_eq!(
            fill("<!-- bench:a -->\nno end\n", &blocks()),
            Err("block `a` is never closed".into())
        );
        assert_eq!(
            fill("<!-- /bench -->\n", &blocks()),
            Err("a block closes that never opened".into())
        );
    }
}
