"""BEAM: where its chats are (the repository's folders or the Hub's Parquet files, ``layout``) and the card's facts."""

from __future__ import annotations

import os
from typing import ClassVar

from convhub.builders.beam import layout, parse
from convhub.engine.inputs.downloads import source_url
from convhub.engine.inputs.listing import FileKind, find_files
from convhub.engine.readers.record_loop import convert_records
from convhub.engine.sources.builder import ConversationBuilder, ConvHubConfig
from convhub.engine.sources.input_shards import Shard, own_shard

#: Without ``--data-dir``: the smallest scale, 100K (20 chats), from the Hub's Parquet conversion of
#: ``Mohammadta/BEAM`` (the ``refs/convert/parquet`` branch, one file per split: a stable address).
URL = "https://huggingface.co/datasets/Mohammadta/BEAM/resolve/refs%2Fconvert%2Fparquet/default/100K/0000.parquet"
PARQUET = FileKind((".parquet",), "chat folder (chats/<scale>/<n>/chat.json) nor *.parquet")


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
    #: A ``sessions`` row is a whole chat (0.6 MB at 100K, tens of MB at 10M).
    WRITER_BATCH_SIZES: ClassVar[dict[str, int]] = {"sessions": 10}

    def shards(self, dl_manager) -> dict[str, list[Shard]]:
        """One split, ``test``: a shard per chat folder, or per Hub Parquet file; ``--subset`` keeps scales."""
        data_dir = self.config.data_dir
        if data_dir is None:
            found = [(URL.rsplit("/default/")[1], dl_manager.download(source_url(URL)))]
        elif not (found := os.path.isdir(data_dir) and layout.chat_folders(data_dir)):
            found = find_files(data_dir, "BEAM", True, PARQUET)
        shards = [{"path": path, "name": name, "scale": layout.scale_of_file(name)} for name, path in found]
        scales = list(dict.fromkeys(shard["scale"] for shard in shards))
        unknown = sorted(set(self.config.subsets or ()) - set(scales))
        if unknown:
            raise KeyError(f"beam has no subset {', '.join(unknown)}; subsets: {', '.join(scales)}")
        return {"test": [shard for shard in shards if shard["scale"] in (self.config.subsets or scales)]}

    def parse_shard(self, shard, notes):
        """A Parquet file's rows (and plans), or the one chat of a folder (its name the conversation id)."""
        name, path = own_shard(shard)["name"], own_shard(shard)["path"]
        if name.endswith(".parquet"):
            items = ((chat_id, (layout.hub_chat, row)) for chat_id, row in layout.hub_rows(name, path))
        else:
            items = iter([(name, (layout.read_folder, (name, path)))])
        return convert_records(path, items, read_and_convert, notes, self.reject)


def read_and_convert(item: tuple, notes) -> parse.schema.Conversation:
    """(reader, its arguments) → the chat's record: an error of a file or column names it, the loop the chat."""
    return parse.convert_chat(item[0](*item[1]), notes)
