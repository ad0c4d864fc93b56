#!/usr/bin/env bash
# Install the Debian packages a command needs when they are missing, then prove they work.
#   scripts/system-deps.sh graphviz            # the `dot` program (every command)
#   scripts/system-deps.sh graphviz chromium   # plus the browser for the end-to-end tests
set -euo pipefail

want=()
for pkg in "$@"; do
  case "$pkg" in
    graphviz) command -v dot >/dev/null 2>&1 || want+=(graphviz) ;;
    chromium) command -v chromium >/dev/null 2>&1 || want+=(chromium) ;;
    xxhash)   command -v xxhsum >/dev/null 2>&1 || want+=(xxhash) ;;
    *) echo "system-deps: unknown package '$pkg'" >&2; exit 2 ;;
  esac
done

if [ ${#want[@]} -gt 0 ]; then
  echo "system-deps: installing ${want[*]} with apt-get"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -q "${want[@]}" >/dev/null 2>&1 \
    || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q "${want[@]}" >/dev/null; }
fi

for pkg in "$@"; do
  case "$pkg" in
    graphviz)
      echo 'digraph{a->b}' | dot -Tsvg | grep -q '<svg' \
        || { echo "system-deps: 'dot -Tsvg' does not produce SVG" >&2; exit 1; } ;;
    chromium)
      profile=$(mktemp -d)
      chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
        --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
        --dump-dom 'data:text/html,<p>ok</p>' 2>/dev/null | grep -q '<p>ok</p>' \
        || { rm -rf "$profile"; echo "system-deps: headless chromium does not start" >&2; exit 1; }
      rm -rf "$profile" ;;
    xxhash)
      echo ok | xxhsum -H2 >/dev/null || { echo "system-deps: xxhsum does not run" >&2; exit 1; } ;;
  esac
done
