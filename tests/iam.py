"""IAM as AWS evaluates an identity policy, and the S3 requests a client sends as IAM sees them.

:func:`evaluate` decides one :class:`Authorization` against a policy document with AWS's rules
(the IAM User Guide, "Policy evaluation logic" and "IAM JSON policy elements"): an explicit Deny
wins; else an Allow that matches allows; else the request is denied by default. A statement
matches when its Action (or NotAction), its Resource (or NotResource) and every one of its
conditions match. Action and Resource patterns take ``*`` and ``?``; actions match without regard
to case, resources with it. In a condition, the operators of a block must all match, the keys of an
operator all match, and any of a key's values may match. A key the request does not carry matches
no positive operator (``StringLike``, ``StringEquals``, ...), matches every negated one
(``StringNotLike``, ...), and matches under an ``...IfExists`` operator; ``ForAnyValue:`` over a
missing key does not match, ``ForAllValues:`` does; ``Null`` tests presence.

:func:`authorizations` maps one recorded HTTP request to S3 (path-style, as the proxy saw it) to
what S3 authorizes it as (the Amazon S3 User Guide, "Actions, resources, and condition keys for
Amazon S3" and the API reference of each operation): a GET or HEAD of an object is
``s3:GetObject`` on ``arn:aws:s3:::bucket/key``; a list (ListObjects, ListObjectsV2) or a
HeadBucket is ``s3:ListBucket`` on the bucket, with ``s3:prefix`` the request's ``prefix`` when it
has one (HeadBucket has none); a PUT (conditional or not), and every step of a multipart upload, is
``s3:PutObject`` on the key; a copy is ``s3:GetObject`` on the source and ``s3:PutObject`` on the
target; a DELETE of a key, and each key of a multi-object delete, is ``s3:DeleteObject``; aborting a
multipart upload is ``s3:AbortMultipartUpload``. A request it does not know raises, so nothing
goes unchecked.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qs, unquote, urlsplit

Decision = Literal["allow", "implicit_deny", "explicit_deny"]


@dataclass(frozen=True)
class Authorization:
    """What IAM decides on: an action on a resource, with the request's condition keys."""

    action: str
    resource: str
    context: Mapping[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        keys = "".join(f" {k}={v!r}" for k, v in sorted(self.context.items()))
        return f"{self.action} {self.resource}{keys}"


def _listed(value: str | Sequence[str] | None) -> list[str]:
    return [] if value is None else [value] if isinstance(value, str) else list(value)


def _wildcard(pattern: str, value: str, *, case: bool = True) -> bool:
    """IAM's ``*`` (any run of characters) and ``?`` (any one), nothing else special."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, 0 if case else re.IGNORECASE) is not None


_STRING = {
    "StringEquals": lambda p, v: p == v,
    "StringEqualsIgnoreCase": lambda p, v: p.lower() == v.lower(),
    "StringLike": lambda p, v: _wildcard(p, v),
    "ArnEquals": lambda p, v: p == v,
    "ArnLike": lambda p, v: _wildcard(p, v),
    "Bool": lambda p, v: p.lower() == v.lower(),
}
_NEGATED = {"StringNotEquals": "StringEquals", "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
            "StringNotLike": "StringLike", "ArnNotEquals": "ArnEquals", "ArnNotLike": "ArnLike"}


def _condition_matches(operator: str, key: str, wanted: list[str], context: Mapping[str, str]) -> bool:
    """One key of one operator of a Condition block (values as the policy writes them)."""
    qualifier, _, operator = operator.rpartition(":")
    present = key in context
    if operator == "Null":  # "true": the key must be absent
        return any((v.lower() == "true") != present for v in wanted)
    if_exists = operator.endswith("IfExists")
    operator = operator.removesuffix("IfExists")
    if not present:
        if if_exists or qualifier == "ForAllValues":
            return True
        return operator in _NEGATED and qualifier != "ForAnyValue"
    base = _NEGATED.get(operator, operator)
    if base not in _STRING:
        raise ValueError(f"condition operator {operator!r} is not supported here")
    hit = any(_STRING[base](pattern, context[key]) for pattern in wanted)
    return not hit if operator in _NEGATED else hit


def _conditions_match(block: Mapping[str, Mapping[str, Any]], context: Mapping[str, str]) -> bool:
    return all(_condition_matches(operator, key, [str(v) for v in _listed(values)], context)
               for operator, keys in block.items() for key, values in keys.items())


def statement_matches(statement: Mapping[str, Any], request: Authorization) -> bool:
    """Whether ``statement`` applies to ``request`` (its Effect aside)."""
    if "Action" in statement:
        actions = any(_wildcard(a, request.action, case=False) for a in _listed(statement["Action"]))
    else:
        actions = not any(_wildcard(a, request.action, case=False) for a in _listed(statement.get("NotAction")))
    if "Resource" in statement:
        resources = any(_wildcard(r, request.resource) for r in _listed(statement["Resource"]))
    else:
        resources = not any(_wildcard(r, request.resource) for r in _listed(statement.get("NotResource")))
    return actions and resources and _conditions_match(statement.get("Condition", {}), request.context)


def statements(policy: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The policy's statements (one, or a list)."""
    found = policy["Statement"]
    return [found] if isinstance(found, Mapping) else list(found)


def evaluate(policy: Mapping[str, Any], request: Authorization) -> Decision:
    """AWS's decision on ``request`` under ``policy`` alone."""
    matching = [s for s in statements(policy) if statement_matches(s, request)]
    if any(s["Effect"] == "Deny" for s in matching):
        return "explicit_deny"
    return "allow" if any(s["Effect"] == "Allow" for s in matching) else "implicit_deny"


# --------------------------------------------------------------------------------------------
# S3 requests as IAM sees them


def _object(bucket: str, key: str, action: str) -> Authorization:
    return Authorization(action, f"arn:aws:s3:::{bucket}/{key}")


def _deleted_keys(body: bytes) -> list[str]:
    """The keys of a multi-object delete's XML body."""
    root = ET.fromstring(body)  # noqa: S314 - a request this test's own client sent
    return [element.text or "" for element in root.iter() if element.tag.rsplit("}", 1)[-1] == "Key"]


def authorizations(method: str, path: str, headers: Mapping[str, str], body: bytes = b"") -> list[Authorization]:
    """What S3 authorizes a path-style request as (one or more checks, all needed)."""
    parts = urlsplit(path)
    query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    bucket, _, key = unquote(parts.path).lstrip("/").partition("/")
    if not bucket:
        if method == "GET":
            return [Authorization("s3:ListAllMyBuckets", "*")]
        raise ValueError(f"no mapping for {method} {path}")
    if not key:
        if method == "HEAD" or (method == "GET" and not set(query) - {"list-type", "prefix", "max-keys",
                                                                        "start-after", "continuation-token",
                                                                        "delimiter", "encoding-type",
                                                                        "fetch-owner", "marker"}):
            context = {"s3:prefix": query["prefix"]} if method == "GET" and "prefix" in query else {}
            if "max-keys" in query:
                context["s3:max-keys"] = query["max-keys"]
            return [Authorization("s3:ListBucket", f"arn:aws:s3:::{bucket}", context)]
        if method == "POST" and "delete" in query:
            return [_object(bucket, k, "s3:DeleteObject") for k in _deleted_keys(body)]
        raise ValueError(f"no mapping for {method} {path}")
    subresources = set(query) - {"x-id", "partNumber", "uploadId", "uploads"}
    if subresources:
        raise ValueError(f"no mapping for {method} {path} (subresources {sorted(subresources)})")
    if method in ("GET", "HEAD") and "uploadId" not in query:
        return [_object(bucket, key, "s3:GetObject")]
    if method == "DELETE":
        return [_object(bucket, key, "s3:AbortMultipartUpload" if "uploadId" in query else "s3:DeleteObject")]
    if method in ("PUT", "POST"):
        found = [_object(bucket, key, "s3:PutObject")]
        source = headers.get("x-amz-copy-source", "")
        if source:
            source_bucket, _, source_key = unquote(source.split("?", 1)[0]).lstrip("/").partition("/")
            found.insert(0, _object(source_bucket, source_key, "s3:GetObject"))
        return found
    raise ValueError(f"no mapping for {method} {path}")
