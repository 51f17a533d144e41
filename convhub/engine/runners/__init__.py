"""The engine's the local engine and Spark: processes, memory, progress."""
