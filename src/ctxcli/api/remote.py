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
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, overload

import orjson

from ctxcli.api.commit import reduce_local
from ctxcli.api.destination import Destination, RunOptions
from ctxcli.api.local import STDIO, read_input
from ctxcli.api.location import locate
from ctxcli.api.undo import original_of
from ctxcli.core.errors import CtxError, OffloadError, RestoreError, TranscriptError
from ctxcli.core.install import install_command
from ctxcli.core.io import is_url, local_path
from ctxcli.core.protocols import sha256
from ctxcli.pipeline.config import Config
from ctxcli.pipeline.results import Report
from ctxcli.store.inplace import write_atomic
from ctxcli.store.manifest import MANIFEST, read_manifest
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


@overload
def _local(location: str) -> str: ...
@overload
def _local(location: str | None) -> str | None: ...
def _local(location: str | None) -> str | None:
    """``location`` with a ``file://`` URL replaced by the path it names.

    Taken before every check and write: ``file:///abs/in.jsonl`` and ``/abs/in.jsonl``
    are one file, so the check that an output is not its input sees them as one.
    """
    if location is None:
        return None
    path = local_path(location)
    return location if path is None else path


def _store_failures() -> tuple[type[BaseException], ...]:
    """Tell whether an exception is the object store failing, not ctx.

    What an object store raises when it, not ctx, fails: no credentials, endpoint
    down, access denied (s3fs turns most answers into OSError, not all of them).
    """
    try:
        from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]
    except ImportError:
        return (OSError,)
    return (OSError, BotoCoreError, ClientError)


@contextmanager
def store_errors(error: Callable[[str], CtxError]) -> Iterator[None]:
    """Turn a failure of an object store into ``error(reason)``, a one-line user error.

    A caller that gives a missing object a meaning of its own catches that inside.
    """
    try:
        yield
    except _store_failures() as exc:
        raise error(str(exc).strip() or type(exc).__name__) from None


def _cannot_read(url: str) -> Callable[[str], CtxError]:
    return lambda why: TranscriptError(url, None, f"cannot read ({why})")


def _cannot_write(url: str) -> Callable[[str], CtxError]:
    return lambda why: OffloadError(f"{url}: cannot write ({why})")


