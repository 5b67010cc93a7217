//! The registry's Prometheus and OpenMetrics text: the exact text (names and help escaped,
//! arrays as labelled series, cumulative and delta values), the same from C into a caller's
//! buffer (a short buffer takes nothing), and three parsers accepting it, whatever names the
//! registry was given: Prometheus' own (`promtool check metrics`) and the two of Python's
//! `prometheus_client` (its Prometheus text parser and its OpenMetrics parser, which rejects
//! a metric named twice and names that clash with a counter's `_total` and `_created`).
//! Without `promtool` on the PATH its check says so and passes, unless
//! `PCPU_REQUIRE_PROMTOOL=1` (as CI sets it, after installing Debian's `prometheus`); without
//! `python3` or its `prometheus_client` (`pip install prometheus-client`) the Python checks
//! do the same, unless `PCPU_REQUIRE_PY_PARSERS=1`.

use pcpu_counter::array::CounterArray;
use pcpu_counter::capi::*;
use pcpu_counter::registry::{Registry, RegistryError, Statistic};
use pcpu_counter::sim::capi::*;
use pcpu_counter::sim::Machine;
use std::io::Write;
use std::process::{Command, Stdio};

const EXPECTED_PROMETHEUS: &str = r#"# HELP net_rx_packets_total Packets received
# TYPE net_rx_packets_total counter
net_rx_packets_total 42
# HELP http_2xx_ok_total Answers "ok" \\ 2xx\nby code
# TYPE http_2xx_ok_total counter
http_2xx_ok_total{index="0"} 7
http_2xx_ok_total{index="1"} 0
http_2xx_ok_total{index="2"} 18446744073709551615
# HELP caf__total café
# TYPE caf__total counter
caf__total 3
"#;

const EXPECTED_OPENMETRICS: &str = r#"# TYPE net_rx_packets counter
# HELP net_rx_packets Packets received
net_rx_packets_total 42
# TYPE http_2xx_ok counter
# HELP http_2xx_ok Answers \"ok\" \\ 2xx\nby code
http_2xx_ok_total{index="0"} 7
http_2xx_ok_total{index="1"} 0
http_2xx_ok_total{index="2"} 18446744073709551615
# TYPE caf_ counter
# HELP caf_ café
caf__total 3
# EOF
"#;

/// What both Python parsers read in [`EXPECTED_PROMETHEUS`] and [`EXPECTED_OPENMETRICS`].
const READ_BY_PYTHON: &str = r#"family net_rx_packets counter 'Packets received'
  net_rx_packets_total{} 42
family http_2xx_ok counter 'Answers "ok" \\ 2xx\nby code'
  http_2xx_ok_total{index=0} 7
  http_2xx_ok_total{index=1} 0
  http_2xx_ok_total{index=2} 18446744073709551615
family caf_ counter 'café'
  caf__total{} 3
"#;

/// Runs `promtool check metrics` on `text`: `Some(output)` when it ran (and then it must have
/// accepted the text), `None` when there is no promtool and none is required.
fn promtool(text: &str) -> Option<String> {
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            let required = std::env::var("PCPU_REQUIRE_PROMTOOL").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "PCPU_REQUIRE_PROMTOOL=1 but promtool cannot run: {e}"
            );
            println!("promtool not found ({e}): the parser check is skipped (apt-get install prometheus)");
            return None;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool rejected:\n{text}\nit said: {said}"
    );
    Some(said)
}

/// Reads stdin with `prometheus_client`'s parser named by `argv[1]` and prints what it read:
/// `family <name> <type> <help>` for each family, then `  <sample>{<labels>} <value>` for each
/// of its samples. Exits with 3 when `prometheus_client` cannot be imported.
const PY_PARSE: &str = r#"
import sys
try:
    from prometheus_client.parser import text_string_to_metric_families as prometheus
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
except ImportError as e:
    print(e)
    sys.exit(3)
parse = {"prometheus": prometheus, "openmetrics": openmetrics}[sys.argv[1]]
for family in parse(sys.stdin.read()):
    print("family", family.name, family.type, repr(family.documentation))
    for s in family.samples:
        labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
        print(f"  {s.name}{{{labels}}} {s.value!r}")
"#;

