//! The report's cells and tables: number formats, verdicts, a table of rows by parameter.

use std::fmt::Write;

/// Writes a table with a row for each of `rows` and a column for each of `params` (writers,
/// threads): the header, the alignment line, then `cell(row, param)` in every cell.
pub fn param_table(
    o: &mut String,
    corner: &str,
    params: &[String],
    rows: &[String],
    mut cell: impl FnMut(&str, &str) -> Result<String, String>,
) -> Result<(), String> {
    write!(o, "| {corner} |").unwrap();
    for p in params {
        write!(o, " {p} |").unwrap();
    }
    write!(o, "\n|---|").unwrap();
    for _ in params {
        write!(o, "---:|").unwrap();
    }
    writeln!(o).unwrap();
    for row in rows {
        write!(o, "| {row} |").unwrap();
        for p in params {
            write!(o, " {} |", cell(row, p)?).unwrap();
        }
        writeln!(o).unwrap();
    }
    Ok(())
}

/// How far `measured` falls short of a goal of at least `goal`.
pub fn short_of(measured: f64, goal: f64) -> String {
    format!("{:.0}% short of the goal", (1.0 - measured / goal) * 100.0)
}

/// How far `measured` is over a goal of at most `goal`.
pub fn over(measured: f64, goal: f64) -> String {
    format!("{:.0}% over the goal", (measured / goal - 1.0) * 100.0)
}

/// Adds per second as millions, one decimal.
pub fn m(adds_per_s: f64) -> String {
    format!("{:.1}", adds_per_s / 1e6)
}

/// A ratio, two decimals and an `x`.
pub fn x(ratio: f64) -> String {
    format!("{ratio:.2}x")
}

/// A target's verdict in the report's tables.
pub fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "**missed**"
    }
}
