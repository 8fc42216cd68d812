"""``python -m tvmrt ARGS``: the ``tvmrt`` command-line tool, as the ``tvmrt`` script runs it."""

from ._cli import main

main()
