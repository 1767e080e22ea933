"""The job life cycle: states and allowed transitions, observe → decide (pure) → execute. The engine that
drives jobs with them is orchestrator/controller."""
