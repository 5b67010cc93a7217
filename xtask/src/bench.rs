//! `cargo xtask bench [--quick] [--from FILE] [--docs DIR]`: runs the benchmarks against the
//! peers (benches/peers) and writes docs/BENCHMARKS.md and docs/throughput.svg (or into DIR).
//!
//! docs/BENCHMARKS.md is written by hand around generated blocks: the bench replaces only the
//! text between each `<!-- bench:NAME -->` and `<!-- /bench -->` (`markers`), the blocks made
//! by `report` and the sections `linux`, `approx` and `lazy`, which share `table`'s formats.
//!
//! It builds the bench in release with the cargo that runs it, runs the binary (a full run
//! takes about two minutes on the 2-core machines here) and the C fast path's bench
//! (`benches/c/c_add.c`, with gcc), disassembles the single-thread loops
//! with `objdump` where it is installed, and renders the report from the result lines.
//! `--from FILE` renders an earlier run's result lines instead of running; `--quick` runs
//! short rounds (a smoke test: CI renders it into a scratch folder with `--docs`).

mod approx;
mod c;
mod lazy;
mod linux;
mod markers;
mod plot;
mod report;
mod results;
mod table;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use markers::Block;
use report::{Code, Machine};
use results::Results;

/// The single-thread loops shown in the report.
const LOOPS: [&str; 4] = ["pcpu_one", "plain_one", "atomic_one", "static_eight"];

pub fn run(args: &[String]) -> Result<(), String> {
    let mut quick = false;
    let mut from = None;
    let mut docs = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--from" => from = Some(it.next().ok_or("--from needs a file")?.clone()),
            "--docs" => docs = Some(PathBuf::from(it.next().ok_or("--docs needs a folder")?)),
            other => {
                return Err(format!(
                    "unknown argument {other:?} (try --quick, --from FILE, --docs DIR)"
                ))
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("no project root")?
        .to_path_buf();
    let docs = docs.unwrap_or_else(|| root.join("docs"));
    let exe = build(&root)?;
    let results_file = match from {
        Some(file) => PathBuf::from(file),
        None => {
            let file = target_dir(&root).join("bench-results.tsv");
            let mut cmd = Command::new(&exe);
            cmd.args(["--bench", "--out"]).arg(&file).current_dir(&root);
            if quick {
                cmd.arg("--quick");
            }
            eprintln!("xtask bench: running {}", exe.display());
            let status = cmd
                .status()
                .map_err(|e| format!("run {}: {e}", exe.display()))?;
            if !status.success() {
                return Err(format!("the benchmark failed ({status})"));
            }
            eprintln!("xtask bench: running the C fast path (benches/c/c_add.c)");
            let lines = c::run(&root, quick)?;
            let mut all = std::fs::read_to_string(&file)
                .map_err(|e| format!("read {}: {e}", file.display()))?;
            all.push_str(&lines);
            std::fs::write(&file, all).map_err(|e| format!("write {}: {e}", file.display()))?;
            file
        }
    };
    let text = std::fs::read_to_string(&results_file)
        .map_err(|e| format!("read {}: {e}", results_file.display()))?;
    let results = Results::parse(&text)?;
    let meta = |name: &str| results.text("meta", name, "-", None);
    let machine = Machine {
        cpu: cpu_model(),
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        kernel: read_trimmed("/proc/sys/kernel/osrelease"),
        rustc: output("rustc", &["-V"]),
        date: meta("started").map_or_else(
            || "unknown".into(),
            |t| output("date", &["-u", "-d", &format!("@{t}"), "+%Y-%m-%d %H:%M"]),
        ),
        load_before: meta("load before").unwrap_or("unknown").into(),
        load_after: meta("load after").unwrap_or("unknown").into(),
        autogroup: read_trimmed("/proc/sys/kernel/sched_autogroup_enabled") == "1",
    };

    std::fs::create_dir_all(&docs).map_err(|e| format!("create {}: {e}", docs.display()))?;
    let series: Vec<plot::Series> = results
        .names("throughput")
        .into_iter()
        .map(|name| {
            let points = results
                .params("throughput")
                .iter()
                .map(|w| {
                    let rate = results.get("throughput", &name, w, None)?;
                    let w: f64 = w.parse().map_err(|_| format!("writer count {w:?}"))?;
                    Ok((w, rate))
                })
                .collect::<Result<_, String>>()?;
            Ok(plot::Series { name, points })
        })
        .collect::<Result<_, String>>()?;
    plot::throughput(&docs.join("throughput.svg"), &series, machine.cores)?;
    let code = Code {
        disassembly: disassemble(&exe),
        protected_is_plain: same_address(&exe, "pcpu_protected", "pcpu_eight"),
    };
    let blocks = all_blocks(&results, &machine, &code)?;
    let template = root.join("docs/BENCHMARKS.md");
    let template = std::fs::read_to_string(&template)
        .map_err(|e| format!("read {}: {e}", template.display()))?;
    let markdown =
        markers::fill(&template, &blocks).map_err(|e| format!("docs/BENCHMARKS.md: {e}"))?;
    std::fs::write(docs.join("BENCHMARKS.md"), &markdown)
        .map_err(|e| format!("write BENCHMARKS.md: {e}"))?;
    // The headline: the targets table.
    if let Some((_, targets)) = blocks.iter().find(|(name, _)| *name == "targets") {
        eprintln!("{targets}");
    }
    eprintln!(
        "xtask bench: wrote BENCHMARKS.md and throughput.svg in {}",
        docs.display()
    );
    Ok(())
}

/// Every generated block of docs/BENCHMARKS.md, from the results of one run.
fn all_blocks(results: &Results, machine: &Machine, code: &Code) -> Result<Vec<Block>, String> {
    let mut blocks = report::blocks(results, machine, code)?;
    blocks.extend(linux::blocks(results)?);
    blocks.extend(approx::blocks(results)?);
    blocks.extend(lazy::blocks(results)?);
    Ok(blocks)
}

/// Where cargo puts the build: `CARGO_TARGET_DIR` or `<root>/target`.
fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

/// Builds the bench in release and returns its executable (from cargo's JSON messages).
fn build(root: &Path) -> Result<PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["bench", "--features", "sim", "--bench", "peers", "--no-run"])
        .arg("--message-format=json-render-diagnostics")
        .current_dir(root)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!("building the bench failed ({})", out.status));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .filter(|l| l.contains("\"compiler-artifact\"") && l.contains("\"name\":\"peers\""))
        .find_map(|l| {
            let start = l.find("\"executable\":\"")? + "\"executable\":\"".len();
            let len = l[start..].find('"')?;
            Some(PathBuf::from(&l[start..start + len]))
        })
        .ok_or_else(|| "cargo built no `peers` bench executable".into())
}

