"""convhub: conversation and long-term-memory datasets as typed, mixable Hugging Face datasets."""
