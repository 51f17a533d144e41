"""The engine: what moves a source's data (listing, reading, the per-record loop, grouping, checking, writing)."""
