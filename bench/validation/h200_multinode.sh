#!/usr/bin/env bash
# Needs 2 GPUs. Two single-GPU "nodes" on one machine, each with its own
# memrec record into its own database (CUDA_VISIBLE_DEVICES=0 and =1, --host
# node0 / node1), running torchrun --nnodes 2 --node_rank 0/1 over a localhost
# rendezvous: a small DDP job (bench/validation/ddp_probe.py) that logs PyTorch's own
# allocator readings per step per rank and sends the same through the probe.
# The two databases are merged; bench/validation/check_multinode.py checks every rank's
# per-step figures in the merged run against the rank's own readings.
# Then the scrape cost: memrec record --metrics-addr sampling at 10 ms (8
# simulated GPUs, and the 2 real ones through NVML), scraped every 100 ms, against
# the same recording unscraped: missed ticks and scrape answer times.
#   bash bench/validation/h200_multinode.sh      (memrec at ./memrec, results in $OUT)
set -u
BIN=${MEMREC:-./memrec}; OUT=${OUT:-/tmp/memrec-multinode}
mkdir -p "$OUT"; rm -f "$OUT"/*.db
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
export NCCL_P2P_DISABLE=1 NCCL_NVLS_ENABLE=0 OMP_NUM_THREADS=2 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
echo "== two nodes"
node() { # node RANK
  CUDA_VISIBLE_DEVICES=$1 $BIN record --db "$OUT/node$1.db" --name node$1 --host node$1 --gpus $1 --interval 10ms -- \
    torchrun --nnodes 2 --node_rank $1 --nproc_per_node 1 --master_addr 127.0.0.1 --master_port 29517 --rdzv-id mnjob \
    bench/validation/ddp_probe.py --readings "$OUT/rank$1.jsonl" > "$OUT/node$1.log" 2>&1
}
node 0 & p0=$!
node 1 & p1=$!
wait $p0; r0=$?; wait $p1; r1=$?
echo "node0 exit $r0, node1 exit $r1"
grep -hE "ticks|samples|marks|database|command" "$OUT/node0.log" "$OUT/node1.log"
if [ $r0 -ne 0 ] || [ $r1 -ne 0 ]; then tail -n 30 "$OUT/node0.log" "$OUT/node1.log"; fi
$BIN merge "$OUT/job.db" "$OUT/node0.db" "$OUT/node1.db"
$BIN --db "$OUT/job.db" export mnjob -o "$OUT/merged.jsonl"
$BIN --db "$OUT/job.db" analyze mnjob --json > "$OUT/analysis.json"
$BIN --db "$OUT/job.db" analyze mnjob | head -30
python3 bench/validation/check_multinode.py "$OUT/merged.jsonl" "$OUT/analysis.json" "$OUT/rank0.jsonl" "$OUT/rank1.jsonl"
echo "multinode: $([ $? -eq 0 ] && echo PASS || echo FAIL)"
gzip -f "$OUT/merged.jsonl"
rm -f "$OUT"/*.db

echo "== scrape cost (scrape every 100 ms, sampling every 10 ms, 30 s each)"
scrape() { # URL SECONDS
  python3 - "$1" "$2" <<'PY'
import sys, time, urllib.request
url, secs = sys.argv[1], float(sys.argv[2])
for _ in range(200):
    try:
        urllib.request.urlopen(url, timeout=1).read(); break
    except Exception:
        time.sleep(0.05)
lat, fail, size = [], 0, 0
end = time.monotonic() + secs
nxt = time.monotonic()
while time.monotonic() < end:
    t0 = time.perf_counter()
    try:
        size = len(urllib.request.urlopen(url, timeout=1).read()); lat.append(time.perf_counter() - t0)
    except Exception:
        fail += 1
    nxt += 0.1
    time.sleep(max(0, nxt - time.monotonic()))
lat.sort()
q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))] * 1e3
print(f"  scrapes {len(lat)} every 100 ms, {fail} failed; answer p50 {q(0.5):.2f} ms p99 {q(0.99):.2f} ms max {lat[-1]*1e3:.2f} ms; {size} bytes")
PY
}
for src in "--source sim --sim-gpus 8" "--gpus 0,1 --procs"; do
  echo "-- $src, not scraped"
  $BIN record --db "$OUT/s.db" $src --interval 10ms --duration 30s 2>&1 | grep -E "ticks|recorder "
  rm -f "$OUT/s.db"
  echo "-- $src, scraped"
  $BIN record --db "$OUT/s.db" $src --interval 10ms --duration 30s --metrics-addr 127.0.0.1:9411 > "$OUT/scraped.log" 2>&1 &
  rp=$!
  scrape http://127.0.0.1:9411/metrics 28
  wait $rp
  grep -E "ticks|recorder " "$OUT/scraped.log"
  rm -f "$OUT/s.db"
done
