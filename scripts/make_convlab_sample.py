"""Writes ConvLab's sample (``builders/convlab/sample``): two invented ConvLab-3 unified datasets holding
the quirks tests/convlab checks. A development tool, so it lives here and not in the installed package.

    python scripts/make_convlab_sample.py            # rewrites builders/convlab/sample/toyhotel and toychat
    python scripts/make_convlab_sample.py OUT        # writes OUT/toyhotel and OUT/toychat instead

``toyhotel`` is a ``data.zip`` (ontology, dialogues, two database files); ``toychat`` an extracted ``data/`` folder.
The output is the same bytes on every run (the zip's members carry a fixed date), so a diff shows any change.
"""

import json
import os
import shutil
import sys
import zipfile

#: The sample's folder in the checkout, where the builder finds it.
SAMPLE_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "builders", "convlab", "sample"
)


def act(intent, domain, slot, value=None, start=None, end=None):
    a = {"intent": intent, "domain": domain, "slot": slot}
    if value is not None:
        a["value"] = value
    if start is not None:
        a["start"], a["end"] = start, end
    return a


def acts(cat=(), noncat=(), binary=()):
    return {"categorical": list(cat), "non-categorical": list(noncat), "binary": list(binary)}


EMPTY_HOTEL = {"name": "", "area": "", "price range": "", "parking": ""}


def hotel_state(**slots):
    s = dict(EMPTY_HOTEL)
    s.update({k.replace("_", " "): v for k, v in slots.items()})
    return {"hotel": s, "attraction": {"name": "", "area": ""}}


