"""No command prints the token: a Hub (or proxy) error that echoes the request's headers is reported on one
redacted line by ``push``, ``export`` from a repo and ``mix`` (reading repos, and ``--push``) alike."""

from __future__ import annotations

import shutil

import pytest

from convhub.cli.main import main
from convhub.publish.hub_errors import redact
from convhub.publish.push import push_folder
from tests.support.hub_double import HUB_TOKEN
from tests.support.mix_sources import numbered, write_source


def one_redacted_line(capsys) -> str:
    captured = capsys.readouterr()
    assert HUB_TOKEN not in captured.out + captured.err
    lines = [line for line in captured.err.splitlines() if "error" in line.lower()]  # not the progress bars
    assert len(lines) == 1, captured.err
    return lines[0]


def test_redact_hides_the_given_and_the_stored_token(hub):
    assert HUB_TOKEN not in redact(f"a {HUB_TOKEN[3:]}\nb", HUB_TOKEN[3:]) + redact(f"x{HUB_TOKEN}x")


def test_redact_keeps_the_names_of_variables_and_hides_bearer_headers_in_any_case():
    message = "the Hub at http://127.0.0.1:9 (HF_ENDPOINT) did not answer; set HF_HUB_DOWNLOAD_TIMEOUT"
    assert redact(message) == message
    assert redact("Authorization: BEARER abc123; x") == "Authorization: BEARER ***; x"
    assert redact("token hf_abcdefgh1234 leaked") == "token *** leaked"


@pytest.mark.parametrize("status", [400, 403])
def test_export_from_a_repo_whose_error_echoes_the_headers(hub, sample_builds, tmp_path, capsys, status):
    folder = tmp_path / "locomo-unified"
    shutil.copytree(sample_builds["locomo"].output, folder)
    push_folder(folder, f"org/leaky-export-{status}", verify=False)
    hub.fail_next("repo_info", times=50, status=status, echo_headers=True)
    command = [
        "export",
        "locomo",
        "--from",
        f"org/leaky-export-{status}",
        "--output",
        str(tmp_path / "export"),
    ]
    assert main([*command, "--token", HUB_TOKEN]) == 1
    assert one_redacted_line(capsys).startswith("convhub export: error: ")


def test_mix_reading_a_repo_whose_error_echoes_the_headers(hub, tmp_path, capsys):
    push_folder(write_source(tmp_path / "a", numbered("a", 5)), "org/a-unified", verify=False)
    hub.fail_next("repo_info", times=50, status=400, echo_headers=True)
    (tmp_path / "recipe.yaml").write_text("name: m\nsources: [{repo: org/a-unified}]\n")
    command = ["mix", str(tmp_path / "recipe.yaml"), "--output", str(tmp_path / "out"), "--token", HUB_TOKEN]
    assert main(command) == 1
    assert one_redacted_line(capsys).startswith("convhub mix: error: ")


@pytest.mark.parametrize("route", ["repo_info", "commit", "preupload"])
def test_mix_push_whose_error_echoes_the_headers(hub, tmp_path, capsys, route):
    write_source(tmp_path / "a", numbered("a", 5))
    (tmp_path / "recipe.yaml").write_text("name: m\nsources: [{path: a}]\n")
    hub.fail_next(route, times=50, status=400, echo_headers=True)
    command = ["mix", str(tmp_path / "recipe.yaml"), "--output", str(tmp_path / "out"), "--push"]
    assert main([*command, "--repo-id", "org/m", "--token", HUB_TOKEN]) == 1
    assert "convhub mix: error: " in one_redacted_line(capsys)
