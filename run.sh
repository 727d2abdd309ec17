#!/usr/bin/env bash
# Install Junction into ./.venv and start it.
#   ./run.sh                        -> the appliance (junction up, etc/appliance): a gateway on
#                                      127.0.0.1 with STOMP 61613, AMQP 5672, every protocol
#                                      61616 and management 8161, and three broker cores behind it
#   ./run.sh --config my/broker.xml -> one node (junction run) with that config
set -eu
here=$(cd "$(dirname "$0")" && pwd)
source "$here/scripts/venv.sh"
install_once "$here"   # only when the venv is new or setup.cfg/pyproject.toml changed
case " $* " in
  *" --config "*) exec "$VENV/bin/junction" run "$@" ;;
  *) exec "$VENV/bin/junction" up --etc "$here/etc/appliance" "$@" ;;
esac
