//! The registry's Prometheus and OpenMetrics text: the exact text (names and help escaped,
//! arrays as labelled series, cumulative and delta values), the same from C into a caller's
//! buffer (a short buffer takes nothing), and Prometheus' own parser (`promtool check
//! metrics`) accepting it. Without `promtool` on the PATH that check says so and passes,
//! unless `PCPU_REQUIRE_PROMTOOL=1` (as CI sets it, after installing Debian's `prometheus`).

use pcpu_counter::array::CounterArray;
use pcpu_counter::capi::*;
use pcpu_counter::registry::Registry;
use pcpu_counter::sim::capi::*;
use pcpu_counter::sim::Machine;
use std::io::Write;
use std::process::{Command, Stdio};

const EXPECTED_PROMETHEUS: &str = r#"# HELP net_rx_packets_total Packets received
# TYPE net_rx_packets_total counter
net_rx_packets_total 42
# HELP _2xx_ok_total Answers "ok" \\ 2xx\nby code
# TYPE _2xx_ok_total counter
_2xx_ok_total{index="0"} 7
_2xx_ok_total{index="1"} 0
_2xx_ok_total{index="2"} 18446744073709551615
# HELP caf__total café
# TYPE caf__total counter
caf__total 3
"#;

const EXPECTED_OPENMETRICS: &str = r#"# TYPE net_rx_packets counter
# HELP net_rx_packets Packets received
net_rx_packets_total 42
# TYPE _2xx_ok counter
# HELP _2xx_ok Answers \"ok\" \\ 2xx\nby code
_2xx_ok_total{index="0"} 7
_2xx_ok_total{index="1"} 0
_2xx_ok_total{index="2"} 18446744073709551615
# TYPE caf_ counter
# HELP caf_ café
caf__total 3
# EOF
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
        .register("2xx:ok", "Answers \"ok\" \\ 2xx\nby code", &codes)
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
            "_2xx_ok_total{index=\"0\"} 0",
            "_2xx_ok_total{index=\"1\"} 9",
            "_2xx_ok_total{index=\"2\"} 0",
            "caf__total 0"
        ]
    );
    promtool(&delta);
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
