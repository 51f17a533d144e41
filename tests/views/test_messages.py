"""`messages` rows that every chat template takes: checked with a strict template on every sample and real file.
The rules by example, on the Arrow code that applies them, are in ``tests/views/test_messages_columns.py``."""

from __future__ import annotations

import json

import datasets
import jinja2
import pytest

from convhub import registry
from convhub.engine.build import build_source
from convhub.views.chat import NO_ASSISTANT, turn_content
from tests.support.data_files import shared_data

#: Gemma's rule, the strictest of the common chat templates: an optional system message, then user and
#: assistant alternating from the user. Rendered as transformers renders chat templates (Jinja with
#: ``raise_exception``), plus the two checks TRL's assistant-only loss needs (content, an assistant turn).
STRICT_TEMPLATE = """
{%- set body = messages[1:] if messages[0]['role'] == 'system' else messages -%}
{%- for message in body -%}
  {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
    {{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
  {%- endif -%}
  {%- if not message['content'] | trim -%}{{ raise_exception('empty content') }}{%- endif -%}
  <start_of_turn>{{ message['role'] }}
{{ message['content'] }}<end_of_turn>
{% endfor -%}
{%- if body | selectattr('role', 'equalto', 'assistant') | list | length == 0 -%}
  {{ raise_exception('at least one example has no assistant tokens') }}
{%- endif -%}
"""


def _raise(message: str):
    raise jinja2.TemplateError(message)


STRICT = jinja2.Environment().from_string(STRICT_TEMPLATE, globals={"raise_exception": _raise})


def assert_every_row_renders(folder) -> int:
    messages = datasets.load_dataset(str(folder), "messages")
    rows = 0
    for split in messages.values():
        for row in split:
            STRICT.render(messages=row["messages"])  # raises on any row a strict template refuses
            rows += 1
    return rows


def test_the_strict_template_refuses_what_gemma_and_trl_refuse():
    for bad in (
        [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "hello"}],
        [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": " "}],
        [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}],
    ):
        with pytest.raises(jinja2.TemplateError):
            STRICT.render(messages=bad)
    good = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
    ]
    assert "<start_of_turn>assistant\nb<end_of_turn>" in STRICT.render(messages=good + good[1:2])


@pytest.mark.parametrize("source", registry.names())
def test_every_messages_row_of_every_sample_renders_with_a_strict_template(sample_builds, source):
    result = sample_builds[source]
    if "messages" not in result.configs:
        pytest.skip(f"{source}'s sample build has no messages row")
    assert assert_every_row_renders(result.output) == sum(
        info.num_examples for info in result.configs["messages"].splits.values()
    )


REAL = {
    "locomo": ("locomo",),
    "gigamemory": ("gigamemory",),
    "convlab": ("convlab",),
    "beam": ("beam",),
}


@pytest.mark.slow
@pytest.mark.parametrize("source", sorted(REAL))
def test_every_messages_row_of_the_real_files_renders_with_a_strict_template(source, tmp_path):
    data = shared_data(*REAL[source])
    result = build_source(source, tmp_path / source, data_dir=str(data), configs=["messages"], num_proc=2)
    rows = assert_every_row_renders(result.output)
    left_out = sum(
        count for kind, count in result.notes.items() if kind.startswith("messages: session left out")
    )
    assert rows + left_out == result.statistics.total().sessions
    if source == "locomo":
        assert rows == 272 and left_out == 0  # every session: the opener is the user


def test_locomo_messages_open_with_the_session_opener_and_carry_names_date_and_shared_photos(tmp_path):
    result = build_source("locomo", tmp_path / "l", data_dir=str(shared_data("locomo")), configs=["messages"])
    rows = datasets.load_dataset(str(result.output), "messages", split="test")
    source = json.loads(shared_data("locomo", "locomo10.json").read_text(encoding="utf-8"))
    conversation = source[0]["conversation"]
    first = next(row for row in rows if row["session_index"] == 0)
    opener = conversation["session_1"][0]["speaker"]
    other = ({conversation["speaker_a"], conversation["speaker_b"]} - {opener}).pop()
    assert first["messages"][0] == {
        "role": "system",
        "content": f"A conversation between {opener} (user) and {other} (assistant), "
        f"{conversation['session_1_date_time']}.",
    }
    assert first["messages"][1]["role"] == "user"
    assert first["messages"][1]["content"].startswith(conversation["session_1"][0]["text"])
    # sessions that speaker_b opens (124 of 272 in locomo10.json) still open with the user
    assert sum(row["messages"][1]["role"] == "user" for row in rows) == 272
    shared = [
        turn
        for sample in source
        for key, session in sample["conversation"].items()
        if key.startswith("session_") and isinstance(session, list)
        for turn in session
        if "blip_caption" in turn
    ]
    text = "\n".join(message["content"] for row in rows for message in row["messages"])
    assert len(shared) > 900
    assert all(f" and shared {turn['blip_caption']}." in text for turn in shared)


def test_turn_content_adds_what_was_shared_as_locomo_evaluation_writes_it():
    assert turn_content("Look!", ["a photo of a dog"]) == "Look! and shared a photo of a dog."
    assert turn_content("Look!", [None]) == "Look! and shared an image."
    assert turn_content("plain", []) == "plain"


def test_the_mnbvc_sample_card_counts_what_messages_left_out(sample_builds):
    result = sample_builds["mnbvc"]
    assert result.notes[NO_ASSISTANT] >= 1
    card = (result.output / "README.md").read_text(encoding="utf-8")
    assert f"| {NO_ASSISTANT} | {result.notes[NO_ASSISTANT]:,} |" in card
