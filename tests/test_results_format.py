"""One results format: every binary's results.json validates against
experiments/results.schema.json (tests/binaries.py checks each run's output), and readers
refuse another format version."""

import json

import binaries
import jsonschema
import pytest

from experiments import series
from experiments.results import RESULTS_FORMAT

SMALL = ("--synthetic_queries=30", "--nocheckpoint", "--rounds=2", "--chunk_rounds=2")


def test_the_schema_is_a_valid_draft_2020_12_schema_of_this_format():
    jsonschema.Draft202012Validator.check_schema(binaries.SCHEMA)
    assert binaries.SCHEMA["properties"]["results_format"] == {"const": RESULTS_FORMAT}


@pytest.fixture(scope="module")
def fpdgd_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("fpdgd")
    result = binaries.call("fpdgd", *SMALL, "--n_clients=4", f"--output_dir={out}")
    assert result.returncode == 0, result.stderr
    return out / "results.json", json.loads((out / "results.json").read_text())


def test_a_binary_s_results_carry_the_format_and_validate(fpdgd_results):
    _, results = fpdgd_results
    assert results["results_format"] == RESULTS_FORMAT
    assert list(results)[:3] == ["results_format", "method", "versions"]
    jsonschema.validate(results, binaries.SCHEMA)


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.update(offline_ndcg=[0.5, 0.6]),  # a curve is per run, then per round
        lambda r: r.pop("method"),
        lambda r: r.update(results_format=2),
        lambda r: r.update(seconds=-1.0),
        lambda r: r.pop("offline_ndcg"),  # no curves, cells or rows
    ],
)
def test_the_schema_refuses_a_broken_results_file(fpdgd_results, change):
    _, results = fpdgd_results
    broken = json.loads(json.dumps(results))
    change(broken)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, binaries.SCHEMA)


def test_a_reader_refuses_another_format_version(fpdgd_results, tmp_path):
    _, results = fpdgd_results
    assert series.read_results(fpdgd_results[0], "fpdgd")  # this format reads
    path = tmp_path / "results.json"
    path.write_text(json.dumps({**results, "results_format": RESULTS_FORMAT + 1}))
    with pytest.raises(series.ReportError, match="results format 2; this version reads format 1"):
        series.read_results(path, "fpdgd")
