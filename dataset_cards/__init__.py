"""Dataset card templates: one per source (with the shared parts in _shared.md) and one for mixtures."""
