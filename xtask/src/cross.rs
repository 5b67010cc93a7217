//! `cargo xtask cross` (being written).

pub fn run(_args: &[String]) -> Result<(), String> {
    Err("not written yet".into())
}
