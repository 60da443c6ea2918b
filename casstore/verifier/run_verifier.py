"""Run a task's Python ``verify()`` inside the verifier sandbox and write Harbor's reward file.

Usage::

    python3 run_verifier.py --verifier FILE --workspace DIR [--task-data FILE]
                            [--response FILE] [--state FILE] [--reward-dir DIR]
                            [--tests-dir DIR]

This file is copied into the sandbox by the ``tests/test.sh`` shim that ``casstore verifier
init`` writes (under ``tests/.ng/``) and runs there as a script, so it uses the standard library
only (Python >= 3.10) and imports nothing from casstore.

What it does, in order:

1. Puts three folders at the front of ``sys.path``, highest priority first: the vendored
   helpers (``helpers/`` beside this file), the verifier module's folder, then the tests folder
   (``--tests-dir``). An entry already on the path (from ``PYTHONPATH``, or this script's own
   folder) is moved, never duplicated, so the verifier's ``import casstore_verify`` always
   resolves to the vendored copy, with or without ``python -I``.
2. Loads the verifier module and finds ``verify``.
3. Removes any ``reward.json`` / ``reward.txt`` in the reward folder (file, link or folder).
4. Calls ``verify`` with the arguments it declares among ``workspace`` (a ``Path``),
   ``task_data`` (the JSON in ``--task-data``), ``response`` (the text of ``--response``) and
   ``state`` (the JSON in ``--state``); an ``async def verify`` is awaited.
5. Writes ``reward.txt`` for a finite number, ``reward.json`` for a dict of reward keys to
   finite numbers.

Exit status: 0 a reward file was written; 1 ``verify`` raised; 2 a runner or contract problem
(bad arguments, a verifier that cannot be loaded, no ``verify``, a required argument that is
not available, a return value that is not a reward). On 1 and 2 no reward file exists
afterwards, and stderr says why, so Harbor records a missing reward.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import inspect
import json
import math
import numbers
import os
import shutil
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

KNOWN_ARGUMENTS = ("workspace", "task_data", "response", "state")
REWARD_FILES = ("reward.json", "reward.txt")
DEFAULT_REWARD_DIR = "/logs/verifier"
HELPERS_DIR = Path(__file__).resolve().parent / "helpers"
MINIMUM_PYTHON = (3, 10)

EXIT_REWARD = 0
EXIT_VERIFY_RAISED = 1
EXIT_CONTRACT = 2

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class ContractError(Exception):
    """The runner was misused or the verifier broke its contract (exit status 2)."""


class VerifyRaised(Exception):
    """``verify`` raised; ``__cause__`` is its exception (exit status 1)."""


def place_on_path(folders: list[Path] | tuple[Path, ...]) -> None:
    """Put ``folders`` at the front of ``sys.path``, in the order given (first = highest).

    Every entry already on the path that names one of the folders (compared by real path, so
    ``''``, relative and symlinked spellings count) is removed first, so a folder lower in the
    order is never searched before a higher one. Duplicates in ``folders`` keep their first
    place.
    """
    wanted: list[str] = []
    for folder in folders:
        real = os.path.realpath(folder)
        if real not in wanted:
            wanted.append(real)
    kept = [entry for entry in sys.path if os.path.realpath(entry or os.curdir) not in wanted]
    sys.path[:] = wanted + kept


def forget_shadowed_modules(folder: Path) -> None:
    """Forget each package vendored in ``folder`` that ``sys.modules`` holds from elsewhere.

    A ``sitecustomize`` or ``.pth`` file may import a same-named package before the runner
    fixes ``sys.path``; forgetting it makes the next import load the vendored copy.
    """
    if not folder.is_dir():
        return
    real_folder = os.path.realpath(folder)
    for child in folder.iterdir():
        name = child.stem if child.suffix == ".py" else child.name
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None) if module is not None else None
        if module is None or (origin and os.path.realpath(origin).startswith(real_folder + os.sep)):
            continue
        for loaded in [key for key in sys.modules if key == name or key.startswith(name + ".")]:
            del sys.modules[loaded]


def load_verify(path: Path) -> Any:
    """Import the verifier module at ``path`` and return its ``verify`` callable.

    The module is registered in ``sys.modules`` under its file stem (or ``_casstore_verifier``
    when that name is taken), so its helpers can import it back. Raises ``ContractError`` when
    the file is missing, fails to import, or has no callable ``verify``.
    """
    if not path.is_file():
        raise ContractError(f"verifier file not found: {path}")
    name = path.stem if path.stem.isidentifier() and path.stem not in sys.modules else None
    name = name or "_casstore_verifier"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ContractError(f"cannot load verifier module: {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as error:
        del sys.modules[name]
        detail = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        raise ContractError(f"cannot import verifier module {path}:\n{detail.rstrip()}") from None
    verify = getattr(module, "verify", None)
    if not callable(verify):
        raise ContractError(f"verifier module {path} defines no callable verify")
    return verify


def select_arguments(verify: Any, available: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The arguments to call ``verify`` with: each known name it declares, from ``available``.

    Returns ``(positional, keywords)``. A positional-only parameter is passed by position (an
    unused positional-only parameter before it gets its default); every other declared one is
    passed by name. ``*args`` receives nothing; ``**kwargs`` receives every available argument
    not already passed. A declared parameter that is unknown, or known but not in ``available``
    in this run, is left to its default; without a default it raises ``ContractError``.
    """
    try:
        parameters = inspect.signature(verify).parameters.values()
    except (TypeError, ValueError) as error:
        raise ContractError(f"cannot read the signature of verify: {error}") from None
    positional: list[Any] = []
    skipped_defaults: list[Any] = []
    keywords: dict[str, Any] = {}
    takes_all = False
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            takes_all = True
            continue
        if parameter.name not in available or parameter.name not in KNOWN_ARGUMENTS:
            _require_default(parameter, available)
            if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
                skipped_defaults.append(parameter.default)
            continue
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            positional.extend(skipped_defaults)
            skipped_defaults.clear()
            positional.append(available[parameter.name])
        else:
            keywords[parameter.name] = available[parameter.name]
    if takes_all:
        passed = set(keywords) | _positional_names(verify, len(positional))
        keywords.update({k: v for k, v in available.items() if k not in passed})
    return positional, keywords


