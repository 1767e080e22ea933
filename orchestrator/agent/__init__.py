"""The agent: runs on the instance, owns its disk and processes, and talks to the controller only through
objects under the job's COS prefix (design.md §2, orchestrator/contract/).

Invocation (by the UserData bootstrap, orchestrator/staging/bootstrap.py; cwd = <dir>, output to <dir>/agent.log)::

    PYTHONPATH=<dir>/lib python3 -m orchestrator.agent --config <dir>/agent.json --workdir <dir>

Environment it reads: ``HTTP_PROXY`` (honoured for the metadata service and presigned URLs),
what the host says of itself (host.py: its "/", local disks, GPUs and network, on the emulator) and
``CUDA_VISIBLE_DEVICES``. Modules, one job each:

attempt      the phases of one attempt on one node, the threads, the result
cloud        credentials (sts / CVM role) and ObjectStores       metadata    the instance metadata service
status       the heartbeat's state                               heartbeat   status.json
logship      logs/<seq>.log                                      control     control.json (cancel)
spot         the spot reclaim notice                             stop        cancel/preempt requests
workdir      the workdir archive and setup commands              nvme        local NVMe for the data
preflight    Python, torch, CUDA, disk checks                    sync        COS -> local data, incremental
manifest     manifest generations, local checkpoint naming       uploader    checkpoints -> COS
restore      latest checkpoint -> local                          launch      command -> torchrun line, env
rendezvous   multi-node c10d endpoint via COS                    processes   child process trees
supervisor   progress, hang, exit, graceful stop                 outputs     $CVMJOB_OUTPUT_DIR -> COS
result       result.json                                         periodic    background ticking threads
install      the bootstrap's second half: lay out, link, start   paths       where things live on the instance
host         what the host says of itself (the only reader)      gpus        GPU count, driver, utilisation
gpu_watch    the GPUs' utilisation folded over heartbeats        seal        the job taken off before a snapshot
uploads      many files up to COS at once                        retry       COS calls retried when it may pass
errors       how a phase ends the attempt                        nic         the interface the collectives use
driver       waiting for the NVIDIA driver the UserData installs  secrets     the job's secrets, for the training only
container    the training in the user's image: runtime, login, pull, run
"""
