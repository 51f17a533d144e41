"""ConvLab-3 unified datasets: MultiWOZ, SGD, Taskmaster, CamRest, WOZ, KVRET, CrossWOZ... in one format.

Each ConvLab dataset is a ``subset``: ``DIR/<name>/data.zip``, its extracted ``data/`` folder, or its
``dummy_data.json`` (``LAYOUTS``); ``DIR`` may also be one dataset's own folder, and a URL. Without ``--data-dir``
each default subset's ``data.zip`` is downloaded from the Hub. Configs: the shared views, plus ``dialogues``
(ConvLab's dialogue-level fields), ``ontology`` and ``database``. The engine reads the files
(``convhub.engine.inputs.file_sets``) and each ``dialogues.json`` by byte ranges, one split's shard at a time
(``convhub.engine.readers.byte_ranges``); ``convhub.builders.convlab.parse`` turns them into records and rows.
"""

from __future__ import annotations

import re
from typing import ClassVar

from datasets import Features, List, Value

from convhub import schema
from convhub.builder import CardLicense, ConversationBuilder, ConvHubConfig, download_folder
from convhub.builders.convlab import parse
from convhub.engine.inputs.downloads import source_url
from convhub.engine.inputs.file_sets import DataInput, Layout, inputs_in, listable
from convhub.engine.readers import byte_ranges
from convhub.engine.runners.input_shards import Shard, own_shard
from convhub.errors import Notes
from convhub.views.definitions import View

__all__ = ["ConvLabBuilder", "DataInput", "find_inputs"]

DIALOGUES, ONTOLOGY, DUMMY = "dialogues.json", "ontology.json", "dummy_data.json"
#: Where a dataset's files are, in this order of preference: ConvLab's ``data.zip``, its extracted ``data/``
#: folder, or ``dummy_data.json`` (ConvLab's ten-dialogue sample: dialogues only).
LAYOUTS = (
    Layout("zip", "data.zip", inner="data/"),
    Layout("folder", "data", marker=DIALOGUES),
    Layout("file", DUMMY, inner=DIALOGUES),
)

URL = "https://huggingface.co/datasets/ConvLab/{name}/resolve/main/data.zip"
#: The ConvLab-3 unified datasets convhub has checked (their dummy_data.json parse in the tests).
DEFAULT_SUBSETS = ("camrest", "crosswoz", "dailydialog", "kvret", "metalwoz", "multiwoz21", "sgd", "sgd1")
DEFAULT_SUBSETS += ("sgd2", "sgd3", "sgd4", "sgd5", "tm1", "tm2", "tm3", "woz")
SUBSET_NAME = re.compile(r"^[\w.-]+$")
SPLIT_ORDER = ("train", "validation", "test")
#: At most about this many dialogues per shard (``byte_ranges.shard_ranges``: a split of
#: ``2 * MIN_DIALOGUES_PER_SHARD`` dialogues or more is cut into an even number of shards of about equal bytes).
DIALOGUES_PER_SHARD = 1000
MIN_DIALOGUES_PER_SHARD = 100

#: Where ConvLab-3 keeps each dataset's README, which states that dataset's license.
UNIFIED_DATASETS_URL = "https://github.com/ConvLab/ConvLab-3/tree/master/data/unified_datasets"
CC_BY = ("cc-by-4.0", "https://creativecommons.org/licenses/by/4.0/")
CC_BY_SA = ("cc-by-sa-4.0", "https://creativecommons.org/licenses/by-sa/4.0/")
APACHE = ("apache-2.0", "https://www.apache.org/licenses/LICENSE-2.0")
#: Each dataset's own license as the "Licensing Information" of its README in ConvLab-3's unified_datasets says
#: (read 2026-11; sgd2 and sgd4 assumed the same as the other SGD-X variants). kvret's README says "TODO":
#: unknown. MetaLWOZ is under the Microsoft Research Data License Agreement, which has no Hub id.
SUBSET_LICENSES: dict[str, tuple[str, str]] = {
    "camrest": CC_BY,
    "crosswoz": APACHE,
    "dailydialog": ("cc-by-nc-sa-4.0", "https://creativecommons.org/licenses/by-nc-sa/4.0/"),
    "kvret": ("unknown", f"{UNIFIED_DATASETS_URL}/kvret"),
    "metalwoz": (
        "other",
        "https://msropendata-web-api.azurewebsites.net/licenses/2f933be3-284d-500b-7ea3-2aa2fd0f1bb2/view",
    ),
    "multiwoz21": APACHE,
    **{name: CC_BY_SA for name in ("sgd", "sgd1", "sgd2", "sgd3", "sgd4", "sgd5")},
    **{name: CC_BY for name in ("tm1", "tm2", "tm3")},
    "woz": APACHE,
}


