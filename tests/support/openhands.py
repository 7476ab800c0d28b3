"""An OpenHands evaluation ``output.jsonl`` shaped like a multi-SWE-bench run, made here.

The shared corpus has no OpenHands file, so this builds one from what ``formats/openhands.py``
reads, with what a CodeActAgent run (V0 event stream, function calling) writes into an
instance's ``history``:

- a ``system`` action, the task as a user ``message``, a ``recall`` and its observation;
- tool calls as actions with ``tool_call_metadata`` (``run``, ``read``, ``edit``,
  ``run_ipython``, ``think``), each answered by the observation of the same
  ``tool_call_id``; the call's ``args.thought`` holds what the model said with it;
- parallel calls of one response (``total_calls_in_response`` > 1): the first carries the
  thought, the others an empty one, and their observations follow in order;
- ``agent_state_changed`` observations and ``null`` observations, which ctx passes through;
- an ``error`` observation with ``cause`` null for a call the model made with bad arguments
  (a second result of that call);
- an agent ``message`` without a tool call (the model answering in text);
- a closing ``finish`` call, which no observation answers (a final call).

:func:`output_jsonl` makes the whole file; everything is derived from a seed.
"""

from __future__ import annotations

import json
import random
from typing import Any

WORDS = (
    "the test fails because the parser drops the trailing newline before the token stream "
    "is flushed so we need to keep it and check the writer again after the change"
).split()


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _output(rng: random.Random, lines: int) -> str:
    return "\n".join(
        f"tests/test_{rng.randrange(99)}.py::test_{rng.randrange(999)} {_words(rng, 6)}"
        for _ in range(lines)
    )


