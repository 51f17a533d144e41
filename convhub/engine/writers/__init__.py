"""The engine's Parquet files and Arrow rows."""
