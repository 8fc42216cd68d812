"""The ``tvmrt`` command of an installed wheel: runs the bundled command-line tool."""

import os
import sys
from pathlib import Path


def main() -> None:
    tool = Path(__file__).resolve().parent / "bin" / "tvmrt"
    if not tool.is_file():
        sys.exit("tvmrt: the command-line tool is not bundled with this installation")
    os.execv(str(tool), [str(tool), *sys.argv[1:]])
