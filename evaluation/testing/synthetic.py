"""Realistic generated conversation logs, for the demo, the tests and the benchmark.

A day holds records from three assistant versions of different quality (``assistant-v2`` is the
most grounded, ``assistant-lite`` hallucinates most), with retrieved contexts, citations (some to
ids that were never retrieved), uncited claims, refusals, references for some records, rubrics or
an expected outcome for others, and, when asked, a few planted bad records. Same seed, same day.

Each record has a ``metadata.locale`` (:data:`LOCALES`). A day can be generated with other
behaviours (``behaviour``), for a model or for one locale of a model: the demo's last day uses
:data:`UNGROUNDED` for one model's German records, whose answers then lose their grounding.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaluation.contract.errors import UsageError

MODELS = ("assistant-v1", "assistant-v2", "assistant-lite")
#: Chance that a model answers well (grounded and cited), hallucinates, or refuses.
MODEL_BEHAVIOUR = {
    "assistant-v1": (0.70, 0.20, 0.10),
    "assistant-v2": (0.85, 0.08, 0.07),
    "assistant-lite": (0.45, 0.45, 0.10),
}
#: A model whose answers lost their grounding: most are wrong, uncited or cite what was never retrieved.
UNGROUNDED = (0.25, 0.68, 0.07)
#: The locales of the records (``metadata.locale``) and their shares of the traffic.
LOCALES = {"en": 0.55, "de": 0.30, "fr": 0.15}


@dataclass(frozen=True)
class Fact:
    """One piece of knowledge a question can be about."""

    subject: str
    attribute: str
    value: str
    wrong: str
    detail: str


FACTS: tuple[Fact, ...] = (
    Fact("Mount Everest", "height", "8,849 metres", "7,210 metres", "It lies on the border of Nepal and China."),
    Fact("the Danube", "length", "2,850 kilometres", "1,420 kilometres", "It flows through ten countries."),
    Fact("the Eiffel Tower", "completion year", "1889", "1925", "It was built for the World's Fair in Paris."),
    Fact("the Great Barrier Reef", "area", "344,400 square kilometres", "98,000 square kilometres",
         "It lies off the coast of Queensland in Australia."),
    Fact("the Python language", "first release year", "1991", "1979", "It was created by Guido van Rossum."),
    Fact("the Hubble Space Telescope", "launch year", "1990", "1972", "It orbits Earth at about 540 kilometres."),
    Fact("Lake Baikal", "maximum depth", "1,642 metres", "812 metres", "It holds about a fifth of the world's fresh water."),
    Fact("the Sahara", "area", "9.2 million square kilometres", "3.1 million square kilometres",
         "It is the largest hot desert in the world."),
    Fact("the human heart", "number of chambers", "four chambers", "six chambers", "It pumps blood through the body."),
    Fact("the Amazon rainforest", "area", "5.5 million square kilometres", "1.2 million square kilometres",
         "It spans nine countries in South America."),
    Fact("the Moon", "average distance from Earth", "384,400 kilometres", "152,000 kilometres",
         "Its gravity causes the tides on Earth."),
    Fact("the Golden Gate Bridge", "opening year", "1937", "1961", "It spans the strait at the entrance to San Francisco Bay."),
    Fact("Mount Kilimanjaro", "height", "5,895 metres", "4,120 metres", "It is a dormant volcano in Tanzania."),
    Fact("the Pacific Ocean", "average depth", "4,280 metres", "2,100 metres", "It is the largest ocean on Earth."),
    Fact("the speed of light", "value in vacuum", "299,792 kilometres per second", "186,000 kilometres per second",
         "Nothing with mass can reach it."),
    Fact("the Berlin Wall", "fall year", "1989", "1975", "It divided the city for twenty-eight years."),
    Fact("the Nile", "length", "6,650 kilometres", "3,900 kilometres", "It flows north into the Mediterranean Sea."),
    Fact("the International Space Station", "first crew year", "2000", "1994", "It orbits Earth about every 90 minutes."),
    Fact("Mars", "number of moons", "two moons", "five moons", "Its moons are called Phobos and Deimos."),
    Fact("the Panama Canal", "opening year", "1914", "1931", "It connects the Atlantic and Pacific oceans."),
    Fact("Venus", "surface temperature", "464 degrees Celsius", "120 degrees Celsius", "It has a thick carbon dioxide atmosphere."),
    Fact("the Colosseum", "completion year", "80 AD", "210 AD", "It could hold about fifty thousand spectators."),
    Fact("the blue whale", "maximum length", "30 metres", "12 metres", "It is the largest animal known to have lived."),
    Fact("Antarctica", "area", "14.2 million square kilometres", "6.3 million square kilometres",
         "It is covered by an ice sheet kilometres thick."),
)

_DISTRACTORS = (
    "The museum opens at nine in the morning and closes at six in the evening.",
    "Shipping usually takes three to five business days for domestic orders.",
    "The committee meets every second Tuesday to review open proposals.",
    "Annual subscriptions can be cancelled from the account settings page.",
    "The library lends up to ten books at a time for three weeks.",
)

_GOALS = (None, None, "fact-checking", "creative", "medical", "balanced", "legal")


def _context_for(fact: Fact) -> str:
    return f"{fact.subject[0].upper()}{fact.subject[1:]} has a {fact.attribute} of {fact.value}. {fact.detail}"


def _answer(rng: random.Random, fact: Fact, roll: float, good: float, hallucinate: float) -> str:
    """A grounded, hallucinated or refusing answer to ``fact`` by the roll of the model's behaviour."""
    if roll < good:
        return f"The {fact.attribute} of {fact.subject} is {fact.value} [ctx-1]. {fact.detail[:-1]} [ctx-1]."
    if roll >= good + hallucinate:
        return ("I cannot provide that figure: the retrieved documents do not cover it, so there is "
                "insufficient evidence to answer.")
    style = rng.random()
    if style < 0.4:
        return f"The {fact.attribute} of {fact.subject} is {fact.wrong} [ctx-7]."  # invalid citation
    if style < 0.7:
        claims = [
            f"The {fact.attribute} of {fact.subject} is {fact.wrong}",
            "This figure was confirmed by several independent surveys",
            "Experts consider it one of the most remarkable facts of its kind",
            "Many visitors are surprised when they learn it",
            "Textbooks have reported it this way for decades",
            "It is widely cited in popular science",
        ]
        return ". ".join(claims[: rng.randint(5, 6)]) + "."  # five or more uncited claims
    return f"The {fact.attribute} of {fact.subject} is {fact.wrong}, according to [ctx-1]."


