"""The library's public surface and its imports: nothing happens at import time."""

from __future__ import annotations

import json
import subprocess
import sys

import evaluation


def test_every_public_name_resolves() -> None:
    assert evaluation.__all__ == sorted(evaluation.__all__)
    for name in evaluation.__all__:
        assert getattr(evaluation, name) is not None, name
    assert callable(evaluation.run_day) and callable(evaluation.score_table)


def test_importing_the_library_changes_nothing_in_the_process() -> None:
    """Importing the client, the stages and the options neither imports litellm nor touches the
    environment, its loggers or the garbage collector; the first client does, explicitly."""
    code = (
        "import gc, json, logging, os, sys\n"
        "import polars  # sets its allocator's variable at its own import: not ours to judge\n"
        "before = dict(os.environ)\n"
        "import evaluation, evaluation.client, evaluation.stages, evaluation.options, evaluation.judges\n"
        "after_import = {'litellm': 'litellm' in sys.modules, 'env': dict(os.environ) == before,\n"
        "                'frozen': gc.get_freeze_count(), 'level': logging.getLogger('LiteLLM').level}\n"
        "evaluation.client.JudgeClient('offline/lexical')\n"
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
