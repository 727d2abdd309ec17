#!/usr/bin/env bash
# Install everything the tests need into ./.venv and run the whole suite.
#   ./test.sh                 -> every test under tests/
#   ./test.sh tests/unit -x   -> arguments go to pytest
set -eu
here=$(cd "$(dirname "$0")" && pwd)
source "$here/scripts/venv.sh"
"$VENV/bin/python" -m pip install -q -e "$here[test]"
cd "$here"
set +e
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "${@:-tests}"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
