"""The engine's duplicate ids, quarantine, statistics."""
