"""Tencent Container Registry as an instance sees it: the Docker Registry HTTP API v2 with token auth."""
