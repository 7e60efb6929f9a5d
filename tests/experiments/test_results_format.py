"""One results format: every binary's results.json validates against
foltr_jax/engine/results.schema.json (tests/binaries.py checks each run's output), and readers
refuse another format version."""

import json

import jsonschema
import pytest

from experiments.lib import series
from foltr_jax.engine.results_files import RESULTS_FORMAT
from tests import binaries

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


def test_one_structure_a_cell_per_setting_curves_by_metric_name(fpdgd_results):
    _, results = fpdgd_results
    assert results["metric"] == "ndcg" and results["config"]["click_model"] == "informational"
    (cell,) = results["cells"]
    assert list(cell) == ["name", "setting", "labels", "evaluated_rounds", "curves", "per_run"]
    assert cell["evaluated_rounds"] == [1, 2]
    assert sorted(cell["curves"]) == ["offline_mrr", "offline_ndcg", "online_max_rr", "online_ndcg"]
    assert all(len(c) == 1 and len(c[0]) == 2 for c in cell["curves"].values())  # [run][round]
    assert cell["per_run"]["final_offline_ndcg"] == [cell["curves"]["offline_ndcg"][0][-1]]
    assert cell["labels"]["panel"] == "informational" and cell["labels"]["method"] == "fpdgd"


def _cell(results):
    return results["cells"][0]


@pytest.mark.parametrize(
    "change",
    [
        lambda r: _cell(r)["curves"].update(offline_ndcg=[0.5, 0.6]),  # per run, then per round
        lambda r: _cell(r)["curves"].update(offline_ndcg=[]),
        lambda r: _cell(r)["curves"].update(ndcg=[[0.5]]),  # not offline_/online_<metric>
        lambda r: _cell(r).pop("evaluated_rounds"),
        lambda r: _cell(r)["labels"].pop("panel"),
        lambda r: _cell(r)["per_run"].update(online_performance=3.0),  # a list, one per run
        lambda r: r.pop("method"),
        lambda r: r.update(results_format=1),
        lambda r: r.update(results_format=3),
        lambda r: r.update(seconds=-1.0),
        lambda r: r.update(cells=[]),
        lambda r: r.pop("cells"),
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
    with pytest.raises(series.ReportError, match="results format 3; this version reads format 2"):
        series.read_results(path, "fpdgd")


@pytest.mark.parametrize("version", [1, None])
def test_a_reader_refuses_a_file_of_an_older_version_in_one_line(tmp_path, version):
    """A format-1 file (curves at the top level or in per-binary rows), or one from
    before the format had a version: refused, never guessed at."""
    old = {"method": "fpdgd", "config": {}, "data": {}, "offline_ndcg": [[0.5, 0.6]]}
    if version is not None:
        old["results_format"] = version
    path = tmp_path / "results.json"
    path.write_text(json.dumps(old))
    with pytest.raises(series.ReportError) as error:
        series.read_results(path, "old")
    message = str(error.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert "written by an older version of foltr_jax" in message
    assert "reads results format 2" in message
