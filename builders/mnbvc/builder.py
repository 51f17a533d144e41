"""MNBVC: the dialogue formats of the Massive Never-ending BT Vast Chinese corpus (多轮对话, 问答, 论坛).

Input: ``*.jsonl`` / ``*.jsonl.gz`` files under ``--data-dir`` (a folder, a file or an fsspec URL such as
``hf://datasets/liwu/MNBVC/forum/20230253``), by default the forum files MNBVC publishes in the Hugging Face
dataset ``liwu/MNBVC``; each file's format detected from its first rows or given with ``--format``. The engine
(``convhub.builders.mnbvc.json_lines_builder``) lists, shards and reads them: a 问答 or 论坛 row is a conversation of its own
(``parse``), and 多轮对话 rows are regrouped by conversation wherever they are (``multiturn``).
"""

from __future__ import annotations

from typing import ClassVar

from convhub.builders.mnbvc import multiturn, parse
from convhub.builders.mnbvc.json_lines_builder import JsonLinesBuilder
from convhub.engine.runners.input_shards import group_of


class MnbvcBuilder(JsonLinesBuilder):
    SOURCE = "mnbvc"
    HUB_NAME = "mnbvc-dialogue-unified"
    HAS_QUESTIONS = False  # no memory questions in the format
    PRETTY_NAME = "MNBVC dialogue (convhub unified)"
    LICENSE = "mit"
    LANGUAGES = ("zh", "en")
    HOMEPAGE = "https://github.com/esbatmop/MNBVC"
    SOURCE_DATASETS = ("extended|liwu/MNBVC",)
    DESCRIPTION = "Chinese multi-turn dialogue, question-answer and forum threads from the MNBVC corpus."
    ROLE_MAPPING: ClassVar[dict[str, str]] = {
        "问 (the question of a Q/A pair)": "user",
        "答 (the answer of a Q/A pair)": "assistant",
        "主题 (a forum thread's topic post, speaker 楼主)": "user",
        "回复 by 楼主 or 洞主 (the thread's author)": "user",
        "回复 by anyone else": "assistant",
    }
    FORMATS = parse.FORMATS
    CITATION = """@misc{mnbvc,
  title        = {{MNBVC}: Massive Never-ending BT Vast Chinese corpus},
  author       = {{MNBVC team}},
  year         = {2023},
  howpublished = {\\url{https://github.com/esbatmop/MNBVC}}
}"""

    NAME_IN_ERRORS = "MNBVC"
    FILE_FORMATS = parse.FILE_FORMATS
    GROUPED_FORMATS = frozenset({parse.MULTITURN})
    #: Without ``--data-dir``: the forum files MNBVC publishes (``JsonLinesBuilder.default_files``, the network)
    DEFAULT_REPO, DEFAULT_PATTERN = "liwu/MNBVC", "forum/**/*.jsonl.gz"

    def format_records(self, kind, objects, name, notes):
        subsets, reject = self.config.subsets, self.reject
        if kind == parse.MULTITURN:
            return multiturn.multiturn_runs(objects, name, notes, subsets, reject)
        return parse.row_records(kind, objects, name, notes, subsets, reject)

    def key_row(self, name, number, row, raw):
        return multiturn.key_row(name, number, row, raw, self.config.subsets)

    def grouped_records(self, rows, shard, notes):
        names = [name for name, _ in group_of(shard).files]
        return multiturn.records_from_sorted(rows, names, notes, self.reject)