# -- views of their own ------------------------------------------------------------------------


def _strings(*names: str) -> dict[str, Value]:
    return {name: Value("string") for name in names}


GOAL = {**_strings("description"), "inform": List(schema.STATE_SLOT), "request": List(schema.STATE_SLOT)}
DB_RESULT = {"turn_id": Value("string"), "turn_index": Value("int32"), **_strings("domain")}
DB_RESULT |= {"rank": Value("int32"), "entity": schema.json_text()}
DIALOGUES_VIEW = View(
    "dialogues",
    Features(
        {
            **dict(schema.CONVERSATION_IDS),
            "original_id": Value("string"),
            "domains": List(Value("string")),
            "goal": GOAL,
            "num_turns": Value("int32"),
            "db_results": List(DB_RESULT),
        }
    ),
    "One row per dialogue: ConvLab's original_id, domains, user goal (description, inform, request) and the "
    "database entities its system turns' db_results list, typed.",
    parse.dialogue_rows,
)
SLOT = {
    **_strings("name", "description"),
    "is_categorical": Value("bool"),
    "possible_values": List(Value("string")),
}
ACT = {**_strings("type", "intent", "domain", "slot"), "user": Value("bool"), "system": Value("bool")}
ONTOLOGY_VIEW = View(
    "ontology",
    Features(
        {
            **_strings("subset"),
            "domains": List({**_strings("name", "description"), "slots": List(SLOT)}),
            "intents": List(_strings("name", "description")),
            "dialogue_acts": List({**ACT, **_strings("raw")}),
            "state": List(schema.STATE_SLOT),
            "extra": schema.json_text(),
        }
    ),
    "One row per dataset: its ontology (domains and slots, intents, dialogue-act inventory, full state).",
)
DATABASE_VIEW = View(
    "database",
    Features(
        {
            **_strings("subset", "file", "key", "domain"),
            "entity_index": Value("int32"),
            "entity": schema.json_text(),
        }
    ),
    "One row per database entity, for the datasets that ship database files in data.zip.",
)


