"""CI retraining: what a pull request learns of a run (its summary against a baseline) and its quality gates."""
