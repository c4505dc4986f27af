"""``python -m simtrain``: the same command line as the ``simtrain`` console script."""

from simtrain.cli import main

if __name__ == "__main__":
    main()