/// What Python's `prometheus_client` reads in `text` with its `format` parser
/// ("prometheus" or "openmetrics"), as [`PY_PARSE`] prints it: `Some(reading)` when it ran
/// (and then it must have accepted the text), `None` when there is no `python3` or no
/// `prometheus_client` and none is required (`PCPU_REQUIRE_PY_PARSERS=1`).
fn python_parser(format: &str, text: &str) -> Option<String> {
    let required = std::env::var("PCPU_REQUIRE_PY_PARSERS").is_ok_and(|v| v == "1");
    let child = Command::new("python3")
        .args(["-c", PY_PARSE, format])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            assert!(
                !required,
                "PCPU_REQUIRE_PY_PARSERS=1 but python3 cannot run: {e}"
            );
            println!("python3 not found ({e}): the Python parser checks are skipped");
            return None;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    if out.status.code() == Some(3) {
        assert!(
            !required,
            "PCPU_REQUIRE_PY_PARSERS=1 but prometheus_client is missing: {}",
            stdout.trim_end()
        );
        println!(
            "{}: the Python parser checks are skipped (pip install prometheus-client)",
            stdout.trim_end()
        );
        return None;
    }
    assert!(
        out.status.success(),
        "Python's {format} parser rejected:\n{text}\nit said: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(stdout)
}

#[test]
fn the_registry_writes_the_exact_text_and_promtool_accepts_it() {
    let machine = Machine::new(3);
    let rx = machine.alloc().unwrap();
    let codes: CounterArray<'_, 3> = CounterArray::new(machine.zone()).unwrap();
    let cafe = machine.alloc().unwrap();
    let stats: Registry<'_, 4> = Registry::new();
    stats
        .register("net.rx.packets", "Packets received", &rx)
        .unwrap();
    stats
        .register("http.2xx:ok", "Answers \"ok\" \\ 2xx\nby code", &codes)
        .unwrap();
    stats.register("café", "", &cafe).unwrap();
    machine.run_on(2, || {
        rx.add(40);
        codes.add(0, 7);
        codes.add(2, -1);
        cafe.add(3);
    });
    machine.run_on(0, || rx.add(2));

    let mut buf = [0u64; 5];
    let values = stats.read_into(&mut buf).unwrap();
    let mut text = String::new();
    values.write_prometheus(&mut text).unwrap();
    assert_eq!(text, EXPECTED_PROMETHEUS);
    assert_eq!(values.to_string(), EXPECTED_PROMETHEUS, "Display");
    let mut om = String::new();
    values.write_openmetrics(&mut om).unwrap();
    assert_eq!(om, EXPECTED_OPENMETRICS);
    if let Some(said) = promtool(&text) {
        println!("promtool accepted the text: {said:?}");
    }
    if let Some(read) = python_parser("prometheus", &text) {
        assert_eq!(read, READ_BY_PYTHON);
    }
    if let Some(read) = python_parser("openmetrics", &om) {
        assert_eq!(read, READ_BY_PYTHON);
    }

    // Deltas: the first export takes everything, the second only what was added since.
    let mut delta = String::new();
    stats
        .fetch_and_zero_into(&mut buf)
        .unwrap()
        .write_prometheus(&mut delta)
        .unwrap();
    assert_eq!(delta, EXPECTED_PROMETHEUS);
    machine.run_on(1, || codes.add(1, 9));
    let mut delta = String::new();
    stats
        .fetch_and_zero_into(&mut buf)
        .unwrap()
        .write_prometheus(&mut delta)
        .unwrap();
    let samples: Vec<&str> = delta.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        samples,
        [
            "net_rx_packets_total 0",
            "http_2xx_ok_total{index=\"0\"} 0",
            "http_2xx_ok_total{index=\"1\"} 9",
            "http_2xx_ok_total{index=\"2\"} 0",
            "caf__total 0"
        ]
    );
    promtool(&delta);
    python_parser("prometheus", &delta);
}

/// A writer that fails after `room` bytes (a full buffer, a closed socket).
struct Short {
    text: String,
    room: usize,
}

impl std::fmt::Write for Short {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.text.len() + s.len() > self.room {
            return Err(std::fmt::Error);
        }
        self.text.push_str(s);
        Ok(())
    }
}

