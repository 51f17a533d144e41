"""The engine's JSON readers: lists, lines, byte ranges, exact JSON, the per-record loop."""
