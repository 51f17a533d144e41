"""`convhub export`: a build back to its source's own files, the proof that nothing was lost."""