/// A delta export whose writer fails loses nothing: the deltas stay in the caller's buffer
/// and are written again, whole, to the next writer.
#[test]
fn a_failing_writer_loses_no_delta() {
    let machine = Machine::new(2);
    let c = machine.alloc().unwrap();
    let stats: Registry<'_, 2> = Registry::new();
    stats.register("c", "a counter", &c).unwrap();
    machine.run_on(1, || c.add(5));
    let mut buf = [0u64; 1];
    let values = stats.fetch_and_zero_into(&mut buf).unwrap();
    let mut short = Short {
        text: String::new(),
        room: 10,
    };
    assert!(values.write_prometheus(&mut short).is_err());
    let mut text = String::new();
    values.write_prometheus(&mut text).unwrap();
    assert!(text.ends_with("\nc_total 5\n"), "{text}");
    assert_eq!(c.fetch(), 0);
}

/// `pcpu_sysctl_export`: the exact text, the size check, and a short buffer that reads and
/// takes nothing (the deltas come whole in the next export that fits).
#[test]
fn c_export_into_a_buffer_loses_nothing_on_a_short_buffer() {
    assert_eq!(pcpu_sim_machine_new(4, 64), 0);
    let c = counter_u64_alloc(M_WAITOK);
    let mut a = [std::ptr::null_mut(); 2];
    assert_eq!(
        unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 2, M_WAITOK) },
        0
    );
    assert_eq!(pcpu_sim_bind(3), 0);
    unsafe {
        pcpu_counter_add(c, 1234);
        pcpu_counter_add(a[1], 5);
    }
    pcpu_sim_unbind();
    unsafe {
        assert_eq!(
            pcpu_sysctl_add_counter(c"tcp.rcvd".as_ptr(), c"segments \\ in".as_ptr(), c),
            0
        );
        assert_eq!(
            pcpu_sysctl_add_counter_array(
                c"tcp.drops".as_ptr(),
                c"by cause".as_ptr(),
                a.as_ptr(),
                2
            ),
            0
        );
    }
    let expected = "# HELP tcp_rcvd_total segments \\\\ in\n# TYPE tcp_rcvd_total counter\n\
                    tcp_rcvd_total 1234\n# HELP tcp_drops_total by cause\n\
                    # TYPE tcp_drops_total counter\ntcp_drops_total{index=\"0\"} 0\n\
                    tcp_drops_total{index=\"1\"} 5\n";
    // The size that always fits: every value with 20 digits, and the NUL.
    let bound = expected.len() + (20 - 4) + 2 * (20 - 1) + 1;
    let mut len = 0usize;
    assert_eq!(
        unsafe { pcpu_sysctl_export(std::ptr::null_mut(), &mut len, PCPU_EXPORT_DELTAS) },
        PCPU_ENOSPC
    );
    assert_eq!(len, bound);
    let mut buf = vec![0xffu8; bound];
    let mut len = expected.len() + 1; // enough for today's text, not for the bound
    assert_eq!(
        unsafe { pcpu_sysctl_export(buf.as_mut_ptr().cast(), &mut len, PCPU_EXPORT_DELTAS) },
        PCPU_ENOSPC
    );
    assert_eq!(len, bound);
    assert!(
        buf.iter().all(|&b| b == 0xff),
        "a refused export wrote the buffer"
    );
    assert_eq!(
        unsafe { counter_u64_fetch(c) },
        1234,
        "a refused export took a delta"
    );
    assert_eq!(
        unsafe { pcpu_sysctl_export(buf.as_mut_ptr().cast(), &mut len, PCPU_EXPORT_DELTAS) },
        0
    );
    assert_eq!(std::str::from_utf8(&buf[..len]).unwrap(), expected);
    assert_eq!(buf[len], 0);
    promtool(expected);
    python_parser("prometheus", expected);
    assert_eq!(
        unsafe { (counter_u64_fetch(c), counter_u64_fetch(a[1])) },
        (0, 0)
    );
    let mut len = bound;
    assert_eq!(
        unsafe { pcpu_sysctl_export(buf.as_mut_ptr().cast(), &mut len, PCPU_EXPORT_OPENMETRICS) },
        0
    );
    assert!(std::str::from_utf8(&buf[..len]).unwrap().starts_with(
        "# TYPE tcp_rcvd counter\n# HELP tcp_rcvd segments \\\\ in\ntcp_rcvd_total 0\n"
    ),);
    assert!(std::str::from_utf8(&buf[..len])
        .unwrap()
        .ends_with("\n# EOF\n"));
    python_parser("openmetrics", std::str::from_utf8(&buf[..len]).unwrap());
    for (bad_flags, bad_len) in [(4, bound), (0, 0)] {
        let mut len = bad_len;
        let rc = unsafe { pcpu_sysctl_export(buf.as_mut_ptr().cast(), &mut len, bad_flags) };
        assert_eq!(
            rc,
            if bad_flags == 4 {
                PCPU_EINVAL
            } else {
                PCPU_ENOSPC
            }
        );
    }
    assert_eq!(
        unsafe { pcpu_sysctl_export(std::ptr::null_mut(), &mut 5, 0) },
        PCPU_EINVAL
    );
    assert_eq!(
        unsafe { pcpu_sysctl_export(buf.as_mut_ptr().cast(), std::ptr::null_mut(), 0) },
        PCPU_EINVAL
    );
    let mut group = [0u64; 2];
    assert_eq!(
        unsafe { pcpu_counter_group_fetch(a[0], 2, group.as_mut_ptr()) },
        PCPU_OK
    );
    assert_eq!(group, [0, 0]);
    unsafe {
        assert_eq!(pcpu_sysctl_remove(c"tcp.rcvd".as_ptr()), 0);
        assert_eq!(pcpu_sysctl_remove(c"tcp.drops".as_ptr()), 0);
        counter_u64_array_free(a.as_mut_ptr(), 2);
        counter_u64_free(c);
    }
}

