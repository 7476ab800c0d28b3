#!/usr/bin/env bash
# Install the real agent CLIs the end-to-end tests drive (tests/e2e), pinned, into a cache
# directory the tests reuse: $CTX_E2E_CACHE, else $XDG_CACHE_HOME/ctx-e2e, else ~/.cache/ctx-e2e.
# Idempotent: a client whose pinned version is already there is not fetched again.
# Exit 0 even when npm is missing or a package fails: the tests then skip and say why.
set -uo pipefail

CLAUDE_CODE_VERSION="${CLAUDE_CODE_VERSION:-2.1.331}"
CODEX_VERSION="${CODEX_VERSION:-0.169.0}"
CCUSAGE_VERSION="${CCUSAGE_VERSION:-18.0.11}"

cache="${CTX_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ctx-e2e}"
mkdir -p "$cache"

if ! command -v npm >/dev/null 2>&1; then
  echo "install_clients: npm not found; the e2e tests will skip" >&2
  exit 0
fi

install() {  # install NAME VERSION DIR
  local name="$1" version="$2" dir="$cache/$3"
  local have
  have="$(node -p "require('$dir/node_modules/$name/package.json').version" 2>/dev/null || true)"
  if [ "$have" = "$version" ]; then
    echo "install_clients: $name@$version already in $dir"
    return 0
  fi
  mkdir -p "$dir"
  [ -f "$dir/package.json" ] || echo '{"private": true}' >"$dir/package.json"
  if npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
      "$name@$version" >"$dir/install.log" 2>&1; then
    echo "install_clients: installed $name@$version into $dir"
  else
    echo "install_clients: could not install $name@$version (see $dir/install.log)" >&2
  fi
}

install @anthropic-ai/claude-code "$CLAUDE_CODE_VERSION" claude-code
install @openai/codex "$CODEX_VERSION" codex
install ccusage "$CCUSAGE_VERSION" ccusage
install @ccusage/codex "$CCUSAGE_VERSION" ccusage-codex
exit 0
