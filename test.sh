#!/usr/bin/env bash
# Install everything the tests need into ./.venv and run the whole suite.
#   ./test.sh                 -> every test under tests/
#   ./test.sh tests/unit -x   -> arguments go to pytest
set -eu
here=$(cd "$(dirname "$0")" && pwd)
source "$here/scripts/venv.sh"
# the pipeline's tests run Spark in local mode: PySpark (the spark extra) and a Java runtime;
# the CORE tests compile small Java programs for the real Artemis client (a JDK) and fetch
# that client and the Artemis broker with Maven
command -v javac >/dev/null || apt_install default-jdk-headless
command -v mvn >/dev/null || apt_install maven
# the OpenWire tests run the real ActiveMQ Classic: Debian's 5.17 client and broker (the
# package enables no broker instance of its own; the tests run theirs on free ports)
apt_install libactivemq-java activemq
# the appliance tests run the docs' curl examples
command -v curl >/dev/null || apt_install curl
install_once "$here[test,spark]"   # only when the venv is new or setup.cfg/pyproject.toml changed
cd "$here"
# the real Artemis client and broker, into a cache outside the checkout (tests/artemis/cache.py;
# at once when cached).  Offline, only the tests that need them fail, saying why.
"$VENV/bin/python" -m tests.artemis fetch >/dev/null ||
  echo "test.sh: could not fetch Apache ActiveMQ Artemis; the tests that run it will fail" >&2
# the ActiveMQ Classic 6.x client, into the same cache (tests/classic/cache.py)
"$VENV/bin/python" -m tests.classic fetch >/dev/null ||
  echo "test.sh: could not fetch the ActiveMQ Classic 6.x client; the tests that run it will fail" >&2
set +e
# two workers, each taking whole files (module fixtures such as a SparkSession are made once
# per worker); TEST_WORKERS=0 runs everything in this process
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -n "${TEST_WORKERS:-2}" --dist loadfile "${@:-tests}"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