def filesystem(url: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """The fsspec filesystem of ``url`` and the path inside it.

    Raises:
        CtxError: fsspec, or the package for the URL's scheme, is not installed.
    """
    try:
        import fsspec
    except ImportError:
        raise CtxError(
            f"{url}: reading URLs needs fsspec; install it with {install_command('s3')}."
        ) from None
    try:
        fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    except (ImportError, ValueError) as exc:
        raise CtxError(f"{url}: {exc}") from None
    return fs, path


def read_url(url: str, storage_options: Mapping[str, Any] | None = None) -> bytes:
    """The bytes of the object at ``url``."""
    fs, path = filesystem(url, storage_options)
    with store_errors(_cannot_read(url)):
        try:
            data: bytes = fs.cat_file(path)
        except FileNotFoundError:
            raise TranscriptError(url, None, "no such object") from None
        except IsADirectoryError:
            raise TranscriptError(url, None, "is a directory; pass a transcript") from None
    return data


def _is_local(fs: Any) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return "file" in protocol or "local" in protocol


def write_url(url: str, data: bytes, storage_options: Mapping[str, Any] | None = None) -> None:
    """Write ``data`` at ``url`` whole or not at all."""
    fs, path = filesystem(url, storage_options)
    if _is_local(fs):
        write_atomic(Path(path), data)
        return
    with store_errors(_cannot_write(url)):
        fs.pipe_file(path, data)


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
                with store_errors(_cannot_write(self.root)):
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
        self.root = root.rstrip("/")
        self.fs, self.base = filesystem(self.root, storage_options)
        self.local = _is_local(self.fs)

    def __call__(self, digest: str) -> bytes:
        """The whole blob ``digest``."""
        return self._cat(digest, {})

    def read(self, digest: str, length: int) -> bytes:
        """Blob ``digest``, of which no more than ``length`` + 1 bytes are read.

        A blob longer than declared is not the blob (the caller sees the extra byte),
        and a local name that is no regular file (a FIFO, a device) is not read at all.
        The declared length comes from the dataset: a local read is bounded by the
        file's size too, so a length the blob does not have (2^62, say) is a short read
        the caller refuses, never an allocation of that size (a ranged read of object
        storage returns no more than the object holds).

        Raises:
            KeyError: the blob is missing; OSError: a local one is no regular file.
        """
        path = f"{self.base}/{blob_path(digest)}"
        if self.local:
            return _read_regular(path, length + 1)
        return self._cat(digest, {"start": 0, "end": length + 1})

    def _cat(self, digest: str, window: dict[str, int]) -> bytes:
        with store_errors(_cannot_read(self.root)):
            try:
                data: bytes = self.fs.cat_file(f"{self.base}/{blob_path(digest)}", **window)
            except FileNotFoundError:
                raise KeyError(digest) from None  # a missing blob, not a failing store
        return data


def _read_regular(path: str, limit: int) -> bytes:
    """Read at most ``limit`` bytes of the regular file ``path``.

    Opening a FIFO never waits, and a read asks for no more than the file holds plus one.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(min(limit, st.st_size + 1))
    finally:
        os.close(fd)


def _remote_manifest(fs: Any, path: str, url: str) -> dict[str, Any] | None:
    with store_errors(_cannot_read(url)):
        try:
            data = orjson.loads(fs.cat_file(f"{path}/{MANIFEST}"))
        except (FileNotFoundError, orjson.JSONDecodeError):
            return None
    return data if isinstance(data, dict) and data.get("tool") == "ctx" else None


def reduce_url(
    input: str,
    dest: Destination,
    *,
    config: Config,
    run: RunOptions,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[Report, bytes]:
    """:func:`ctxcli.api.reduce` where the input, output or offload is a URL.

    A ``file://`` URL is the local path it names. Otherwise the offload directory is
    built locally, then uploaded (texts, then the original records, then the
    manifest), then the output is written.

    Raises:
        OffloadError: the offload URL holds another transcript's offload (pass
            ``force`` to replace it), the output is the input, or the store failed.
    """
    input, out_name = _local(input), _local(dest.output)
    data = read_url(input, storage_options) if is_url(input) else read_input(input)
    asked = replace(dest, output=out_name, offload_dir=_local(dest.offload_dir))
    root = asked.offload_dir or locate(input, asked, config, data).root
    if not is_url(root) and not (out_name and is_url(out_name)):
        done = reduce_local(input, config, run, asked, data)
        return done.report, done.output
    if out_name == input:
        raise OffloadError(f"{out_name}: output would overwrite the input; choose another output.")
    fs, base = filesystem(root, storage_options) if is_url(root) else (None, root)
    if fs is not None and not run.force:
        _refuse_another_transcript(_remote_manifest(fs, base, root), root, data)
    with tempfile.TemporaryDirectory(prefix="ctx-url-") as tmp:
        local = Path(tmp) / "offload"
        where = str(local) if fs is not None else root
        here = Destination(None, where, cite_as=root.rstrip("/"), write=None)
        done = reduce_local(input, config, run, here, data)
        if fs is not None:
            _upload_offload(fs, base, local, root)
    report, out = done.report, done.output
    report.offload_dir = root.rstrip("/")
    if out_name is not None:
        write_url(out_name, out, storage_options) if is_url(out_name) else write_atomic(
            Path(out_name), out
        )
    elif dest.write is not None:
        dest.write(out)
    report.output = out_name or STDIO
    return report, out


def _refuse_another_transcript(previous: dict[str, Any] | None, root: str, data: bytes) -> None:
    """Refuse an offload URL that holds the offload of another transcript."""
    if previous is not None and previous.get("input", {}).get("sha256") != sha256(data):
        raise OffloadError(
            f"{root} holds the offload of another transcript "
            f"({previous.get('input', {}).get('name', '?')}); "
            "choose another offload directory or pass force to replace it."
        )


def _upload_offload(fs: Any, base: str, local: Path, url: str) -> None:
    """Upload an offload directory; the manifest goes last (it is the commit)."""
    files = sorted(p for p in local.rglob("*") if p.is_file() and p.name != MANIFEST)
    with store_errors(
        lambda why: OffloadError(f"{url}: cannot upload the offload directory ({why})")
    ):
        for path in files:
            fs.pipe_file(f"{base}/{path.relative_to(local).as_posix()}", path.read_bytes())
        fs.pipe_file(f"{base}/{MANIFEST}", (local / MANIFEST).read_bytes())


def restore_url(
    reduced: str,
    output: str | None,
    *,
    offload_dir: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> bytes:
    """:func:`ctxcli.api.restore_file` where the reduced file or its offload is a URL.

    A ``file://`` URL is the local path it names.
    """
    reduced, output, offload_dir = _local(reduced), _local(output), _local(offload_dir)
    data = read_url(reduced, storage_options) if is_url(reduced) else read_input(reduced)
    root = offload_dir or f"{reduced}.offload"
    if is_url(root):
        fs, base = filesystem(root, storage_options)
        with tempfile.TemporaryDirectory(prefix="ctx-url-") as tmp:
            local = Path(tmp) / "offload"
            with store_errors(lambda why: RestoreError(f"{root}: cannot read ({why})")):
                try:
                    fs.get(f"{base}/", f"{local}/", recursive=True)
                except FileNotFoundError:
                    raise RestoreError(
                        f"{root} is not a ctx offload directory (no objects)."
                    ) from None
            if read_manifest(local) is None:
                raise RestoreError(f"{root} is not a ctx offload directory (no valid {MANIFEST}).")
            original = original_of(data, reduced, local).data
    else:
        original = original_of(data, reduced, root).data
    if output is not None and output != STDIO:
        if is_url(output):
            write_url(output, original, storage_options)
        else:
            write_atomic(Path(output), original)
    return original
