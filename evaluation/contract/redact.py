"""PII redaction before text reaches the judge: emails, phone numbers, card numbers, IBANs, IPs.

Each match is replaced by a typed placeholder (``<EMAIL>``, ``<PHONE>``, ``<CARD>``, ``<IBAN>``,
``<IP>``; not square brackets, which the MASIS citation audit would count as invalid citations)
and counted. Card numbers must pass the Luhn check and IBANs the mod-97 check, so order
numbers and ids are left alone. Context ids and citations are not redacted (they are not PII and
the citation audit depends on them).
"""

from __future__ import annotations

import ipaddress
import re

from evaluation.contract.config import InputRecord

_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b")
_CARD = re.compile(r"\b(?:\d[ -]?){12,18}\d\b")
_IPV4 = re.compile(r"\b(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)\b")
# Candidates only (a time like 12:30:45 is one): ``ipaddress`` decides, so ``2001:db8::1`` counts too.
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")
# With a + or (area) prefix two groups are a number (``(020) 7946 0958``, ``+49 30 901820``); bare, three.
_PHONE = re.compile(r"(?<![\w+])(?:(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?|\(\d{1,4}\)[ .-]?)\d{1,4}(?:[ .-]\d{2,8}){1,5}"
                    r"|\d{2,4}(?:[ .-]\d{2,4}){2,4})(?!\w)")
_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}(?!\d)|\d{1,2}[./-]\d{1,2}[./-]\d{2,4}(?!\d)")


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def _iban_valid(text: str) -> bool:
    compact = text.replace(" ", "")
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(c, 36)) for c in rearranged)
    return 15 <= len(compact) <= 34 and int(number) % 97 == 1


def _ipv6_valid(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return len(text.replace(":", "")) >= 4  # not ``::2`` or ``a::b`` (slices, code)


def redact_text(text: str) -> tuple[str, int]:
    """``text`` with PII replaced, and how many replacements were made."""
    count = 0

    def substitute(pattern: re.Pattern[str], label: str, check: object = None) -> None:
        nonlocal text, count

        def replace(match: re.Match[str]) -> str:
            nonlocal count
            value = match.group(0)
            if callable(check) and not check(value):
                return value
            count += 1
            return label

        text = pattern.sub(replace, text)

    substitute(_EMAIL, "<EMAIL>")
    substitute(_IBAN, "<IBAN>", _iban_valid)
    substitute(_CARD, "<CARD>", lambda v: _luhn(re.sub(r"\D", "", v)))
    substitute(_IPV4, "<IP>")
    substitute(_IPV6, "<IP>", _ipv6_valid)
    # E.164 numbers have at most 15 digits: a longer run (an order number failing Luhn) is not a phone.
    substitute(_PHONE, "<PHONE>", lambda v: 7 <= len(re.sub(r"\D", "", v)) <= 15 and not _DATE.match(v))
    return text, count


def redact_record(record: InputRecord) -> tuple[InputRecord, int]:
    """A copy of ``record`` with every judged text redacted, and the number of redactions."""
    total = 0

    def clean(value: str | None) -> str | None:
        nonlocal total
        if value is None:
            return None
        cleaned, count = redact_text(value)
        total += count
        return cleaned

    contexts = [c.model_copy(update={"text": clean(c.text)}) for c in record.contexts]
    rubrics = None if record.rubrics is None else [
        r.model_copy(update={"description": clean(r.description)}) for r in record.rubrics]
    redacted = record.model_copy(
        update={
            "question": clean(record.question),
            "answer": clean(record.answer),
            "reference": clean(record.reference),
            "expected_outcome": clean(record.expected_outcome),
            "contexts": contexts,
            "rubrics": rubrics,
        }
    )
    return redacted, total
