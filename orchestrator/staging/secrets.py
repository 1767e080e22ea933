"""The values of a job's ``secrets``, read from the submitting machine's environment into ``secrets.json`` (the one
object that holds them: agents read it with their scoped keys, so no controller carries them to a relaunch).
Pure: api.submit makes the put."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..contract import SecretsDoc
from ..errors import CvmjobError


class SecretsMissing(CvmjobError):
    """A name in ``secrets`` (or ``--secret``) that this machine's environment does not set: nothing is created."""


def gather(names: Sequence[str], environ: Mapping[str, str]) -> SecretsDoc:
    """Every named variable's value; SecretsMissing names all the missing ones at once. An empty value counts as
    missing: CI systems hand a secret they may not reveal (a fork's pull request) as an empty variable."""
    missing = [name for name in names if not environ.get(name)]
    if missing:
        one = len(missing) == 1
        raise SecretsMissing(
            f"secrets: {', '.join(missing)} {'is' if one else 'are'} not set (or empty) in this environment, where the "
            f"job's secrets are read at submission: export {missing[0]}=<value> before `cvmjob run`, or drop "
            f"{'it' if one else 'them'} from the spec's secrets (or --secret)")
    return SecretsDoc(values={name: environ[name] for name in names})
