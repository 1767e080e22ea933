"""The tags cvmjob puts on what it creates (design.md §4): lookups by tag find an instance or image again after a
crash, and `cvmjob gc` judges only what carries its owner's tag. One place for the names; the spec reserves the
``cvmjob:`` prefix for them (spec/fields.py)."""

from __future__ import annotations

import os
import socket

TAG_JOB = "cvmjob:job"
TAG_ATTEMPT = "cvmjob:attempt"
TAG_NODE = "cvmjob:node"
TAG_NAME = "cvmjob:name"  # the job's name: images of every run of a job name, for retention and image.from_job
TAG_OWNER = "cvmjob:owner"
TAG_POOL = "cvmjob:pool"  # a reserved pool's member
TAG_MANAGED = "cvmjob:managed"  # what cvmjob keeps for every job of a region (its security group)


def owner() -> str:
    """Who drives jobs from this machine: the value of the ``cvmjob:owner`` tag (gc judges only its own)."""
    return f"{os.environ.get('USER', 'user')}@{socket.gethostname()}"[:63]
