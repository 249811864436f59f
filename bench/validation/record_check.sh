#!/usr/bin/env bash
# memrec recording at 1 ms on one GPU while a real training job runs on it,
# against the bare C loop (bench/tools/cwake) in the same run, and the size
# of the file written live against the same run exported and imported.
#
#   bash bench/validation/record_check.sh OUTDIR        # about 100 s; needs ./memrec and gcc
#
# Rounds alternate C loop and memrec, ROUNDS (default 2) of SECS (default 15)
# seconds each, while examples/train.py trains on GPU 0; both read the
# device's memory and its processes at every tick (cwake v2procs, memrec
# --procs). A tick is late for both when it starts more than one interval
# after its time (memrec counts it missed). Prints medians and PASS/FAIL:
#   on time     memrec ≥ 99.5 % of ticks
#   CPU         memrec ≤ 1.1 × the C loop's % of one core
#   live size   the live file ≤ 1.1 × the imported file of the same run
# Everything goes to OUTDIR (logs, rounds.txt, summary.txt; the databases
# are deleted at the end, their sizes kept in sizes.txt).
set -u
OUT=${1:?usage: record_check.sh OUTDIR}
BIN=${MEMREC:-./memrec}
SECS=${SECS:-15}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
: > "$OUT/rounds.txt"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > "$OUT/info.txt" 2>&1

cwake=$OUT/cwake
if ! gcc -O2 -o "$cwake" bench/tools/cwake/cwake.c -ldl 2> "$OUT/gcc.txt"; then
  echo "FAIL cwake: gcc could not build bench/tools/cwake/cwake.c (see gcc.txt)"
  cwake=
fi

python3 examples/train.py --epochs 1000 --steps 1000000 --seconds $((ROUNDS * 2 * (SECS + 3) + 20)) \
  > "$OUT/train.txt" 2>&1 &
train=$!
sleep 12 # CUDA context, first steps
if ! kill -0 $train 2>/dev/null; then
  echo "FAIL training job did not start (see train.txt)"
  exit 1
fi

for r in $(seq "$ROUNDS"); do
  if [[ -n $cwake ]]; then
    o=$("$cwake" 1000 "$SECS" v2procs 2>&1)
    echo "$o" >> "$OUT/cwake-$r.txt"
    # "C v2procs  1000us N ticks L% late C% of one core"
    echo "c $r $(awk '{for (i = 1; i <= NF; i++) { if ($i == "late") l = $(i-1); if ($i == "of") c = $(i-1) } } END { gsub("%", "", l); gsub("%", "", c); print 100 - l, c }' <<<"$o")" >> "$OUT/rounds.txt"
  fi
  db=$OUT/live-$r.db
  rm -f "$db"
  "$BIN" --db "$db" record --name "rec1ms-$r" --interval 1ms --gpus 0 --procs --duration "${SECS}s" \
    > "$OUT/record-$r.txt" 2>&1
  on=$(grep -oE '\([0-9.]+% on time' "$OUT/record-$r.txt" | grep -oE '[0-9.]+' | head -1)
  cpu=$(grep -oE 'recorder +[0-9.]+%' "$OUT/record-$r.txt" | grep -oE '[0-9.]+' | head -1)
  echo "memrec $r ${on:-nan} ${cpu:-nan}" >> "$OUT/rounds.txt"
  # The same run exported and imported into a fresh file.
  live=$(stat -c %s "$db" 2>/dev/null || echo 0)
  imp=$OUT/imported-$r.db
  rm -f "$imp"
  "$BIN" --db "$db" export "rec1ms-$r" 2> "$OUT/export-$r.txt" | "$BIN" --db "$imp" import - > "$OUT/import-$r.txt" 2>&1
  echo "$r $live $(stat -c %s "$imp" 2>/dev/null || echo 0) $("$BIN" --db "$db" runs 2>/dev/null | grep -c "rec1ms-$r")" >> "$OUT/sizes.txt"
  rm -f "$db" "$imp"
done
kill $train 2>/dev/null
wait $train 2>/dev/null

python3 - "$OUT/rounds.txt" "$OUT/sizes.txt" <<'PY' | tee "$OUT/summary.txt"
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def med(who, col):
    v = [float(r[col]) for r in rows if r[0] == who and r[col] != "nan"]
    return (statistics.median(v), v) if v else (None, v)
on, onv = med("memrec", 2)
cpu, cpuv = med("memrec", 3)
con, conv = med("c", 2)
ccpu, ccpuv = med("c", 3)
print(f"rounds: memrec on time {onv} %, CPU {cpuv} % of one core; C loop on time {conv} %, CPU {ccpuv} %")
if on is None:
    print("FAIL memrec: no tick figures in its output (see record-*.txt)")
else:
    print(f"{'PASS' if on >= 99.5 else 'FAIL'} on time: memrec median {on:.3f} % of ticks (C loop {con if con is None else f'{con:.3f}'} %), want >= 99.5 %")
if cpu is not None and ccpu:
    ratio = cpu / ccpu
    print(f"{'PASS' if ratio <= 1.1 else 'FAIL'} CPU: memrec median {cpu:.2f} % of one core, C loop {ccpu:.2f} %: {ratio:.2f}x, want <= 1.1x")
else:
    print("FAIL CPU: no figure for memrec or the C loop")
for l in open(sys.argv[2]):
    r, live, imp, listed = l.split()
    live, imp = int(live), int(imp)
    if not imp or listed == "0":
        print(f"FAIL size round {r}: the run was not stored or not imported")
        continue
    print(f"{'PASS' if live <= 1.1 * imp else 'FAIL'} size round {r}: live file {live} B, exported and imported {imp} B: {live / imp:.2f}x, want <= 1.1x")
PY
