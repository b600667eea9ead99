"""Client of the admin endpoint (broker/admin_http.py), stdlib only: `kcoord faults`, `kcoord groups
expire-member | fire-timers | run-retention` and the pytest fixture's `faults` / `timers` use it.

    admin = AdminClient("http://127.0.0.1:8083")
    admin.faults.add(api="Heartbeat", error="REBALANCE_IN_PROGRESS", group_id="g", count=3)
    admin.faults.list(); admin.faults.remove(1); admin.faults.clear()
    admin.timers.expire_member("g", member_id); admin.timers.fire("g"); admin.timers.run_retention()
    admin.client_metrics(client_id="my-app")   # what clients pushed (KIP-714 telemetry)
"""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any


class AdminRequestError(RuntimeError):
    """The endpoint answered 4xx/5xx (`status`, and its message), or could not be reached (status 0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status


class AdminClient:
    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        if "://" not in self.url:
            self.url = "http://" + self.url
        self.timeout = timeout
        self.faults = Faults(self)
        self.timers = Timers(self)

    def request(self, method: str, path: str, body: Any = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("error", exc.reason)
            except ValueError:
                message = exc.reason
            raise AdminRequestError(exc.code, message) from None
        except (urllib.error.URLError, OSError) as exc:
            raise AdminRequestError(0, f"cannot reach the admin endpoint at {self.url}: {exc}") from None


    def clients(self, client_id: str | None = None) -> list[dict]:
        """The client instances the telemetry receiver knows (KIP-714), each with its pushed metrics."""
        query = "" if client_id is None else "?" + urllib.parse.urlencode({"client_id": client_id})
        return self.request("GET", "/clients" + query)["clients"]

    def client_metrics(self, client_id: str | None = None) -> dict[str, float]:
        """The latest value of each metric the clients (with this client.id) pushed: {name: value}, a
        name with its data point's attributes in braces when it has any ("...latency.avg{node_id=1}")."""
        out: dict[str, float] = {}
        for instance in self.clients(client_id):
            for metric in instance["metrics"]:
                attrs = ",".join(f"{k}={v}" for k, v in sorted(metric["attributes"].items()))
                out[metric["name"] + (f"{{{attrs}}}" if attrs else "")] = metric["value"]
        return out


class Faults:
    def __init__(self, client: AdminClient) -> None:
        self._client = client

    def add(self, api: str | int, **spec: Any) -> dict:
        """Install one fault (fields as in broker/faults.py); returns it with its id."""
        body = {"api": api, **{k: v for k, v in spec.items() if v is not None}}
        return self._client.request("POST", "/faults", body)["faults"][0]

    def list(self) -> list[dict]:
        return self._client.request("GET", "/faults")["faults"]

    def get(self, fault_id: int) -> dict:
        for fault in self.list():
            if fault["id"] == fault_id:
                return fault
        raise KeyError(fault_id)

    def remove(self, fault_id: int) -> None:
        self._client.request("DELETE", f"/faults/{int(fault_id)}")

    def clear(self) -> int:
        return self._client.request("DELETE", "/faults")["cleared"]


class Timers:
    def __init__(self, client: AdminClient) -> None:
        self._client = client

    def expire_member(self, group_id: str, member_id: str) -> None:
        self._client.request("POST", "/groups/expire-member", {"group_id": group_id, "member_id": member_id})

    def fire(self, group_id: str) -> int:
        """Fire the group's pending join / sync timers now; returns how many fired."""
        return self._client.request("POST", "/groups/fire-timers", {"group_id": group_id})["fired"]

    def run_retention(self) -> int:
        """Run offset retention now; returns the records (tombstones) it wrote."""
        return self._client.request("POST", "/offsets/run-retention", {})["records"]
