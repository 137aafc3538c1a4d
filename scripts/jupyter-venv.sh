#!/usr/bin/env bash
# Create target/jupyter-venv: a Python virtual environment with a real Jupyter
# server and kernel, for the notebook integration tests (tests/environment/jupyter.rs).
#
# Idempotent: a venv that already imports everything is left as it is. Needs
# python3 with the venv module (Debian: python3-venv); scripts/test.sh
# installs it on Debian and runs this script before `cargo test`.
#
# Usage, from anywhere:  scripts/jupyter-venv.sh
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/jupyter-venv
packages=(jupyter_server ipykernel jupyter_client websocket-client)
probe='import jupyter_server, ipykernel, jupyter_client, websocket'

if [[ -x $venv/bin/python ]] && "$venv/bin/python" -c "$probe" 2>/dev/null; then
  exit 0
fi
if ! command -v python3 >/dev/null; then
  echo "jupyter-venv.sh: python3 is missing; install it (Debian: apt-get install python3 python3-venv)" >&2
  exit 2
fi
rm -rf "$venv"
mkdir -p target
if ! python3 -m venv "$venv"; then
  echo "jupyter-venv.sh: python3 -m venv failed; install the venv module (Debian: apt-get install python3-venv)" >&2
  exit 2
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${packages[@]}"
"$venv/bin/python" -c "$probe"
echo "jupyter-venv.sh: $venv ready ($("$venv/bin/python" -m pip list --format=freeze 2>/dev/null | grep -iE '^(jupyter[-_]server|ipykernel|jupyter[-_]client)==' | tr '\n' ' '))"
