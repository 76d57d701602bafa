"""Command-line entry points: msir-opt, msir-run."""