/// Whatever names come in, the registry takes those that export as a metric of their own and
/// refuses the others, so every export is one family per name taken, which promtool and both
/// Python parsers accept. The names: every one and two pieces of the issue's names and of
/// the characters and suffixes that make clashes (`a.c` and `a_c`, `9x` and `_9x`, `foo` and
/// `foo_total` or `foo_created`, `é`, `:`), registered in turn as a counter and an array.
/// (Not `a.b`, the issue's: promtool's style lint reads its `_b_` as an abbreviated unit,
/// and flags capitals as camelCase; those judge the names as the user chose them.)
#[test]
fn whatever_names_come_in_every_parser_reads_one_family_per_name_taken() {
    const PIECES: [&str; 12] = [
        "a", "a.c", "a_c", "9x", "_9x", "foo", "_total", "_created", ".created", "é", ":", "x",
    ];
    let names: Vec<String> = PIECES
        .iter()
        .map(|p| p.to_string())
        .chain(
            PIECES
                .iter()
                .flat_map(|p| PIECES.iter().map(move |q| format!("{p}{q}"))),
        )
        .collect();
    assert_eq!(names.len(), 156);
    let machine = Machine::new(2);
    let c = machine.alloc().unwrap();
    let arr: CounterArray<'_, 2> = CounterArray::new(machine.zone()).unwrap();
    machine.run_on(1, || {
        c.add(7);
        arr.add(1, 5);
    });
    let stats: Registry<'_, 160> = Registry::new();
    let mut taken: Vec<&str> = Vec::new();
    let (mut bad, mut clashes) = (0, 0);
    for (i, name) in names.iter().enumerate() {
        let stat: &dyn Statistic = if i % 2 == 0 { &c } else { &arr };
        match stats.register(name, "", stat) {
            Ok(()) => taken.push(name),
            Err(RegistryError::BadName { name: refused }) => {
                assert_eq!(refused, name);
                assert!(!name.starts_with(|c: char| c.is_ascii_alphabetic()));
                bad += 1;
            }
            Err(RegistryError::Clash {
                name: refused,
                registered,
            }) => {
                assert_eq!(refused, name);
                assert!(
                    taken.contains(&registered),
                    "{name:?} clashed with {registered:?}"
                );
                clashes += 1;
            }
            Err(e) => panic!("{name:?}: {e}"),
        }
    }
    assert_eq!((bad, clashes), (91, 33));
    assert_eq!(
        taken,
        [
            "a", "a.c", "foo", "x", "aa", "aa.c", "a9x", "a_9x", "afoo", "aé", "ax", "a.ca",
            "a.ca.c", "a.c9x", "a.c_9x", "a.cfoo", "a.cé", "a.cx", "fooa", "fooa.c", "foo9x",
            "foo_9x", "foofoo", "fooé", "foox", "xa", "xa.c", "x9x", "x_9x", "xfoo", "xé", "xx"
        ]
    );
    let mut buf = [0u64; 320];
    let values = stats.read_into(&mut buf).unwrap();
    let (mut prometheus, mut openmetrics) = (String::new(), String::new());
    values.write_prometheus(&mut prometheus).unwrap();
    values.write_openmetrics(&mut openmetrics).unwrap();
    promtool(&prometheus);
    for (format, text) in [("prometheus", &prometheus), ("openmetrics", &openmetrics)] {
        let Some(read) = python_parser(format, text) else {
            continue;
        };
        let families: Vec<&str> = read.lines().filter(|l| l.starts_with("family ")).collect();
        let mut distinct = families.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(
            (families.len(), distinct.len()),
            (taken.len(), taken.len()),
            "{format}: one family per name taken"
        );
        let samples: Vec<&str> = read.lines().filter(|l| l.starts_with("  ")).collect();
        assert_eq!(samples.len(), values.values().len(), "{format}");
    }
}