#: Per model, the chances of :data:`MODEL_BEHAVIOUR` to use instead; a key ``model@locale`` (e.g.
#: ``assistant-v2@de``) applies to that model's records of that locale alone.
Behaviour = Mapping[str, tuple[float, float, float]]


def _locale(day: dt.date, index: int) -> str:
    """A record's locale, drawn aside so that every other draw of the day stays as it was."""
    roll, total = random.Random(f"{day.isoformat()}-{index}-locale").random(), 0.0
    for locale, share in LOCALES.items():
        total += share
        if roll < total:
            return locale
    return next(iter(LOCALES))


def _record(
    rng: random.Random, day: dt.date, index: int, model: str, behaviour: Behaviour, profiles: Behaviour
) -> dict[str, Any]:
    fact = FACTS[rng.randrange(len(FACTS))]
    good, hallucinate, _ = profiles[model]
    roll = rng.random()
    contexts = [{"id": "ctx-1", "text": _context_for(fact), "source": "kb/facts", "score": round(rng.uniform(0.7, 0.99), 3)}]
    if rng.random() < 0.6:
        contexts.append({"id": "ctx-2", "text": rng.choice(_DISTRACTORS), "source": "kb/misc",
                         "score": round(rng.uniform(0.2, 0.6), 3)})
    if rng.random() < 0.1:
        contexts = [{"text": c["text"]} for c in contexts]  # ids default to ctx-N
    answer = _answer(rng, fact, roll, good, hallucinate)
    locale = _locale(day, index)
    changed = behaviour.get(f"{model}@{locale}", behaviour.get(model))
    if changed is not None:  # drawn aside, so every other draw of the day stays as it was
        side = random.Random(f"{day.isoformat()}-{index}-{model}")
        answer = _answer(side, fact, side.random(), *changed[:2])
    if rng.random() < 0.02:
        answer = ""
    record: dict[str, Any] = {
        "record_id": f"{day:%Y%m%d}-{index:06d}",
        "conversation_id": f"conv-{rng.randrange(10**6):06d}",
        "timestamp": (dt.datetime.combine(day, dt.time(0), dt.UTC)
                      + dt.timedelta(seconds=rng.randrange(86400))).isoformat().replace("+00:00", "Z"),
        "model": model,
        "question": f"What is the {fact.attribute} of {fact.subject}?",
        "answer": answer,
        "contexts": contexts,
        "metadata": {"channel": rng.choice(["web", "mobile", "api"]), "locale": locale},
    }
    kind = rng.random()
    if kind < 0.35:
        record["reference"] = f"The {fact.attribute} of {fact.subject} is {fact.value}."
    elif kind < 0.45:
        record["reference"] = rng.choice([None, "", " None "])
    if 0.2 < kind < 0.45:
        record["rubrics"] = [
            {"id": "states-value", "description": f"States that the {fact.attribute} is {fact.value}", "weight": 2},
            {"id": "cites", "description": "Cites the retrieved context ctx-1", "required": False},
        ]
    elif 0.45 <= kind < 0.6:
        record["expected_outcome"] = f"The answer gives the {fact.attribute} of {fact.subject}: {fact.value}."
    goal = rng.choice(_GOALS)
    if goal is not None:
        record["evaluation_goal"] = goal
    return record


