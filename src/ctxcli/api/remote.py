"""Object storage (``s3://``, ``gs://``, ``file://`` ...) for inputs, outputs and offloads.

Any fsspec URL works where a path does; the filesystem comes from fsspec
(``pip install 'ctx-lossless[s3]'`` brings s3fs; credentials and ``AWS_ENDPOINT_URL`` come
from the environment as for any AWS tool). :mod:`ctxcli.api` stays about local files: this module reduces into a
private local directory, then uploads.

Writes never leave a half object: an object store shows an object only once its upload
completed (a PUT, or the last step of a multipart upload), local files are written
through a temporary name and a rename, and the order is blobs first, the offload
manifest next, the reduced output last, so an output never exists without what
``ctx restore`` needs.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from ctxcli import api
from ctxcli.core.errors import CtxError, OffloadError, RestoreError, TranscriptError
from ctxcli.core.protocols import sha256
from ctxcli.pipeline.config import Config
from ctxcli.pipeline.results import Report
from ctxcli.services.tokens import CountOptions
from ctxcli.store.disk import MANIFEST, read_manifest
from ctxcli.store.memory import blob_path

__all__ = [
    "BlobReader",
    "BlobWriter",
    "filesystem",
    "is_url",
    "read_url",
    "reduce_url",
    "restore_url",
    "write_url",
]


def is_url(path: str | Path | None) -> bool:
    """True for ``scheme://...`` (object storage or ``file://``), False for a plain path."""
    return path is not None and "://" in str(path)


