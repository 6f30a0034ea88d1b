"""What the model sees and what it costs: the projections of a session log into model
history, shared state and session facts, token estimates calibrated against what providers
report, compaction that keeps the next request inside the context window, the deterministic
digest it falls back to, and the prompt-cache drift monitor."""
