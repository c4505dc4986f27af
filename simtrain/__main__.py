"""``python -m simtrain`` and the ``simtrain`` console script.

The command line loads only after :func:`run` is in place, so a Ctrl-C at any moment of a
command, loading included, ends with one ``error: interrupted`` line and exit code 130.
"""

import sys


def run() -> None:
    """Run the ``simtrain`` command line."""
    try:
        from simtrain.cli import main
    except KeyboardInterrupt:  # Ctrl-C while the command line loads
        sys.stderr.write("error: interrupted\n")
        sys.exit(130)
    main()


if __name__ == "__main__":
    run()
