"""Where the tests find the real MSLR excerpt: ../shared first, then the fetch recipe's folder."""

import pathlib

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
_SAMPLE_DIRS = [
    REPO_ROOT.parent / "shared" / "data" / "mslr_sample",
    REPO_ROOT / "third_party" / "mslr_sample" / "data",
]


def _sample_dir():
    for directory in _SAMPLE_DIRS:
        if (directory / "train.txt").is_file() and (directory / "test.txt").is_file():
            return directory
    return None


SAMPLE_DIR = _sample_dir()
needs_sample = pytest.mark.skipif(
    SAMPLE_DIR is None,
    reason="MSLR sample not available (python third_party/mslr_sample/fetch.py fetches it)",
)
