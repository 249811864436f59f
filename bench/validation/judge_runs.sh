#!/usr/bin/env bash
# Fixtures of memrec's growth rule, from one H200 GPU. About 2 minutes
# (SECONDS_EACH=35 per recorded job; PARTS="snapshot reserved" picks parts).
#
#   bash bench/validation/judge_runs.sh OUT     # ./memrec built from main, run from the repo root
#
# Writes into OUT:
#   snap-judge-leak.pickle.gz   PyTorch memory snapshot (history "all", Python
#                               stacks) of an MLP + Adam whose leak is allocated
#                               two calls below the loop, 512 000 B a step for
#                               60 steps; the first step's gradients and Adam
#                               state are in the same trace (snapshot.json: facts)
#   reserved-off.jsonl.gz       memrec recording of a job of many block sizes
#                               (variable sequence lengths whose maximum grows,
#                               prefetched batches of random sizes),
#                               expandable_segments off
#   reserved-on.jsonl.gz        the same job with expandable_segments:True
#   *.analyze.txt/json, *.sites.txt  what this memrec says of them
# PASS/FAIL lines check the jobs did what they claim (from torch's own figures).
set -u
BIN=${MEMREC:-./memrec}
OUT=${1:?usage: judge_runs.sh OUT}
mkdir -p "$OUT"
W=$(mktemp -d /dev/shm/memrec-judge.XXXXXX)
export MEMREC_DB=$W/runs.db PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
J=bench/validation/judge_jobs.py
start=$(date +%s)

PARTS=${PARTS:-snapshot reserved}
case " $PARTS " in *" snapshot "*)
echo "== snapshot: leak two calls below the loop, warm-up in the trace"
python3 $J snapshot --steps 60 --pickle "$W/snap.pickle" --out "$OUT/snapshot.json" > "$OUT/snapshot.log" 2>&1
echo "snapshot job: exit $?"
gzip -9 -c "$W/snap.pickle" > "$OUT/snap-judge-leak.pickle.gz"
$BIN import --name snap "$OUT/snap-judge-leak.pickle.gz" > "$OUT/snapshot.import.txt" 2>&1
$BIN sites snap > "$OUT/snapshot.sites.txt" 2>&1
;; esac

case " $PARTS " in *" reserved "*) modes="off on";; *) modes="";; esac
for mode in $modes; do
  echo "== reserved, expandable_segments $mode"
  if [ $mode = on ]; then export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; else unset PYTORCH_CUDA_ALLOC_CONF; fi
  $BIN record --name reserved-$mode --gpus 0 --tag alloc_conf=${PYTORCH_CUDA_ALLOC_CONF:-default} -- \
    python3 $J reserved --seconds ${SECONDS_EACH:-35} --out "$OUT/reserved-$mode.json" > "$OUT/reserved-$mode.log" 2>&1
  echo "reserved-$mode: exit $?"
  $BIN export reserved-$mode | gzip -9 > "$OUT/reserved-$mode.jsonl.gz"
  $BIN analyze reserved-$mode > "$OUT/reserved-$mode.analyze.txt" 2>&1
  $BIN analyze --json reserved-$mode > "$OUT/reserved-$mode.analyze.json" 2>&1
done
unset PYTORCH_CUDA_ALLOC_CONF

python3 - "$OUT" <<'PY'
import gzip, json, os, sys
out = sys.argv[1]
def ok(name, cond, what):
    print(("PASS" if cond else "FAIL"), name, what)
try:
    if not os.path.exists(os.path.join(out, "snapshot.json")):
        raise FileNotFoundError("snapshot part not run")
    s = json.load(open(os.path.join(out, "snapshot.json")))
    size = os.path.getsize(os.path.join(out, "snap-judge-leak.pickle.gz"))
    ok("snapshot", s["steps"] == 60 and size < 8 << 20,
       f"{s['steps']} steps, store() at {s['file']}:{s['store_line']}, {s['leak_bytes_per_step']} B/step, "
       f"params {s['param_bytes']} B, pickle.gz {size} B")
except Exception as e:
    ok("snapshot", False, repr(e))
for mode in ("off", "on"):
    try:
        r = json.load(open(os.path.join(out, f"reserved-{mode}.json")))
        e = r["every20"]
        q = e[len(e) // 4]
        last = e[-1]
        ok(f"reserved-{mode}", len(e) > 8,
           f"{r['steps']} steps ({r['alloc_conf'] or 'default'}): reserved {q[2]} B at step {q[0]} -> {last[2]} B at step {last[0]}; "
           f"allocated {q[1]} -> {last[1]} B; max allocated {q[3]} -> {last[3]} B")
    except Exception as e:
        ok(f"reserved-{mode}", False, repr(e))
PY
echo "ran in $(( $(date +%s) - start )) s"
du -sh "$OUT"
rm -rf "$W"
