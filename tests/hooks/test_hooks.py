"""ctx hooks: settings kept and given back, native output shapes, never failing a tool call."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxcli.core.errors import ConfigError
from ctxcli.core.hints import is_truncated, truncated_path
from ctxcli.hooks import settings as hs
from ctxcli.hooks.post_tool_use import Limits, respond
from ctxcli.hooks.runner import answer, log_path, main
from ctxcli.hooks.settings import Scope
from ctxcli.services.dirs import data_dir
from ctxcli.store.snapshots import snapshots_of
from support.cli import invoke
from support.paths import REPO

SAMPLES = REPO / "sample_transcripts"
USER_SETTINGS = (
    b'{\n    "permissions": {"allow": ["Bash(ls:*)"]},\n'
    b'    "hooks": {\n        "PostToolUse": [{"matcher": "Edit", "hooks": '
    b'[{"type": "command", "command": "prettier --write"}]}]\n    },\n'
    b'    "model": "opus",\n    "env": {"A": "\xc3\xa9"}\n}\n'
)
LONG = "".join(f"2026-11-28 INFO step {i}: compiling module_{i % 97}.c ok\n" for i in range(6000))


# -- install / uninstall / status ------------------------------------------------------------


def _settings(project: Path, name: str = "settings.json") -> Path:
    path = project / ".claude" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_install_keeps_the_users_settings_and_uninstall_gives_the_bytes_back(
    tmp_path: Path,
) -> None:
    path = _settings(tmp_path)
    path.write_bytes(USER_SETTINGS)
    done = hs.install("claude", Scope.PROJECT, tmp_path, command="ctx")
    assert done.action == "installed" and done.path == path
    data = json.loads(path.read_bytes())
    assert list(data) == ["permissions", "hooks", "model", "env"]  # key order kept
    assert data["env"] == {"A": "é"}
    assert data["permissions"] == {"allow": ["Bash(ls:*)"]}
    post = data["hooks"]["PostToolUse"]
    assert post[0]["matcher"] == "Edit"  # the user's own hook, first, untouched
    assert post[1]["hooks"][0]["command"] == "ctx hooks run post-tool-use"
    assert "Bash" in post[1]["matcher"] and "Read" in post[1]["matcher"]
    assert data["hooks"]["PreCompact"][0]["hooks"][0]["command"] == "ctx hooks run pre-compact"
    assert b'\n    "permissions"' in path.read_bytes()  # the file's 4-space indentation
    assert "é" in path.read_text(encoding="utf-8")
    installed = path.read_bytes()
    assert hs.install("claude", Scope.PROJECT, tmp_path).action == "unchanged"
    assert path.read_bytes() == installed  # twice changes nothing
    assert hs.uninstall("claude", Scope.PROJECT, tmp_path).action == "restored"
    assert path.read_bytes() == USER_SETTINGS


def test_uninstall_removes_the_file_ctx_created(tmp_path: Path) -> None:
    hs.install("claude", Scope.LOCAL, tmp_path, command="ctx")
    path = tmp_path / ".claude" / "settings.local.json"
    assert json.loads(path.read_bytes())["hooks"]["PostToolUse"]
    assert path.read_bytes().startswith(b'{\n  "hooks"')
    assert hs.uninstall("claude", Scope.LOCAL, tmp_path).action == "removed"
    assert not path.exists()
    assert hs.uninstall("claude", Scope.LOCAL, tmp_path).action == "absent"


def test_uninstall_after_the_user_edited_keeps_the_edits(tmp_path: Path) -> None:
    path = _settings(tmp_path)
    path.write_bytes(b'{\n\t"model": "opus"\n}\n')
    hs.install("claude", Scope.PROJECT, tmp_path, command="ctx")
    assert b'\n\t"model"' in path.read_bytes()  # tab indentation kept
    data = json.loads(path.read_bytes())
    data["theme"] = "dark"
    path.write_text(json.dumps(data, indent="\t") + "\n")
    done = hs.uninstall("claude", Scope.PROJECT, tmp_path)
    assert done.action == "cleaned"
    assert json.loads(path.read_bytes()) == {"model": "opus", "theme": "dark"}
    assert hs.uninstall("claude", Scope.PROJECT, tmp_path).action == "absent"


def test_global_scope_honours_claude_config_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))
    done = hs.install("claude", Scope.GLOBAL, tmp_path / "project", command="ctx")
    assert done.path == tmp_path / "cfg" / "settings.json" and done.path.exists()
    # Bash may cat the cited files: Claude Code takes the grant from the user's settings only.
    permissions = json.loads(done.path.read_bytes())["permissions"]
    assert permissions == {"additionalDirectories": [str(data_dir() / "hooks")]}
    assert (data_dir() / "hooks").is_dir()
    assert hs.uninstall("claude", Scope.GLOBAL, tmp_path).action == "removed"
    # Edited since: only ctx's groups and its folder go, the user's grants stay.
    done.path.write_text('{"permissions": {"additionalDirectories": ["/srv/data"]}}\n')
    hs.install("claude", Scope.GLOBAL, tmp_path, command="ctx")
    data = json.loads(done.path.read_bytes())
    data["model"] = "opus"
    done.path.write_text(json.dumps(data) + "\n")
    assert hs.uninstall("claude", Scope.GLOBAL, tmp_path).action == "cleaned"
    assert json.loads(done.path.read_bytes()) == {
        "permissions": {"additionalDirectories": ["/srv/data"]},
        "model": "opus",
    }
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert hs.settings_path("claude", Scope.GLOBAL, tmp_path) == (
        tmp_path / "home" / ".claude" / "settings.json"
    )


def test_codex_gets_the_pre_compact_snapshot_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = hs.install("codex", Scope.PROJECT, tmp_path, command="ctx")
    assert done.path == tmp_path / ".codex" / "hooks.json"
    assert list(json.loads(done.path.read_bytes())) == ["hooks"]  # no Claude permissions
    assert list(json.loads(done.path.read_bytes())["hooks"]) == ["PreCompact"]
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    assert hs.install("codex", Scope.GLOBAL, tmp_path).path == tmp_path / "codex-home/hooks.json"
    with pytest.raises(ConfigError, match="Codex has no personal"):
        hs.install("codex", Scope.LOCAL, tmp_path)


def test_a_broken_settings_file_is_named_with_its_line(tmp_path: Path) -> None:
    path = _settings(tmp_path)
    path.write_text('{\n  "model": "opus",\n}\n')
    with pytest.raises(ConfigError, match=r"settings.json:3: not valid JSON"):
        hs.install("claude", Scope.PROJECT, tmp_path)
    assert path.read_text() == '{\n  "model": "opus",\n}\n'


def test_cli_install_status_uninstall(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    done = invoke(["hooks", "install", "claude", "--dir", str(tmp_path)])
    assert done.stdout == "" and "installed: PostToolUse, PreCompact" in done.stderr
    shown = json.loads(invoke(["hooks", "status", "--dir", str(tmp_path), "--json"]).stdout)
    project = [f for f in shown["files"] if f["client"] == "claude" and f["scope"] == "project"]
    assert project[0]["events"] == ["PostToolUse", "PreCompact"]
    assert shown["versions"] == {"claude": None, "codex": None}
    text = invoke(["hooks", "status", "--dir", str(tmp_path)]).stdout
    assert "claude on PATH: not found" in text and "ctx wrap codex" in text
    invoke(["hooks", "install", "claude", "--local", "--global"], code=2)
    invoke(["hooks", "run", "post-tool-uses"], code=2)
    assert "removed" in invoke(["hooks", "uninstall", "claude", "--dir", str(tmp_path)]).stderr


# -- post-tool-use: native shapes -------------------------------------------------------------


def _payload(tool: str, response: Any, **extra: Any) -> dict[str, Any]:
    return {
        "session_id": "sess-1",
        "cwd": str(Path.cwd()),
        "hook_event_name": "PostToolUse",
        "tool_name": tool,
        "tool_use_id": "toolu_01",
        "tool_input": extra.pop("tool_input", {"command": "cat build.log"}),
        "tool_response": response,
        **extra,
    }


def _run(payload: Any) -> dict[str, Any] | None:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    out = answer("post-tool-use", raw)
    return json.loads(out) if out else None


def _cited(text: str) -> str:
    path = truncated_path(text)
    assert path is not None, text[:300]
    return Path(path).read_text(encoding="utf-8")


def test_bash_keeps_its_shape_and_only_the_long_fields_change() -> None:
    response = {
        "stdout": LONG,
        "stderr": "warning: x\n" * 6000,
        "interrupted": False,
        "isImage": False,
        "noOutputExpected": False,
    }
    reply = _run(_payload("Bash", response))
    assert reply is not None
    out = reply["hookSpecificOutput"]
    assert out["hookEventName"] == "PostToolUse"
    new = out["updatedToolOutput"]
    assert set(new) == set(response)
    assert {k: new[k] for k in ("interrupted", "isImage", "noOutputExpected")} == {
        "interrupted": False,
        "isImage": False,
        "noOutputExpected": False,
    }
    assert len(new["stdout"]) <= 50_000 and is_truncated(new["stdout"])
    assert new["stdout"].startswith("2026-11-28 INFO step 0:")
    assert new["stdout"].rstrip().endswith("step 5999: compiling module_82.c ok")
    assert "(read it with Read)" in new["stdout"]
    assert _cited(new["stdout"]) == LONG
    assert _cited(new["stderr"]) == response["stderr"]
    stored = Path(truncated_path(new["stdout"]) or "")
    assert stored.parent.parent == data_dir() / "hooks" / "sess-1"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert stat.S_IMODE(stored.parent.stat().st_mode) == 0o700


def test_bash_output_claude_code_persisted_itself_passes() -> None:
    response = {"stdout": LONG[:100_000], "stderr": "", "interrupted": False}
    response["persistedOutputPath"] = "/home/u/.claude/projects/p/s/tool-results/b1.txt"
    assert _run(_payload("Bash", response)) is None


def test_read_cuts_the_content_to_its_head_and_the_hint() -> None:
    file = {
        "filePath": "/p/big.py",
        "content": LONG,
        "numLines": 6000,
        "startLine": 1,
        "totalLines": 6000,
    }
    reply = _run(_payload("Read", {"type": "text", "file": file}))
    assert reply is not None
    new = reply["hookSpecificOutput"]["updatedToolOutput"]
    assert new["type"] == "text"
    assert {k: v for k, v in new["file"].items() if k != "content"} == {
        k: v for k, v in file.items() if k != "content"
    }
    content = new["file"]["content"]
    assert content.startswith("2026-11-28 INFO step 0:") and len(content) <= 50_000
    assert content.rstrip().endswith("(read it with Read)]")  # no tail after the hint
    assert _cited(content) == LONG


def test_read_of_an_image_passes() -> None:
    response = {"type": "image", "file": {"base64": "A" * 80_000, "type": "image/png"}}
    assert _run(_payload("Read", response)) is None


def test_grep_glob_and_webfetch_shapes() -> None:
    names = [f"/p/src/module_{i:05d}.py" for i in range(4000)]
    grep = {"mode": "content", "numFiles": 0, "filenames": [], "content": LONG, "numLines": 6000}
    new = _run(_payload("Grep", grep))["hookSpecificOutput"]["updatedToolOutput"]  # type: ignore[index]
    assert new["filenames"] == [] and new["numLines"] == 6000 and _cited(new["content"]) == LONG
    glob = {"filenames": names, "durationMs": 3, "numFiles": 4000, "truncated": False}
    new = _run(_payload("Glob", glob))["hookSpecificOutput"]["updatedToolOutput"]  # type: ignore[index]
    assert isinstance(new["filenames"], list) and new["filenames"][0] == names[0]
    assert new["filenames"][-1] == names[-1] and len(new["filenames"]) < len(names)
    assert any(is_truncated(n) for n in new["filenames"]) and new["numFiles"] == 4000
    assert _cited(next(n for n in new["filenames"] if is_truncated(n))) == "\n".join(names)
    fetch = {"result": LONG, "code": 200, "url": "https://example.org"}
    new = _run(_payload("WebFetch", fetch))["hookSpecificOutput"]["updatedToolOutput"]  # type: ignore[index]
    assert new["code"] == 200 and _cited(new["result"]) == LONG


def test_mcp_tools_answer_with_updated_mcp_tool_output() -> None:
    blocks = [{"type": "text", "text": LONG}, {"type": "image", "data": "x"}]
    reply = _run(_payload("mcp__db__query", blocks))
    assert reply is not None
    out = reply["hookSpecificOutput"]
    assert "updatedToolOutput" not in out
    new = out["updatedMCPToolOutput"]
    assert new[1] == blocks[1] and _cited(new[0]["text"]) == LONG
    reply = _run(_payload("mcp__db__query", LONG))
    assert reply is not None and _cited(reply["hookSpecificOutput"]["updatedMCPToolOutput"]) == LONG


def test_small_unknown_and_already_cut_outputs_pass_with_no_answer() -> None:
    assert _run(_payload("Bash", {"stdout": "ok\n", "stderr": "", "interrupted": False})) is None
    assert _run(_payload("Edit", {"stdout": LONG})) is None  # a shape ctx does not know
    assert _run(_payload("Bash", {"output": LONG})) is None  # not Bash's shape
    first = _run(_payload("Bash", {"stdout": LONG, "stderr": ""}))
    cut = first["hookSpecificOutput"]["updatedToolOutput"]["stdout"]  # type: ignore[index]
    long_cut = cut + "x" * 60_000
    assert _run(_payload("Bash", {"stdout": long_cut, "stderr": ""})) is None


def test_reading_an_offloaded_file_back_is_never_cut_again() -> None:
    first = _run(_payload("Bash", {"stdout": LONG, "stderr": ""}))
    path = truncated_path(first["hookSpecificOutput"]["updatedToolOutput"]["stdout"])  # type: ignore[index]
    again = _payload("Bash", {"stdout": LONG, "stderr": ""}, tool_input={"command": f"cat {path}"})
    assert _run(again) is None
    read = _payload(
        "Read",
        {"type": "text", "file": {"filePath": path, "content": LONG}},
        tool_input={"file_path": path},
    )
    assert _run(read) is None


def test_thresholds_language_and_directory_come_from_the_config(tmp_path: Path) -> None:
    Path("ctx.toml").write_text(
        'language = "zh"\noffload_dir = "offloaded"\n\n[[stages]]\nuse = "truncate_tool_output"\n'
        "max_chars = 1000\n\n[stages.tools.Grep]\nskip = true\n"
    )
    medium = LONG[:5000]
    reply = _run(_payload("Bash", {"stdout": medium, "stderr": ""}))
    assert reply is not None
    text = reply["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    assert len(text) <= 1000 and "输出已截断" in text
    assert truncated_path(text) == str(Path.cwd() / "offloaded" / "trunc" / "toolu_01")
    assert _run(_payload("Grep", {"mode": "content", "content": medium})) is None
    # A changed file is read again (the cache is keyed by its size and mtime).
    Path("ctx.toml").write_text('[[stages]]\nuse = "truncate_tool_output"\nmax_chars = 9000\n')
    os.utime("ctx.toml", ns=(1, 1))
    assert _run(_payload("Bash", {"stdout": medium, "stderr": ""})) is None


def test_respond_is_a_plain_function_of_payload_limits_and_root(tmp_path: Path) -> None:
    reply = respond(_payload("Bash", {"stdout": "y" * 600}), Limits(max_chars=300), tmp_path)
    assert reply is not None
    assert (tmp_path / "trunc" / "toolu_01").read_text() == "y" * 600


def test_a_real_call_id_names_its_file_by_its_tail_as_the_stages_do(tmp_path: Path) -> None:
    """The hint is read from the cache on every later call: the reduce stages' one rule
    (``core.protocols.call_key``) names the file, and the note keeps the whole id."""
    call = "toolu_01XbRv9f3kLmQpZ7TuWc2sNa"
    payload = {**_payload("Bash", {"stdout": "y" * 600}), "tool_use_id": call}
    reply = respond(payload, Limits(max_chars=300), tmp_path)
    assert reply is not None
    cited = truncated_path(reply["hookSpecificOutput"]["updatedToolOutput"]["stdout"])
    assert cited == str(tmp_path / "trunc" / "TuWc2sNa")
    assert Path(str(cited)).read_text() == "y" * 600
    (note,) = (tmp_path / "cuts").iterdir()
    assert json.loads(note.read_text())["tool_use_id"] == call


# -- never failing a tool call ----------------------------------------------------------------


def _main(event: str, raw: bytes) -> tuple[int, bytes, str]:
    out, err = io.BytesIO(), io.StringIO()
    code = main(event, io.BytesIO(raw), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("raw", [b"", b"not json", b"[1, 2]", b'{"tool_response": '])
def test_malformed_payload_passes_and_logs_one_line(raw: bytes) -> None:
    code, out, err = _main("post-tool-use", raw)
    assert code == 0 and out == b""
    assert err.count("\n") == 1 and "output passed through" in err
    assert log_path().read_text().count("\n") == 1
    assert stat.S_IMODE(log_path().stat().st_mode) == 0o600


@pytest.mark.may_skip(reason="a platform property: root writes into a read-only directory")
@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_an_unwritable_offload_dir_passes_the_output_through(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    Path("ctx.toml").write_text(f'offload_dir = "{locked / "sub"}"\n')
    payload = json.dumps(_payload("Bash", {"stdout": LONG, "stderr": ""})).encode()
    code, out, err = _main("post-tool-use", payload)
    assert code == 0 and out == b"" and "output passed through" in err


def test_an_offload_dir_that_is_a_file_passes_the_output_through() -> None:
    Path("blocked").write_text("a file where the directory should be")
    Path("ctx.toml").write_text('offload_dir = "blocked/sub"\n')
    payload = json.dumps(_payload("Bash", {"stdout": LONG, "stderr": ""})).encode()
    code, out, err = _main("post-tool-use", payload)
    assert code == 0 and out == b"" and "output passed through" in err
    assert "post-tool-use" in log_path().read_text()


def test_an_invalid_config_passes_the_output_through() -> None:
    Path("ctx.toml").write_text("[[stages]]\nuse = 'no_such_stage'\n")
    payload = json.dumps(_payload("Bash", {"stdout": LONG, "stderr": ""})).encode()
    code, out, err = _main("post-tool-use", payload)
    assert code == 0 and out == b"" and "ctx.toml" in err


# -- pre-compact --------------------------------------------------------------------------------


def test_pre_compact_snapshots_once_per_compaction(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    session.write_bytes((SAMPLES / "claude_code_session.jsonl").read_bytes())
    payload = {"hook_event_name": "PreCompact", "trigger": "manual"}
    payload["transcript_path"] = str(session)
    for _ in range(3):  # Claude Code fires PreCompact two to four times per /compact
        assert _main("pre-compact", json.dumps(payload).encode())[:2] == (0, b"")
    snaps = snapshots_of(session)
    assert len(snaps) == 1 and snaps[0].path.read_bytes() == session.read_bytes()


def test_pre_compact_without_a_transcript_never_blocks() -> None:
    code, out, err = _main("pre-compact", b'{"hook_event_name": "PreCompact"}')
    assert code == 0 and out == b"" and "compaction goes on" in err


def test_the_hook_command_answers_without_the_cli(tmp_path: Path) -> None:
    """``python -m ctxcli hooks run`` (what settings name) answers before typer is imported."""
    payload = json.dumps(_payload("Bash", {"stdout": LONG, "stderr": ""}))
    probe = (
        "import sys, runpy; sys.argv = ['ctx', 'hooks', 'run', 'post-tool-use'];"
        "import ctxcli._entry as e\n"
        "try:\n    e.main()\nexcept SystemExit:\n    pass\n"
        "assert 'typer' not in sys.modules and 'pydantic' not in sys.modules, 'slow path'"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], input=payload, capture_output=True, text=True, check=True
    )
    reply = json.loads(done.stdout)
    assert _cited(reply["hookSpecificOutput"]["updatedToolOutput"]["stdout"]) == LONG


def test_scope_options_are_the_shared_ones_of_cli_options() -> None:
    """--project/--local/--global are declared once, in cli/options.py, and used as they are."""
    import typing

    from ctxcli.cli import hooks as cli_hooks
    from ctxcli.cli import options

    for command in (cli_hooks.install, cli_hooks.uninstall):
        hints = typing.get_type_hints(command, include_extras=True)
        assert hints["project"] is options.ScopeProjectOpt
        assert hints["local"] is options.ScopeLocalOpt
        assert hints["glob"] is options.ScopeGlobalOpt
    assert not hasattr(cli_hooks, "GlobalOpt")
