"""The LLM judge ``convhub score`` asks for verdicts: ``client`` (the judge, LongMemEval's and GigaMemory's
prompts), ``transport`` (one bounded request, the key never shown), ``cache`` (each reply kept by its request),
``options`` (the command's judge options and the report's ``judge`` section) and ``mem0`` (mem0's LoCoMo judge).
``docs/judging.md`` says what each does for a user."""
