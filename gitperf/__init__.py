"""git perf: continuous performance analysis of native programs, profiles stored as git notes."""

__version__ = "0.1.0"
