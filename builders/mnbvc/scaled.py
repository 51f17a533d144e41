"""MNBVC's scaled benchmark input, found by ``benchmarks/scaled_inputs.py`` (``docs/adding-a-source.md``): large
synthetic 多轮对话 shards whose conversations' rows are scattered, and 论坛 shards.

``generate`` writes shards in MNBVC's multi-turn row format where the rows of a conversation are scattered: each
row goes to a random shard and, within a shard, the conversations' rows interleave (a pool of open conversations,
the next row taken from a random one). Some rows carry the format's quirks: the unquoted ``扩展字段`` variant, an
empty ``会话`` (grouped by ``id``), integer ``会话``, an empty ``答``. Memory stays small whatever the size: rows are
written as they are made. ``benchmarks/mnbvc_synthetic.py`` is its command line and measures a build on it.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
from pathlib import Path

#: No real file: the input is synthetic at every scale.
REAL_FILE = None
#: ``benchmarks/large_record.py``: the sample file whose first record it grows, and where the record goes.
LARGE_RECORD = ("multiturn/sharegpt-0002.jsonl", "multiturn/one.jsonl")
#: The text a large record's longest string is made of.
LARGE_RECORD_UNIT = "中文对话 "
#: Full-scale sizes (scale 1): ~2 GB of multi-turn and forum shards.
MULTITURN_MB, MULTITURN_SHARDS = 1536, 8
FORUM_MB, FORUM_SHARDS = 512, 4


def scaled_input(folder: Path, scale: float, real: Path | None) -> tuple[Path, list[Path], list[str]]:
    """多轮对话 shards (each conversation's rows spread over the shards) and 论坛 shards, ~2 GB at scale 1."""
    for kind in ("multiturn", "forum"):
        shutil.rmtree(folder / kind, ignore_errors=True)
    generate(folder / "multiturn", MULTITURN_MB * scale, MULTITURN_SHARDS, use_gzip=False, seed=0)
    generate_forum(folder / "forum", FORUM_MB * scale, FORUM_SHARDS, seed=1)
    files = sorted((folder / "multiturn").glob("*.jsonl")) + sorted((folder / "forum").glob("*.jsonl"))
    return folder, files, []


CHINESE = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处理府研质"
ENGLISH = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "you",
    "that",
    "it",
    "for",
    "on",
    "with",
    "as",
    "are",
    "this",
    "be",
    "at",
    "have",
    "or",
    "from",
    "by",
    "can",
    "your",
    "an",
    "not",
]


def chinese_text(rng: random.Random, length: int) -> str:
    chars = rng.choices(CHINESE, k=length)
    for position in range(rng.randrange(12, 30), length, rng.randrange(12, 30)):
        chars[position] = "，" if rng.random() < 0.7 else "。"
    return "".join(chars)


def english_text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(ENGLISH, k=words)).capitalize() + "."


def make_row(rng: random.Random, conversation: dict, number: int) -> dict:
    english = conversation["english"]
    question = english_text(rng, rng.randint(8, 60)) if english else chinese_text(rng, rng.randint(10, 120))
    answer = english_text(rng, rng.randint(40, 400)) if english else chinese_text(rng, rng.randint(60, 800))
    if rng.random() < 0.03:
        answer = ""
    key = conversation["key"]
    if conversation["style"] == "unquoted":
        extension = f'{{"会话": {key}, "多轮序号": {number}, "解析模型": gpt4}}'
    elif conversation["style"] == "empty":
        extension = f'{{"会话": , "多轮序号": {number}, "解析模型": gpt4}}'
    else:
        extension = json.dumps({"会话": key, "多轮序号": number, "解析模型": "gpt4"}, ensure_ascii=False)
    return {
        "id": conversation["id"],
        "问": question,
        "答": answer,
        "来源": "ShareGPT",
        "时间": "20230517",
        "元数据": {
            "create_time": f"202305{rng.randint(10, 28)} {rng.randint(10, 23)}:{rng.randint(10, 59)}:{rng.randint(10, 59)}",
            "问题明细": '"from": "human"',
            "回答明细": '"from": "gpt"',
            "扩展字段": extension,
        },
    }