u0 = "I need a cheap hotel in the north with free parking."
u2 = "Any area is fine, actually. What is the phone number of Lark House?"
dialogues = [
    {  # goal, categorical + non-categorical with span + binary, "" and "dontcare", db_results, booked
        "dataset": "toyhotel",
        "data_split": "train",
        "dialogue_id": "toyhotel-train-0",
        "original_id": "PMUL0001.json",
        "domains": ["hotel", "general"],
        "goal": {
            "description": "Find a <span class='emphasis'>cheap</span> hotel and ask for its phone.",
            "inform": {"hotel": {"price range": "cheap", "parking": "yes"}},
            "request": {"hotel": {"phone": ""}},
        },
        "finished": True,
        "turns": [
            {
                "speaker": "user",
                "utterance": u0,
                "utt_idx": 0,
                "dialogue_acts": acts(
                    cat=[
                        act("inform", "hotel", "price range", "cheap"),
                        act("inform", "hotel", "parking", "yes"),
                    ],
                    noncat=[
                        act("inform", "hotel", "area", "north", u0.index("north"), u0.index("north") + 5)
                    ],
                ),
                "state": hotel_state(price_range="cheap", area="north", parking="yes"),
            },
            {
                "speaker": "system",
                "utterance": "Lark House is a cheap hotel in the north. Shall I book it?",
                "utt_idx": 1,
                "dialogue_acts": acts(
                    noncat=[act("recommend", "hotel", "name", "Lark House", 0, 10)],
                    binary=[act("offerbook", "hotel", ""), act("reqmore", "", "")],
                ),
                "db_results": {
                    "hotel": [
                        {
                            "name": "Lark House",
                            "area": "north",
                            "price range": "cheap",
                            "phone": "01223 000001",
                        },
                        {
                            "name": "Acorn Lodge",
                            "area": "north",
                            "price range": "cheap",
                            "phone": "01223 000002",
                        },
                    ]
                },
                "booked": {"hotel": [], "attraction": []},
            },
            {
                "speaker": "user",
                "utterance": u2,
                "utt_idx": 2,
                "dialogue_acts": acts(
                    cat=[act("inform", "hotel", "area", "dontcare")],
                    noncat=[
                        act(
                            "inform",
                            "hotel",
                            "name",
                            "Lark House",
                            u2.index("Lark House"),
                            u2.index("Lark House") + 10,
                        )
                    ],
                    binary=[act("request", "hotel", "phone")],
                ),
                "state": hotel_state(price_range="cheap", area="dontcare", parking="yes", name="Lark House"),
            },
            {
                "speaker": "system",
                "utterance": "Its phone number is 01223 000001.",
                "utt_idx": 3,
                # a non-categorical act whose span was not found: no start/end
                "dialogue_acts": acts(noncat=[act("inform", "hotel", "phone", "01223 000001")]),
                "db_results": {"hotel": []},
                "booked": {"hotel": [{"name": "Lark House", "reference": "XYZ123"}], "attraction": []},
            },
        ],
    },
    {  # starts with the system, ends with the user; an empty utterance; no goal; SGD-style turn keys;
        # state holding only filled slots, with an empty domain dict; a turn without dialogue_acts;
        # acts dict without its "binary" kind; integer original_id
        "dataset": "toyhotel",
        "data_split": "train",
        "dialogue_id": "toyhotel-train-1",
        "original_id": 17,
        "domains": ["weather", "attraction"],
        "type": "multi-domain",
        "user_state_init": [{"attraction": {"inform": {"area": ["centre", "not mentioned"]}}}],
        "turns": [
            {
                "speaker": "system",
                "utterance": "Hello, how can I help?",
                "utt_idx": 0,
                "dialogue_acts": acts(binary=[act("greet", "", "")]),
                "service_call": {},
                "db_results": {},
            },
            {
                "speaker": "user",
                "utterance": "",
                "utt_idx": 1,
                "state": {"weather": {}, "attraction": {"area": "centre"}},
                "active_intent": {"attraction": "FindAttraction"},
                "requested_slots": {"attraction": []},
                "user_state": [{"attraction": {"inform": {"area": ["centre", "mentioned"]}}}],
            },
            {
                "speaker": "system",
                "utterance": "The Round Church is in the centre.",
                "utt_idx": 2,
                "dialogue_acts": {
                    "categorical": [],
                    "non-categorical": [act("inform", "attraction", "name", "The Round Church", 0, 16)],
                },
                "db_query": {"attraction": {"area": "centre"}},
                "db_results": {
                    "attraction": [{"name": "The Round Church", "area": "centre", "entrance fee": 0}]
                },
            },
            {
                "speaker": "user",
                "utterance": "Will it rain there tomorrow?",
                "utt_idx": 3,
                "dialogue_acts": acts(binary=[act("request", "weather", "rain")]),
                "state": {"weather": {}, "attraction": {"area": "centre", "name": "The Round Church"}},
                "emotion": "neutral",
            },
        ],
        "user_state_final": [{"attraction": {"inform": {"area": ["centre", "mentioned"]}}}],
    },
    {  # a single turn; an empty state; grounded-generation keys
        "dataset": "toyhotel",
        "data_split": "validation",
        "dialogue_id": "toyhotel-validation-0",
        "original_id": "v-0",
        "domains": [],
        "goal": {"description": "", "inform": {}, "request": {}},
        "turns": [
            {
                "speaker": "user",
                "utterance": "Thanks, that is all.",
                "utt_idx": 0,
                "dialogue_acts": acts(binary=[act("thank", "general", ""), act("bye", "", "")]),
                "state": {},
                "candidates": ["You are welcome.", "Goodbye."],
                "checked_sentence": "no_sentences_used",
                "checked_passage": "no_passages_used",
                "concepts": ["thanks"],
                "tripleset": [["Lark House", "area", "north"]],
            },
        ],
    },
    {  # every slot listed: "" for unfilled, "dontcare"
        "dataset": "toyhotel",
        "data_split": "test",
        "dialogue_id": "toyhotel-test-0",
        "original_id": "t-0",
        "domains": ["hotel"],
        "goal": {"description": "", "inform": {"hotel": {"area": "east"}}, "request": {}},
        "turns": [
            {
                "speaker": "user",
                "utterance": "Something in the east, any price.",
                "utt_idx": 0,
                "dialogue_acts": acts(
                    cat=[
                        act("inform", "hotel", "area", "east"),
                        act("inform", "hotel", "price range", "dontcare"),
                    ]
                ),
                "state": hotel_state(area="east", price_range="dontcare"),
            },
            {
                "speaker": "system",
                "utterance": "Sorry, there is none.",
                "utt_idx": 1,
                "dialogue_acts": acts(binary=[act("nooffer", "hotel", "")]),
                "db_results": {"hotel": []},
            },
        ],
    },
]


def da(user, system, intent, domain, slot):
    return str({"user": user, "system": system, "intent": intent, "domain": domain, "slot": slot})


