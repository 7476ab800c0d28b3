"""Write src/ctxcli/ctx.schema.json from ctx's config models (`make schema`).

The shipped schema describes the built-in stages only; `ctx config schema` adds
the stages of installed plugins. With --check, write nothing and exit 1 if the
file is stale (tests/pipeline/test_schema.py runs the same comparison).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

TARGET = Path(__file__).resolve().parent.parent / "src" / "ctxcli" / "ctx.schema.json"


def main() -> int:
    """Regenerate (or check) the schema file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args()
    os.environ["CTX_NO_PLUGINS"] = "1"  # a broken local plugin must not block this
    from ctxcli.pipeline.schema import schema_text

    text = schema_text(include_plugins=False)
    current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
    if text == current:
        print(f"{TARGET.name} is up to date", file=sys.stderr)
        return 0
    if args.check:
        print(f"{TARGET} is stale; run 'make schema'", file=sys.stderr)
        return 1
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