/// The single-thread loops' machine code, from `objdump -d` (or why it is missing).
fn disassemble(exe: &Path) -> String {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "-C"])
        .arg(exe)
        .output();
    let text = match out {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
        _ => return "objdump is not installed here: no disassembly.\n".into(),
    };
    let mut shown = String::new();
    for name in LOOPS {
        let header = format!("<peers::single::{name}>:");
        let Some(start) = text.lines().position(|l| l.ends_with(&header)) else {
            shown.push_str(&format!("{name}: not found\n"));
            continue;
        };
        for line in text.lines().skip(start) {
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if !line.ends_with("int3") {
                shown.push_str(line);
                shown.push('\n');
            }
        }
        shown.push('\n');
    }
    shown
}

/// Whether the bench's functions `single::a` and `single::b` are one function (one address,
/// or no symbol left for `a`: the compiler merges functions whose code is identical), from
/// `nm`. `None` where `nm` is missing or `b` is not found.
fn same_address(exe: &Path, a: &str, b: &str) -> Option<bool> {
    let out = Command::new("nm").arg("-C").arg(exe).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let address = |name: &str| {
        let symbol = format!("peers::single::{name}");
        text.lines()
            .find(|l| l.ends_with(&symbol))
            .and_then(|l| l.split_whitespace().next().map(str::to_owned))
    };
    // `#[inline(never)]` keeps both out of line, so a function without a symbol of its own
    // was merged into the other one.
    match (address(a), address(b)?) {
        (Some(a), b) => Some(a == b),
        (None, _) => Some(true),
    }
}

fn cpu_model() -> String {
    read_trimmed("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or_else(|| "unknown".into(), |(_, model)| model.trim().into())
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map_or_else(|_| "unknown".into(), |s| s.trim().into())
}

fn output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "unknown".into(),
            |o| String::from_utf8_lossy(&o.stdout).trim().into(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The machine of the saved run (`bench/quick-run.tsv`, a `--quick` run's result lines).
    fn machine() -> Machine {
        Machine {
            cpu: "a CPU".into(),
            cores: 2,
            kernel: "a kernel".into(),
            rustc: "rustc".into(),
            date: "2026-12-07 20:15".into(),
            load_before: "1.00".into(),
            load_after: "2.00".into(),
            autogroup: false,
        }
    }

    /// The document with the text of each block left out, markers kept.
    fn prose(document: &str) -> String {
        markers::fill(
            document,
            &all_blocks(&saved_run(), &machine(), &code())
                .unwrap()
                .into_iter()
                .map(|(name, _)| (name, String::new()))
                .collect::<Vec<_>>(),
        )
        .unwrap()
    }

    fn saved_run() -> Results {
        Results::parse(include_str!("bench/quick-run.tsv")).unwrap()
    }

    fn code() -> Code {
        Code {
            disassembly: "the loops\n".into(),
            protected_is_plain: Some(true),
        }
    }

    /// The committed docs/BENCHMARKS.md takes a run's blocks: one marker for each block, and
    /// only the blocks change.
    #[test]
    fn a_saved_run_fills_the_committed_report_between_its_markers_only() {
        let template = include_str!("../../docs/BENCHMARKS.md");
        let blocks = all_blocks(&saved_run(), &machine(), &code()).unwrap();
        let filled = markers::fill(template, &blocks).unwrap();
        assert_ne!(filled, template);
        assert_eq!(prose(&filled), prose(template));
        assert_eq!(markers::fill(&filled, &blocks).unwrap(), filled);
        for (name, text) in &blocks {
            if !text.is_empty() {
                assert!(
                    filled.contains(text.as_str()),
                    "block {name} is not in the report"
                );
            }
        }
        assert!(filled.contains("| Throughput rounds | 3 rounds of"));
        assert!(filled.contains("> This is a `--quick` run"));
    }
}
