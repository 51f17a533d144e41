"""A source's files found in a local folder or at a URL, as a zip, a folder or one file, and read the same way;
a JSON list read by byte ranges, indexed once and cut into byte-balanced shards."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from convhub.engine.inputs.file_sets import DataInput, Layout, inputs_in, listable
from convhub.engine.readers import byte_ranges
from convhub.errors import SourceError
from tests.support.data_files import uploaded

LAYOUTS = (
    Layout("zip", "data.zip", inner="data/"),
    Layout("folder", "data", marker="x.json"),
    Layout("file", "x1.json", inner="x.json"),
)
ITEMS = [{"id": f"i-{n}", "group": ("a", "b")[n % 2], "n": 18446744073709551616 + n} for n in range(7)]


def write_three_layouts(root):
    """``z/data.zip``, ``f/data/`` and ``one/x1.json``, each holding the same ``x.json``."""
    raw = json.dumps(ITEMS, indent=1).encode()
    (root / "z").mkdir(parents=True)
    with zipfile.ZipFile(root / "z" / "data.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("data/x.json", raw)
        archive.writestr("data/sub/y.json", b"[]")
    (root / "f" / "data" / "sub").mkdir(parents=True)
    (root / "f" / "data" / "x.json").write_bytes(raw)
    (root / "f" / "data" / "sub" / "y.json").write_bytes(b"[]")
    (root / "one").mkdir()
    (root / "one" / "x1.json").write_bytes(raw)
    (root / "nothing").mkdir()
    return raw


def test_each_layout_lists_labels_and_reads_its_files(tmp_path):
    write_three_layouts(tmp_path)
    found = inputs_in(str(tmp_path), LAYOUTS, "test data dir")
    assert {name: source.kind for name, source in found.items()} == {"f": "folder", "one": "file", "z": "zip"}
    assert found["z"].members() == found["f"].members() == ["sub/y.json", "x.json"]
    assert found["one"].members() == ["x.json"]
    assert found["z"].label("x.json") == f"{tmp_path}/z/data.zip:data/x.json"
    assert found["f"].label("x.json") == f"{tmp_path}/f/data/x.json"
    assert found["one"].label("x.json") == f"{tmp_path}/one/x1.json"
    for source in found.values():
        assert source.read_json("x.json") == ITEMS  # integers past 64 bits exact
        assert source.member_size("x.json") == len(json.dumps(ITEMS, indent=1))
    assert inputs_in(str(tmp_path / "f"), LAYOUTS, "test data dir") == {
        "f": found["f"]
    }  # one dataset's folder


def test_a_local_data_dir_with_a_double_colon_in_its_name_is_listed_as_it_is(tmp_path):
    write_three_layouts(tmp_path / "convlab::v2")  # (fsspec would read "::" as a chain of URLs)
    found = inputs_in(str(tmp_path / "convlab::v2"), LAYOUTS, "test data dir")
    assert sorted(found) == ["f", "one", "z"]
    assert found["f"].read_json("x.json") == ITEMS


def test_a_data_dir_that_is_no_folder_and_bad_json_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"test data dir .* is not a folder"):
        inputs_in(str(tmp_path / "absent"), LAYOUTS, "test data dir")
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "x1.json").write_bytes(b"[1,")
    [source] = inputs_in(str(tmp_path), LAYOUTS, "d").values()
    with pytest.raises(SourceError, match="not valid JSON") as raised:
        source.read_json("x.json")
    assert raised.value.path == str(tmp_path / "one" / "x1.json")


def test_a_folder_name_a_card_reads_as_a_wildcard_is_refused(tmp_path):
    (tmp_path / "x[1]").mkdir()
    (tmp_path / "x[1]" / "x1.json").write_bytes(b"[]")
    with pytest.raises(SourceError, match="rename the folder"):
        inputs_in(str(tmp_path), LAYOUTS, "d")


def test_an_unlistable_input_is_rejected_and_the_others_kept(tmp_path):
    write_three_layouts(tmp_path)
    (tmp_path / "z" / "data.zip").write_bytes(b"not a zip")
    rejected = []
    kept = listable(
        inputs_in(str(tmp_path), LAYOUTS, "d").values(), lambda error, *a, **k: rejected.append(error)
    )
    assert [source.name for source in kept] == ["f", "one"]
    assert [error.path for error in rejected] == [str(tmp_path / "z" / "data.zip")]


def test_inputs_at_a_url_are_read_from_local_copies_and_named_by_their_url(bucket, tmp_path):
    write_three_layouts(tmp_path / "local")
    url = uploaded(tmp_path / "local", bucket)
    at_url = inputs_in(url, LAYOUTS, "d")
    copies = {name: source.here(str(tmp_path / "copies")) for name, source in at_url.items()}
    for name, source in copies.items():
        assert source.origin == at_url[name].path and source.path.startswith(str(tmp_path / "copies"))
        assert source.read_json("x.json") == ITEMS
    assert copies["z"].label("x.json") == f"{url}/z/data.zip:data/x.json"
    elsewhere = DataInput("z", "zip", str(tmp_path / "not-here"), "data/", origin=copies["z"].origin).here()
    assert elsewhere.read_json("x.json") == ITEMS


def place(path):
    def group_of(value, position):
        if not isinstance(value, dict):
            raise SourceError(path, position, None, "not an object")
        return value["group"]

    return group_of


@pytest.mark.parametrize("threshold", [0, 1 << 40])
def test_ranged_shards_read_back_every_element_from_a_zip_with_or_without_a_copy(
    tmp_path, monkeypatch, threshold
):
    write_three_layouts(tmp_path)
    monkeypatch.setattr(byte_ranges, "EXTRACT_MIN_BYTES", threshold)
    monkeypatch.setattr(byte_ranges, "_INDEX_CACHE", {})
    sources = list(inputs_in(str(tmp_path), LAYOUTS, "d").values())
    shards = byte_ranges.ranged_shards(sources, "x.json", place, sizes=(2, 1))
    assert list(shards) == ["a", "b"]
    read = {
        group: [
            (shard["input"].name, value["id"])
            for shard in found
            for _, value in byte_ranges.ByteRanges().read(shard)
        ]
        for group, found in shards.items()
    }
    for group in ("a", "b"):
        expected = [item["id"] for item in ITEMS if item["group"] == group]
        assert read[group] == [(name, id_) for name in ("f", "one", "z") for id_ in expected]
    copies = {shard["copy"] for found in shards.values() for shard in found if shard["input"].kind == "zip"}
    assert (copies == {None}) == (threshold > 0)
    assert [shard["first"] for shard in shards["a"] if shard["input"].name == "f"] == [True, False]


def test_a_bad_element_is_rejected_and_the_rest_indexed():
    raw = json.dumps([{"group": "a"}, 7, {"group": "b"}]).encode()
    rejected = []
    index = byte_ranges.index_list(
        io.BytesIO(raw), "m.json", place("m.json"), lambda e, raw, *a, **k: rejected.append(raw)
    )
    assert {group: [position for _, _, position in ranges] for group, ranges in index.items()} == {
        "a": [0],
        "b": [2],
    }
    assert rejected == [7]
    with pytest.raises(SourceError, match=r"m\.json, record 1: not an object"):
        byte_ranges.index_list(io.BytesIO(raw), "m.json", place("m.json"))