def _require_default(parameter: inspect.Parameter, available: dict[str, Any]) -> None:
    """Raise ``ContractError`` unless ``parameter`` (one the runner will not pass) has a default."""
    if parameter.default is not inspect.Parameter.empty:
        return
    if parameter.name in KNOWN_ARGUMENTS:
        offered = ", ".join(name for name in KNOWN_ARGUMENTS if name in available)
        option = "--" + parameter.name.replace("_", "-")
        raise ContractError(
            f"verify requires {parameter.name!r}, which this run does not provide "
            f"(available: {offered}); give it a default or pass {option}"
        )
    raise ContractError(
        f"verify requires unknown argument {parameter.name!r}; "
        f"it may declare only {', '.join(KNOWN_ARGUMENTS)} (or give others a default)"
    )


def _positional_names(verify: Any, count: int) -> set[str]:
    """Names of the first ``count`` positional parameters of ``verify``."""
    names = [p.name for p in inspect.signature(verify).parameters.values() if p.kind in _POSITIONAL]
    return set(names[:count])


def call_verify(verify: Any, positional: list[Any], keywords: dict[str, Any]) -> Any:
    """Call ``verify`` (awaiting it when it returns an awaitable) and return its result.

    Raises ``VerifyRaised`` from whatever ``verify`` raised, ``SystemExit`` included.
    """
    try:
        result = verify(*positional, **keywords)
        if inspect.isawaitable(result):
            result = asyncio.run(_awaited(result))
    except (Exception, SystemExit) as error:
        raise VerifyRaised("verify raised") from error
    return result


async def _awaited(awaitable: Any) -> Any:
    """Await ``awaitable`` (``asyncio.run`` takes only coroutines)."""
    return await awaitable


