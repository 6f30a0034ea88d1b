"""Text and JSON at the edges: the exact JSON encoding of LoopEvents and its published
schema, strict JSON parsing that every client's parser would agree with, and the repair of
lone UTF-16 surrogates so that every event encodes as UTF-8."""
