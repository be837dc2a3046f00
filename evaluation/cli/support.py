"""What makes ``python -m evaluation`` answer people rather than programmers: one-line errors that
name the option, the bad value and what is accepted; "did you mean" for misspelt options and
judge names; plain-text help; failures of storage or a provider as one line (the traceback only
with ``-v``); third-party warnings sent to the log at INFO instead of the terminal.

Exit codes: 2 for a command line that cannot be used as given, 1 for a command that could not
do its work (a failed run, storage or a provider refusing).
"""

from __future__ import annotations

import argparse
import datetime as dt
import difflib
import logging
import operator
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from pydantic import ValidationError

from evaluation.contract.config import JUDGES
from evaluation.contract.errors import EvaluationError, UsageError
from evaluation.contract.options import Option

__all__ = ["CliError", "DayExpression", "Parser", "ProgressBars", "add_options", "bounded", "day_expression", "dispatch",
           "iso_date", "judge_names", "option_values", "plain", "route_third_party_logs", "suggest", "validation_message"]

#: Exit code of a command line that cannot be used as given.
USAGE = 2
#: Exit code of a command that could not do its work.
FAILED = 1

#: Environment variables searched, in order, for the judge's API key (litellm also reads the
#: providers' own, such as OPENAI_API_KEY or ANTHROPIC_API_KEY, by itself).
API_KEY_ENV = ("EVALUATION_JUDGE_API_KEY", "LLM_API_KEY")
#: Where the command line looks for the judge's key, as messages about credentials name it.
KEY_HINT = " / ".join(API_KEY_ENV)


def api_key_from_env(cfg_api_base: str | None) -> str | None:
    """The judge's key from the environment; a placeholder for a keyless OpenAI-compatible server."""
    for name in API_KEY_ENV:
        if os.environ.get(name):
            return os.environ[name]
    if cfg_api_base and not os.environ.get("OPENAI_API_KEY"):
        return "EMPTY"  # vLLM / Ollama style servers take any key, but the client wants one
    return None


class CliError(UsageError):
    """A command line that cannot be used as given; the message names the option and the value."""


class ProgressBars:
    """A progress bar on stderr for each judging pass of a command (``run``: the day's judging;
    ``calibrate``: each model of the set; ``compare``: the re-judged sample), the one before closed
    when the next starts; none when ``enabled`` is false (``--no-progress``). :meth:`start` is what
    the jobs take as ``progress`` (or :meth:`update` moves the bar started last); close the last
    with :meth:`close`."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Any = None

    def start(self, what: str, total: int) -> Callable[[int], None]:
        self.close()
        if self.enabled:
            from tqdm import tqdm  # only when a bar is drawn

            self.bar = tqdm(total=total, unit="judgement", desc=what, file=sys.stderr, dynamic_ncols=True)
        return self.update

    def update(self, count: int) -> None:
        if self.bar is not None:
            self.bar.update(count)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def plain(text: str) -> str:
    """Help text without reStructuredText markup: ````x```` and ``:func:`x``` as x."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)
    return text.replace("``", "").replace("`", "")


def suggest(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean X?)`` for the closest of ``choices``, or nothing."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def iso_date(value: str) -> dt.date:
    """An argparse type: a YYYY-MM-DD day, refused with a short reason."""
    try:
        return dt.date.fromisoformat(value)
    except ValueError as exc:
        reason = str(exc).removeprefix("Invalid isoformat string: ").strip()
        why = "" if reason.startswith("'") else f": {reason}"
        raise argparse.ArgumentTypeError(f"{value!r} is not a day (YYYY-MM-DD){why}") from None


@dataclass(frozen=True)
class DayExpression:
    """A day as given on the command line: a date, or ``latest`` / ``latest-N`` (the newest day
    landed under the output root, or N days before it), resolved once the tables are known."""

    date: dt.date | None
    days_before_latest: int = 0

    def resolve(self, latest: Callable[[], dt.date]) -> dt.date:
        """The day, asking ``latest`` for the newest landed one when needed."""
        if self.date is not None:
            return self.date
        return latest() - dt.timedelta(days=self.days_before_latest)


def day_expression(value: str) -> DayExpression:
    """An argparse type: YYYY-MM-DD, ``latest`` or ``latest-N``."""
    found = re.fullmatch(r"latest(?:-(\d+))?", value.strip())
    if found:
        return DayExpression(None, int(found.group(1) or 0))
    try:
        return DayExpression(dt.date.fromisoformat(value))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a day (YYYY-MM-DD, latest or latest-N)") from None


