"""Cloud providers. Only ``tencent`` exists; it is the one place that imports the Tencent SDKs."""
