"""The ``tvmrt`` command of an installed wheel (and ``python -m tvmrt``): runs the bundled
command-line tool, or in a checkout the one built beside the library the package would load."""

import os
import sys
from pathlib import Path


def tool_path() -> Path:
    """The ``tvmrt`` tool: the wheel's ``tvmrt/bin/tvmrt``, else the ``tvmrt`` built beside
    the library :func:`tvmrt._ffi.find_library` picks (``target/{release,debug}``)."""
    bundled = Path(__file__).resolve().parent / "bin" / "tvmrt"
    if bundled.is_file():
        return bundled
    from ._ffi import find_library

    beside = Path(find_library()).resolve().parent / "tvmrt"
    if beside.is_file():
        return beside
    raise OSError(
        f"the tvmrt tool is neither bundled with this package nor built beside {beside.parent} "
        "(`cargo build --release` at the repository root builds it)"
    )


def main() -> None:
    try:
        tool = tool_path()
    except OSError as e:
        sys.exit(f"tvmrt: {e}")
    os.execv(str(tool), [str(tool), *sys.argv[1:]])