class _Instance:
    def __init__(self, seed: int, steps: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.steps = steps
        self.events: list[dict[str, Any]] = []
        self.calls = 0

    def add(self, event: dict[str, Any]) -> int:
        event = {
            "id": len(self.events),
            "timestamp": f"2025-05-0{1 + self.seed % 9}T10:00:00",
            **event,
        }
        self.events.append(event)
        return int(event["id"])

    def meta(self, function: str, response: str, total: int) -> dict[str, Any]:
        self.calls += 1
        return {
            "function_name": function,
            "tool_call_id": f"toolu_{self.seed:02d}_{self.calls:03d}",
            "model_response": {"id": response, "model": "claude-3-7-sonnet", "choices": []},
            "total_calls_in_response": total,
        }

    def start(self) -> None:
        self.add(
            {
                "source": "agent",
                "message": "You are OpenHands agent, a helpful AI assistant.",
                "action": "system",
                "args": {
                    "content": "You are OpenHands agent. " + _words(self.rng, 60),
                    "tools": [{"type": "function", "function": {"name": "execute_bash"}}],
                    "openhands_version": "0.38.0",
                    "agent_class": "CodeActAgent",
                },
            }
        )
        task = "<uploaded_files>/workspace/repo</uploaded_files>\n" + _words(self.rng, 80)
        self.message("user", task)
        recall = self.add({"source": "user", "message": "Retrieving content", "action": "recall",
                           "args": {"recall_type": "workspace_context", "query": task[:40]}})  # fmt: skip
        self.add({"source": "environment", "message": "Added workspace context",
                  "observation": "recall", "content": "", "cause": recall,
                  "extras": {"recall_type": "workspace_context", "repo_name": "repo"}})  # fmt: skip
        self.state("running")

    def state(self, agent_state: str) -> None:
        self.add(
            {
                "source": "environment",
                "message": "",
                "observation": "agent_state_changed",
                "content": "",
                "extras": {"agent_state": agent_state, "reason": ""},
            }
        )

    def call(self, function: str, action: str, args: dict[str, Any], meta: dict[str, Any]) -> int:
        return self.add(
            {
                "source": "agent",
                "message": f"Running {action}",
                "action": action,
                "tool_call_metadata": meta,
                "args": args,
                "llm_metrics": {"accumulated_cost": 0.01 * self.calls},
            }
        )

    def observe(self, kind: str, cause: int, meta: dict[str, Any], content: str) -> None:
        self.add(
            {
                "source": "agent",
                "message": f"{kind} done",
                "cause": cause,
                "observation": kind,
                "tool_call_metadata": meta,
                "content": content,
                "extras": {"metadata": {"exit_code": self.rng.choice([0, 1])}, "hidden": False},
                "success": True,
            }
        )

    def response(self, step: int) -> None:
        """One model response: one call, or two or three in parallel."""
        total = self.rng.choice([1, 1, 1, 2, 3]) if step % 4 else 1
        rid = f"chatcmpl-{self.seed}-{step}"
        pending: list[tuple[str, int, dict[str, Any], str]] = []
        for i in range(total):
            kind = self.rng.choice(["run", "run", "read", "edit", "run_ipython", "think"])
            function = {"run": "execute_bash", "read": "str_replace_editor",
                        "edit": "str_replace_editor", "run_ipython": "execute_ipython_cell",
                        "think": "think"}[kind]  # fmt: skip
            meta = self.meta(function, rid, total)
            thought = _words(self.rng, self.rng.randrange(5, 40)) if i == 0 else ""
            args: dict[str, Any] = {"thought": thought}
            if kind == "run":
                args.update(command=f"cd /workspace/repo && pytest -x -k t{step}", is_input=False,
                            blocking=False, hidden=False, confirmation_state="confirmed")  # fmt: skip
                content = _output(self.rng, self.rng.randrange(3, 120))
            elif kind == "read":
                args.update(path=f"/workspace/repo/src/m{step}.py", impl_source="oh_aci",
                            view_range=None)  # fmt: skip
                content = _output(self.rng, self.rng.randrange(10, 200))
            elif kind == "edit":
                args.update(path=f"/workspace/repo/src/m{step}.py", command="str_replace",
                            old_str=_words(self.rng, 8), new_str=_words(self.rng, 9),
                            impl_source="oh_aci")  # fmt: skip
                content = "The file has been edited. " + _output(self.rng, 12)
            elif kind == "run_ipython":
                args.update(code="print(open('setup.cfg').read())", include_extra=True)
                content = _output(self.rng, self.rng.randrange(2, 40))
            else:
                args["thought"] = thought or _words(self.rng, 30)
                content = "Your thought has been logged."
            pending.append((kind, self.call(function, kind, args, meta), meta, content))
        for kind, cause, meta, content in pending:
            self.observe(kind, cause, meta, content)
        if self.rng.randrange(9) == 0:
            # The model called a tool with bad arguments: OpenHands answers that call a
            # second time, with an error observation that has no cause.
            _, _, meta, _ = pending[-1]
            self.add({"source": "agent", "message": "error", "observation": "error",
                      "content": "Missing required argument \"command\"", "cause": None,
                      "tool_call_metadata": meta, "extras": {"error_id": ""}})  # fmt: skip

    def message(self, source: str, text: str) -> None:
        args = {"content": text, "image_urls": None, "wait_for_response": False}
        self.add({"source": source, "message": text, "action": "message", "args": args})

    def finish(self) -> None:
        meta = self.meta("finish", f"chatcmpl-{self.seed}-end", 1)
        self.call("finish", "finish", {"final_thought": _words(self.rng, 25),
                  "task_completed": "true", "outputs": {}, "thought": ""}, meta)  # fmt: skip
        self.state("finished")

    def build(self) -> list[dict[str, Any]]:
        self.start()
        for step in range(self.steps):
            if step == 2:
                self.message("agent", "I will look at the test first. " + _words(self.rng, 20))
            self.response(step)
        self.finish()
        return self.events


def instance(seed: int, steps: int = 30) -> dict[str, Any]:
    """One instance's row: its history and the fields an evaluation adds around it."""
    history = _Instance(seed, steps).build()
    return {
        "instance_id": f"org__repo-{1000 + seed}",
        "instruction": history[1]["args"]["content"],
        "instance": {"repo": "org/repo", "number": 1000 + seed, "language": "java"},
        "test_result": {"git_patch": "diff --git a/x b/x\n"},
        "metadata": {"agent_class": "CodeActAgent", "max_iterations": 100},
        "history": history,
        "metrics": {"accumulated_cost": 1.5, "costs": []},
        "error": None,
    }


def output_jsonl(instances: int = 3, steps: int = 30) -> bytes:
    """An ``output.jsonl`` of ``instances`` instances (one JSON object per line)."""
    rows = [instance(seed, steps + 7 * seed) for seed in range(instances)]
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)
