"""A session's one append-only record and what is read back from it: the session log,
streamed deltas folded into runs in memory, replay to a client (exact or coalesced), and
closing a turn a crash left open by appending to the log."""