def bad_lines(day: dt.date) -> list[tuple[str, str]]:
    """Planted bad records as (raw line, the reason validation must give)."""
    ts = f"{day.isoformat()}T12:00:00Z"
    other_day = (day - dt.timedelta(days=3)).isoformat() + "T12:00:00Z"
    base = {"conversation_id": "conv-bad", "model": "assistant-v1", "answer": "Some answer.", "contexts": []}
    return [
        ('{"record_id": "bad-json", "question": "unterminated', "not valid JSON"),
        (json.dumps({**base, "record_id": "bad-no-question", "timestamp": ts}), "question"),
        (json.dumps({**base, "record_id": "bad-other-day", "timestamp": other_day, "question": "Why?"}), "timestamp"),
        (json.dumps({**base, "record_id": "bad-rubric", "timestamp": ts, "question": "Why?",
                     "rubrics": [{"description": "x", "weight": -1}]}), "rubrics"),
        (json.dumps({**base, "record_id": "bad-contexts", "timestamp": ts, "question": "Why?",
                     "contexts": [{"id": "c"}]}), "contexts"),
    ]


def generate_day(
    day: dt.date,
    records: int = 300,
    *,
    seed: int = 7,
    bad: bool = True,
    behaviour: Behaviour | None = None,
    models: Sequence[str] = MODELS,
) -> list[str]:
    """JSON lines of a day: ``records`` valid records (spread over ``models`` in turn), plus the
    planted bad records when ``bad`` (one of them a repeat of the first record's id).
    ``behaviour`` overrides :data:`MODEL_BEHAVIOUR` for the models it names (same draws otherwise,
    so the day's questions stay the same). A model not in :data:`MODEL_BEHAVIOUR` behaves as the
    built-in model at its position (the first as assistant-v1, the second as assistant-v2, ...)."""
    if not models:
        raise UsageError("models: name at least one model")
    rng = random.Random(f"{seed}-{day.isoformat()}")
    behaviour = behaviour or {}
    built_in = list(MODEL_BEHAVIOUR.values())
    profiles = {m: MODEL_BEHAVIOUR.get(m, built_in[i % len(built_in)]) for i, m in enumerate(models)}
    lines = [json.dumps(_record(rng, day, i, models[i % len(models)], behaviour, profiles), ensure_ascii=False)
             for i in range(records)]
    if bad:
        lines.extend(raw for raw, _ in bad_lines(day))
        lines.append(lines[0])  # a repeated record_id: the first occurrence is kept
    return lines


#: A system prompt of the generated chat logs (it lands in metadata.conversation_history).
CHAT_SYSTEM_PROMPT = "You answer from the retrieved passages and cite them by id, like [ctx-1]."


def to_openai_chat(line: str) -> str:
    """One generated line in the OpenAI chat format (the ``openai-chat`` input format), the same
    content: a system prompt, the user's question, the assistant's retrieval tool call and the
    tool's reply (the contexts as a JSON array), then the answer. ``id``, ``model`` and
    ``created`` (Unix seconds) as a gateway exports them; the other fields under their own names.
    A line that is not a JSON object is returned as it is."""
    try:
        record = json.loads(line)
    except ValueError:
        return line
    if type(record) is not dict:
        return line
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": CHAT_SYSTEM_PROMPT},
        {"role": "user", "content": record.pop("question", None)},
    ]
    contexts = record.pop("contexts", None)
    if contexts:
        call = {"id": "call_1", "type": "function",
                "function": {"name": "search_kb", "arguments": json.dumps({"query": messages[1]["content"]})}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": "call_1", "name": "search_kb",
                         "content": json.dumps(contexts, ensure_ascii=False)})
    messages.append({"role": "assistant", "content": record.pop("answer", None)})
    chat: dict[str, Any] = {"id": record.pop("record_id", None), "object": "chat.completion",
                            "model": record.pop("model", None)}
    timestamp = record.pop("timestamp", None)
    try:
        chat["created"] = int(dt.datetime.fromisoformat(timestamp).timestamp())
    except (TypeError, ValueError):
        chat["timestamp"] = timestamp  # kept as it was: validation names what is wrong with it
    return json.dumps({**chat, "messages": messages, **record}, ensure_ascii=False)


def jsonl_objects(day: dt.date, lines: Sequence[str], input_format: str = "own") -> dict[str, bytes]:
    """Generated lines as a day's two JSONL objects (the second gzipped), each line in
    ``input_format`` (``own`` or ``openai-chat``)."""
    if input_format == "openai-chat":
        lines = [to_openai_chat(line) for line in lines]
    half = len(lines) // 2
    return {
        f"dt={day.isoformat()}/part-000.jsonl": ("\n".join(lines[:half]) + "\n").encode(),
        f"dt={day.isoformat()}/part-001.jsonl.gz": gzip.compress(("\n".join(lines[half:]) + "\n").encode(), mtime=0),
    }


def write_day(
    store: Any, day: dt.date, records: int = 300, *, seed: int = 7, bad: bool = True, behaviour: Behaviour | None = None
) -> list[str]:
    """Write a generated day (:func:`generate_day`) into a store (see :mod:`evaluation.storage`) as
    its two JSONL objects (:func:`jsonl_objects`); returns the keys."""
    objects = jsonl_objects(day, generate_day(day, records, seed=seed, bad=bad, behaviour=behaviour))
    for key, data in objects.items():
        store.write_bytes(key, data)
    return list(objects)