def new_conversation(rng: random.Random, index: int) -> dict:
    style = rng.choices(["json", "unquoted", "empty", "integer"], weights=[80, 12, 3, 5])[0]
    key = index if style == "integer" else f"c{index:09x}"
    return {
        "key": key,
        "style": style,
        "id": f"{rng.getrandbits(128):032x}",
        "english": rng.random() < 0.3,
        "turns": rng.randint(1, 12),
        "next": 1,
    }


def generate(out: Path, megabytes: float, shards: int, use_gzip: bool, seed: int) -> dict:
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    suffix = ".jsonl.gz" if use_gzip else ".jsonl"
    handles = [
        (gzip.open if use_gzip else open)(out / f"multiturn-{index:04d}{suffix}", "wb")
        for index in range(shards)
    ]
    target = int(megabytes * 2**20)
    written = rows = conversations = 0
    pool: list[dict] = []
    try:
        while written < target or pool:
            if written < target and (len(pool) < 64 or rng.random() < 0.05):
                pool.append(new_conversation(rng, conversations))
                conversations += 1
            conversation = pool[rng.randrange(len(pool))]
            line = json.dumps(make_row(rng, conversation, conversation["next"]), ensure_ascii=False).encode()
            handles[rng.randrange(shards)].write(line + b"\n")
            written += len(line) + 1
            rows += 1
            conversation["next"] += 1
            if conversation["next"] > conversation["turns"]:
                pool.remove(conversation)
    finally:
        for handle in handles:
            handle.close()
    return {"rows": rows, "conversations": conversations, "uncompressed_mb": round(written / 2**20, 1)}


FORUM_BOARDS = ("北大树洞", "清华树洞", "水木社区")
FORUM_USERS = ("洞主", "Alice", "Bob", "Carol", "Dave", "Eve")


def make_thread(rng: random.Random, number: int) -> dict:
    """One 论坛 row: a topic and 0-40 replies, each reply's 扩展字段 a JSON string (replier, quote, time)."""
    day = f"2020{rng.randint(1, 12):02d}{rng.randint(10, 28)}"
    replies = []
    for floor in range(1, rng.randint(0, 40) + 1):
        details = {
            "回复人": rng.choice(FORUM_USERS),
            "回复时间": f"{day} {rng.randint(10, 23)}:{rng.randint(10, 59)}:00",
        }
        if floor > 1 and rng.random() < 0.3:
            details["引用ID"] = str(rng.randint(1, floor - 1))
        text = chinese_text(rng, rng.randint(4, 160))
        replies.append(
            {"楼ID": str(floor), "回复": text, "扩展字段": json.dumps(details, ensure_ascii=False)}
        )
    return {
        "ID": number,
        "主题": chinese_text(rng, rng.randint(10, 300)),
        "来源": rng.choice(FORUM_BOARDS),
        "时间": day,
        "回复": replies,
        "元数据": {
            "发帖时间": f"{day} 09:00:00",
            "回复数": len(replies),
            "扩展字段": json.dumps({"点赞数": rng.randint(0, 9)}, ensure_ascii=False),
        },
    }


def generate_forum(out: Path, megabytes: float, shards: int, seed: int) -> dict:
    """论坛 shards (one thread per row) of ``megabytes`` together, written row by row."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    target = int(megabytes * 2**20)
    written = rows = 0
    per_shard = max(1, target // shards)
    for index in range(shards):
        with open(out / f"forum-{index:04d}.jsonl", "wb") as handle:
            shard_written = 0
            while shard_written < per_shard or (index == shards - 1 and written < target):
                line = json.dumps(make_thread(rng, rows), ensure_ascii=False).encode() + b"\n"
                handle.write(line)
                shard_written += len(line)
                written += len(line)
                rows += 1
    return {"rows": rows, "uncompressed_mb": round(written / 2**20, 1)}
