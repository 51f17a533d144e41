"""BEAM: where its chats are (the repository's folders or the Hub's Parquet files, ``layout``) and the card's facts."""

from __future__ import annotations

from typing import ClassVar

from convhub.builder import ConversationBuilder, ConvHubConfig
from convhub.builders.beam import layout, parse
from convhub.engine.inputs.downloads import source_url
from convhub.engine.inputs.listing import FileKind, find_files
from convhub.engine.runners.input_shards import Shard

#: Without ``--data-dir``: the smallest scale, 100K (20 chats), from the Hub's Parquet conversion of
#: ``Mohammadta/BEAM`` (the ``refs/convert/parquet`` branch, one file per split: a stable address).
URL = "https://huggingface.co/datasets/Mohammadta/BEAM/resolve/refs%2Fconvert%2Fparquet/default/100K/0000.parquet"
ANY_FILE = FileKind(("",), "chat folder (chats/<scale>/<n>/chat.json) or *.parquet")


class BeamBuilder(ConversationBuilder):
    SOURCE = "beam"
    HUB_NAME = "beam-unified"
    PRETTY_NAME = "BEAM (convhub unified)"
    LICENSE = "cc-by-sa-4.0"
    LANGUAGES = ("en",)
    HOMEPAGE = "https://github.com/mohammadtavakoli78/BEAM"
    SOURCE_DATASETS = ("extended|Mohammadta/BEAM", "extended|Mohammadta/BEAM-10M")
    DESCRIPTION = "Synthetic user-assistant chats of 100K to 10M tokens, probing ten memory abilities."
    ROLE_MAPPING: ClassVar[dict[str, str]] = dict(parse.ROLES)
    CITATION = """@article{tavakoli2025beyond,
  title   = {Beyond a Million Tokens: Benchmarking and Enhancing Long-Term Memory in {LLMs}},
  author  = {Tavakoli, Mohammad and Salemi, Alireza and Ye, Carrie and Abdalla, Mohamed and Zamani, Hamed and Mitchell, J. Ross},
  journal = {arXiv preprint arXiv:2510.27246},
  year    = {2025}
}"""

    config: ConvHubConfig
    READER, CONVERT = layout.ChatFiles(), staticmethod(parse.convert)
    #: A raw chat's ``id``, its path from the scale on (``100K/1``, ``10M/1/plan-0``), is unique in the input.
    ID_FIELD, ID_ACROSS_FILES = "id", True
    #: A ``sessions`` row is a whole chat (0.6 MB at 100K, tens of MB at 10M).
    WRITER_BATCH_SIZES: ClassVar[dict[str, int]] = {"sessions": 10}

    def shards(self, dl_manager) -> dict[str, list[Shard]]:
        """One split, ``test``: a shard per chat folder (``layout.chat_shards``, not ``LISTING``, whose record
        is a file and subset at a fixed depth) or per Hub Parquet file; ``--subset`` keeps the scales."""
        data_dir = self.config.data_dir
        if data_dir is None:
            listed = [(URL.rsplit("/default/")[1], str(dl_manager.download(source_url(URL))))]
        else:
            listed = find_files(data_dir, "BEAM", True, ANY_FILE)
        parquet_files = [{"path": path, "name": name} for name, path in listed if name.endswith(".parquet")]
        shards = layout.chat_shards(data_dir or "", listed) or parquet_files
        if not shards:
            raise FileNotFoundError(f"no BEAM {ANY_FILE.shown} file in {data_dir}")
        scales = list(dict.fromkeys(layout.scale_of_file(shard["name"]) for shard in shards))
        if unknown := ", ".join(sorted(set(self.config.subsets or ()) - set(scales))):
            raise KeyError(f"beam has no subset {unknown}; subsets: {', '.join(scales)}")
        wanted = self.config.subsets or scales
        return {"test": [shard for shard in shards if layout.scale_of_file(shard["name"]) in wanted]}