/// The `+Inf` bucket and `_count` of one histogram family in Prometheus text, and whether
/// its buckets rise.
fn inf_and_count(text: &str, name: &str) -> (u64, u64, bool) {
    let value = |line: &str| line.rsplit(' ').next().unwrap().parse::<u64>().unwrap();
    let buckets: Vec<u64> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{name}_bucket{{")))
        .map(value)
        .collect();
    let inf = text
        .lines()
        .find(|l| l.starts_with(&format!("{name}_bucket{{le=\"+Inf\"}}")))
        .map(value)
        .unwrap();
    let count = text
        .lines()
        .find(|l| l.starts_with(&format!("{name}_count ")))
        .map(value)
        .unwrap();
    (inf, count, buckets.windows(2).all(|w| w[0] <= w[1]))
}

/// A histogram written while three CPUs observe into it: every scrape's `+Inf` bucket is
/// its `_count` and its buckets are cumulative, and promtool and both Python parsers read
/// each of a few of them back as one histogram family with its samples.
#[test]
fn histogram_scrapes_while_cpus_observe_are_consistent_and_parsed() {
    use pcpu_counter::export::Format;
    use pcpu_counter::histogram::{Buckets, Histogram};
    use std::sync::atomic::{AtomicBool, Ordering};
    const RULE: Buckets = Buckets::log_linear(1, 4, 12); // 4, 6, 8, 12, 16, ... 192..255
    let machine = Machine::new(4);
    let h = Histogram::new(machine.zone(), RULE).unwrap();
    /// Stops the observers when dropped, also when an assertion unwinds.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let _stop = Stop(&stop);
        for cpu in 1..4 {
            let (machine, h, stop) = (&machine, &h, &stop);
            s.spawn(move || {
                machine.run_on(cpu, || {
                    let mut k = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        h.observe((k * 37 + cpu as u64) % 300);
                        k += 1;
                    }
                })
            });
        }
        let scrapes = (0..2_000).map(|i| {
            let (mut out, mut text) = ([0; RULE.slots()], String::new());
            let format = [Format::Prometheus, Format::OpenMetrics][i % 2];
            let read = h.read(&mut out);
            read.write(&mut text, format, "io_size", "I/O sizes")
                .unwrap();
            if format == Format::OpenMetrics {
                text.push_str("# EOF\n");
            }
            (format, text)
        });
        let mut parsed = 0;
        for (i, (format, text)) in scrapes.enumerate() {
            let (inf, count, rising) = inf_and_count(&text, "io_size");
            assert!(inf == count && rising, "scrape {i}:\n{text}");
            if i % 400 < 2 {
                if format == Format::Prometheus {
                    promtool(&text);
                }
                let name = ["prometheus", "openmetrics"][i % 2];
                if let Some(read) = python_parser(name, &text) {
                    assert!(
                        read.starts_with("family io_size histogram 'I/O sizes'\n"),
                        "{read}"
                    );
                    // The underflow (le 3), 12 buckets, the overflow, _sum and _count.
                    assert_eq!(read.lines().count(), 1 + 14 + 2, "{read}");
                    parsed += 1;
                }
            }
        }
        println!("2000 scrapes consistent, {parsed} read back by Python");
    });
}
