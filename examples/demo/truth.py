"""Print what `git perf check` stored for each demo commit beside what the demo's history should give
(make_history.EXPECTED); exit 1 on any mismatch.   Usage: truth.py REPO [--json]"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from make_history import EXPECTED, HISTORY  # noqa: E402


def said(repo: str, commit: str) -> tuple[str, str]:
    """(the stored check's verdict, the first notable function) for the gate workload."""
    r = subprocess.run(["git", "perf", "check", commit, "--workload", "gate", "--json"], cwd=repo,
                       capture_output=True, text=True)
    if not r.stdout.strip():
        return f"error (exit {r.returncode}): {r.stderr.strip()[-200:]}", ""
    out = json.loads(r.stdout)
    first = next((c["function"] for c in out["changes"] if c["type"] == out["result"]), "")
    return out["result"], first


def rows(repo: str) -> list[dict]:
    commits = subprocess.run(["git", "rev-list", "--reverse", "HEAD"], cwd=repo, capture_output=True, text=True,
                             check=True).stdout.split()
    out = []
    for i, (subject, _) in enumerate(HISTORY):
        if i not in EXPECTED:
            continue
        verdicts, function, why = EXPECTED[i]
        result, first = said(repo, commits[i])
        ok = result in verdicts and (not function or first == function)
        out.append({"commit": commits[i][:12], "subject": subject, "expected": " or ".join(verdicts)
                    + (f" ({function} first)" if function else ""), "why": why,
                    "git perf said": result + (f" ({first} first)" if first else ""), "match": ok})
    return out


def main() -> int:
    found = rows(sys.argv[1])
    if "--json" in sys.argv:
        print(json.dumps(found, indent=2))
    else:
        width, exp, got = (max(len(r[k]) for r in found) for k in ("subject", "expected", "git perf said"))
        print(f"{'commit':12}  {'subject':{width}}  {'expected':{exp}}  {'git perf said':{got}}  match")
        for r in found:
            print(f"{r['commit']:12}  {r['subject']:{width}}  {r['expected']:{exp}}  {r['git perf said']:{got}}  "
                  f"{'yes' if r['match'] else 'NO'}")
        print("why: " + "; ".join(f"{r['commit'][:7]} {r['why']}" for r in found))
    return 0 if all(r["match"] for r in found) else 1


if __name__ == "__main__":
    sys.exit(main())
