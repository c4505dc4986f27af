"""``python -m simtrain``: the same command line as the ``simtrain`` console script."""

from simtrain.cli import main

main()