class ConvLabBuilder(ConversationBuilder):
    SOURCE = "convlab"
    HUB_NAME = "convlab-unified"
    HAS_QUESTIONS = False  # no memory questions in the format
    #: Each split's dialogues of ``dialogues.json``, read back by their byte ranges (``shards`` indexed them).
    READER = byte_ranges.ByteRanges()
    CONVERT = staticmethod(parse.convert)
    PRETTY_NAME = "ConvLab-3 unified datasets (convhub unified)"
    LICENSE = "other"
    LANGUAGES = ("en", "zh")
    HOMEPAGE = "https://github.com/ConvLab/ConvLab-3"
    DESCRIPTION = (
        "Task-oriented and chit-chat dialogue datasets in ConvLab-3's unified format, one subset each."
    )
    ROLE_MAPPING: ClassVar[dict[str, str]] = {"user": "user", "system": "assistant"}
    CITATION = """@inproceedings{zhu2023convlab3,
  title     = {{ConvLab-3}: A Flexible Dialogue System Toolkit Based on a Unified Data Format},
  author    = {Zhu, Qi and Geishauser, Christian and Lin, Hsien-chin and van Niekerk, Carel and Peng, Baolin and
               Zhang, Zheng and Feng, Shutong and Heck, Michael and Lubis, Nurul and Wan, Dazhen and Zhu, Xiaochen and
               Gao, Jianfeng and Ga{\\v{s}}i{\\'c}, Milica and Huang, Minlie},
  booktitle = {Proceedings of the 2023 Conference on Empirical Methods in Natural Language Processing:
               System Demonstrations},
  year      = {2023}
}"""

    config: ConvHubConfig  # what datasets made of BUILDER_CONFIG_CLASS, typed as such
    EXTRA_VIEWS = (DIALOGUES_VIEW, ONTOLOGY_VIEW, DATABASE_VIEW)
    SUBSET_CONFIGS = True
    DEFAULT_SUBSETS = DEFAULT_SUBSETS

    @classmethod
    def subset_licenses(cls, subsets: list[str]) -> dict[str, tuple[str, str]]:
        """Each subset's own license; a dataset ConvLab does not publish (one of your own) is unknown."""
        return {name: SUBSET_LICENSES.get(name, ("unknown", UNIFIED_DATASETS_URL)) for name in subsets}

    @classmethod
    def card_license(cls, subsets: list[str]) -> CardLicense:
        """The subsets' one license when they share it, else ``other`` pointing at the per-subset table."""
        ids = {license_id for license_id, _ in cls.subset_licenses(subsets).values()}
        if len(ids) == 1 and ids != {"other"}:
            return {"license": ids.pop()}
        return {
            "license": "other",
            "license_name": "convlab-per-dataset",
            "license_link": UNIFIED_DATASETS_URL,
        }

    @classmethod
    def card_source_datasets(cls, subsets: list[str]) -> list[str]:
        """ConvLab publishes each default dataset on the Hub as ``ConvLab/<name>``."""
        return [
            f"extended|ConvLab/{name}" if name in DEFAULT_SUBSETS else f"extended|other-{name}"
            for name in subsets
        ]

    def inputs(self, dl_manager) -> list[DataInput]:
        subsets = self.config.subsets
        for name in subsets or ():
            if not SUBSET_NAME.match(name):
                raise ValueError(f"ConvLab subset name {name!r} is not a plain dataset name")
        if self.config.data_dir:  # at a URL, read from local copies made once (a zip is read by seeking)
            copies = download_folder(dl_manager)
            return [source.here(copies) for source in find_inputs(self.config.data_dir, subsets)]
        return [
            DataInput(name, "zip", dl_manager.download(source_url(URL.format(name=name))), inner="data/")
            for name in subsets or DEFAULT_SUBSETS
        ]

    def shards(self, dl_manager) -> dict[str, list[Shard]]:
        """Ontology and database: one shard per subset that has them. Sessions: each split's dialogues,
        subset after subset, cut by ``byte_ranges.shard_ranges``."""
        inputs = listable(self.inputs(dl_manager), self.reject)
        if self.config.name == ONTOLOGY_VIEW.name:
            found = [source for source in inputs if ONTOLOGY in source.members()]
            return {"train": [{"input": s, "table": "ontology", "path": s.label(ONTOLOGY)} for s in found]}
        if self.config.name == DATABASE_VIEW.name:
            return {"train": [{"input": s, "table": "database"} for s in inputs if database_files(s)]}
        return byte_ranges.ranged_shards(
            inputs,
            DIALOGUES,
            parse.split_checker,
            self.reject,
            recover=self.config.on_bad_record == "skip",  # the scan then reads on after a break in the list
            element="dialogue",
            key="dialogue_id",
            sizes=(DIALOGUES_PER_SHARD, MIN_DIALOGUES_PER_SHARD),
            order=ordered_splits,
        )

    def parse_shard(self, shard, notes: Notes):
        """The engine's default (its ``READER``, a shard's dialogues by their byte ranges), noting a subset read
        from ``dummy_data.json``."""
        shard = own_shard(shard)
        if shard["first"] and shard["input"].kind == "file":
            notes.add("subset read from dummy_data.json (its first dialogues only, no ontology or database)")
        return super().parse_shard(shard, notes)

    def table_rows(self, view: View, shard):
        shard = own_shard(shard)
        source: DataInput = shard["input"].here()
        if shard["table"] == "ontology":
            yield parse.ontology_row(source.read_json(ONTOLOGY), source.name, Notes(), source.label(ONTOLOGY))
            return
        domains = source.read_json(ONTOLOGY).get("domains") if ONTOLOGY in source.members() else None
        domains = list(domains) if isinstance(domains, dict) else []
        for member in database_files(source):
            yield from parse.database_rows(
                source.read_json(member), source.name, member, parse.database_domain(member, domains)
            )


def find_inputs(data_dir: str, subsets: tuple[str, ...] | None) -> list[DataInput]:
    """Every ConvLab dataset under ``data_dir`` (or ``data_dir`` itself), restricted to ``subsets``; at a URL,
    their paths are URLs (``DataInput.here`` makes local copies)."""
    found = inputs_in(data_dir, LAYOUTS, "ConvLab data dir")
    if not subsets:
        if not found:
            raise FileNotFoundError(
                f"no ConvLab dataset in {data_dir} (no <name>/data.zip, data/ or {DUMMY})"
            )
        return list(found.values())
    missing = [name for name in subsets if name not in found]
    if missing:
        raise FileNotFoundError(
            f"no ConvLab dataset {', '.join(missing)} in {data_dir} "
            f"(looked for <name>/data.zip, <name>/data/{DIALOGUES}, <name>/{DUMMY}); found: {sorted(found)}"
        )
    return [found[name] for name in subsets]


def database_files(source: DataInput) -> list[str]:
    """Every JSON file of ``data/`` besides the dialogues and the ontology: ConvLab's database files."""
    return [name for name in source.members() if name.endswith(".json") and name not in (DIALOGUES, ONTOLOGY)]


def ordered_splits(splits) -> list[str]:
    known = [split for split in SPLIT_ORDER if split in splits]
    return known + [split for split in splits if split not in SPLIT_ORDER]
