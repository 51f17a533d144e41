"""The engine's what a source extends and declares: the builder, shard types, formats."""
