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

# Five rounds of one run per commit: interleaving spreads any disturbance of this machine over all
# commits instead of spoiling one commit's runs (the checks compare medians).
n=$(git rev-list --count HEAD)
for round in 1 2 3 4 5; do
  i=0
  for c in $(git rev-list --reverse HEAD); do
    i=$((i + 1))
    echo "== round $round/5, [$i/$n] git perf collect $(git log -1 --format='%h %s' "$c") --workload gate --repeat 1"
    git perf collect "$c" --workload gate --repeat 1 -q
  done
done

echo "== git perf log"
git perf log
for c in $(git rev-list --reverse HEAD); do
  echo "== git perf check $(git log -1 --format='%h %s' "$c")"
  git perf check "$c" && status=0 || status=$?
  echo "   (exit $status: 0 no degradation, 1 degradation, 3 not enough data)"
done
slow=$(git rev-list --reverse HEAD | sed -n 4p)
echo "== the pull-request comment for the slowdown: git perf report $(git log -1 --format=%h "$slow")"
git perf report "$slow" || true
echo "== the newest profile: git perf show HEAD --workload gate --top 10"
git perf show HEAD --workload gate --top 10 | head -30
echo "== the dashboard as static pages: git perf report --format html -o $WORK/report"
git perf report --format html -o "$WORK/report" || true
echo
echo "Profiles are git notes: git notes --ref=perf list   (in $REPO)"
echo "Dashboard: open $WORK/report/index.html, or run (no root needed): cd $REPO && git perf serve"
