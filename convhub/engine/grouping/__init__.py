"""The engine's rows of one conversation brought together by key."""