def judge_names(value: str) -> str:
    """An argparse type: comma-separated judge names, each known (refused naming the unknown one,
    the closest known name and every accepted one). Returns the value as given."""
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"no judge named in {value!r} (judges: {', '.join(JUDGES)})")
    for name in names:
        if name not in JUDGES:
            raise argparse.ArgumentTypeError(
                f"unknown judge {name!r}{suggest(name, JUDGES)}; judges: {', '.join(JUDGES)}")
    return ",".join(names)


def bounded(kind: type[int] | type[float], minimum: float | None = None, maximum: float | None = None, *,
            above: float | None = None, below: float | None = None) -> Callable[[str], int | float]:
    """An argparse type: an int or float within [minimum, maximum] (and above ``above``, below
    ``below``), refused with the range."""
    noun = "a whole number" if kind is int else "a number"
    limits = [(bound, words, holds) for bound, words, holds in (
        (minimum, "at least", operator.ge), (above, "above", operator.gt), (maximum, "at most", operator.le),
        (below, "below", operator.lt)) if bound is not None]
    if minimum is not None and maximum is not None and len(limits) == 2:
        accepted = f"from {minimum:g} to {maximum:g}"
    else:
        accepted = " and ".join(f"{words} {bound:g}" for bound, words, _ in limits)

    def convert(value: str) -> int | float:
        try:
            number = kind(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not {noun}") from None
        if not all(holds(number, bound) for bound, _, holds in limits):
            raise argparse.ArgumentTypeError(f"{value} is out of range (accepted: {accepted})")
        return number

    convert.__name__ = kind.__name__  # argparse names the type in its own messages
    return convert


def _flag_type(option: Option) -> Callable[[str], Any]:
    """The argparse type of an option, from its JSON Schema."""
    schema = option.schema
    if option.kind in ("integer", "number"):
        return bounded(int if option.kind == "integer" else float, schema.get("minimum"), schema.get("maximum"),
                       above=schema.get("exclusiveMinimum"), below=schema.get("exclusiveMaximum"))
    if option.kind == "array" and "enum" in schema.get("items", {}):
        return judge_names
    if schema.get("format") == "date":
        return day_expression
    return str


def add_options(parser: argparse.ArgumentParser, found: Iterable[Option], title: str = "run options") -> None:
    """A flag per option, with its help and its default (or the variable an empty one takes), in
    a group of the help under ``title``: after the command's own options, whatever the order they
    were added in (argparse lists the groups after its own)."""
    group = parser.add_argument_group(title)
    for option in found:
        text = option.description.rstrip(".")
        if option.schema.get("format") == "date":
            text += ": YYYY-MM-DD, latest (the newest landed day) or latest-N"
        kwargs: dict[str, Any] = {"dest": option.name, "default": None,
                                  "help": text if option.required else f"{text} (default: {option.default_text})"}
        if option.kind == "boolean":
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs.update(type=_flag_type(option), required=option.required,
                          metavar="URI" if option.name.endswith("_uri") else None)
        kwargs["help"] = plain(kwargs["help"]).replace("%", "%%")
        action = group.add_argument(*option.flags, **kwargs)
        if isinstance(parser, Parser):
            parser.track(action)
            if option.env is not None:
                parser.variables[option.name] = option.env


def option_values(args: argparse.Namespace, found: Iterable[Option]) -> dict[str, Any]:
    """The options given on the command line (those left out are absent)."""
    return {o.name: getattr(args, o.name) for o in found if getattr(args, o.name, None) is not None}


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage block), with "did you mean" for an
    unknown option, and whose help is plain text; its subcommands' parsers are of this class too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        if kwargs.get("description"):
            kwargs["description"] = plain(kwargs["description"])
        #: dest -> the flag people type (the first long option string)
        self.flags: dict[str, str] = {}
        #: dest -> the environment variable an option left out takes (``EVALUATION_<OPTION>``)
        self.variables: dict[str, str] = {}
        self.options: list[str] = []
        self.subcommands: argparse.Action | None = None
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        if isinstance(kwargs.get("help"), str):  # a help text is plain prose: its % are not argparse's
            kwargs["help"] = plain(kwargs["help"]).replace("%", "%%")
        return self.track(super().add_argument(*args, **kwargs))

    def track(self, action: argparse.Action) -> argparse.Action:
        """Know ``action``'s flags (for "did you mean" and error messages), also when it was added
        to an argument group."""
        self.options += action.option_strings
        longs = [s for s in action.option_strings if s.startswith("--")]
        if longs:
            self.flags.setdefault(action.dest, longs[0])
        return action

    def format_help(self) -> str:
        self._compact_usage()
        return super().format_help()

    def _compact_usage(self) -> None:
        """A usage line that fits a screen when argparse's would not (a command with the run's
        options): the required options and arguments, then ``[options]`` and each group's title."""
        if self.usage is not None or self.subcommands is not None or super().format_usage().count("\n") <= 4:
            return
        parts = ["%(prog)s"]
        for action in self._actions:
            if action.option_strings and action.required:
                parts.append(f"{action.option_strings[0]} {action.metavar or action.dest.upper()}")
            elif not action.option_strings:
                parts.append(str(action.metavar or action.dest))
        parts.append("[options]")
        parts += [f"[{group.title}]" for group in self._action_groups[2:] if group._group_actions]
        self.usage = " ".join(parts)

    def add_subparsers(self, **kwargs: Any) -> Any:
        self.subcommands = super().add_subparsers(**kwargs)
        return self.subcommands

    def subcommand(self, name: str) -> Parser:
        assert self.subcommands is not None and self.subcommands.choices is not None
        parser = dict(self.subcommands.choices)[name]  # type: ignore[call-overload]
        assert isinstance(parser, Parser)
        return parser

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and self.subcommands is None:
            # a subcommand's parser: refuse what it does not know, naming the closest option
            unknown = next((e for e in extras if e.startswith("-")), extras[0])
            name = unknown.split("=", 1)[0]
            if name.startswith("-"):
                self.error(f"unknown option {name}{suggest(name, self.options)}")
            self.error(f"unexpected argument {unknown!r}")
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        message = re.sub(r"^argument (\S+?)(/\S+)?: ", r"\1: ", message)  # "--date: ..." not "argument --date/-d: ..."
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            message += suggest(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)))
        self.exit(USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def validation_message(exc: ValidationError, flags: dict[str, str]) -> str:
    """A pydantic error as one line per failed field, naming the option (``flags``: field name ->
    flag), the value given and what is accepted; joined with "; "."""
    aliases = {"pass": "pass_threshold", "pass_": "pass_threshold", "borderline": "borderline_threshold",
               "thresholds": "borderline_threshold"}
    parts = []
    for error in exc.errors(include_url=False):
        names = [str(part) for part in error["loc"] if not isinstance(part, int)] or [exc.title.lower()]
        field = next((aliases.get(n, n) for n in reversed(names) if aliases.get(n, n) in flags), names[0])
        flag = flags.get(field) or ("--" + field.replace("_", "-") if field else "the options")
        message = str(error["msg"]).removeprefix("Value error, ")
        value = error.get("input")
        if error["type"] in ("missing",) or isinstance(value, dict):
            parts.append(f"{flag}: {message}")
        else:
            parts.append(f"{flag} {value!r}: {message}")
    return "; ".join(parts)


class _ThirdPartyToInfo(logging.Filter):
    """Warnings of other libraries (and Python ``warnings``) as INFO records: they are for the
    log, not for the person at the terminal."""

    def __init__(self, threshold: int) -> None:
        super().__init__()
        self.threshold = threshold

    def filter(self, record: logging.LogRecord) -> bool:
        ours = record.name == "evaluation" or record.name.startswith("evaluation.")
        if not ours and record.levelno == logging.WARNING:
            record.levelno, record.levelname = logging.INFO, "INFO"
        return record.levelno >= self.threshold


def route_third_party_logs(verbose: bool) -> None:
    """Log to stderr at WARNING (INFO with ``verbose``), other libraries' warnings at INFO."""
    root = logging.getLogger()
    before = list(root.handlers)
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.captureWarnings(True)
    threshold = logging.INFO if verbose else logging.WARNING
    for handler in root.handlers:
        for old in [f for f in handler.filters if isinstance(f, _ThirdPartyToInfo)]:
            handler.removeFilter(old)  # a second call replaces the first one's threshold
        # the terminal's handler only: one set up by whoever embeds the CLI keeps its own records
        if handler not in before or (type(handler) is logging.StreamHandler and handler.stream is sys.stderr):
            handler.addFilter(_ThirdPartyToInfo(threshold))


def _named_as_given(parser: Parser, args: argparse.Namespace) -> dict[str, str]:
    """Each option's name in an error: its flag, or the variable its value came from when the flag
    was left out and the variable is set (``$EVALUATION_WORK_DAYS (--work-days)``)."""
    named = dict(parser.flags)
    for dest, variable in parser.variables.items():
        if getattr(args, dest, None) is None and os.environ.get(variable):
            named[dest] = f"${variable} ({parser.flags.get(dest, dest)})"
    return named


def _failure_line(exc: BaseException, flags: dict[str, str]) -> tuple[int, str]:
    """The exit code and the one line of an exception that ends a command: a usage error (a
    settings model refusing an option's value among them) exits 2 naming the option by its flag
    (``flags``: field name to flag), any other error 1."""
    if isinstance(exc, ValidationError):
        return USAGE, validation_message(exc, flags)
    if isinstance(exc, UsageError):  # "input_format: ..." names the option by its field
        name, colon, rest = str(exc).partition(": ")
        return USAGE, f"{flags[name]}: {rest}" if colon and name in flags else str(exc)
    if isinstance(exc, EvaluationError):
        return FAILED, str(exc)
    if isinstance(exc, OSError) and exc.filename:
        return FAILED, f"{exc.filename}: {exc.strerror or exc}"
    botocore = sys.modules.get("botocore.exceptions")  # loaded only if S3 was used
    if botocore is not None and isinstance(exc, (botocore.BotoCoreError, botocore.ClientError)):
        return FAILED, f"S3: {exc}"
    return FAILED, f"{type(exc).__name__}: {exc} (run with -v for the traceback)"


def dispatch(parser: Parser, command: Callable[[argparse.Namespace], int], args: argparse.Namespace, *,
             verbose: bool) -> int:
    """Run one subcommand; a user error or a failure of storage or a provider becomes one line on
    stderr (the traceback above it with ``verbose``) and the exit code."""
    sub = parser.subcommand(args.command)
    try:
        return command(args)
    except KeyboardInterrupt:
        code, line = 130, "interrupted"
    except BrokenPipeError:  # the reader (| head) has had enough: nothing to say
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the interpreter flushes stdout at exit
        return 0
    except Exception as exc:
        if verbose:
            traceback.print_exc()
        code, line = _failure_line(exc, _named_as_given(sub, args))
    print(f"{sub.prog}: error: {line}", file=sys.stderr)
    return code


#: Deltas a comparison prints (the rest are in its report and with ``--json``).
COMPARISON_ROWS = 15


def comparison_lines(result: dict[str, Any]) -> list[str]:
    """A comparison as a few lines for people: what was compared, its largest differences against
    the baseline (significant ones first, then by size), and where the report is."""
    deltas = sorted(result.get("deltas") or [], key=lambda d: (not d.get("significant"), -abs(d.get("delta") or 0.0)))
    records = ", ".join(f"{model} {n:,}" for model, n in (result.get("records_per_model") or {}).items())
    days = result.get("days") or []
    lines = [f"comparison {result['comparison_id']}: baseline {result.get('baseline')}; "
             f"{days[0] + ' to ' + days[-1] if days else 'no day'}; records {records or '-'}; "
             f"{sum(1 for d in deltas if d.get('significant'))} of {len(deltas)} differences significant "
             f"({result.get('p_adjust')}-adjusted)"]
    header = ("judge", "metric", "model", "n", "mean", "delta", "95% interval", "p adj.", "")
    rows = [(str(d["judge"]), str(d["metric"]), str(d["model"]), f"{d.get('n') or 0:,}", _fixed(d.get("mean")),
             _fixed(d.get("delta"), signed=True), f"{_fixed(d.get('delta_ci_low'), signed=True)} .. "
             f"{_fixed(d.get('delta_ci_high'), signed=True)}", _fixed(d.get("p_adjusted")),
             "significant" if d.get("significant") else "") for d in deltas[:COMPARISON_ROWS]]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]
    if len(deltas) > COMPARISON_ROWS:
        lines.append(f"  ... and {len(deltas) - COMPARISON_ROWS} more in the report (all of them with --json)")
    lines.append(f"report: {result.get('report_uri')}")
    return lines


def _fixed(value: Any, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.4f}" if signed else f"{value:.4f}"
