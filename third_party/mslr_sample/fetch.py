"""Fetch the MSLR-WEB10K excerpt (Fold 1, 43 + 43 queries) from PyPI.

The files are the test data of the PyPI package rankeval 0.8.2 (source
distribution, ``rankeval/test/data/msn1.fold1.{train,test}.5k.txt``).  This
script downloads that sdist with pip (in a throwaway virtual environment,
since pip runs the sdist's setup.py to read its metadata), extracts the two files into ``data/``
beside it as ``train.txt`` and ``test.txt``, and checks their SHA-256.

    python third_party/mslr_sample/fetch.py

Nothing is written unless both files download and verify.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import subprocess
import sys
import tarfile
import tempfile

PACKAGE = "rankeval==0.8.2"
MEMBERS = {
    "train.txt": (
        "rankeval/test/data/msn1.fold1.train.5k.txt",
        "6d1721de961a35fbaef7085dc5b41e2940f0ddb04bab5f7a8566cf7db4158fa6",
    ),
    "test.txt": (
        "rankeval/test/data/msn1.fold1.test.5k.txt",
        "13d3c638edd23e482c38f4316c2680c938c2eaedbe096970ab30a48e364463d3",
    ),
}
DATA_DIR = pathlib.Path(__file__).resolve().parent / "data"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def main() -> int:
    if all((DATA_DIR / name).exists() for name in MEMBERS):
        print(f"already present: {DATA_DIR}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        # pip prepares an sdist's metadata even to download it, and rankeval's
        # setup.py needs these: give them to it in a throwaway environment.
        venv = pathlib.Path(tmp) / "venv"
        pip = [str(venv / "bin" / "python"), "-m", "pip", "-q"]
        quiet = dict(check=True, stdout=subprocess.DEVNULL)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], **quiet)
        subprocess.run(pip + ["install", "setuptools", "wheel", "cython", "numpy"], **quiet)
        download = ["download", "--no-deps", "--no-build-isolation", "--no-binary", ":all:"]
        subprocess.run(pip + download + ["--dest", tmp, PACKAGE], **quiet)
        (sdist,) = pathlib.Path(tmp).glob("rankeval-0.8.2*.tar.gz")
        contents = {}
        with tarfile.open(sdist) as archive:
            for name, (suffix, digest) in MEMBERS.items():
                member = next(m for m in archive.getmembers() if m.name.endswith(suffix))
                data = archive.extractfile(member).read()
                if sha256(data) != digest:
                    print(f"error: {suffix} in {sdist.name} has an unexpected SHA-256", file=sys.stderr)
                    return 1
                contents[name] = data
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    for name, data in contents.items():
        temporary = DATA_DIR / f".{name}.tmp"
        temporary.write_bytes(data)
        os.replace(temporary, DATA_DIR / name)
    print(f"wrote {', '.join(contents)} to {DATA_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
