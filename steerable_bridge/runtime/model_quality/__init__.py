"""Making weak, local and cheap models behave: the quality settings and the guards of one
turn (budgets, soft timeout, duplicate calls, error breaker), and the recovery of tool calls
a model wrote as text: the table of text formats' markers, the streaming stripper, the
per-format parsers and the filter that turns what they find into real tool calls."""
