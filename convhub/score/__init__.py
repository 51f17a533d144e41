"""``convhub score``: a memory benchmark's own figures for a system's answers to a convhub build's questions.

The questions come from the build's ``qa`` config (the shared schema, ``convhub.schema.QA_FEATURES``), the
answers from a JSON Lines file of predictions; each benchmark module reproduces its benchmark's published
evaluation code (``locomo``: token F1 and evidence recall; ``longmemeval``: retrieval recall/NDCG and an LLM
judge; ``gigamemory``: the judge per question type), and ``report`` gives the one JSON shape they share.
"""
