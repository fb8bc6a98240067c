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

# The first workflow: `git perf check REV --collect` builds REV and its parent, probes both with one
# plan focused on what REV changed (the rest stack-sampled), runs them interleaved until the changed
# functions are decided, stores the profiles as notes and reports.
i=0
for c in $(git rev-list --reverse HEAD | tail -n +2); do
  i=$((i + 1))
  echo "== [$i/5] git perf check $(git log -1 --format='%h %s' "$c") --collect --workload gate"
  git perf check "$c" --collect --workload gate && status=0 || status=$?
  echo "   (exit $status: 0 no degradation, 1 degradation, 3 not enough data)"
done

# Exact call counts of every commit under one plan (trace all), for the dashboard's timeline.
for c in $(git rev-list --reverse HEAD); do
  echo "== git perf collect $(git log -1 --format='%h %s' "$c") --workload small (exact counts)"
  git perf collect "$c" --workload small -q
done

echo "== git perf log"
git perf log
slow=$(git rev-list --reverse HEAD | sed -n 4p)
echo "== the pull-request comment for the slowdown: git perf report $(git log -1 --format=%h "$slow")"
git perf report "$slow" || true
echo "== the newest profile: git perf show HEAD --workload gate --top 10"
git perf show HEAD --workload gate --top 10 | head -30
echo "== the dashboard as static pages: git perf report --format html -o $WORK/report"
git perf report --format html -o "$WORK/report" || true
echo "== what the demo's commits should give, beside what git perf check stored for them"
python3 "$HERE/truth.py" "$REPO" && truth=0 || truth=$?
echo
echo "Profiles are git notes: git notes --ref=perf list   (in $REPO)"
echo "Dashboard: open $WORK/report/index.html, or run (no root needed): cd $REPO && git perf serve"
if [ "$truth" -ne 0 ]; then
  echo "git perf disagreed with the demo's expected outcomes above (a bug, or a machine too disturbed to measure: run make demo again)" >&2
  exit 1
fi
