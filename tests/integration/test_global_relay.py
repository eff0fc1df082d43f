#!/usr/bin/python3
"""test_global_relay.py — the global relay's userspace data path with real processes on
loopback (issue 13; docs/global-relay.md). No root needed.

    client ──> relay A (cluster 1, ingress)  VIP 127.0.0.1:VA
                 │ hint names cluster 2: PROXY v2 (client, VA) + payload
                 v
               relay B (cluster 2, owner)    peers.listen 127.0.0.2:PB, trusts 127.0.0.1/32
                 │ the same datagram, unchanged
                 v
               fake transceiver EP7          (tests/integration/fake_transceiver.py)

Cluster 2 signs its hints with its own keys; relay A holds them (peers.clusters
hint_key_file). Checked: the client's check and its media cross both relays and come back
from the VIP it used; the transceiver sees the client and VIP A as if the client had come to
it directly; the role counters of both relays; a forwarded datagram from outside
peers.trusted, a hint for a cluster nobody serves and a hint of cluster 2 signed with the
wrong keys each make a counted drop and no flow.

Exit 0 pass, 1 fail.
"""

import argparse
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import prom_metrics  # noqa: E402
import proxy_v2  # noqa: E402
import stun_codec as stun  # noqa: E402

ARGS = None
PWD = "global-relay-test-pwd-0123"


def free_port(kind=socket.SOCK_DGRAM, host="127.0.0.1"):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)  # poll interval of a deadline-bounded wait
    raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))