ontology = {
    "domains": {
        "hotel": {
            "description": "find and book a hotel",
            "slots": {
                "name": {"description": "name of the hotel", "is_categorical": False, "possible_values": []},
                "area": {
                    "description": "area of the town",
                    "is_categorical": True,
                    "possible_values": ["north", "east", "centre"],
                },
                "price range": {
                    "description": "price budget",
                    "is_categorical": True,
                    "possible_values": ["cheap", "expensive"],
                },
                "parking": {
                    "description": "free parking",
                    "is_categorical": True,
                    "possible_values": ["yes", "no"],
                },
                "phone": {"description": "phone number", "is_categorical": False, "possible_values": []},
            },
        },
        "attraction": {
            "description": "find an attraction",
            "slots": {
                "name": {
                    "description": "name of the attraction",
                    "is_categorical": False,
                    "possible_values": ["The Round Church"],
                },
                "area": {
                    "description": "area of the town",
                    "is_categorical": True,
                    "possible_values": ["centre"],
                },
            },
        },
        "weather": {"description": "weather forecasts", "slots": {}},
        "general": {"description": "general dialogue acts", "slots": {}},
    },
    "intents": {
        "inform": {"description": "inform the value of a slot"},
        "request": {"description": "ask for a slot"},
        "recommend": {"description": "recommend an entity"},
        "greet": {"description": "say hello"},
        "nooffer": {"description": "nothing matches"},
    },
    "state": {
        "hotel": {"name": "", "area": "", "price range": "", "parking": ""},
        "attraction": {"name": "", "area": ""},
        "weather": {},
    },
    "dialogue_acts": {
        "categorical": [
            da(True, False, "inform", "hotel", "area"),
            da(True, False, "inform", "hotel", "price range"),
        ],
        "non-categorical": [
            da(True, True, "inform", "hotel", "name"),
            da(False, True, "inform", "hotel", "phone"),
        ],
        "binary": [da(False, True, "reqmore", "", ""), da(True, False, "request", "hotel", "phone")],
    },
}
hotel_db = [
    {
        "name": "Lark House",
        "area": "north",
        "price range": "cheap",
        "parking": "yes",
        "phone": "01223 000001",
        "stars": 4,
    },
    {
        "name": "Acorn Lodge",
        "area": "north",
        "price range": "cheap",
        "parking": "no",
        "phone": "01223 000002",
        "stars": 3,
    },
]
attraction_db = [  # CrossWOZ's shape: [name, details] pairs
    ["The Round Church", {"name": "The Round Church", "area": "centre", "entrance fee": 0}],
    ["Kettle's Yard", {"name": "Kettle's Yard", "area": "west", "entrance fee": 0}],
]


def dump(value):
    return json.dumps(value, ensure_ascii=False, indent=2)


# toychat: an extracted data/ folder; chit-chat with no goal and no dialogue_acts on any turn (like MetaLWOZ),
# emotion/persona/topic keys, train and test only, a dialogue that starts with the system and ends with the user.
chat = [
    {
        "dataset": "toychat",
        "data_split": "train",
        "dialogue_id": "toychat-train-0",
        "original_id": 0,
        "domains": ["Ordinary Life"],
        "topic": "weekend",
        "persona": {"user": ["I like hiking."], "system": []},
        "turns": [
            {
                "speaker": "user",
                "utterance": "Any plans for the weekend?",
                "utt_idx": 0,
                "emotion": "no emotion",
            },
            {
                "speaker": "system",
                "utterance": "I might go hiking, 北山 is lovely.",
                "utt_idx": 1,
                "emotion": "happiness",
            },
            {"speaker": "user", "utterance": "Sounds great!", "utt_idx": 2, "emotion": "happiness"},
        ],
    },
    {
        "dataset": "toychat",
        "data_split": "train",
        "dialogue_id": "toychat-train-1",
        "original_id": 1,
        "domains": ["Work"],
        "topic": "office",
        "turns": [
            {"speaker": "system", "utterance": "You look tired.", "utt_idx": 0, "emotion": "no emotion"},
            {"speaker": "user", "utterance": "Long day.", "utt_idx": 1, "emotion": "sadness"},
        ],
    },
    {
        "dataset": "toychat",
        "data_split": "test",
        "dialogue_id": "toychat-test-0",
        "original_id": 2,
        "domains": [],
        "turns": [{"speaker": "user", "utterance": "Hi!", "utt_idx": 0, "emotion": "no emotion"}],
    },
]
chat_ontology = {
    "domains": {},
    "intents": {},
    "state": {},
    "dialogue_acts": {"categorical": [], "non-categorical": [], "binary": []},
}


def write_sample(out: str) -> None:
    """``out/toyhotel/data.zip`` and ``out/toychat/data/``, each replacing what was there (only these two)."""
    for name in ("toyhotel", "toychat"):
        shutil.rmtree(os.path.join(out, name), ignore_errors=True)
    os.makedirs(f"{out}/toyhotel")
    with zipfile.ZipFile(f"{out}/toyhotel/data.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        for name, value in [
            ("ontology.json", ontology),
            ("dialogues.json", dialogues),
            ("hotel_db.json", hotel_db),
            ("attraction_db.json", attraction_db),
        ]:
            info = zipfile.ZipInfo(f"data/{name}", date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, dump(value))
    os.makedirs(f"{out}/toychat/data")
    for name, value in [("ontology.json", chat_ontology), ("dialogues.json", chat)]:
        with open(f"{out}/toychat/data/{name}", "w", encoding="utf-8") as handle:
            handle.write(dump(value) + "\n")


if __name__ == "__main__":
    write_sample(sys.argv[1] if len(sys.argv) > 1 else SAMPLE_DIR)
