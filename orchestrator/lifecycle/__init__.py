"""The job life cycle: states and allowed transitions, observe → decide (pure) → execute, reconcile."""
