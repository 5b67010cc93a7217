//! A Linux program that serves its counters to Prometheus over HTTP (std::net only): 4
//! simulated CPUs count packets, bytes and errors by kind, and every request for `/metrics`
//! gets the registry in the Prometheus text format, read as one group snapshot.
//!
//! `cargo run --release --example metrics [-- ADDR [REQUESTS]]`
//!
//! - `ADDR`: where to listen (default `127.0.0.1:9464`; port 0 picks a free one). The first
//!   line printed is `listening on http://<addr>/metrics`.
//! - `REQUESTS`: exit after that many requests (default: serve for ever).
//!
//! `GET /metrics` is cumulative; `GET /metrics?deltas` returns the counts since the last
//! such request (the registry's lossless group `fetch_and_zero`); a request whose `Accept`
//! names `application/openmetrics-text` gets OpenMetrics 1.0 instead.

use pcpu_counter::array::CounterArray;
use pcpu_counter::registry::Registry;
use pcpu_counter::sim::Machine;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};

const CPUS: usize = 4;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:9464".into());
    let requests: Option<u64> = args.next().map(|n| n.parse().expect("REQUESTS: a number"));

    let machine = Machine::new(CPUS);
    let packets = machine.alloc().expect("a fresh zone has room");
    let bytes = machine.alloc().expect("a fresh zone has room");
    let errors: CounterArray<'_, 3> = CounterArray::new(machine.zone()).expect("room");
    let stats: Registry<'_, 8> = Registry::new();
    stats
        .register("net.rx.packets", "Packets received", &packets)
        .expect("a new name");
    stats
        .register("net.rx.bytes", "Bytes received, \"on the wire\"", &bytes)
        .expect("a new name");
    stats
        .register(
            "net.rx.errors",
            "Receive errors by kind\n(0 crc, 1 short, 2 long)",
            &errors,
        )
        .expect("a new name");

    let listener = TcpListener::bind(&addr)?;
    println!("listening on http://{}/metrics", listener.local_addr()?);
    std::io::stdout().flush()?;

    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for cpu in 0..CPUS {
            let (machine, packets, bytes, errors, stop) =
                (&machine, &packets, &bytes, &errors, &stop);
            s.spawn(move || {
                machine.run_on(cpu, || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        packets.inc();
                        bytes.add(64 + (n % 1400) as i64);
                        if n.is_multiple_of(1000) {
                            errors.inc((n / 1000 % 3) as usize);
                        }
                        n += 1;
                        if n.is_multiple_of(4096) {
                            std::thread::yield_now();
                        }
                    }
                })
            });
        }
        let mut buf = vec![0u64; 16];
        for (served, stream) in listener.incoming().enumerate() {
            if let Err(e) = stream.and_then(|s| serve(s, &stats, &mut buf)) {
                eprintln!("metrics: request failed: {e}");
            }
            if requests.is_some_and(|n| served as u64 + 1 >= n) {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    Ok(())
}

/// Answers one HTTP/1.x request on `stream`.
fn serve(stream: TcpStream, stats: &Registry<'_, 8>, buf: &mut Vec<u64>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    let mut openmetrics = false;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        let lower = header.to_ascii_lowercase();
        openmetrics |=
            lower.starts_with("accept:") && lower.contains("application/openmetrics-text");
    }
    let path = request.split_whitespace().nth(1).unwrap_or("");
    let mut out = stream;
    if path != "/metrics" && path != "/metrics?deltas" {
        return out.write_all(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    }
    buf.resize(stats.values_len(), 0);
    let values = if path.ends_with("?deltas") {
        stats.fetch_and_zero_into(buf)
    } else {
        stats.read_into(buf)
    }
    .expect("the buffer was sized for the registry, which this program does not change");
    let mut body = String::new();
    let content_type = if openmetrics {
        values
            .write_openmetrics(&mut body)
            .expect("a String takes any text");
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    } else {
        values
            .write_prometheus(&mut body)
            .expect("a String takes any text");
        "text/plain; version=0.0.4; charset=utf-8"
    };
    write!(
        out,
        "HTTP/1.0 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}
