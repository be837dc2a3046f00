"""The command line's help, in process: what ``python -m evaluation COMMAND --help`` prints."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from evaluation.cli.main import main


@pytest.fixture
def cli_help(capsys: pytest.CaptureFixture[str]) -> Callable[[str], str]:
    def text(command: str) -> str:
        with pytest.raises(SystemExit) as exited:
            main([command, "--help"])
        assert exited.value.code == 0
        return capsys.readouterr().out

    return text