def reward_number(value: Any) -> int | float | None:
    """``value`` as a finite ``int``/``float``, or ``None`` when it is not a finite real number.

    Booleans are not numbers here; an integer too large for a float is not finite.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        as_float = float(value)
    except (OverflowError, ValueError, TypeError):
        return None
    if not math.isfinite(as_float):
        return None
    return int(value) if isinstance(value, numbers.Integral) else as_float


def reward_file(result: Any) -> tuple[str, str]:
    """The reward file for ``verify``'s return value: ``(file name, text)``.

    A finite number gives ``reward.txt`` holding it; a non-empty dict of string reward keys to
    finite numbers gives ``reward.json``. Anything else raises ``ContractError``.
    """
    if isinstance(result, dict):
        return "reward.json", json.dumps(_reward_dict(result), allow_nan=False) + "\n"
    number = reward_number(result)
    if number is None:
        raise ContractError(
            f"verify returned {_shown(result)}; expected a finite number or a dict of "
            "reward keys to finite numbers"
        )
    return "reward.txt", f"{number!r}\n"


def _reward_dict(result: dict[Any, Any]) -> dict[str, int | float]:
    """The rewards in ``result`` as JSON-ready numbers; ``ContractError`` for any bad entry."""
    if not result:
        raise ContractError("verify returned an empty dict; it needs at least one reward key")
    rewards: dict[str, int | float] = {}
    for key, value in result.items():
        if not isinstance(key, str):
            raise ContractError(f"verify returned a dict with reward key {key!r}; keys are strings")
        number = reward_number(value)
        if number is None:
            raise ContractError(
                f"verify returned {_shown(value)} for reward key {key!r}; expected a finite number"
            )
        rewards[key] = number
    return rewards


def _shown(value: Any) -> str:
    """A short description of ``value`` for an error message."""
    text = repr(value)
    text = text if len(text) <= 80 else text[:77] + "..."
    return f"{text} ({type(value).__name__})"


def clear_rewards(reward_dir: Path) -> None:
    """Remove every ``reward.json`` / ``reward.txt`` in ``reward_dir``: a file, a link or a folder.

    A link is removed itself, never what it points to. Does nothing when the folder does not
    exist. ``OSError`` propagates.
    """
    for name in REWARD_FILES:
        path = reward_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.is_symlink() or path.exists():
            path.unlink()


def write_reward(reward_dir: Path, name: str, text: str) -> Path:
    """Write ``text`` to ``reward_dir/name`` atomically (temporary file, then rename)."""
    reward_dir.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{name}.", dir=reward_dir)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, reward_dir / name)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return reward_dir / name


def read_inputs(arguments: argparse.Namespace) -> dict[str, Any]:
    """The arguments available to ``verify`` in this run, by name.

    ``workspace`` is always there (a resolved ``Path``); ``task_data`` and ``state`` are the
    JSON in their files, ``response`` the text of its file, each only when its option was
    given. Raises ``ContractError`` for a missing workspace or an unreadable input file.
    """
    workspace = Path(arguments.workspace)
    if not workspace.is_dir():
        raise ContractError(f"workspace is not a directory: {workspace}")
    available: dict[str, Any] = {"workspace": workspace.resolve()}
    for name, parse in (("task_data", json.loads), ("response", str), ("state", json.loads)):
        path = getattr(arguments, name)
        if path is not None:
            available[name] = _read_input(name, Path(path), parse)
    return available


def _read_input(name: str, path: Path, parse: Any) -> Any:
    """``parse`` applied to the UTF-8 text of ``path``; ``ContractError`` when that fails."""
    try:
        return parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ContractError(f"cannot read --{name.replace('_', '-')} {path}: {error}") from None


def argument_parser() -> argparse.ArgumentParser:
    """The command-line interface of the runner."""
    parser = argparse.ArgumentParser(
        prog="run_verifier.py", description="Run a Python verify() and write Harbor's reward file."
    )
    parser.add_argument("--verifier", required=True, help="the verifier module (.py)")
    parser.add_argument("--workspace", required=True, help="the agent's workspace folder")
    parser.add_argument("--task-data", help="JSON file passed as task_data")
    parser.add_argument("--response", help="text file holding the agent's final response")
    parser.add_argument("--state", help="JSON file passed as state")
    parser.add_argument("--reward-dir", default=DEFAULT_REWARD_DIR, help="where rewards go")
    parser.add_argument("--tests-dir", help="the tests folder around the shim (import path)")
    return parser


def run(arguments: argparse.Namespace) -> Path:
    """Run one verification as the module docstring describes; return the reward file written.

    Raises ``ContractError``, ``VerifyRaised`` or ``OSError``; the caller clears the rewards.
    """
    verifier = Path(arguments.verifier).resolve()
    tests_dir = Path(arguments.tests_dir).resolve() if arguments.tests_dir else verifier.parent
    place_on_path([HELPERS_DIR, verifier.parent, tests_dir])
    forget_shadowed_modules(HELPERS_DIR)
    reward_dir = Path(arguments.reward_dir)
    clear_rewards(reward_dir)
    available = read_inputs(arguments)
    verify = load_verify(verifier)
    positional, keywords = select_arguments(verify, available)
    result = call_verify(verify, positional, keywords)
    name, text = reward_file(result)
    clear_rewards(reward_dir)
    return write_reward(reward_dir, name, text)


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, run the verifier, and return the exit status (0, 1 or 2)."""
    if sys.version_info < MINIMUM_PYTHON:
        _say(f"needs Python >= 3.10, this is {sys.version.split()[0]}")
        return EXIT_CONTRACT
    try:
        arguments = argument_parser().parse_args(argv)
    except SystemExit as stop:
        return EXIT_REWARD if stop.code == 0 else EXIT_CONTRACT
    sys.dont_write_bytecode = True
    try:
        written = run(arguments)
    except VerifyRaised as raised:
        error = raised.__cause__
        detail = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        return _failed(arguments, EXIT_VERIFY_RAISED, f"verify raised:\n{detail.rstrip()}")
    except ContractError as error:
        return _failed(arguments, EXIT_CONTRACT, f"contract error: {error}")
    except OSError as error:
        return _failed(arguments, EXIT_CONTRACT, f"runner error: {error}")
    _say(f"wrote {written}")
    return EXIT_REWARD


def _failed(arguments: argparse.Namespace, status: int, message: str) -> int:
    """Report ``message`` on stderr, make sure no reward file is left, return ``status``."""
    _say(message)
    try:
        clear_rewards(Path(arguments.reward_dir))
    except OSError as error:
        _say(f"cannot remove reward files: {error}")
        return EXIT_CONTRACT
    _say("no reward written")
    return status


def _say(message: str) -> None:
    """One message on stderr, prefixed with the runner's name."""
    print(f"run_verifier: {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
