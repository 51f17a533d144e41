"""LongMemEval: where its files are (every ``*.json`` or extension-less file of ``--data-dir``) and the card's facts."""

from __future__ import annotations

import os
from typing import ClassVar

from builders.longmemeval import parse
from convhub.engine.builder import ConversationBuilder
from convhub.storage.folders import url_files

#: Without ``--data-dir``: the Hub repo's oracle file (evidence sessions only, 15 MB; no extension there).
URL = "https://huggingface.co/datasets/xiaowu0162/longmemeval/resolve/main/longmemeval_oracle"


def is_data_file(name: str) -> bool:
    """A LongMemEval file: ``longmemeval_s.json`` or the Hub's ``longmemeval_s``; not a hidden file, not a README."""
    return not name.startswith(".") and (name.endswith(".json") or "." not in name)


class LongMemEvalBuilder(ConversationBuilder):
    SOURCE = "longmemeval"
    HUB_NAME = "longmemeval-unified"
    PRETTY_NAME = "LongMemEval (convhub unified)"
    LICENSE = "mit"
    LANGUAGES = ("en",)
    HOMEPAGE = "https://github.com/xiaowu0162/LongMemEval"
    SOURCE_DATASETS = ("extended|xiaowu0162/longmemeval",)
    DESCRIPTION = "Questions on a user's long chat history with an assistant, a haystack of sessions each."
    ROLE_MAPPING: ClassVar[dict[str, str]] = dict(parse.ROLES)
    CITATION = """@inproceedings{wu2025longmemeval,
  title     = {{LongMemEval}: Benchmarking Chat Assistants on Long-Term Interactive Memory},
  author    = {Wu, Di and Wang, Hongwei and Yu, Wenhao and Zhang, Yuwei and Chang, Kai-Wei and Yu, Dong},
  booktitle = {The Thirteenth International Conference on Learning Representations},
  year      = {2025}
}"""
    #: A ``sessions`` row is a haystack (~5.5 MB in ``_m``): 1,000 a batch would hold a whole 2.75 GB file.
    WRITER_BATCH_SIZES: ClassVar[dict[str, int]] = {"sessions": 10}

    def shards(self, dl_manager):
        """One split, ``test``; one shard (``{"path", "name"}``) per file, its subset the name without ``.json``:
        two files of one subset (``longmemeval_s`` and ``longmemeval_s.json``) are an error."""
        data_dir = self.config.data_dir
        if data_dir is None:
            files = [(dl_manager.download(URL), "longmemeval_oracle")]
        elif "://" in data_dir:
            files = [(url, name) for name, url in url_files(data_dir, ("",)) if is_data_file(name)]
        elif os.path.isfile(data_dir):
            files = [(data_dir, os.path.basename(data_dir))]
        else:
            names = [name for name in sorted(os.listdir(data_dir)) if is_data_file(name)]
            files = [
                (os.path.join(data_dir, n), n) for n in names if os.path.isfile(os.path.join(data_dir, n))
            ]
        subsets: dict[str, str] = {}
        for path, name in files:
            if subsets.setdefault(parse.subset_of(name), path) != path:
                raise FileNotFoundError(f"{subsets[parse.subset_of(name)]} and {path} are one subset")
        missing = set(self.config.subsets or ()) - set(subsets)
        if not files or missing:
            wanted = f"for subset(s) {', '.join(sorted(missing))} " if missing else ""
            raise FileNotFoundError(f"no LongMemEval file (*.json, or no extension) {wanted}in {data_dir}")
        kept = [(p, n) for p, n in files if parse.subset_of(n) in (self.config.subsets or subsets)]
        return {"test": [{"path": path, "name": name} for path, name in kept]}

    def parse_shard(self, shard, notes):
        return parse.parse_file(shard["path"], shard["name"], notes, self.reject)
