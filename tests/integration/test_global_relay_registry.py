#!/usr/bin/python3
"""test_global_relay_registry.py — global relay peers learned from the registry (issue 13;
docs/global-relay.md, "Peers from the registry") with real processes on loopback: a
redis-server on a free port, two relays, tests/integration/fake_transceiver.py. No root.

    client ──> relay A (cluster 1, ingress)   peers.clusters [{cluster: 2}] (no address)
                 │ learns rtce:{c2}:ingress from Redis
                 v
               relay B (cluster 2, owner)     peers.listen 127.0.0.2:P, published in Redis
                 v
               fake transceiver EP7

Checked, in order: before B publishes, a hint for cluster 2 is a counted hint_rejected
drop at A; B publishes its peers.listen (a member scored by a future expiry); A learns it
and forwards a flow both ways; B restarts on a new peers.listen port: its clean stop
withdraws the old member, A follows the new one and the same client's flow works again;
Redis stopped: A keeps the learned address and keeps forwarding (an established flow, and a
new one).

Exit 0 pass, 1 fail.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support", "py"))
sys.path.insert(0, HERE)
import prom_metrics  # noqa: E402
import stun_codec as stun  # noqa: E402
import test_global_relay as gr  # noqa: E402

ARGS = None
PWD = gr.PWD  # the fake transceiver of the shared stage checks with it
TTL_MS = 3000  # registry.ttl of the relays: the owner republishes every second


# The loopback harness of test_global_relay.py: free ports, waits, processes, Redis, relays.
free_port, wait_for, http_get, Process = gr.free_port, gr.wait_for, gr.http_get, gr.Process


class Redis(gr.Redis):
    def cli(self, *args):
        r = subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True, timeout=5)
        return r.stdout.split() if r.returncode == 0 else None

    def ingress(self, cluster):
        """{member: expiry_ms} of the cluster's ingress set, and Redis's time in ms."""
        out = self.cli("ZRANGE", "rtce:{c%d}:ingress" % cluster, "0", "-1", "WITHSCORES") or []
        secs, usecs = self.cli("TIME")
        return dict(zip(out[::2], (float(s) for s in out[1::2]))), int(secs) * 1000 + int(usecs) // 1000


class Relay(gr.Relay):
    def __init__(self, name, tmp, keys, cluster, extra):
        super().__init__(name, tmp, keys, cluster, ["--registry-ttl", "%dms" % TTL_MS] + list(extra))


class GlobalRelayRegistryTest(gr.TwoClusterStage):
    def setUp(self):
        if not shutil.which("redis-server") or not shutil.which("redis-cli"):
            self.skipTest("redis-server/redis-cli not installed (scripts/install-deps.sh)")
        self.make_stage("rtce-global-registry-")
        self.redis = Redis(self.tmp)
        self.addCleanup(self.redis.stop)
        self.url = "redis://127.0.0.1:%d" % self.redis.port
        self.start_fake_transceiver()
        with open(os.path.join(self.tmp, "ingress.yaml"), "w") as f:
            json.dump({"peers": {"clusters": [{"cluster": 2, "hint_key_file": self.keys2}]},
                       "registry": {"redis_url": self.url}}, f)  # JSON is YAML
        self.ingress = Relay("relay-a-ingress", self.tmp, self.keys1, 1,
                             ["--config", os.path.join(self.tmp, "ingress.yaml")])
        self.addCleanup(self.ingress.stop)
        wait_for(self.ingress.ready, 15, "the ingress relay ready")
        self.vip = ("127.0.0.1", self.ingress.vip_port)
        self.owners = 0

    def start_owner(self):
        self.owners += 1
        port = free_port(host="127.0.0.2")
        owner = Relay("relay-b-owner-%d" % self.owners, self.tmp, self.keys2, 2, [
            "--endpoints", "7=127.0.0.1:%d" % self.ep_port, "--peers-listen", "127.0.0.2:%d" % port,
            "--peers-trusted", "127.0.0.1/32", "--registry-redis-url", self.url])
        self.addCleanup(owner.stop)
        wait_for(owner.ready, 15, "the owner relay ready")
        return owner, "127.0.0.2:%d" % port

    def check_through(self, sock, tag):
        """A STUN check with a cluster-2 hint and two media packets cross both relays."""
        _, request = stun.binding_request(self.mint(2, 7, self.keys2), tag, PWD)
        got = self.exchange(sock, request)
        self.assertIsNotNone(got, "%s: no answer through the two relays" % tag)
        data, src = got
        self.assertEqual(src, self.vip)
        msg = stun.parse(data)
        self.assertEqual(msg.msg_type, stun.BINDING_SUCCESS)
        self.assertEqual(msg.xor_mapped_address(), sock.getsockname())
        self.media_through(sock, tag)

    def media_through(self, sock, tag):
        for i in range(2):
            payload = b"\x80\x6f" + bytes([0, i]) + tag.encode() + b"-%d" % i
            self.assertEqual(self.exchange(sock, payload), (b"EP7:" + payload, self.vip), "%s media %d" % (tag, i))

    def test_the_ingress_learns_follows_and_outlives_the_registry(self):
        # Nothing published yet: cluster 2 is not routable, a counted hint_rejected drop
        # (unknown_key: its keys join the routing with its address).
        early = self.client()
        before = self.ingress.metrics()
        _, request = stun.binding_request(self.mint(2, 7, self.keys2), "early", PWD)
        early.sendto(request, self.vip)
        wait_for(lambda: prom_metrics.delta(before, self.ingress.metrics(), "rtcedge_relay_dropped_packets_total",
                                            reason="hint_rejected") >= 1, 5, "a hint_rejected drop")
        self.assertEqual(self.ingress.metrics().get("rtcedge_relay_flows_active"), 0)

        owner, first = self.start_owner()
        members, now = wait_for(lambda: (lambda m: m if first in m[0] else None)(self.redis.ingress(2)), 5,
                                "the owner's peers.listen published")
        self.assertEqual(set(members), {first})
        self.assertGreater(members[first], now, "the member's score is its expiry, in the future")
        self.assertLessEqual(members[first], now + TTL_MS + 100, "expiry within registry.ttl")
        wait_for(lambda: "registry: cluster 2 relay ingress %s" % first in self.ingress.text(), 5,
                 "the ingress learning %s" % first)
        client = self.client()
        self.check_through(client, "first")
        m = self.ingress.metrics()
        self.assertGreaterEqual(m.get("rtcedge_relay_role_packets_total", role="ingress",
                                      direction="transceiver_to_client"), 3)

        # The owner moves: a clean stop withdraws its member, the new one is learned.
        owner.stop()
        # Sooner than it could expire (at least TTL - 1 s after the stop): withdrawn.
        wait_for(lambda: first not in self.redis.ingress(2)[0], TTL_MS / 2000, "the stopped owner's member withdrawn")
        owner, second = self.start_owner()
        wait_for(lambda: "registry: cluster 2 relay ingress %s (was %s)" % (second, first) in self.ingress.text(),
                 5, "the ingress following the owner to %s" % second)
        self.assertEqual(set(self.redis.ingress(2)[0]), {second})
        # The same client: the ingress flow was re-pointed (set_routing), the new owner
        # process builds its flow from the check.
        self.check_through(client, "moved")
        self.assertEqual(self.ingress.metrics().get("rtcedge_relay_flows_active"), 1)
        self.assertGreaterEqual(owner.metrics().get("rtcedge_relay_role_packets_total", role="owner",
                                                    direction="client_to_transceiver"), 3)

        # Redis gone: the learned address stays, forwarding goes on (the established flow
        # and a new one), over more than one registry.ttl.
        self.redis.stop()
        deadline = time.monotonic() + TTL_MS / 1000 + 0.5
        while time.monotonic() < deadline:  # exercised all along the outage, not once
            self.media_through(client, "outage")
        self.check_through(self.client(), "new-in-outage")
        self.assertNotIn("relay ingress unknown", self.ingress.text())
        self.ingress.alive()

    def register_ep7(self, cluster):
        """EP7 in the registry as its transceiver writes it (the fake transceiver does not)."""
        key = "rtce:{c%d}:ep:7" % cluster
        self.redis.cli("HSET", key, "address", "127.0.0.1:%d" % self.ep_port, "capacity", "10", "load", "0",
                       "draining", "0")
        self.redis.cli("PEXPIRE", key, "600000")
        self.redis.cli("SADD", "rtce:{c%d}:eps" % cluster, "7")

    def test_a_relay_restarted_while_redis_is_down_routes_from_its_registry_cache(self):
        # A relay whose only endpoints come from the registry, with registry.cache_file.
        cache = os.path.join(self.tmp, "registry-cache")
        extra = ["--registry-redis-url", self.url, "--registry-cache-file", cache]
        self.register_ep7(2)
        first = Relay("relay-cached-1", self.tmp, self.keys2, 2, extra)
        self.addCleanup(first.stop)
        wait_for(first.ready, 15, "the relay ready once the registry named EP7")
        self.vip = ("127.0.0.1", first.vip_port)
        self.check_through(self.client(), "registry")
        wait_for(lambda: os.path.exists(cache), 5, "the registry cache written")
        self.assertEqual(first.metrics().get("rtcedge_relay_registry_up"), 1)
        with open(cache) as f:
            self.assertIn("7 127.0.0.1:%d\n" % self.ep_port, f.read())

        # Redis down, the relay restarts: ready, and the hint's endpoint id still maps to EP7.
        self.redis.stop()
        first.stop()
        second = Relay("relay-cached-2", self.tmp, self.keys2, 2, extra)
        self.addCleanup(second.stop)
        wait_for(second.ready, 10, "the restarted relay ready from its cache while Redis is down")
        self.assertIn("endpoint(s) from the cache", second.text())
        m = second.metrics()
        self.assertEqual(m.get("rtcedge_relay_registry_up"), 0, "Redis is down")
        self.assertGreaterEqual(m.get("rtcedge_relay_registry_events_total", event="error"), 1)
        self.vip = ("127.0.0.1", second.vip_port)
        self.check_through(self.client(), "cached")

        # A relay without the cache, restarted the same way, knows no endpoint: not ready.
        uncached = Relay("relay-uncached", self.tmp, self.keys2, 2, ["--registry-redis-url", self.url])
        self.addCleanup(uncached.stop)
        def answering():
            try:
                return uncached.metrics() is not None
            except OSError:
                return False
        wait_for(answering, 10, "the uncached relay answering")
        self.assertFalse(uncached.ready(), "without a cache nothing names an endpoint")
        uncached.stop()

        # Redis returns empty. Its first answers come before transceivers register again: the
        # cached EP7 is kept for one more registry.ttl, then, still unlisted, it leaves.
        self.redis = Redis(self.tmp, port=self.redis.port)
        self.addCleanup(self.redis.stop)  # setUp's cleanup stops the first one only
        # The relay's re-list (an EVAL of the list script) has been answered by the empty Redis.
        wait_for(lambda: "cmdstat_eval" in " ".join(self.redis.cli("INFO", "commandstats") or []), 6,
                 "the relay listing the registry again")
        self.check_through(self.client(), "grace")
        wait_for(lambda: second.metrics().get("rtcedge_relay_registry_up") == 1, 5, "registry_up 1 again")
        wait_for(lambda: "registry: cached endpoint 7 left" in second.text(), TTL_MS / 1000 + 5,
                 "the unlisted cached endpoint leaving after the grace")
        self.assertIn("registry: routing updated (0 endpoints", second.text())
        before = second.metrics()
        _, request = stun.binding_request(self.mint(2, 7, self.keys2), "gone", PWD)
        self.client().sendto(request, self.vip)
        wait_for(lambda: prom_metrics.delta(before, second.metrics(), "rtcedge_relay_dropped_packets_total",
                                            reason="unknown_endpoint") >= 1, 5, "an unknown_endpoint drop")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--relay", required=True)
    ARGS, rest = ap.parse_known_args()
    gr.ARGS = ARGS
    prog = unittest.main(argv=[sys.argv[0], "-v", *rest], exit=False)
    sys.exit(0 if prog.result.wasSuccessful() else 1)
