"""Planning: from a spec and what the cloud offers to an ordered list of placements, prices and an estimate.
Pure functions: the facts are gathered elsewhere (api.plan) and passed in."""
