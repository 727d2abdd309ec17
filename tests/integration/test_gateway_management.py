"""The router management API on a real gateway node (``junction run`` processes).

Two broker cores and a gateway whose router ``r`` (FIRST_ELEMENT) pools
both; the management API's ``/api/routers/r/target`` and the Jolokia exec
path must name core1, with its real node id and connector.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from junction.cli.status_table import fetch_route, route_url
from junction.management.routers import CONNECTOR_FACTORY
from tests.integration.test_gateway_stomp import make_core, make_gateway, wait_ready

pytestmark = pytest.mark.timeout(120)


def test_target_for_key_on_a_real_gateway(broker_factory):
    core1 = make_core(broker_factory, "core1").start()
    core2 = make_core(broker_factory, "core2").start()
    gateway = make_gateway(broker_factory, [core1, core2]).start()
    wait_ready(gateway, core1=True, core2=True)

    code, target = fetch_route(route_url(gateway.mgmt_url, "r", "app-1"))
    assert code == 200, target
    assert target["nodeID"] == core1.status()["node_id"]
    assert target["local"] is False
    assert target["connector"]["name"] == "core1"
    assert target["connector"]["factoryClassName"] == CONNECTOR_FACTORY
    assert target["connector"]["params"]["port"] == str(core1.gateway_in_port)

    listing = gateway.get_json("/api/routers")["routers"]
    assert [r["name"] for r in listing] == ["r"] and listing[0]["pool"]["ready"] == 2

    request = {
        "type": "exec",
        "mbean": 'org.apache.activemq.artemis:broker="gateway",component=connection-routers,name="r"',
        "operation": "getTargetAsJSON(java.lang.String)",
        "arguments": ["app-1"],
    }
    http = urllib.request.Request(
        gateway.mgmt_url + "/console/jolokia/", data=json.dumps(request).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(http, timeout=10) as resp:
        answer = json.loads(resp.read())
    assert answer["status"] == 200 and json.loads(answer["value"]) == target

    code, body = fetch_route(route_url(gateway.mgmt_url, "nope", "k"))
    assert code == 404 and "nope" in body["error"]


def test_changing_a_filter_needs_credentials_and_changes_routing(broker_factory):
    core1 = make_core(broker_factory, "core1").start()
    gateway = make_gateway(broker_factory, [core1]).start()
    wait_ready(gateway, core1=True)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    url = gateway.mgmt_url + "/api/routers/r/filters"

    def put(body: dict, auth: str | None = None) -> tuple[int, dict]:
        import base64

        headers = {"Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
        req = urllib.request.Request(url, data=json.dumps(body).encode(), method="PUT", headers=headers)
        try:
            with opener.open(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    code, body = put({"localTargetFilter": "app-.*"})
    assert code == 401 and "manage permission" in body["error"]
    assert put({"localTargetFilter": "app-.*"}, "app:wrong")[0] == 401
    assert fetch_route(route_url(gateway.mgmt_url, "r", "app-1"))[1]["local"] is False  # unchanged
    code, body = put({"localTargetFilter": "app-.*"}, "app:app-secret")
    assert code == 200 and body["localTargetFilter"] == "app-.*"
    code, target = fetch_route(route_url(gateway.mgmt_url, "r", "app-1"))
    assert code == 200 and target["local"] is True and target["connector"] is None
    assert "by user app" in gateway.log_text()
