"""Hyperparameter sweeps over Optuna: trials are cvmjob jobs, driven by the controller's engine."""
