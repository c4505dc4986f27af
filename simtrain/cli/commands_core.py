"""Core subcommands: run, validate, trace, list."""
