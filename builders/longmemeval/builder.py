"""LongMemEval: where its files are (every ``*.json`` or extension-less file of ``--data-dir``) and the card's facts."""

from __future__ import annotations

import os
from typing import ClassVar

from builders.longmemeval import parse
from convhub.engine.builder import ConversationBuilder
from convhub.storage.folders import url_files

#: Without ``--data-dir``: the oracle file (evidence sessions only, 15 MB) of the Hub repo, which has no extension.
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
    DESCRIPTION = (
        "Questions about a user's long chat history with an assistant, one haystack of sessions each."
    )
    ROLE_MAPPING: ClassVar[dict[str, str]] = dict(parse.ROLES)
    CITATION = """@inproceedings{wu2025longmemeval,
  title     = {{LongMemEval}: Benchmarking Chat Assistants on Long-Term Interactive Memory},
  author    = {Wu, Di and Wang, Hongwei and Yu, Wenhao and Zhang, Yuwei and Chang, Kai-Wei and Yu, Dong},
  booktitle = {The Thirteenth International Conference on Learning Representations},
  year      = {2025}
}"""
    #: A ``sessions`` row is a whole haystack: ~0.5 MB in ``_s``, ~5.5 MB in ``_m``; datasets' batch of 1,000
    #: rows would hold a whole ``_m`` file (2.75 GB) in memory.
    WRITER_BATCH_SIZES: ClassVar[dict[str, int]] = {"sessions": 10}

    def shards(self, dl_manager):
        """One split, ``test``; one shard per file (``{"path", "name"}``), its subset the name without ``.json``.
        Two files of one subset (``longmemeval_s`` and ``longmemeval_s.json``) are an error; ``--subset``
        keeps some subsets."""
        data_dir = self.config.data_dir
        if data_dir is None:
            files = [(dl_manager.download(URL), "longmemeval_oracle")]
        elif "://" in data_dir:
            files = [(url, name) for name, url in url_files(data_dir, ("",)) if is_data_file(name)]
        elif os.path.isfile(data_dir):
            files = [(data_dir, os.path.basename(data_dir))]
        else:
            names = sorted(name for name in os.listdir(data_dir) if is_data_file(name))
            files = [
                (os.path.join(data_dir, n), n) for n in names if os.path.isfile(os.path.join(data_dir, n))
            ]
        if not files:
            raise FileNotFoundError(
                f"no LongMemEval file (*.json, or a name without extension) in {data_dir}"
            )
        by_subset: dict[str, str] = {}
        for path, name in files:
            first = by_subset.setdefault(parse.subset_of(name), path)
            if first != path:
                raise FileNotFoundError(f"{first} and {path} are both subset {parse.subset_of(name)!r}")
        wanted = self.config.subsets
        unknown = set(wanted or ()) - set(by_subset)
        if unknown:
            raise FileNotFoundError(f"no LongMemEval file for subset(s) {', '.join(sorted(unknown))}")
        kept = [(p, n) for p, n in files if not wanted or parse.subset_of(n) in wanted]
        return {"test": [{"path": path, "name": name} for path, name in kept]}

    def parse_shard(self, shard, notes):
        return parse.parse_file(shard["path"], shard["name"], notes, self.reject)
