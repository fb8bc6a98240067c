#!/usr/bin/env bash
# The main job on the bundled example: build the demo history, profile every commit under eBPF,
# store the profiles as git notes, and show what they say.   Usage: run-demo.sh WORKDIR
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK="${1:?usage: run-demo.sh WORKDIR}"
REPO="$WORK/wordstat"

rm -rf "$REPO"
mkdir -p "$WORK"
echo "== building the demo history in $REPO"
python3 "$HERE/make_history.py" "$REPO"
cd "$REPO"

n=$(git rev-list --count HEAD)
i=0
for c in $(git rev-list --reverse HEAD); do
  i=$((i + 1))
  echo "== [$i/$n] git perf collect $(git log -1 --format='%h %s' "$c")"
  git perf collect "$c" --workload small --workload default
done

echo "== git perf log"
git perf log
slow=$(git rev-list --reverse HEAD | sed -n 4p)
echo "== checksum_block before and after the slowdown commit ($(git log -1 --format=%h "$slow"))"
for c in "$slow~1" "$slow"; do
  git perf show "$c" --workload default --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
for p in d["profiles"]:
    f = {x["name"]: x for x in p["functions"]}["checksum_block"]
    commit, calls, ms = d["commit"][:12], f["count"], f["exclusive_ns"] / 1e6
    print(f"{commit}  checksum_block  calls {calls}  exclusive {ms:.2f} ms")'
done
echo "== the newest profile in full: git perf show HEAD --workload small --top 10"
git perf show HEAD --workload small --top 10
echo
echo "Profiles are git notes: git notes --ref=perf list   (in $REPO)"
