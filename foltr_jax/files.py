"""One way to write a file: through a temporary file in the same folder and a rename.

Readers never see a half-written results file, checkpoint, cache entry or figure: the
target either keeps its old content or has the complete new one.  On any error the
temporary file is removed and the error is raised.
"""

from __future__ import annotations

import os
import pathlib
import tempfile
from collections.abc import Callable
from typing import BinaryIO


def write_atomically(path, write: Callable[[BinaryIO], None]) -> None:
    """Calls ``write(stream)`` on a binary temporary file beside ``path``, then renames it
    over ``path`` (creating the folder first)."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
