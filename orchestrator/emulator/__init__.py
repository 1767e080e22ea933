"""A local Tencent Cloud: CVM, VPC, STS, billing (API 3.0, TC3 signatures), COS (XML, q-sign signatures),
the instance metadata service and instances as local process sandboxes, on one port.

This package imports nothing from the rest of ``orchestrator``: it is the cloud, not a part of the client.
"""
