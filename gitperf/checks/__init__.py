"""Checks (ARCHITECTURE.md §10): degradations of a commit against its baseline and history.

`check` walks the history and pairs profiles; `compare` holds the statistics of one workload;
`witness` the instruction counts' rules; `verdict` the one pipeline after measurement; `change` the
result types; `record` a paired check's stored result; `noise` the A/A analysis; `bisect` the search
for a first slow commit."""

from gitperf.checks.change import (
                                   ACCEPTED,
                                   CONFLICT,
                                   DEGRADATION,
                                   INLINED,
                                   INSTRUCTIONS,
                                   NEW,
                                   NO_CHANGE,
                                   NOT_ENOUGH_DATA,
                                   OPTIMIZATION,
                                   REMOVED,
                                   UNKNOWN,
                                   UNRESOLVED,
                                   Change,
                                   CheckResult,
                                   WorkloadPair,
)
from gitperf.checks.check import Baseline, baseline, check, comparable, find_baseline, group, recompute, result_of
from gitperf.checks.compare import compare_workload
from gitperf.checks.decision import error_budget
from gitperf.checks.noisemodel import MIN_HISTORY
from gitperf.checks.opinions import HISTORY_Z
from gitperf.checks.sides import Sides

__all__ = ["ACCEPTED", "CONFLICT", "DEGRADATION", "INLINED", "INSTRUCTIONS", "NEW", "NO_CHANGE", "NOT_ENOUGH_DATA", "OPTIMIZATION", "REMOVED", "UNKNOWN",
           "UNRESOLVED",
           "Change", "CheckResult", "WorkloadPair", "Baseline", "baseline", "check", "comparable", "find_baseline",
           "group", "recompute", "result_of", "HISTORY_Z", "MIN_HISTORY", "Sides", "compare_workload", "error_budget"]
