"""The agent and its sessions: the `Agent` that creates, loads and forgets sessions and its
shared settings, a `Session` and the one turn it may run, `LocalPort` (our runtime behind
the agent port), model routing, the scoped tool and prompt registries, the bounded map of
idle sessions, and the signals that reach a turn running in another process."""
