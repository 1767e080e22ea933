"""cvmjob: GPU training jobs on Tencent Cloud, from a YAML spec to a trained model, with spot recovery."""

__version__ = "0.1.0"
