#!/usr/bin/env bash
# Print the path of a working Python X.Y interpreter, as a fresh machine has it:
# python X.Y on PATH (pyenv's shims there fail unless PYENV_VERSION names a
# version: each candidate is run once to see), then pyenv's newest X.Y.*, then
# /usr/local/bin and /usr/bin. Exit 1 with a message naming what was tried.
set -u
want="${1:?usage: find_python.sh X.Y}"
candidates=()
command -v "python$want" >/dev/null 2>&1 && candidates+=("$(command -v "python$want")")
root="${PYENV_ROOT:-}"
[ -n "$root" ] || root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
for dir in $(ls -d "$root/versions/$want".* 2>/dev/null | sort -V -r); do
  candidates+=("$dir/bin/python$want")
done
candidates+=("/usr/local/bin/python$want" "/usr/bin/python$want")
for python in "${candidates[@]}"; do
  if [ -x "$python" ] && "$python" -c "import sys, venv; assert sys.version_info[:2] == tuple(map(int, '$want'.split('.')))" >/dev/null 2>&1; then
    echo "$python"
    exit 0
  fi
done
echo "error: no working Python $want with venv found (tried: ${candidates[*]}); install it (e.g. 'pyenv install $want') or pass PYTHON$(echo "$want" | tr -d .)=/path/to/python$want to make" >&2
exit 1
