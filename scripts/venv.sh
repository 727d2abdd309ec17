# Shared by run.sh and test.sh: make sure ./.venv exists with Python >= 3.11, and
# install_once installs Junction into it only when something changed.
# Installs Debian's python3-venv when the interpreter cannot create a venv
# (a fresh Debian machine), using apt-get as root or through sudo.
set -eu
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="${JUNCTION_VENV:-$here/.venv}"
PYTHON="${PYTHON:-python3}"

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "need root to run: $*" >&2; return 1; fi
}

apt_install() {
  # apt_install PKG...: install the Debian packages that are missing.
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || { echo "please install: ${missing[*]}" >&2; return 1; }
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}"
}

quietly() {
  # quietly WHAT CMD...: run CMD with its output kept aside; shown only if it fails, with WHAT.
  local out rc=0
  out=$(mktemp)
  "${@:2}" >"$out" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    cat "$out" >&2
    echo "$1 failed (exit $rc); pip's output is above" >&2
  fi
  rm -f "$out"
  return "$rc"
}

# The install stamp: one line per spec installed ("<hash> <spec>"), the hash covering what
# decides what pip installs (setup.cfg, pyproject.toml, the checkout's path, the Python).
STAMP="$VENV/.junction-install"

install_hash() {
  { cat "$here/setup.cfg" "$here/pyproject.toml"; echo "$here"; "$VENV/bin/python" -V; } | sha256sum | cut -d' ' -f1
}

install_once() {
  # install_once SPEC: pip install -e SPEC (the checkout, with extras: "$here[test]") unless the
  # stamp says it is installed for this setup.cfg and pyproject.toml; pip's output is shown only
  # if it fails.  An install with extras also counts for the plain checkout (run.sh after test.sh).
  local spec="$1" hash
  hash=$(install_hash)
  if [ -x "$VENV/bin/junction" ] && [ -f "$STAMP" ] &&
     { grep -qxF "$hash $spec" "$STAMP" || { [ "$spec" = "$here" ] && grep -qF "$hash $here[" "$STAMP"; }; }; then
    return 0
  fi
  quietly "installing $spec into $VENV" "$VENV/bin/python" -m pip install -q -e "$spec"
  { grep -F "$hash " "$STAMP" 2>/dev/null | grep -vxF "$hash $spec" || true; echo "$hash $spec"; } >"$STAMP.new"
  mv "$STAMP.new" "$STAMP"
}

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "Junction needs Python 3.11 or newer as '$PYTHON'" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  if ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
    ver=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
    apt_install "python${ver}-venv" || apt_install python3-venv
  fi
  "$PYTHON" -m venv "$VENV"
  quietly "upgrading pip in $VENV" "$VENV/bin/python" -m pip install -q --upgrade pip
fi
