"""LongMemEval: where its files are (every ``*.json`` or extension-less file of ``--data-dir``) and the card's facts."""

from __future__ import annotations

from typing import ClassVar

from convhub.builder import ConversationBuilder, ConvHubConfig
from convhub.builders.longmemeval import parse
from convhub.engine.inputs.listing import JSON_OR_EXTENSIONLESS, Listing
from convhub.engine.readers.json_list import JsonList
from convhub.engine.runners.input_shards import Shard

#: Without ``--data-dir``: the oracle file (evidence sessions only, 15 MB) of the cleaned release (September
#: 2025, the version users cite; its subset ``longmemeval_oracle``). The first release's files, extension-less
#: in ``xiaowu0162/longmemeval``, and the cleaned ``longmemeval_s_cleaned.json``/``longmemeval_m_cleaned.json``
#: build from ``--data-dir``, each a subset named by its file (``longmemeval_s``, ``longmemeval_s_cleaned``).
URL = "https://huggingface.co/datasets/xiaowu0162/longmemeval-cleaned/resolve/main/longmemeval_oracle.json"
#: A file is one JSON list of instances, read one at a time (an ``_m`` file is 2.75 GB); an error names an instance
#: by its position, a file whose first element is not an instance is refused whole, and with ``--on-bad-record
#: skip`` a break in the list costs only the instances it held.
INSTANCES = JsonList(
    element="LongMemEval instance",
    id_field="question_id",
    recognize=parse.not_longmemeval,
    long_lists=parse.LONG_LISTS,
)


class LongMemEvalBuilder(ConversationBuilder):
    SOURCE = "longmemeval"
    HUB_NAME = "longmemeval-unified"
    PRETTY_NAME = "LongMemEval (convhub unified)"
    LICENSE = "mit"
    LANGUAGES = ("en",)
    HOMEPAGE = "https://github.com/xiaowu0162/LongMemEval"
    SOURCE_DATASETS = ("extended|xiaowu0162/longmemeval-cleaned", "extended|xiaowu0162/longmemeval")
    DESCRIPTION = "Questions on a user's long chat history with an assistant, a haystack of sessions each."
    ROLE_MAPPING: ClassVar[dict[str, str]] = dict(parse.ROLES)
    CITATION = """@inproceedings{wu2025longmemeval,
  title     = {{LongMemEval}: Benchmarking Chat Assistants on Long-Term Interactive Memory},
  author    = {Wu, Di and Wang, Hongwei and Yu, Wenhao and Zhang, Yuwei and Chang, Kai-Wei and Yu, Dong},
  booktitle = {The Thirteenth International Conference on Learning Representations},
  year      = {2025}
}"""

    config: ConvHubConfig  # what datasets made of BUILDER_CONFIG_CLASS, typed as such
    #: A ``sessions`` row is a haystack (~5.5 MB in ``_m``): 1,000 a batch would hold a whole 2.75 GB file.
    WRITER_BATCH_SIZES: ClassVar[dict[str, int]] = {"sessions": 10}
    READER = INSTANCES
    CONVERT = staticmethod(parse.convert)
    #: Unique within a file (the conversation_id is ``<subset>:<question_id>``).
    ID_FIELD = "question_id"
    #: Each ``*.json`` or extension-less file a subset named by its name without ``.json``.
    LISTING = Listing(JSON_OR_EXTENSIONLESS, split="test")

    def shards(self, dl_manager) -> dict[str, list[Shard]]:
        """One split, ``test``; one shard (``{"path", "name"}``) per file, its subset the name without ``.json``:
        two files of one subset (``longmemeval_s`` and ``longmemeval_s.json``) are an error."""
        return {
            "test": [{"path": file.path, "name": file.name} for file in self.listed_files(dl_manager, URL)]
        }

    @classmethod
    def input_files(cls, data_dir, subsets, downloads):
        """The files of ``--data-dir`` a build of ``subsets`` reads (not a README beside them), else the download."""
        if data_dir is None:
            return super().input_files(data_dir, subsets, downloads)
        return sorted((file.name, file.path) for file in cls.LISTING.files(data_dir, cls.SOURCE, subsets))
