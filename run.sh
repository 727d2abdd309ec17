#!/usr/bin/env bash
# Install Junction into ./.venv and run one node with the default config.
#   ./run.sh                       -> etc/broker.xml, STOMP on 127.0.0.1:61613,
#                                     management API on 127.0.0.1:8161
#   ./run.sh --config my/broker.xml
set -eu
here=$(cd "$(dirname "$0")" && pwd)
source "$here/scripts/venv.sh"
"$VENV/bin/python" -m pip install -q -e "$here"
case " $* " in
  *" --config "*) exec "$VENV/bin/junction" run "$@" ;;
  *) exec "$VENV/bin/junction" run --config "$here/etc/broker.xml" "$@" ;;
esac
