"""The per-source builders: one folder per source (its declaration, `datasets` builder, conversion, export and sample)."""
