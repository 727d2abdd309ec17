# Shared by run.sh and test.sh: make sure ./.venv exists with Python >= 3.11.
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
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