def http_get(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
        return r.read().decode()


class Process:
    def __init__(self, name, argv, tmp):
        self.name = name
        self.log_path = os.path.join(tmp, name + ".log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)

    def alive(self):
        if self.proc.poll() is not None:
            with open(self.log_path) as f:
                raise AssertionError("%s exited with %d:\n%s" % (self.name, self.proc.returncode, f.read()[-3000:]))
        return True

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()


class Relay(Process):
    def __init__(self, name, tmp, keys, cluster, extra):
        self.vip_port, self.admin = free_port(), free_port(socket.SOCK_STREAM)
        argv = [ARGS.relay, "--hint-key-file", keys, "--listen", "127.0.0.1:%d" % self.vip_port,
                "--admin-listen", "127.0.0.1:%d" % self.admin, "--workers", "1", "--pin-cpus", "false",
                "--cluster-id", str(cluster)] + extra
        super().__init__(name, argv, tmp)

    def ready(self):
        self.alive()
        try:
            return http_get(self.admin, "/readyz").startswith("ready")
        except OSError:
            return False

    def metrics(self):
        return prom_metrics.parse(http_get(self.admin, "/metrics"))


class GlobalRelayTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rtce-global-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.keys1 = os.path.join(self.tmp, "cluster1.yaml")
        self.keys2 = os.path.join(self.tmp, "cluster2.yaml")
        for path, key_id in ((self.keys1, 1), (self.keys2, 2)):
            with open(path, "w") as f:
                subprocess.run([ARGS.relay, "hint", "keygen", "--id", str(key_id)], stdout=f, check=True, timeout=10)
        ep_port = free_port()
        self.transceiver = Process("fake-transceiver", [
            sys.executable, os.path.join(HERE, "fake_transceiver.py"), "--endpoint", "EP7=%d" % ep_port,
            "--pwd", PWD, "--max-seconds", "120"], self.tmp)
        self.addCleanup(self.transceiver.stop)
        self.peer_port = free_port(host="127.0.0.2")
        self.owner = Relay("relay-b-owner", self.tmp, self.keys2, 2, [
            "--endpoints", "7=127.0.0.1:%d" % ep_port, "--peers-listen", "127.0.0.2:%d" % self.peer_port,
            "--peers-trusted", "127.0.0.1/32"])
        self.addCleanup(self.owner.stop)
        with open(os.path.join(self.tmp, "ingress.yaml"), "w") as f:
            json.dump({"peers": {"clusters": [{"cluster": 2, "address": "127.0.0.2:%d" % self.peer_port,
                                               "hint_key_file": self.keys2}]}}, f)  # JSON is YAML
        self.ingress = Relay("relay-a-ingress", self.tmp, self.keys1, 1,
                             ["--config", os.path.join(self.tmp, "ingress.yaml")])
        self.addCleanup(self.ingress.stop)
        wait_for(lambda: self.owner.ready() and self.ingress.ready(), 15, "both relays ready")
        self.vip = ("127.0.0.1", self.ingress.vip_port)

    def mint(self, cluster, endpoint, keys):
        return subprocess.run([ARGS.relay, "hint", "encode", "--key-file", keys, "--cluster", str(cluster),
                               "--endpoint", str(endpoint)], capture_output=True, text=True, check=True,
                              timeout=10).stdout.strip()

    def client(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        self.addCleanup(s.close)
        return s

    def exchange(self, sock, data, timeout=3.0):
        """Sends data to the VIP; returns the first datagram back (payload, source), or None.
        Resent every 0.5 s within the deadline: UDP, and the first packet crosses two relays."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            sock.sendto(data, self.vip)
            ready, _, _ = select.select([sock], [], [], min(0.5, max(0.0, deadline - time.monotonic())))
            if ready:
                return sock.recvfrom(65536)
        return None

    def quiet(self, sock, seconds=0.5):
        ready, _, _ = select.select([sock], [], [], seconds)
        return not ready

    def test_a_flow_of_another_cluster_crosses_both_relays_and_comes_back_from_the_vip(self):
        client = self.client()
        ufrag = self.mint(2, 7, self.keys2)
        txid, request = stun.binding_request(ufrag, "cli1", PWD)
        got = self.exchange(client, request)
        self.assertIsNotNone(got, "no answer through the two relays")
        data, src = got
        self.assertEqual(src, self.vip, "the answer did not come from the VIP the client used")
        msg = stun.parse(data)
        self.assertEqual(msg.msg_type, stun.BINDING_SUCCESS)
        self.assertTrue(msg.integrity_ok(PWD.encode()))
        # The transceiver saw the client itself (XOR-MAPPED-ADDRESS from the PROXY header).
        self.assertEqual(msg.xor_mapped_address(), client.getsockname())
        self.assertEqual(msg.get(stun.ATTR_SOFTWARE), b"rtce-fake-transceiver EP7")

        for i in range(5):
            payload = b"\x80\x6f" + bytes([0, i]) + b"media-%d" % i
            got = self.exchange(client, payload)
            self.assertIsNotNone(got, "media %d not echoed" % i)
            self.assertEqual(got, (b"EP7:" + payload, self.vip))

        def counted():
            a, b = self.ingress.metrics(), self.owner.metrics()
            ok = all(m.get("rtcedge_relay_role_packets_total", role=role, direction=d) >= 6
                     for m, role in ((a, "ingress"), (b, "owner"))
                     for d in ("client_to_transceiver", "transceiver_to_client"))
            return (a, b) if ok else None
        a, b = wait_for(counted, 5, "role counters of both relays")
        self.assertEqual(a.get("rtcedge_relay_role_packets_total", role="local", direction="client_to_transceiver"), 0)
        self.assertEqual(b.get("rtcedge_relay_role_packets_total", role="local", direction="client_to_transceiver"), 0)
        self.assertEqual(a.get("rtcedge_relay_flows_active"), 1)
        self.assertEqual(b.get("rtcedge_relay_flows_active"), 1)
        # The ingress's view of cluster 2's relay: traffic both ways, and a recent reply.
        for d in ("client_to_transceiver", "transceiver_to_client"):
            self.assertGreaterEqual(a.get("rtcedge_relay_peer_packets_total", cluster="2", direction=d), 6, d)
        age = a.get("rtcedge_relay_peer_last_reply_age_seconds", cluster="2", default=None)
        self.assertIsNotNone(age)
        self.assertTrue(0 <= age < 10, age)

    def test_a_peer_that_never_answered_reports_no_reply(self):
        self.assertEqual(self.ingress.metrics().get("rtcedge_relay_peer_last_reply_age_seconds", cluster="2"), -1)

    def test_forwarded_datagrams_from_outside_peers_trusted_are_dropped(self):
        ufrag = self.mint(2, 7, self.keys2)
        _, request = stun.binding_request(ufrag, "cli2", PWD)
        stranger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.addCleanup(stranger.close)
        stranger.bind(("127.0.0.99", 0))
        framed = proxy_v2.encode(("127.0.0.1", 40999), self.vip) + request
        before = self.owner.metrics()
        for _ in range(3):
            stranger.sendto(framed, ("127.0.0.2", self.peer_port))
        after = wait_for(lambda: (lambda m: m if prom_metrics.delta(
            before, m, "rtcedge_relay_dropped_packets_total", reason="peer_untrusted") >= 3 else None)(
            self.owner.metrics()), 5, "peer_untrusted drops")
        self.assertEqual(after.get("rtcedge_relay_flows_active"), 0)
        self.assertEqual(prom_metrics.delta(before, after, "rtcedge_relay_forwarded_packets_total",
                                            direction="client_to_transceiver"), 0)
        self.assertTrue(self.quiet(stranger), "the owner answered an untrusted sender")

    def test_hints_nobody_serves_or_signed_with_the_wrong_keys_leave_no_state(self):
        client = self.client()
        before = self.ingress.metrics()
        for ufrag in (self.mint(5, 7, self.keys1),   # a cluster nobody serves (a key A holds)
                      self.mint(2, 7, self.keys1)):  # cluster 2, signed with cluster 1's keys
            _, request = stun.binding_request(ufrag, "cli3", PWD)
            client.sendto(request, self.vip)
        after = wait_for(lambda: (lambda m: m if prom_metrics.delta(
            before, m, "rtcedge_relay_dropped_packets_total", reason="hint_rejected") >= 2 else None)(
            self.ingress.metrics()), 5, "two hint_rejected drops")
        self.assertEqual(prom_metrics.delta(before, after, "rtcedge_relay_hint_failures_total",
                                            reason="wrong_cluster"), 1)
        self.assertEqual(prom_metrics.delta(before, after, "rtcedge_relay_hint_failures_total",
                                            reason="unknown_key"), 1)
        self.assertEqual(after.get("rtcedge_relay_flows_active"), 0)
        self.assertEqual(self.owner.metrics().get("rtcedge_relay_received_packets_total",
                                                  direction="client_to_transceiver"), 0)
        self.assertTrue(self.quiet(client), "the ingress answered a rejected hint")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--relay", required=True)
    ARGS, rest = ap.parse_known_args()
    prog = unittest.main(argv=[sys.argv[0], "-v", *rest], exit=False)
    sys.exit(0 if prog.result.wasSuccessful() else 1)
