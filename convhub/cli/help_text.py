"""The words of ``convhub --help`` and of each command's help that are not an option's: the description, the
epilog and each command's examples (``cli.main`` builds the parser with them)."""

from __future__ import annotations

DESCRIPTION = "Conversation and long-term-memory datasets as typed, mixable Hugging Face datasets."
EPILOG = "Run `convhub COMMAND --help` for a command's options and examples."

#: Examples shown under each command's help.
EXAMPLES = {
    "build": """\
examples:
  convhub build --all --sample --output out
  convhub build locomo --data-dir ../shared/data/locomo --output out/locomo-unified
  convhub build locomo --data-dir DIR --output out/locomo-unified --repo-id my-org/locomo-unified
  convhub build mnbvc --data-dir DIR --output out/mnbvc --config turns --num-proc 2""",
    "check": """\
examples:
  convhub check locomo --sample
  convhub check convlab --data-dir DIR --on-bad-record skip --quarantine bad.jsonl""",
    "push": """\
examples:
  convhub push locomo --repo-id ORG/locomo-unified --folder out/locomo-unified --dry-run
  convhub push locomo --repo-id ORG/locomo-unified --folder out/locomo-unified --revision v2 --create-pr""",
    "export": """\
examples:
  convhub export locomo --from out/locomo-unified --output locomo-again
  convhub export gigamemory --from ORG/gigamemory-unified --output DIR --streaming""",
    "mix": """\
examples:
  convhub mix examples/recipe.yaml --output out/my-mix
  convhub mix recipe.yaml --output out/my-mix --push --repo-id ORG/my-mix""",
    "score": """\
examples:
  convhub score locomo --data out/locomo-unified --predictions answers.jsonl --output report.json
  convhub score locomo --data ORG/locomo-unified --predictions answers.jsonl --output report.json --evidence normalized
  convhub score gigamemory --data out/gigamemory-unified --predictions answers.jsonl --output report.json \\
      --judge-url http://127.0.0.1:8000/v1 --judge-model MODEL
  convhub score locomo --data out/locomo-unified --predictions answers.jsonl --output report.json \\
      --protocol mem0-judge --judge-url https://api.openai.com/v1 --judge-model gpt-4o-mini""",
}
