"""A local Tencent Cloud: CVM, VPC, STS, billing (API 3.0, TC3 signatures), COS (XML, q-sign signatures),
the instance metadata service and instances as local process sandboxes, on one port.

This package imports nothing from the rest of ``orchestrator``: it is the cloud, not a part of the client.

Load tests: ``serve --no-user-data``, or at run time the admin call ``PUT /_emulator/settings {"run_user_data":
false}`` (``AdminClient.set_run_user_data(False)``), boots instances without running their UserData or any other
process: they still go PENDING -> RUNNING, are billed, reclaimed and terminated, and the rest of the cloud (COS,
metadata, the call log, rate limits) is unchanged, so a load generator can play a thousand agents through the real
APIs. ``{"run_user_data": true}`` switches back, for boots after the call. ``serve --state-save-seconds 1`` writes
the state file at most once a second instead of after every change (with a thousand instances a write takes about
0.1 s); what a kill -9 then loses is the last second.
"""
