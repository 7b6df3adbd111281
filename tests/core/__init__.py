"""Table tests of the pure core, one file per module, written to kill mutants (scripts/mutation.py)."""
