"""The IAM evaluator and the S3 request mapping of tests/iam.py, on the cases AWS documents."""

from __future__ import annotations

from typing import Any

import pytest

from tests.iam import Authorization, authorizations, evaluate

BUCKET = "arn:aws:s3:::b"


def _policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


LIST_UNDER_RAW = {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": BUCKET,
                  "Condition": {"StringLike": {"s3:prefix": ["raw/*"]}}}


def test_default_deny_and_allow() -> None:
    policy = _policy({"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"{BUCKET}/raw/*"})
    assert evaluate(policy, Authorization("s3:GetObject", f"{BUCKET}/raw/a")) == "allow"
    assert evaluate(policy, Authorization("s3:GetObject", f"{BUCKET}/other/a")) == "implicit_deny"
    assert evaluate(policy, Authorization("s3:PutObject", f"{BUCKET}/raw/a")) == "implicit_deny"


def test_an_explicit_deny_wins_over_any_allow() -> None:
    policy = _policy({"Effect": "Allow", "Action": "s3:*", "Resource": "*"},
                     {"Effect": "Deny", "Action": "s3:DeleteObject", "Resource": f"{BUCKET}/raw/*"})
    assert evaluate(policy, Authorization("s3:DeleteObject", f"{BUCKET}/raw/a")) == "explicit_deny"
    assert evaluate(policy, Authorization("s3:DeleteObject", f"{BUCKET}/curated/a")) == "allow"


def test_actions_match_without_case_resources_with_it_and_wildcards() -> None:
    policy = _policy({"Effect": "Allow", "Action": "S3:get*", "Resource": f"{BUCKET}/dt=????-*/x"})
    assert evaluate(policy, Authorization("s3:GetObject", f"{BUCKET}/dt=2026-11/x")) == "allow"
    assert evaluate(policy, Authorization("s3:GetObject", f"{BUCKET}/dt=26-11/x")) == "implicit_deny"  # ? is one
    assert evaluate(policy, Authorization("s3:GetObject", "arn:aws:s3:::B/dt=2026-11/x")) == "implicit_deny"


def test_not_resource_and_not_action() -> None:
    policy = _policy({"Effect": "Allow", "NotAction": "s3:DeleteObject", "NotResource": f"{BUCKET}/secret/*"})
    assert evaluate(policy, Authorization("s3:GetObject", f"{BUCKET}/raw/a")) == "allow"
    assert evaluate(policy, Authorization("s3:GetObject", f"{BUCKET}/secret/a")) == "implicit_deny"
    assert evaluate(policy, Authorization("s3:DeleteObject", f"{BUCKET}/raw/a")) == "implicit_deny"


def test_a_condition_on_a_key_the_request_lacks_does_not_match() -> None:
    policy = _policy(LIST_UNDER_RAW)
    assert evaluate(policy, Authorization("s3:ListBucket", BUCKET, {"s3:prefix": "raw/dt=1/"})) == "allow"
    assert evaluate(policy, Authorization("s3:ListBucket", BUCKET)) == "implicit_deny"  # HeadBucket: no prefix
    assert evaluate(policy, Authorization("s3:ListBucket", BUCKET, {"s3:prefix": ""})) == "implicit_deny"
    assert evaluate(policy, Authorization("s3:ListBucket", BUCKET, {"s3:prefix": "raw"})) == "implicit_deny"


@pytest.mark.parametrize(("operator", "present", "absent"), [
    ("StringNotLike", False, True),  # a negated operator matches a missing key
    ("StringLikeIfExists", True, True),
    ("ForAnyValue:StringLike", True, False),
    ("ForAllValues:StringLike", True, True),
    ("StringEquals", False, False),
])
def test_operators_on_present_and_missing_keys(operator: str, present: bool, absent: bool) -> None:
    policy = _policy({"Effect": "Allow", "Action": "s3:ListBucket", "Resource": BUCKET,
                      "Condition": {operator: {"s3:prefix": "raw/*"}}})
    assert (evaluate(policy, Authorization("s3:ListBucket", BUCKET, {"s3:prefix": "raw/x"})) == "allow") is present
    assert (evaluate(policy, Authorization("s3:ListBucket", BUCKET)) == "allow") is absent


def test_null_and_every_key_and_operator_must_match() -> None:
    policy = _policy({"Effect": "Allow", "Action": "s3:ListBucket", "Resource": BUCKET,
                      "Condition": {"Null": {"s3:prefix": "false"}, "StringEquals": {"s3:max-keys": "1"}}})
    assert evaluate(policy, Authorization("s3:ListBucket", BUCKET, {"s3:prefix": "a", "s3:max-keys": "1"})) == "allow"
    assert evaluate(policy, Authorization("s3:ListBucket", BUCKET, {"s3:max-keys": "1"})) == "implicit_deny"
    assert evaluate(policy, Authorization("s3:ListBucket", BUCKET, {"s3:prefix": "a"})) == "implicit_deny"


def test_s3_requests_as_iam_sees_them() -> None:
    assert authorizations("GET", "/b?list-type=2&prefix=raw%2Fdt%3D1%2F&max-keys=1", {}) == [
        Authorization("s3:ListBucket", BUCKET, {"s3:prefix": "raw/dt=1/", "s3:max-keys": "1"})]
    assert authorizations("GET", "/b?list-type=2", {}) == [Authorization("s3:ListBucket", BUCKET)]
    assert authorizations("HEAD", "/b", {}) == [Authorization("s3:ListBucket", BUCKET)]
    assert authorizations("HEAD", "/b/raw/a%20b", {}) == [Authorization("s3:GetObject", f"{BUCKET}/raw/a b")]
    assert authorizations("PUT", "/b/c/x", {"x-amz-copy-source": "/b/c/y%3D1"}) == [
        Authorization("s3:GetObject", f"{BUCKET}/c/y=1"), Authorization("s3:PutObject", f"{BUCKET}/c/x")]
    assert authorizations("PUT", "/b/c/x", {"if-none-match": "*"}) == [Authorization("s3:PutObject", f"{BUCKET}/c/x")]
    for method, path in (("POST", "/b/c/x?uploads"), ("PUT", "/b/c/x?partNumber=1&uploadId=u"),
                         ("POST", "/b/c/x?uploadId=u")):
        assert authorizations(method, path, {}) == [Authorization("s3:PutObject", f"{BUCKET}/c/x")]
    assert authorizations("DELETE", "/b/c/x?uploadId=u", {}) == [
        Authorization("s3:AbortMultipartUpload", f"{BUCKET}/c/x")]
    body = b'<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Object><Key>c/1</Key></Object>' \
           b"<Object><Key>c/2</Key></Object><Quiet>true</Quiet></Delete>"
    assert authorizations("POST", "/b?delete", {}, body) == [
        Authorization("s3:DeleteObject", f"{BUCKET}/c/1"), Authorization("s3:DeleteObject", f"{BUCKET}/c/2")]
    with pytest.raises(ValueError, match="no mapping"):
        authorizations("GET", "/b/c/x?acl", {})  # unknown requests are not waved through
