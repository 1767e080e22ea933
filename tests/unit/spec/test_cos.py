from __future__ import annotations

import pytest
from pydantic import TypeAdapter

from orchestrator.spec.cos import CosDir, CosUri


@pytest.mark.parametrize(("text", "bucket", "prefix"), [
    ("cos://datasets-1250000000/mnist/", "datasets-1250000000", "mnist/"),
    ("cos://datasets-1250000000/a/b.tar", "datasets-1250000000", "a/b.tar"),
    ("cos://datasets-1250000000/", "datasets-1250000000", ""),
    ("cos://datasets-1250000000", "datasets-1250000000", ""),
    ("cos://my-data-set-1250000000/x", "my-data-set-1250000000", "x"),
])
def test_parse_and_str_round_trip(text: str, bucket: str, prefix: str) -> None:
    uri = CosUri.parse(text)
    assert (uri.bucket, uri.prefix) == (bucket, prefix)
    assert CosUri.parse(str(uri)) == uri
    assert str(uri) == f"cos://{bucket}/{prefix}"


def test_as_dir_ends_prefix_with_slash() -> None:
    assert str(CosUri("b-1250000000", "x").as_dir()) == "cos://b-1250000000/x/"
    assert str(CosUri("b-1250000000", "x/").as_dir()) == "cos://b-1250000000/x/"
    assert str(CosUri("b-1250000000", "").as_dir()) == "cos://b-1250000000/"


@pytest.mark.parametrize(("text", "reason"), [
    ("s3://bucket-1250000000/x", "uses s3://, but only COS is supported"),
    ("datasets-1250000000/x", "is not a COS URI"),
    ("cos://", "the bucket is missing"),
    ("cos:///x", "the bucket is missing"),
    ("cos://datasets/x", "bucket 'datasets' does not end in -<appid>"),
    ("cos://data-2024/x", "bucket 'data-2024' does not end in -<appid>"),
    ("cos://Data-1250000000/x", "may only contain lowercase letters, digits and '-'"),
    ("cos://data-1250000000/my dir/", "contains whitespace"),
    ("cos://data-1250000000/a/../b", "may not contain '\\', '.' or '..' segments"),
    ("cos://data-1250000000/a//b", "has an empty segment"),
    ("cos://" + "x" * 45 + "-1250000000/", "is longer than 50 characters"),
])
def test_malformed_uris_say_the_expected_form(text: str, reason: str) -> None:
    with pytest.raises(ValueError) as caught:
        CosUri.parse(text)
    message = str(caught.value)
    assert reason in message
    assert "expected cos://<name>-<appid>/<prefix>, e.g. cos://datasets-1250000000/mnist/" in message


def test_pydantic_type_validates_normalises_and_serialises() -> None:
    adapter = TypeAdapter(CosDir)
    uri = adapter.validate_python("cos://b-1250000000/x")
    assert uri == CosUri("b-1250000000", "x/")
    assert adapter.dump_json(uri) == b'"cos://b-1250000000/x/"'
    assert adapter.validate_python(uri) == uri
