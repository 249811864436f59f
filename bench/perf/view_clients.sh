#!/usr/bin/env bash
# memrec view against clients that never read: CLIENTS (default 200) connections
# each ask for the largest window (64 lines of every sample of a 3-minute run at
# 100 Hz, about 24 MB of JSON) and never read it. The view process's RSS is
# sampled every 0.2 s for HOLD seconds (default 20): its RSS before the clients,
# its peak, and whether it still answers /api/runs while they hold on. Run for
# the binary built from REF (default: the work tree) and, with BASE=<commit>,
# the same against that commit, in the same minute. BASE's run is capped at
# AS_MB (default 3072) of address space so that a server without bounds fails
# with "out of memory" rather than take the machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
clients=${CLIENTS:-200} hold=${HOLD:-20} as_mb=${AS_MB:-3072}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
go run ./bench/tools/gentrace -duration 3m -gpus 1 -db "$tmp/v.db" >/dev/null
go build -o "$tmp/memrec-head" ./cmd/memrec
if [ -n "${BASE:-}" ]; then
  git worktree add -q --detach "$tmp/base" "$BASE"
  (cd "$tmp/base" && go build -o "$tmp/memrec-base" ./cmd/memrec)
  git worktree remove --force "$tmp/base"
fi

measure() { # binary label [ulimit-v-kb]
  local bin=$1 label=$2 port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  ( [ -n "${3:-}" ] && ulimit -v "$3"; exec "$bin" --db "$tmp/v.db" view --addr "127.0.0.1:$port" gen ) >"$tmp/$label.out" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/api/runs" >/dev/null && break; sleep 0.1; done
  local before; before=$(awk '/VmRSS/{print $2}' /proc/$pid/status)
  python3 - "$port" "$clients" "$hold" "$pid" "$label" <<'PY' &
import socket, sys, time
port, n, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
q = "/api/window?run=gen&from=0&to=180&points=10000" + "&line=gpu0.used" * 64
socks = []
for _ in range(n):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET {q} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    socks.append(s)
time.sleep(hold)
PY
  local cl=$! peak=0 answered=0 asked=0 rss
  local end=$((SECONDS + hold))
  while [ $SECONDS -lt $end ] && kill -0 $pid 2>/dev/null; do
    rss=$(awk '/VmRSS/{print $2}' /proc/$pid/status 2>/dev/null || echo 0)
    [ "${rss:-0}" -gt $peak ] && peak=$rss
    asked=$((asked + 1))
    curl -fs -m 2 "http://127.0.0.1:$port/api/runs" >/dev/null && answered=$((answered + 1))
    sleep 0.2
  done
  local state=running
  kill -0 $pid 2>/dev/null || state="exited ($(grep -m1 -o 'fatal error: [a-z ]*' "$tmp/$label.out" || echo 'see its log'))"
  printf '%s: %d clients for %ds: RSS before %.1f MiB, peak %.1f MiB; /api/runs answered %d of %d times; %s\n' \
    "$label" "$clients" "$hold" "$(echo "$before/1024" | bc -l)" "$(echo "$peak/1024" | bc -l)" "$answered" "$asked" "$state"
  kill $pid $cl 2>/dev/null || true; wait $pid $cl 2>/dev/null || true
}
[ -n "${BASE:-}" ] && measure "$tmp/memrec-base" "base $BASE" $((as_mb * 1024))
measure "$tmp/memrec-head" "head"
