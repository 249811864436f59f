#!/bin/sh
# exports_identical.sh OLD NEW [FIXTURE.jsonl.gz ...]: imports each fixture
# with both memrec binaries and compares their JSON Lines, CSV, Parquet and
# TensorBoard exports byte for byte (a move of code must change none).
# Prints one line a fixture and format; exits 1 on the first difference.
set -eu
old=$1 new=$2
shift 2
[ $# -gt 0 ] || set -- storage/testdata/chunk-v1.jsonl.gz storage/testdata/sites-12cols.jsonl.gz storage/testdata/h200-r18-oom.jsonl.gz storage/testdata/real-resnet18-bs64-leak.jsonl.gz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for fx in "$@"; do
	name=$(basename "$fx" .jsonl.gz)
	gunzip -c "$fx" > "$tmp/$name.jsonl"
	for bin in old new; do
		eval b=\$$bin
		d="$tmp/$bin-$name"
		mkdir -p "$d"
		"$b" --db "$d/m.db" import "$tmp/$name.jsonl" > /dev/null
		run=$("$b" --db "$d/m.db" runs --json | sed -n 's/.*"name": *"\([^"]*\)".*/\1/p' | head -1)
		"$b" --db "$d/m.db" export "$run" -o "$d/out.jsonl"
		"$b" --db "$d/m.db" export "$run" --format csv -o "$d/out.csv"
		"$b" --db "$d/m.db" export "$run" --format parquet -o "$d/pq" > /dev/null
		"$b" --db "$d/m.db" export "$run" --format tensorboard -o "$d/tb" > /dev/null
	done
	for bin in old new; do # the event file's name holds the pid: compare its bytes
		cat "$tmp/$bin-$name"/tb/* > "$tmp/$bin-$name/out.tfevents"
	done
	for f in out.jsonl out.csv pq out.tfevents; do
		if diff -r "$tmp/old-$name/$f" "$tmp/new-$name/$f" > /dev/null; then
			echo "$name $f identical"
		else
			echo "$name $f DIFFERS"
			status=1
		fi
	done
done
exit $status
