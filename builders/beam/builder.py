"""BEAM: where its chats are (the repository's folders or the Hub's Parquet files) and the card's facts."""

from __future__ import annotations

import os
from typing import ClassVar

from convhub.builders.beam import layout, parse
from convhub.engine.inputs.downloads import source_url
from convhub.engine.inputs.listing import FileKind, find_files
from convhub.engine.readers.record_loop import convert_records
from convhub.engine.sources.builder import ConversationBuilder, ConvHubConfig
from convhub.engine.sources.input_shards import Shard, own_shard

#: Without ``--data-dir``: the smallest scale, 100K (20 chats), as the Hub's Parquet conversion of
#: ``Mohammadta/BEAM`` serves it (the ``refs/convert/parquet`` branch, one file per split, a stable address).
URL = "https://huggingface.co/datasets/Mohammadta/BEAM/resolve/refs%2Fconvert%2Fparquet/default/100K/0000.parquet"
PARQUET = FileKind((".parquet",), "*.parquet")


class BeamBuilder(ConversationBuilder):
    SOURCE = "beam"
    HUB_NAME = "beam-unified"
    PRETTY_NAME = "BEAM (convhub unified)"
    LICENSE = "cc-by-sa-4.0"
    LANGUAGES = ("en",)
    HOMEPAGE = "https://github.com/mohammadtavakoli78/BEAM"
    SOURCE_DATASETS = ("extended|Mohammadta/BEAM", "extended|Mohammadta/BEAM-10M")
    DESCRIPTION = "Synthetic user-assistant chats of 100K to 10M tokens with probing questions on ten memory abilities."
    ROLE_MAPPING: ClassVar[dict[str, str]] = dict(parse.ROLES)
    CITATION = """@article{tavakoli2025beyond,
  title   = {Beyond a Million Tokens: Benchmarking and Enhancing Long-Term Memory in {LLMs}},
  author  = {Tavakoli, Mohammad and Salemi, Alireza and Ye, Carrie and Abdalla, Mohamed and Zamani, Hamed and Mitchell, J. Ross},
  journal = {arXiv preprint arXiv:2510.27246},
  year    = {2025}
}"""

    config: ConvHubConfig
    #: A ``sessions`` row is a whole chat (0.6 MB at 100K, tens of MB at 10M).
    WRITER_BATCH_SIZES: ClassVar[dict[str, int]] = {"sessions": 10}

    def shards(self, dl_manager) -> dict[str, list[Shard]]:
        """One split, ``test``: a shard per chat folder of the repository's layout, or per Hub Parquet file;
        ``--subset`` keeps the scales named."""
        data_dir = self.config.data_dir
        if data_dir is None:
            name = URL.rsplit("/default/", 1)[-1]
            shards = [{"path": dl_manager.download(source_url(URL)), "name": name, "hub": True}]
        elif "://" in data_dir or not os.path.isdir(data_dir) or not layout.holds_chat_folder(data_dir):
            found = find_files(data_dir, "BEAM", recursive=True, kind=PARQUET)
            shards = [{"path": path, "name": name, "hub": True} for name, path in found]
        else:
            shards = [{"path": folder, "name": chat_id} for chat_id, folder in layout.chat_folders(data_dir)]
        scales = {self.scale_of(shard): None for shard in shards}
        wanted = self.config.subsets or list(scales)
        unknown = sorted(set(wanted) - set(scales))
        if unknown:
            raise KeyError(f"beam has no subset {', '.join(unknown)}; subsets: {', '.join(scales)}")
        return {"test": [shard for shard in shards if self.scale_of(shard) in wanted]}

    @staticmethod
    def scale_of(shard: dict) -> str:
        return layout.scale_of_file(shard["name"]) if shard.get("hub") else shard["name"].split("/")[0]

    def parse_shard(self, shard, notes):
        shard = own_shard(shard)
        if shard.get("hub"):
            items = layout.hub_rows(shard["name"], shard["path"])
            return convert_records(shard["path"], items, convert_hub_row, notes, self.reject)
        items = [(shard["name"], (shard["name"], shard["path"]))]
        return convert_records(shard["path"], items, convert_folder, notes, self.reject)


def convert_folder(chat: tuple[str, str], notes) -> dict:
    """(conversation id, folder) → its record; a file's error names the file, the loop the folder."""
    return parse.convert_chat(layout.read_folder(*chat), notes)


def convert_hub_row(row: tuple, notes) -> dict:
    """``layout.hub_rows``' item → its record; a column's error names it, the loop the file and the chat."""
    return parse.convert_chat(layout.hub_chat(*row), notes)
