#!/usr/bin/env bash
# Speed and size of the exports and of the report page on a generated run of
# 8 GPUs at 100 Hz for 10 minutes (bench/tools/gentrace, about 1 M lines):
# TensorBoard and CSV export times, the page's size, and how long after
# navigation the page's charts are interactive in headless Chromium (no
# network). Prints medians of RUNS rounds (default 5).
#
#   bash bench/perf/interop.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${RUNS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/memrec" ./cmd/memrec
go run ./bench/tools/gentrace -duration 10m -name gen -db "$tmp/m.db" 2>/dev/null
m() { "$tmp/memrec" --db "$tmp/m.db" "$@"; }
. bench/lib.sh
timed() { # timed FILE CMD...: append the command's wall and CPU seconds to FILE
  local f=$1; shift
  /usr/bin/time -f "%e %U %S" -o "$tmp/one" "$@" > /dev/null 2>&1
  awk '{print $1, $2 + $3}' "$tmp/one" >> "$f"
}
: > "$tmp/tb.t"; : > "$tmp/csv.t"
for i in $(seq "$rounds"); do
  rm -rf "$tmp/tb"
  timed "$tmp/tb.t" "$tmp/memrec" --db "$tmp/m.db" export gen --format tensorboard -o "$tmp/tb"
  timed "$tmp/csv.t" "$tmp/memrec" --db "$tmp/m.db" export gen --format csv -o "$tmp/gen.csv"
done
printf 'tensorboard export   median %.2f s (CPU %.2f s); event file %d bytes (%d rounds)\n' \
  "$(cut -d' ' -f1 "$tmp/tb.t" | median)" "$(cut -d' ' -f2 "$tmp/tb.t" | median)" "$(stat -c %s "$tmp"/tb/events.out.tfevents.*)" "$rounds"
printf 'csv export           median %.2f s (CPU %.2f s); %d rows, %d bytes\n' "$(cut -d' ' -f1 "$tmp/csv.t" | median)" "$(cut -d' ' -f2 "$tmp/csv.t" | median)" \
  "$(( $(wc -l < "$tmp/gen.csv") - 1 ))" "$(stat -c %s "$tmp/gen.csv")"

m report gen -o "$tmp/rep" > /dev/null
page=$tmp/rep/index.html
printf 'report page          %d bytes (%.2f MB)\n' "$(stat -c %s "$page")" "$(echo "$(stat -c %s "$page") / 1000000" | bc -l)"
# Interactive: the page's script builds every chart while the page loads and
# notes performance.now() (ms since navigation) when the last is drawn.
sed 's|</body>|<script>addEventListener("load", function () { document.body.setAttribute("data-ready-ms", String(window.memrecReadyMs)); });</script></body>|' \
  "$page" > "$tmp/rep/probe.html"
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome)
: > "$tmp/ready.t"; : > "$tmp/load.t"
for i in $(seq "$rounds"); do
  s=$(date +%s.%N)
  "$browser" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$tmp/profile" \
    --proxy-server=127.0.0.1:9 --host-resolver-rules='MAP * ~NOTFOUND' --window-size=1280,2000 \
    --dump-dom "file://$tmp/rep/probe.html" 2>/dev/null | grep -o 'data-ready-ms="[0-9.]*"' | grep -o '[0-9.]*' >> "$tmp/ready.t"
  e=$(date +%s.%N)
  echo "$e - $s" | bc -l >> "$tmp/load.t"
done
printf 'page interactive     median %.0f ms after navigation (8 charts drawn); whole browser run %.2f s (%d rounds)\n' \
  "$(median < "$tmp/ready.t")" "$(median < "$tmp/load.t")" "$rounds"
