"""Re-pin ``requirements.txt`` and ``requirements-dev.txt`` from the current environment.

Every installed distribution is pinned at its installed version. A distribution goes to
``requirements-dev.txt`` when it is listed there already, or when only the development tools need
it (it is outside the dependency closure of the packages pinned in ``requirements.txt``); every
other one goes to ``requirements.txt``. The comment header of each file is kept.
"""

from __future__ import annotations

import importlib.metadata as metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PROD = ROOT / "requirements.txt"
DEV = ROOT / "requirements-dev.txt"


def _pins(path: Path) -> tuple[list[str], set[str]]:
    header: list[str] = []
    names: set[str] = set()
    for line in path.read_text().splitlines():
        if line.startswith("#") or line.startswith("-r "):
            header.append(line)
        elif line.strip():
            names.add(canonicalize_name(line.split("==")[0].split("[")[0]))
    return header, names


def _closure(roots: set[str], installed: dict[str, metadata.Distribution]) -> set[str]:
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name in seen or name not in installed:
            continue
        seen.add(name)
        for text in installed[name].requires or []:
            requirement = Requirement(text)
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": extra}) for extra in ("", *requirement.extras)):
                stack.append(canonicalize_name(requirement.name))
    return seen


def main() -> None:
    """Rewrite both files."""
    installed: dict[str, metadata.Distribution] = {canonicalize_name(d.metadata["Name"]): d for d in metadata.distributions()}
    for tool in ("pip", "setuptools", "wheel"):  # the virtual environment's own
        installed.pop(tool, None)
    prod_header, prod_names = _pins(PROD)
    dev_header, dev_names = _pins(DEV)
    runtime = _closure(prod_names - dev_names, installed)
    pins = {name: f"{dist.metadata['Name']}=={dist.version}" for name, dist in installed.items()}
    prod = [pins[n] for n in sorted(pins) if n in runtime and n not in dev_names]
    dev = [pins[n] for n in sorted(pins) if n not in runtime or n in dev_names]
    PROD.write_text("\n".join([*prod_header, *prod]) + "\n")
    DEV.write_text("\n".join([*dev_header, *dev]) + "\n")
    print(f"requirements.txt: {len(prod)} pins; requirements-dev.txt: {len(dev)} pins")


if __name__ == "__main__":
    main()
