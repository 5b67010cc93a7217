#!/usr/bin/env bash
# The metrics example over HTTP, checked by Prometheus' own parser and Python's: starts
# `examples/metrics.rs` on a free local port, fetches /metrics (cumulative), /metrics?deltas
# twice and the OpenMetrics form with plain bash (/dev/tcp, no curl), and has
# `promtool check metrics` (Debian's `prometheus`, installed by .ci/run) and the Prometheus
# text parser of Python's `prometheus_client` accept each Prometheus-format body, and its
# OpenMetrics parser the OpenMetrics body. Installs `prometheus_client` from PyPI when it is
# missing. Run from .ci/run's examples step; about 10 s after the build.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v promtool >/dev/null || { echo "FAIL: promtool missing (apt-get install prometheus)"; exit 1; }
# PyPI's prometheus-client; a Debian python3 (externally managed, PEP 668) needs the flag.
if ! python3 -c 'import prometheus_client' 2>/dev/null; then
    python3 -m pip install --quiet prometheus-client \
        || python3 -m pip install --quiet --break-system-packages prometheus-client
fi

# Parses stdin with prometheus_client's parser $1 (prometheus or openmetrics); fails if it
# rejects the text or reads no family.
pyparse() {
    python3 -c '
import sys
from prometheus_client.parser import text_string_to_metric_families as prometheus
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
parse = {"prometheus": prometheus, "openmetrics": openmetrics}[sys.argv[1]]
families = list(parse(sys.stdin.read()))
assert families, "no metric family"
print(len(families), "families")
' "$1"
}

cargo build --release --example metrics
log=$(mktemp)
target/release/examples/metrics 127.0.0.1:0 4 >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 100); do
    grep -q '^listening on' "$log" && break
    sleep 0.1
done
addr=$(sed -n 's|^listening on http://\(.*\)/metrics$|\1|p' "$log")
[ -n "$addr" ] || { echo "FAIL: the example did not say where it listens"; cat "$log"; exit 1; }
host=${addr%:*} port=${addr##*:}

# GET $1 with optional Accept header $2; prints the body, fails unless the status is 200.
get() {
    exec 3<>"/dev/tcp/$host/$port"
    printf 'GET %s HTTP/1.0\r\nHost: %s\r\n%s\r\n' "$1" "$addr" "${2:+Accept: $2$'\r\n'}" >&3
    local response
    response=$(cat <&3)
    exec 3<&-
    grep -q '^HTTP/1.0 200 OK' <<<"$response" || { echo "FAIL: GET $1: ${response%%$'\r'*}" >&2; return 1; }
    sed '1,/^\r$/d' <<<"$response"
}

for path in /metrics '/metrics?deltas' '/metrics?deltas'; do
    body=$(get "$path")
    grep -q '^net_rx_packets_total [1-9]' <<<"$body" || { echo "FAIL: $path has no packets"; echo "$body"; exit 1; }
    promtool check metrics <<<"$body" || { echo "FAIL: promtool rejected $path:"; echo "$body"; exit 1; }
    said=$(pyparse prometheus <<<"$body") || { echo "FAIL: prometheus_client rejected $path:"; echo "$body"; exit 1; }
    echo "promtool and prometheus_client ($said) accepted GET $path ($(grep -c '^net_rx' <<<"$body") series)"
done
body=$(get /metrics 'application/openmetrics-text; version=1.0.0')
[ "$(tail -n 1 <<<"$body")" = "# EOF" ] || { echo "FAIL: OpenMetrics body without # EOF"; echo "$body"; exit 1; }
said=$(pyparse openmetrics <<<"$body") || { echo "FAIL: the OpenMetrics parser rejected:"; echo "$body"; exit 1; }
echo "prometheus_client's OpenMetrics parser accepted the OpenMetrics body ($said)"
wait "$pid"
echo "metrics example: ok"
