"""The agent configuration checks of ``casstore run``, made before anything runs.

Credentials never reach Harbor's configuration as values: Harbor copies its agent config into
the job's ``config.json`` and ``lock.json`` and into every trial's files, so a value put there
cannot be taken back.

* ``--ak KEY=JSON``: the value must be JSON. Refused: a credential-looking key (``api_key``,
  ``token``, ``secret``, ``authorization``, ``password``, …, at any depth of the value) holding
  a plaintext string (a ``${NAME}`` template is fine), and any string with an issued-token
  shape (:data:`TOKEN_SHAPES`: ``nvapi-``, ``sk-``, ``hf_``, a PEM block, …). A backstop, not a
  guarantee: a secret under a key of another name, in a shape not listed, passes.
* ``--env-secret NAME=REF``: the value is read from this process's environment, ``REF``
  upper-cased with ``-`` as ``_``: ``my-ws/openai-api-key`` reads ``MY_WS_OPENAI_API_KEY``,
  falling back to ``OPENAI_API_KEY``; a bare ``openai-api-key`` reads ``OPENAI_API_KEY``. Harbor
  gets the template ``${NAME}`` and the Harbor process the value under ``NAME`` in its
  environment: no file holds it, and the cache identity takes the reference, never the value.
* ``--env-var NAME=VALUE``: a literal for the agent. Refused: a ``${…}`` template, a value of a
  credential shape, and a name Harbor treats as a secret (Harbor's own rule,
  ``harbor.utils.env.is_sensitive_env_key``: KEY, SECRET, TOKEN, PASSWORD, CREDENTIAL, AUTH,
  any case, e.g. ``MAX_TOKENS``), which Harbor would mask in config.json and scrub from every
  trial file.

Every refusal is a :class:`~casstore.errors.UsageError` naming the option and the key, never
the value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import msgspec

from casstore.errors import UsageError

__all__ = [
    "TOKEN_SHAPES",
    "AgentEnv",
    "check_agent_kwargs",
    "check_env_vars",
    "credential_key",
    "parse_assignments",
    "resolve_secrets",
    "secret_variables",
    "token_shape",
]

TOKEN_SHAPES: dict[str, re.Pattern[str]] = {
    "nvapi-": re.compile(r"(?<![A-Za-z0-9])nvapi-[A-Za-z0-9_-]{16,}"),
    "sk-": re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{16,}"),
    "hf_": re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{16,}"),
    "a PEM block": re.compile(r"-----BEGIN [A-Z0-9 ]+-----"),
    "ghp_/gho_/ghs_": re.compile(r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{30,}"),
    "github_pat_": re.compile(r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{20,}"),
    "glpat-": re.compile(r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_-]{16,}"),
    "xox?-": re.compile(r"(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9-]{10,}"),
    "AKIA": re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
    "AIza": re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}"),
    "a JWT": re.compile(r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\."),
}
"""The issued-token shapes refused anywhere in a value (name → pattern, searched)."""

_CREDENTIAL_WORDS = frozenset(
    {
        "apikey",
        "auth",
        "authorization",
        "bearer",
        "cookie",
        "credential",
        "credentials",
        "passphrase",
        "passwd",
        "password",
        "secret",
        "token",
    }
)
_CREDENTIAL_PAIRS = frozenset({("api", "key"), ("access", "key"), ("private", "key")})
_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_TEMPLATE = re.compile(r"\$\{[^}]*\}")
_FULL_TEMPLATE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REF_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def credential_key(key: str) -> bool:
    """Whether ``key`` looks like it names a credential: one of its words (split at ``_``,
    ``-``, ``.`` and camelCase) is token, secret, password, authorization, auth, apikey, …,
    or two of them read api key, access key or private key (``max_tokens`` is not one)."""
    words = [word.lower() for word in _WORDS.findall(key)]
    if any(word in _CREDENTIAL_WORDS for word in words):
        return True
    return any(pair in _CREDENTIAL_PAIRS for pair in pairwise(words))


def token_shape(value: str) -> str | None:
    """The name of the issued-token shape ``value`` holds (:data:`TOKEN_SHAPES`), or None."""
    for name, pattern in TOKEN_SHAPES.items():
        if pattern.search(value):
            return name
    return None


def parse_assignments(items: Sequence[str], option: str) -> dict[str, str]:
    """``KEY=VALUE`` items of a repeatable option as a mapping; UsageError for an item without
    ``=``, an empty key or a key given twice."""
    found: dict[str, str] = {}
    for number, item in enumerate(items, 1):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:  # (the item is not shown: it may be a credential)
            raise UsageError(option, f"item {number} is not KEY=VALUE")
        if key in found:
            raise UsageError(f"{option} {key}", "given twice")
        found[key] = value
    return found


def check_agent_kwargs(items: Mapping[str, str], option: str = "--ak") -> dict[str, Any]:
    """The ``--ak`` values (or those of ``option``: ``--ek`` too, which Harbor copies into
    the job's files alike) decoded as JSON, after the credential checks (module docstring);
    UsageError naming the option and the key."""
    kwargs: dict[str, Any] = {}
    for key, text in items.items():
        try:
            value = msgspec.json.decode(text.encode("utf-8", "surrogatepass"))
        except (msgspec.DecodeError, UnicodeEncodeError):
            raise UsageError(
                f"{option} {key}",
                f"the value is not JSON (quote a string: {option} 'name=\"text\"')",
            ) from None
        _check_key(option, key)
        _check_value(f"{option} {key}", value, key)
        kwargs[key] = value
    return kwargs


def _check_key(path: str, key: str) -> None:
    """Refuse a key of an issued-token shape (Harbor writes keys into the job's files as it
    writes values); the error names where, never the key."""
    if shape := token_shape(key):
        raise UsageError(
            path, f"a key has the shape of an issued token ({shape}): use --env-secret"
        )


def _check_value(path: str, value: Any, key: str | None) -> None:
    """Refuse a plaintext string under a credential-looking ``key`` and any token shape,
    through lists and mappings (``path`` names where, for the message)."""
    if isinstance(value, str):
        if key is not None and credential_key(key) and not _FULL_TEMPLATE.fullmatch(value):
            raise UsageError(
                path,
                "a credential-looking key holding plaintext: pass credentials with "
                "--env-secret NAME=REF (a ${NAME} template is fine here)",
            )
        if shape := token_shape(value):
            raise UsageError(path, f"{_refused_shape(shape)}: use --env-secret")
    elif isinstance(value, dict):
        for name, item in value.items():
            _check_key(path, str(name))
            _check_value(f"{path}.{name}", item, str(name))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_value(f"{path}[{index}]", item, key)


def check_env_vars(items: Mapping[str, str]) -> dict[str, str]:
    """The ``--env-var`` literals, each name a valid variable name Harbor does not treat as a
    secret, each value neither a ``${…}`` template nor of a credential shape; UsageError."""
    from harbor.utils.env import is_sensitive_env_key  # Harbor's rule (a light module)

    for name, value in items.items():
        option = f"--env-var {name}"
        if not _ENV_NAME.fullmatch(name):
            raise UsageError(option, "not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
        if is_sensitive_env_key(name):
            raise UsageError(
                option,
                "Harbor treats this name as a secret (it holds KEY, SECRET, TOKEN, PASSWORD, "
                "CREDENTIAL or AUTH): it would mask it in config.json and scrub its value from "
                "every trial file; a credential goes in --env-secret",
            )
        if _TEMPLATE.search(value):
            raise UsageError(option, "a ${...} template: --env-var takes literal values only")
        if shape := token_shape(value):
            raise UsageError(option, f"{_refused_shape(shape)}: use --env-secret")
    return dict(items)


@dataclass(frozen=True)
class AgentEnv:
    """What the agent's environment becomes: ``templates`` (Harbor's ``AgentConfig.env``: the
    literals, then ``NAME: ${NAME}`` per secret), ``values`` (the secrets, for the Harbor
    process's environment only) and ``references`` (``NAME → REF``: the cache identity)."""

    templates: dict[str, str] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict, repr=False)
    references: dict[str, str] = field(default_factory=dict)


