"""A/A sessions (`git perf noise`): one commit collected k times as `collect` would, every session
under the plans the first one chose (profiles of one plan compare; a budget re-planned per session
would probe each session differently), each workload's complete runs kept per session and the
reason when a run of it ended early."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pygit2

from gitperf.collect.collection import Collected, collect
from gitperf.collect.context import CollectRequest, Progress
from gitperf.core.model import Mode, Profile
from gitperf.engine.base import Engine


@dataclass(frozen=True)
class SessionsRequest:
    req: CollectRequest  # the commit and workloads, as `collect` takes them
    sessions: int = 5
    keep: bool = False  # store the profiles (they are valid profiles of the commit)


@dataclass
class Sessions:
    runs: dict[str, list[list[Profile]]] = field(default_factory=dict)  # workload -> per session its complete runs
    failed: dict[str, str] = field(default_factory=dict)  # workload -> why a run of it did not count

    def missing(self) -> dict[str, str]:
        """Workloads that cannot be reported (fewer than two sessions with complete runs), and why."""
        return {wl: f"fewer than two sessions with complete runs (a run ended: {why})"
                for wl, why in self.failed.items() if len(self.runs.get(wl, [])) < 2}


def kept_plans(got: list[Collected]) -> tuple:
    """The budgeted plans of a session, as `CollectRequest.keep_plans`: (workload, stack Hz, traced)."""
    return tuple({c.profile.header.workload: (c.profile.header.workload, c.profile.plan.params.get("stack_hz", 0),
                                              c.profile.plan.traced)
                  for c in got if c.profile.plan.mode == Mode.HYBRID}.values())


def collect_sessions(repo: pygit2.Repository, asked: SessionsRequest, engine: Engine, say: Progress) -> Sessions:
    """`asked.sessions` collections of its commit (stored only with `keep`)."""
    out, req = Sessions(), asked.req
    for k in range(asked.sessions):
        say(f"session {k + 1}/{asked.sessions}")
        got = collect(repo, req, engine, say, keep=asked.keep).profiles
        req = req if req.keep_plans else replace(req, keep_plans=kept_plans(got))
        by_wl: dict[str, list[Profile]] = {}
        for c in got:
            wl = c.profile.header.workload
            if c.profile.header.partial:
                out.failed[wl] = c.profile.header.partial
            else:
                by_wl.setdefault(wl, []).append(c.profile)
        for wl, ps in by_wl.items():
            out.runs.setdefault(wl, []).append(ps)
    return out