def filesystem(url: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """The fsspec filesystem of ``url`` and the path inside it.

    Raises:
        CtxError: fsspec, or the package for the URL's scheme, is not installed.
    """
    try:
        import fsspec
    except ImportError:
        raise CtxError(
            f"{url}: reading URLs needs fsspec; install it with pip install 'ctx-lossless[s3]'."
        ) from None
    try:
        fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    except (ImportError, ValueError) as exc:
        raise CtxError(f"{url}: {exc}") from None
    return fs, path


def read_url(url: str, storage_options: Mapping[str, Any] | None = None) -> bytes:
    """The bytes of the object at ``url``."""
    fs, path = filesystem(url, storage_options)
    try:
        data: bytes = fs.cat_file(path)
    except FileNotFoundError:
        raise TranscriptError(url, None, "no such object") from None
    except IsADirectoryError:
        raise TranscriptError(url, None, "is a directory; pass a transcript") from None
    except OSError as exc:
        raise TranscriptError(url, None, f"cannot read ({exc})") from None
    return data


def _is_local(fs: Any) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return "file" in protocol or "local" in protocol


def write_url(url: str, data: bytes, storage_options: Mapping[str, Any] | None = None) -> None:
    """Write ``data`` at ``url`` whole or not at all."""
    fs, path = filesystem(url, storage_options)
    if _is_local(fs):
        api.write_atomic(Path(path), data)
        return
    try:
        fs.pipe_file(path, data)
    except OSError as exc:
        raise OffloadError(f"{url}: cannot write ({exc})") from None


class BlobWriter:
    """Stores content-addressed blobs under an offload root (``<root>/<sha[:2]>/<sha>``).

    A blob already there is not written again: its name is its content.
    """

    def __init__(self, root: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.root = root.rstrip("/")
        self.storage_options = dict(storage_options or {})
        self.fs, self.base = filesystem(self.root, self.storage_options)
        self.local = _is_local(self.fs)
        self.written = 0

    def put_many(self, blobs: Mapping[str, bytes]) -> None:
        """Store every blob not stored yet."""
        for digest, data in blobs.items():
            path = f"{self.base}/{blob_path(digest)}"
            if self.local:
                if _size(path) == len(data):
                    continue
                _write_blob(Path(path), data)
            else:
                self.fs.pipe_file(path, data)
            self.written += 1


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def _write_blob(path: Path, data: bytes) -> None:
    """A temporary file renamed into place, without the fsync of every blob.

    A blob is checked against its hash when it is read, and one that a crash left short
    is written again by the next run (its size differs), so durability per blob would
    only cost time: a row has hundreds of them.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.ctx-tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class BlobReader:
    """Fetches blobs by their SHA-256 from an offload root (for ``restore_row``)."""

    def __init__(self, root: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.fs, self.base = filesystem(root.rstrip("/"), storage_options)

    def __call__(self, digest: str) -> bytes:
        data: bytes = self.fs.cat_file(f"{self.base}/{blob_path(digest)}")
        return data


def _remote_manifest(fs: Any, path: str) -> dict[str, Any] | None:
    try:
        data = orjson.loads(fs.cat_file(f"{path}/{MANIFEST}"))
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("tool") == "ctx" else None


def reduce_url(
    input: str,
    output: str | None,
    *,
    config: Config,
    offload_dir: str | None = None,
    force: bool = False,
    on_invalid: str = "error",
    counting: CountOptions | None = None,
    log: Callable[[str], None] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[Report, bytes]:
    """:func:`ctxcli.api.reduce_file` where the input, output or offload is a URL.

    The offload directory is built locally, then uploaded (texts, then the original
    records, then the manifest), then the output is written.

    Raises:
        OffloadError: the offload URL holds another transcript's offload (pass
            ``force`` to replace it).
    """
    data = read_url(input, storage_options) if is_url(input) else api.read_input(input)
    out_name = None if output in (None, api.STDIO) else output
    root = offload_dir or api.default_offload_dir(out_name, config)
    if not is_url(root) and not (out_name and is_url(out_name)):
        return api.reduce_file(
            input,
            out_name,
            config=config,
            offload_dir=root,
            force=force,
            on_invalid=on_invalid,
            raw=data,
            log=log,
            counting=counting,
        )
    fs, base = filesystem(root, storage_options) if is_url(root) else (None, root)
    if fs is not None and not force:
        previous = _remote_manifest(fs, base)
        if previous is not None and previous.get("input", {}).get("sha256") != sha256(data):
            raise OffloadError(
                f"{root} holds the offload of another transcript "
                f"({previous.get('input', {}).get('name', '?')}); "
                "choose another offload directory or pass force to replace it."
            )
    with tempfile.TemporaryDirectory(prefix="ctx-url-") as tmp:
        local = Path(tmp) / "offload"
        report, out = api.reduce_file(
            input,
            None,
            config=config,
            offload_dir=local if fs is not None else root,
            force=force,
            on_invalid=on_invalid,
            raw=data,
            log=log,
            counting=counting,
            cite_as=root.rstrip("/"),
        )
        if fs is not None:
            _upload_offload(fs, base, local)
    report.offload_dir = root.rstrip("/")
    if out_name is not None:
        write_url(out_name, out, storage_options) if is_url(out_name) else api.write_atomic(
            Path(out_name), out
        )
    report.output = out_name or api.STDIO
    return report, out


def _upload_offload(fs: Any, base: str, local: Path) -> None:
    """Upload an offload directory; the manifest goes last (it is the commit)."""
    files = sorted(p for p in local.rglob("*") if p.is_file() and p.name != MANIFEST)
    try:
        for path in files:
            fs.pipe_file(f"{base}/{path.relative_to(local).as_posix()}", path.read_bytes())
        fs.pipe_file(f"{base}/{MANIFEST}", (local / MANIFEST).read_bytes())
    except OSError as exc:
        raise OffloadError(f"{base}: cannot upload the offload directory ({exc})") from None


def restore_url(
    reduced: str,
    output: str | None,
    *,
    offload_dir: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> bytes:
    """:func:`ctxcli.api.restore_file` where the reduced file or its offload is a URL."""
    data = read_url(reduced, storage_options) if is_url(reduced) else api.read_input(reduced)
    root = offload_dir or f"{reduced}.offload"
    if is_url(root):
        fs, base = filesystem(root, storage_options)
        with tempfile.TemporaryDirectory(prefix="ctx-url-") as tmp:
            local = Path(tmp) / "offload"
            try:
                fs.get(f"{base}/", f"{local}/", recursive=True)
            except FileNotFoundError:
                raise RestoreError(f"{root} is not a ctx offload directory (no objects).") from None
            if read_manifest(local) is None:
                raise RestoreError(f"{root} is not a ctx offload directory (no valid {MANIFEST}).")
            original = api.restore_file(reduced, None, offload_dir=local, raw=data)
    else:
        original = api.restore_file(reduced, None, offload_dir=root, raw=data)
    if output is not None and output != api.STDIO:
        if is_url(output):
            write_url(output, original, storage_options)
        else:
            api.write_atomic(Path(output), original)
    return original