def secret_variables(ref: str) -> list[str]:
    """The environment variables a secret reference reads, first found wins:
    ``my-ws/openai-api-key`` → ``MY_WS_OPENAI_API_KEY``, ``OPENAI_API_KEY``; ``openai-api-key``
    → ``OPENAI_API_KEY``. UsageError for a malformed reference."""
    parts = ref.split("/")
    if len(parts) > 2 or not all(_REF_PART.fullmatch(part) for part in parts):
        raise UsageError(
            f"--env-secret {_shown(ref)}",
            "a secret reference is NAME or WORKSPACE/NAME (letters, digits, '_', '-')",
        )
    names = [part.upper().replace("-", "_") for part in parts]
    return ["_".join(names), names[-1]] if len(names) == 2 else names


def resolve_secrets(
    items: Mapping[str, str], literals: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> AgentEnv:
    """The ``--env-secret NAME=REF`` items resolved from ``environ`` (default this process's
    environment) beside the ``--env-var`` ``literals``: see :class:`AgentEnv`. UsageError for
    a bad name, a name also given as a literal, or a reference no variable resolves."""
    environ = os.environ if environ is None else environ
    templates, values, references = dict(literals), {}, {}
    for name, ref in items.items():
        option = f"--env-secret {name}"
        if not _ENV_NAME.fullmatch(name):
            raise UsageError(option, "not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
        if name in literals:
            raise UsageError(option, "also given with --env-var")
        candidates = secret_variables(ref)
        found = next((variable for variable in candidates if environ.get(variable)), None)
        if found is None:
            unset = (
                f"neither {candidates[0]} nor {candidates[1]} is set"
                if len(candidates) == 2
                else f"{candidates[0]} is not set"
            )
            raise UsageError(option, f"{ref} does not resolve: {unset}")
        templates[name] = f"${{{name}}}"
        values[name] = environ[found]
        references[name] = ref
    return AgentEnv(templates, values, references)


def _refused_shape(shape: str) -> str:
    return f"the value has the shape of an issued token ({shape})"


def _shown(text: str) -> str:
    """At most 40 characters of what was given (never the whole of a long value)."""
    return text if len(text) <= 40 else text[:39] + "…"
