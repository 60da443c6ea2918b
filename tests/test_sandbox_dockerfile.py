"""What of a Dockerfile the host sandbox honours, ignores and refuses (casstore.sandbox)."""

from __future__ import annotations

from pathlib import Path

import pytest

from casstore.errors import SandboxError
from casstore.sandbox.dockerfile import read_dockerfile, substitute


def _read(tmp_path: Path, text: str):
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    return read_dockerfile(path)


def test_state_and_steps_in_file_order(tmp_path: Path) -> None:
    recipe = _read(
        tmp_path,
        "# syntax comment\nFROM ubuntu:24.04 AS base\nARG ROOT=/srv\nARG EMPTY\n"
        'ENV A=1 B="two words" \\\n    C=${ROOT}/c\nENV D legacy form\n'
        "WORKDIR $C\nWORKDIR sub\nUSER agent:agent\n"
        'COPY --chown=agent:agent --chmod=640 ["x y.txt", "./"]\n'
        "RUN echo $A && \\\n  # a comment inside\n  echo done\n"
        'RUN ["/bin/echo", "exec form"]\nSHELL ["/bin/bash", "-c"]\nRUN echo bash\n'
        "EXPOSE 80\nLABEL a=b\nENTRYPOINT /x\nCMD y\nHEALTHCHECK NONE\n",
    )
    assert recipe.env == {"A": "1", "B": "two words", "C": "/srv/c", "D": "legacy form"}
    assert (recipe.workdir, recipe.user) == ("/srv/c/sub", "agent")
    kinds = [(step.kind, step.args, step.line) for step in recipe.steps]
    assert kinds == [
        ("workdir", ("/srv/c",), 8),
        ("workdir", ("/srv/c/sub",), 9),
        ("copy", ("x y.txt", "./"), 11),
        ("run", ("/bin/sh", "-c", "echo $A && echo done"), 12),
        ("run", ("/bin/echo", "exec form"), 15),
        ("run", ("/bin/bash", "-c", "echo bash"), 17),
    ]
    entrypoint = recipe.entrypoint
    assert entrypoint is not None
    assert (entrypoint.args, entrypoint.line, entrypoint.user) == (
        ("/bin/bash", "-c", "/x"),
        20,
        "agent",
    )
    copy = recipe.steps[2]
    assert (copy.chown, copy.chmod, copy.user, copy.workdir) == (
        "agent:agent",
        0o640,
        "agent",
        "/srv/c/sub",
    )
    assert recipe.steps[0].env == recipe.env and recipe.steps[0].user is None


def test_substitution_forms() -> None:
    variables = {"SET": "v", "EMPTY": ""}
    text = r"$SET ${SET} ${UNSET:-d} ${EMPTY:-e} ${SET:+alt} ${UNSET:+alt}| \$SET"
    assert substitute(text, variables) == "v v d e alt | $SET"


@pytest.mark.parametrize(
    ("text", "line", "rule"),
    [
        ("FROM a\nFROM b\n", 2, "multi-stage builds"),
        ("FROM a\nCOPY --from=builder /x /y\n", 2, "--from is not supported"),
        ("FROM a\nADD https://example.org/x /x\n", 2, "ADD of a URL or an archive"),
        ("FROM a\nADD layer.tar.gz /\n", 2, "ADD of a URL or an archive"),
        ("FROM a\n\nRUN --mount=type=cache,target=/c true\n", 3, "RUN flags"),
        ("FROM a\nRUN <<EOF\necho\nEOF\n", 2, "heredocs"),
        ("FROM a\nFROBNICATE x\n", 2, "unknown instruction FROBNICATE"),
        ("FROM a\nCOPY only-one\n", 2, "needs a source and a destination"),
        ("FROM a\nCOPY --chmod=u+x a b\n", 2, "only octal modes"),
        ('FROM a\nENV A="unclosed\n', 2, "cannot split"),
    ],
)
def test_refusals_name_the_line(tmp_path: Path, text: str, line: int, rule: str) -> None:
    with pytest.raises(SandboxError, match=rule) as caught:
        _read(tmp_path, text)
    assert caught.value.path == f"{tmp_path / 'Dockerfile'}:{line}"
    assert caught.value.kind == "sandbox"


def test_an_unreadable_dockerfile_is_a_sandbox_error(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_bytes(b"FROM \xff\n")
    with pytest.raises(SandboxError, match="cannot read the Dockerfile"):
        read_dockerfile(tmp_path / "Dockerfile")
