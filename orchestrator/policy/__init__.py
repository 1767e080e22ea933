"""Named policies (recovery, reserved pool) as validated YAML; builtins ship in ``builtin/``. Pure."""
