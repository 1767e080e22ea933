"""The controller: the engine that drives jobs (one in the foreground for `cvmjob run`, or every job it can
claim from the store for `cvmjob controller`), shared observation rounds, and leases."""
