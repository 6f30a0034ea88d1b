"""Running one turn: the turn / step loop (`loop.py`), the data a turn starts from and ends
with (`turn.py`), one model call (`model_step.py`), how the turn records its events
(`recorder.py`), steering and follow-up queues, the cancel token, the hooks user code
registers at five named points, and the log context that tags a turn's log lines."""
