"""GigaMemory (AIJ Contest 2025): long-term memory questions over very long Russian dialogues."""
