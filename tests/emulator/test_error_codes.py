"""Every API 3.0 error code the emulator can answer is a real one (design §6.1).

The emulator's source (all of orchestrator/emulator except cos/, which has its own test) is scanned with ``ast`` for
``ApiError(<code>, ...)``. A code must be a string literal, so that nothing escapes this check; the only other
forms allowed are a conditional between literals, a parameter with a literal default whose every keyword use in
the package is a literal (api3/params.py ``too_many_code``), and the fault injector's ``rule.code`` (the code a test
asks for; its default ``ApiFault.code`` is checked). Codes raised by a product's package (cvm/, vpc/, sts/,
billing/) must be in that product's ``errorcodes.py`` in the installed SDK, or be common codes
(shared/reference/tencent-cloud-api.md §4.2); common codes and the codes of the shared modules (api3/, runtime/,
…) must appear in some ``errorcodes.py`` of the full SDK that tccli installs in the clients virtualenv.
"""

from __future__ import annotations

import ast
import os
import re
from collections import defaultdict
from pathlib import Path

import pytest
import tencentcloud

import orchestrator.emulator as emulator_package

PACKAGE = Path(emulator_package.__file__).parent
SDK = Path(tencentcloud.__file__).parent
PRODUCTS = {"cvm": "cvm/v20170312", "vpc": "vpc/v20170312", "sts": "sts/v20180813", "billing": "billing/v20180709"}
# The common error codes of API 3.0 (reference §4.2); the SDK lists them only inside product modules.
COMMON = {
    "ActionOffline", "AuthFailure", "DryRunOperation", "FailedOperation", "InternalError", "InvalidAction",
    "InvalidParameter", "InvalidParameterValue", "InvalidRequest", "IpInBlacklist", "IpNotInWhitelist",
    "LimitExceeded", "MissingParameter", "NoSuchProduct", "NoSuchVersion", "RequestLimitExceeded",
    "RequestSizeLimitExceeded", "ResourceInUse", "ResourceInsufficient", "ResourceNotFound", "ResourceUnavailable",
    "ResponseSizeLimitExceeded", "ServiceUnavailable", "UnauthorizedOperation", "UnknownParameter",
    "UnsupportedOperation", "UnsupportedProtocol", "UnsupportedRegion",
}
CODE_LITERAL = re.compile(r"""=\s*['"]([A-Za-z][\w.]*)['"]""")


def is_common(code: str) -> bool:
    return code in COMMON or code.startswith(("AuthFailure.", "RequestLimitExceeded."))


def sources() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if "cos" not in p.relative_to(PACKAGE).parts[:1]]


def keyword_literals(name: str) -> list[str]:
    """Every literal passed as ``name=...`` anywhere in the package; a non-literal fails the test."""
    found = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg == name:
                        assert isinstance(kw.value, ast.Constant), f"{path}:{node.lineno}: computed {name}="
                        found.append(str(kw.value.value))
    return found


def dataclass_default(tree: ast.Module, cls: str, field: str) -> str:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                        and item.target.id == field and isinstance(item.value, ast.Constant)):
                    return str(item.value.value)
    raise AssertionError(f"no literal default for {cls}.{field}")


def literal_codes(arg: ast.expr, func: ast.FunctionDef | None, tree: ast.Module, where: str) -> list[str]:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, ast.IfExp):
        return literal_codes(arg.body, func, tree, where) + literal_codes(arg.orelse, func, tree, where)
    if isinstance(arg, ast.Name) and func is not None:
        args = func.args
        positional = args.posonlyargs + args.args
        with_defaults = positional[len(positional) - len(args.defaults) :]
        defaults = {a.arg: d for a, d in zip(with_defaults, args.defaults, strict=True)}
        defaults |= {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None}
        default = defaults.get(arg.id)
        if isinstance(default, ast.Constant):
            return [str(default.value), *keyword_literals(arg.id)]
    if where.startswith("runtime/faults.py") and ast.unparse(arg) == "rule.code":
        return [dataclass_default(tree, "ApiFault", "code")]
    raise AssertionError(f"{where}: ApiError code `{ast.unparse(arg)}` is not a literal the check can follow")


def emitted_codes() -> dict[str, set[str]]:
    """code -> the files (relative to the package) that can raise it."""
    codes: dict[str, set[str]] = defaultdict(set)
    for path in sources():
        tree = ast.parse(path.read_text(), str(path))
        rel = str(path.relative_to(PACKAGE))
        functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
        for node in ast.walk(tree):
            name = getattr(node.func, "id", getattr(node.func, "attr", None)) if isinstance(node, ast.Call) else None
            if name != "ApiError":
                continue
            assert isinstance(node, ast.Call)
            arg = node.args[0] if node.args else next(k.value for k in node.keywords if k.arg == "code")
            enclosing = [f for f in functions if f.lineno <= node.lineno <= (f.end_lineno or f.lineno)]
            func = max(enclosing, key=lambda f: f.lineno) if enclosing else None
            for code in literal_codes(arg, func, tree, f"{rel}:{node.lineno}"):
                codes[code].add(rel)
    return codes


def sdk_codes(errorcodes: Path) -> set[str]:
    return set(CODE_LITERAL.findall(errorcodes.read_text()))


def product_of(rel: str) -> str | None:
    top = rel.split("/", 1)[0]
    return top if top in PRODUCTS else None


def clients_venv() -> Path:
    configured = os.environ.get("CVMJOB_CLIENTS_VENV")
    return Path(configured) if configured else Path(__file__).resolve().parents[2] / ".venv-clients"


def test_the_scan_finds_the_emulators_errors() -> None:
    codes = emitted_codes()
    assert len(codes) > 80
    assert {"InvalidInstanceId.NotFound", "AuthFailure.SignatureFailure", "InternalError",
            "UnsupportedOperation.InstanceStatePending", "InvalidParameterValue.LimitExceeded"} <= set(codes)


def test_product_codes_exist_in_the_products_errorcodes() -> None:
    wrong = []
    for code, files in sorted(emitted_codes().items()):
        for product in {p for p in map(product_of, files) if p is not None}:
            if code not in sdk_codes(SDK / PRODUCTS[product] / "errorcodes.py") and not is_common(code):
                wrong.append(f"{code} ({product}: {sorted(files)})")
    assert not wrong, f"codes missing from the SDK's errorcodes.py: {wrong}"


def test_common_codes_exist_somewhere_in_the_full_sdk() -> None:
    modules = sorted(clients_venv().glob("lib/python3.*/site-packages/tencentcloud/*/*/errorcodes.py"))
    if not modules:
        pytest.skip(f"the full SDK is not installed: set CVMJOB_CLIENTS_VENV (looked in {clients_venv()})")
    everything = set().union(*(sdk_codes(m) for m in modules))
    shared = [
        code for code, files in emitted_codes().items()
        if is_common(code) or any(product_of(f) is None for f in files)
    ]
    missing = sorted(code for code in shared if code not in everything)
    assert not missing, f"codes no Tencent Cloud product declares: {missing}"
