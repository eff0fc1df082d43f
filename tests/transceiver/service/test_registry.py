#!/usr/bin/python3
"""The transceiver in the shared registry, against a real redis-server this test starts on
loopback (Python standard library + redis-cli): stable endpoint ids per pod identity
across restarts, one record per worker with its address and capacity, heartbeats keeping
the records alive, draining on SIGTERM, deregistration on exit, and a transceiver that
stops heartbeating (SIGSTOP) disappearing within the TTL. Also: Redis down at start does
not stop the transceiver from serving. Every wait has a deadline."""

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

ARGS = None

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support", "py"))
from rtcetest.redis import REDIS_CLI, REDIS_SERVER, RedisServer as Redis  # noqa: E402
from rtcetest.core import free_port, free_port_run, wait_for  # noqa: E402


class Transceiver:
    def __init__(self, redis_url, identity, workers=2, ttl="1s"):
        self.http = free_port()
        self.media = free_port_run(workers)
        self.proc = subprocess.Popen([ARGS.transceiver, "--http-listen", f"127.0.0.1:{self.http}",
                                      "--workers", str(workers), "--media-base-port", str(self.media),
                                      "--registry-redis-url", redis_url, "--registry-pod-identity", identity,
                                      "--registry-ttl", ttl, "--sessions-drain-timeout", "3s"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wait_for(self.ready, 15, "transceiver /readyz")

    def ready(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"transceiver exited: {self.proc.stdout.read()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/readyz", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.wait(timeout=10)


class RegistryTest(unittest.TestCase):
    def setUp(self):
        if not (os.access(REDIS_SERVER, os.X_OK) and os.access(REDIS_CLI, os.X_OK)):
            self.skipTest("redis-server / redis-cli not installed")
        self.redis = Redis()
        self.url = f"redis://127.0.0.1:{self.redis.port}"

    def tearDown(self):
        self.redis.stop()

    def ids(self):
        out = self.redis.cli("SMEMBERS", "rtce:{c0}:eps")
        return sorted(int(x) for x in out.split()) if out else []

    def test_register_heartbeat_drain_deregister(self):
        tx = Transceiver(self.url, "pod-a")
        try:
            ids = wait_for(lambda: self.ids() if len(self.ids()) == 2 else None, 5, "two endpoints registered")
            self.assertEqual(ids[1], ids[0] + 1)
            rec = self.redis.hash(f"rtce:{{c0}}:ep:{ids[0]}")
            self.assertEqual(rec["address"], f"127.0.0.1:{tx.media}")
            self.assertEqual(rec["capacity"], "1000")
            self.assertEqual(rec["draining"], "0")
            wait_for(lambda: self.metric(tx.http, "rtcedge_transceiver_registry_up") == 1, 3, "registry_up 1")
            # Heartbeats keep the 1 s TTL from lapsing: the record is there at every poll for 2.5 s.
            deadline = time.monotonic() + 2.5
            while time.monotonic() < deadline:
                self.assertTrue(self.redis.hash(f"rtce:{{c0}}:ep:{ids[1]}"), "record expired while heartbeating")
                time.sleep(0.2)
            # SIGTERM with a live session: draining while it may finish (drain timeout 3 s),
            # then deregistered when the process exits.
            with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sdp", "fixtures",
                                   "chrome_audio_offer.sdp"), "rb") as f:
                offer = urllib.request.Request(f"http://127.0.0.1:{tx.http}/v1/sessions", data=f.read(),
                                               headers={"Content-Type": "application/sdp"}, method="POST")
            with urllib.request.urlopen(offer, timeout=5) as r:
                self.assertEqual(r.status, 201)
            tx.proc.send_signal(signal.SIGTERM)
            wait_for(lambda: self.redis.hash(f"rtce:{{c0}}:ep:{ids[0]}").get("draining") == "1", 3, "draining=1")
            # A draining transceiver takes no new session (the live one may finish first).
            with self.assertRaises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(urllib.request.Request(offer.full_url, data=offer.data,
                                                              headers=dict(offer.header_items()), method="POST"),
                                       timeout=5)
            self.assertEqual(refused.exception.code, 503)
            self.assertIsNotNone(refused.exception.headers.get("Retry-After"))
            self.assertEqual(tx.proc.wait(timeout=10), 0)
            self.assertFalse(self.redis.hash(f"rtce:{{c0}}:ep:{ids[0]}"))
            self.assertFalse(self.redis.hash(f"rtce:{{c0}}:ep:{ids[1]}"))
        finally:
            tx.stop()
        # The same pod identity gets the same ids back; another pod gets a disjoint range.
        again = Transceiver(self.url, "pod-a")
        other = Transceiver(self.url, "pod-b")
        try:
            both = wait_for(lambda: self.ids() if len(self.ids()) == 4 else None, 5, "four endpoints registered")
            self.assertTrue(set(ids) <= set(both))
            self.assertEqual(len(set(both)), 4)
        finally:
            again.stop()
            other.stop()

    def test_stopped_heartbeat_expires_within_ttl(self):
        tx = Transceiver(self.url, "pod-frozen")
        try:
            ids = wait_for(lambda: self.ids() if len(self.ids()) == 2 else None, 5, "two endpoints registered")
            tx.proc.send_signal(signal.SIGSTOP)
            stopped = time.monotonic()
            wait_for(lambda: not self.redis.hash(f"rtce:{{c0}}:ep:{ids[0]}"), 3, "the record to expire")
            self.assertLess(time.monotonic() - stopped, 2.0)
        finally:
            tx.stop()

    def metric(self, port, name):
        """The value of an unlabelled sample `name` on port's /metrics, or None."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith(name + " "):
                        return float(line.split()[1])
        except OSError:
            return None
        return None

    def relay_endpoints(self, admin):
        value = self.metric(admin, "rtcedge_relay_endpoints")
        return None if value is None else int(value)

    def test_relay_follows_the_registry(self):
        if not ARGS.relay:
            self.skipTest("no --relay binary given")
        keys = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
        subprocess.run([ARGS.relay, "hint", "keygen", "--id", "1"], stdout=keys, check=True, timeout=10)
        keys.close()
        admin = free_port()
        relay = subprocess.Popen([ARGS.relay, "--hint-key-file", keys.name, "--listen",
                                  f"127.0.0.1:{free_port(socket.SOCK_DGRAM)}", "--admin-listen", f"127.0.0.1:{admin}",
                                  "--workers", "1", "--pin-cpus", "false", "--registry-redis-url", self.url,
                                  "--registry-ttl", "1s"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tx = None
        try:
            wait_for(lambda: self.relay_endpoints(admin) == 0, 10, "the relay up with no endpoints")
            tx = Transceiver(self.url, "pod-routed")
            started = time.monotonic()
            wait_for(lambda: self.relay_endpoints(admin) == 2, 3, "the relay to route to both registered workers")
            self.assertLess(time.monotonic() - started, 2.5)
            # A transceiver that stops heartbeating leaves the relay's table within TTL + one re-list.
            tx.proc.send_signal(signal.SIGSTOP)
            stopped = time.monotonic()
            wait_for(lambda: self.relay_endpoints(admin) == 0, 5, "the frozen transceiver's endpoints to leave")
            self.assertLess(time.monotonic() - stopped, 3.5)
        finally:
            if tx:
                tx.stop()
            relay.kill()
            relay.wait(timeout=10)
            os.unlink(keys.name)

    def test_redis_down_at_start_still_serves(self):
        self.redis.stop()
        tx = Transceiver(self.url, "pod-lonely")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{tx.http}/healthz", timeout=2) as r:
                self.assertEqual(r.status, 200)
            # The registry client reports the outage (and its failed connects).
            self.assertEqual(self.metric(tx.http, "rtcedge_transceiver_registry_up"), 0)
        finally:
            tx.stop()
            self.redis = Redis()  # for tearDown


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--transceiver", required=True)
    ap.add_argument("--relay")
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0], "-v", *rest])


if __name__ == "__main__":
    main()
