"""The library's public surface and its imports: nothing happens at import time."""

from __future__ import annotations

import json
import subprocess
import sys
from types import ModuleType

import pytest

import evaluation
import evaluation.calibration
import evaluation.compare
import evaluation.contract.config
import evaluation.judges
import evaluation.report
import evaluation.stages


@pytest.mark.parametrize("package", [evaluation, evaluation.calibration, evaluation.compare, evaluation.judges,
                                     evaluation.report, evaluation.stages], ids=lambda p: p.__name__)
def test_every_public_name_is_imported_explicitly(package: ModuleType) -> None:
    """``__all__`` names each public name once, and each is bound by an import or a definition in the package
    (no module ``__getattr__`` resolving names at run time)."""
    assert len(set(package.__all__)) == len(package.__all__)
    assert not hasattr(package, "__getattr__")
    for name in package.__all__:
        assert name in vars(package), f"{package.__name__}.{name}"


def test_the_packages_a_dag_file_reaches_import_nothing_heavy() -> None:
    """``evaluation`` and ``evaluation.calibration`` run when a DAG file imports the options or the
    calibration spec: they re-export light names only."""
    code = (
        "import sys, evaluation, evaluation.calibration, evaluation.contract.options\n"
        "print(sorted(m for m in ('litellm', 'polars', 'great_expectations', 'pandas', 'boto3', 'openai') "
        "if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert evaluation.RunConfig is evaluation.contract.config.RunConfig


def test_importing_the_library_changes_nothing_in_the_process() -> None:
    """Importing the client, the stages and the options neither imports litellm nor touches the
    environment, its loggers or the garbage collector; the first client does, explicitly."""
    code = (
        "import gc, json, logging, os, sys\n"
        "import polars  # sets its allocator's variable at its own import: not ours to judge\n"
        "before = dict(os.environ)\n"
        "import evaluation, evaluation.calling.client, evaluation.stages, evaluation.contract.options, evaluation.judges\n"
        "after_import = {'litellm': 'litellm' in sys.modules, 'env': dict(os.environ) == before,\n"
        "                'frozen': gc.get_freeze_count(), 'level': logging.getLogger('LiteLLM').level}\n"
        "evaluation.calling.client.JudgeClient('offline/lexical')\n"
        "configured = {'litellm': 'litellm' in sys.modules, 'frozen': gc.get_freeze_count() > 0,\n"
        "              'offline': any(e.get('provider') == 'offline' for e in sys.modules['litellm'].custom_provider_map)}\n"
        "print(json.dumps([after_import, configured]))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    after_import, configured = json.loads(done.stdout.strip().splitlines()[-1])
    assert after_import == {"litellm": False, "env": True, "frozen": 0, "level": 0}
    assert configured == {"litellm": True, "frozen": True, "offline": True}
