"""The executor's families of actions (lifecycle/execute.py composes them into one Executor)."""
