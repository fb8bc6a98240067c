"""One module per test design of a comparison (ARCHITECTURE.md §10): `paired` (interleaved rounds),
`pooled` (stack samples pooled over rounds), `history` (separate sessions against the history)."""
