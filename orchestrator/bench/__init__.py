"""`cvmjob bench TYPE`: a ResNet-50 benchmark of an instance type, run through the normal life cycle, and
`cvmjob bench compare`, which ranks the types measured by CNY per million images.

- ``spec``: TYPE and options to the bench job's JobSpec (pure);
- ``workload``: what the job runs on the instance (torch; ``python -m orchestrator.bench.workload --help``);
- ``resnet``: the model and its optimizer step, shared with jobs/resnet50;
- ``results``: the documents (the workload's report, the stored result) and their arithmetic (pure);
- ``run``: the I/O around them: the bench data object, the plan, reading the outputs, the ``_bench/`` store.

Nothing here imports torch at import time but ``resnet`` and ``workload``: the CLI runs without it.
"""
