"""ListObjects (GET Bucket v1) through the SDK: prefix, delimiter, markers, pages, and keys the SDK only gets back
intact if the emulator url-encodes them (it always sends encoding-type=url and decodes; client-recipes §3.4)."""

from __future__ import annotations

from typing import Any

from qcloud_cos import CosS3Client

ODD_KEYS = ["odd/a b.txt", "odd/pct%41+x.txt", "odd/ünï©ødé.bin", "odd/q?&=#.txt", "odd/tilde~star*.txt"]


def put_all(cos: CosS3Client, bucket: str, keys: list[str]) -> None:
    for key in keys:
        cos.put_object(Bucket=bucket, Key=key, Body=key.encode())


def keys_of(listing: dict[str, Any]) -> list[str]:
    return [c["Key"] for c in listing.get("Contents", [])]


def prefixes_of(listing: dict[str, Any]) -> list[str]:
    return [p["Prefix"] for p in listing.get("CommonPrefixes", [])]


def test_prefix_and_delimiter(cos: CosS3Client, bucket: str) -> None:
    put_all(cos, bucket, ["top.txt", "a/1", "a/2", "a/b/3", "b/4", "ab"])
    root = cos.list_objects(Bucket=bucket, Delimiter="/")
    assert keys_of(root) == ["ab", "top.txt"]
    assert prefixes_of(root) == ["a/", "b/"]
    assert root["IsTruncated"] == "false"
    assert "NextMarker" not in root

    under_a = cos.list_objects(Bucket=bucket, Prefix="a/", Delimiter="/")
    assert keys_of(under_a) == ["a/1", "a/2"]
    assert prefixes_of(under_a) == ["a/b/"]
    assert under_a["Prefix"] == "a/"

    flat = cos.list_objects(Bucket=bucket, Prefix="a")
    assert keys_of(flat) == ["a/1", "a/2", "a/b/3", "ab"]
    entry = flat["Contents"][0]
    assert set(entry) == {"Key", "LastModified", "ETag", "Size", "Owner", "StorageClass"}
    assert entry["Size"] == "3"


def test_marker_and_pages(cos: CosS3Client, bucket: str) -> None:
    keys = [f"k/{i:03d}" for i in range(25)]
    put_all(cos, bucket, keys)
    seen: list[str] = []
    marker = ""
    pages = 0
    while True:
        page = cos.list_objects(Bucket=bucket, Prefix="k/", Marker=marker, MaxKeys=10)
        pages += 1
        seen += keys_of(page)
        if page["IsTruncated"] == "false":
            break
        marker = page["NextMarker"]  # present whenever truncated: coscmd pages on it
        assert marker == seen[-1]
    assert (seen, pages) == (keys, 3)
    assert keys_of(cos.list_objects(Bucket=bucket, Marker="k/020")) == keys[21:]


def test_pages_over_common_prefixes(cos: CosS3Client, bucket: str) -> None:
    put_all(cos, bucket, ["d1/x", "d1/y", "d2/x", "d3/x", "d3/y", "f"])
    first = cos.list_objects(Bucket=bucket, Delimiter="/", MaxKeys=2)
    assert (prefixes_of(first), first["IsTruncated"], first["NextMarker"]) == (["d1/", "d2/"], "true", "d2/")
    second = cos.list_objects(Bucket=bucket, Delimiter="/", MaxKeys=2, Marker=first["NextMarker"])
    assert (prefixes_of(second), keys_of(second), second["IsTruncated"]) == (["d3/"], ["f"], "false")


def test_odd_keys_survive_listing(cos: CosS3Client, bucket: str) -> None:
    put_all(cos, bucket, ODD_KEYS)
    listing = cos.list_objects(Bucket=bucket, Prefix="odd/")
    assert keys_of(listing) == sorted(ODD_KEYS, key=lambda k: k.encode())
    for key in ODD_KEYS:
        body = cos.get_object(Bucket=bucket, Key=key)["Body"].get_raw_stream().read()
        assert body == key.encode()
    by_marker = cos.list_objects(Bucket=bucket, Prefix="odd/", Marker="odd/pct%41+x.txt", MaxKeys=1)
    assert keys_of(by_marker) == ["odd/q?&=#.txt"]
    assert by_marker["Marker"] == "odd/pct%41+x.txt"
    assert by_marker["NextMarker"] == "odd/q?&=#.txt"


def test_odd_prefixes_roll_up(cos: CosS3Client, bucket: str) -> None:
    put_all(cos, bucket, ["sp ace/1", "pl+us/2", "pc%t/3", "ü/4"])
    listing = cos.list_objects(Bucket=bucket, Delimiter="/")
    assert prefixes_of(listing) == ["pc%t/", "pl+us/", "sp ace/", "ü/"]


def test_raw_listing_without_sdk_decoding(cos: CosS3Client, bucket: str) -> None:
    """With EncodingType given by the caller the SDK does not decode: the wire form is visible."""
    put_all(cos, bucket, ["x/a b+c%.txt"])
    listing = cos.list_objects(Bucket=bucket, Prefix="x/", EncodingType="url")
    assert listing["EncodingType"] == "url"
    assert keys_of(listing) == ["x/a%20b%2Bc%25.txt"]
