#!/usr/bin/env python3
"""check_config_test.py — `--check-config` of rtcedge-relay and rtcedge-transceiver: the
configuration resolved exactly as a start resolves it (file < env < flags < defaults) is
printed as YAML with every key and its value, secrets redacted, exit 0; a bad value exits 2
naming the key and the layer it came from; an unknown file key exits 2 naming it. The
addresses it names are held by this test, so a run that opened a socket would fail."""
import os
import re
import socket
import subprocess
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support", "py"))
from rtcetest.core import unittest_main  # noqa: E402

ARGS = None


def run(binary, *argv, env=None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("RTCEDGE_")}
    full_env.update(env or {})
    return subprocess.run([binary, *argv], capture_output=True, text=True, timeout=30, env=full_env)


def flatten(tree, prefix=""):
    out = {}
    for key, value in tree.items():
        name = prefix + key
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def reference_keys(binary):
    r = run(binary, "--print-config-reference")
    assert r.returncode == 0, r.stderr
    keys = re.findall(r"^\| `([a-z0-9_.]+)` \|", r.stdout, re.M)
    assert len(keys) > 20, r.stdout
    return keys


class Base(unittest.TestCase):
    binary = None
    prefix = None

    def write(self, text, suffix=".yaml"):
        f = tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False)
        f.write(text)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def held_port(self, kind):
        """A loopback port this test holds (bound, and listening when TCP) until it ends."""
        s = socket.socket(socket.AF_INET, kind)
        self.addCleanup(s.close)
        s.bind(("127.0.0.1", 0))
        if kind == socket.SOCK_STREAM:
            s.listen()
        return s.getsockname()[1]

    def check_ok(self, *argv, env=None):
        r = run(self.binary, "--check-config", *argv, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout, flatten(yaml.safe_load(r.stdout))

    def check_bad(self, *argv, env=None):
        r = run(self.binary, "--check-config", *argv, env=env)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertEqual(r.stdout, "", "nothing on stdout when the configuration is bad")
        return r.stderr

    def assert_every_key(self, values):
        self.assertEqual(sorted(values), sorted(reference_keys(self.binary)))

    def assert_round_trip(self, text, *argv):
        again, _ = self.check_ok("--config", self.write(text), *argv)
        self.assertEqual(again, text, "the printed configuration reads back as the same configuration")


class Relay(Base):
    prefix = "RTCEDGE_RELAY_"

    def setUp(self):
        self.binary = ARGS.relay
        keys = subprocess.run([self.binary, "hint", "keygen"], capture_output=True, text=True, check=True)
        self.keys = self.write(keys.stdout)
        os.chmod(self.keys, 0o600)

    def test_layers_every_key_and_redaction(self):
        vip_addr = "127.0.0.1:%d" % self.held_port(socket.SOCK_DGRAM)
        admin_addr = "127.0.0.1:%d" % self.held_port(socket.SOCK_STREAM)
        config = self.write("hint_key_file: %s\nlisten: ['%s']\nadmin: {listen: '%s'}\n"
                            "cluster_id: 1\nflows: {capacity: 100, idle_timeout: 10s}\n"
                            "endpoints:\n  - {id: 3, address: '198.18.2.3:40003'}\n" % (self.keys, vip_addr, admin_addr))
        text, values = self.check_ok(
            "--config", config, "--flows-capacity", "300",
            env={"RTCEDGE_RELAY_CLUSTER_ID": "2", "RTCEDGE_RELAY_FLOWS_CAPACITY": "200",
                 "RTCEDGE_RELAY_FLOW_STORE_REDIS_URL": "redis://app:hunter2hunter2@127.0.0.1:6379/0"})
        self.assert_every_key(values)
        self.assertEqual(values["cluster_id"], 2, "env beats file")
        self.assertEqual(values["flows.capacity"], 300, "flag beats env")
        self.assertEqual(values["flows.idle_timeout"], "10s", "file beats default")
        self.assertEqual(values["flows.max_per_hint"], 8, "the default")
        self.assertEqual(values["flow_store.refresh_interval"], "40s", "a third of flow_store.ttl")
        self.assertEqual(values["listen"], [vip_addr])
        self.assertEqual(values["admin.listen"], admin_addr)
        self.assertEqual(values["endpoints"], [{"id": 3, "address": "198.18.2.3:40003"}])
        self.assertNotIn("hunter2", text)
        self.assertEqual(values["flow_store.redis_url"], "redis://app:<redacted>@127.0.0.1:6379/0")

    def test_output_reads_back(self):
        text, _ = self.check_ok("--hint-key-file", self.keys, "--endpoints", "1=198.18.2.1:4000",
                                "--xdp-interfaces", "eth0,eth1")
        self.assert_round_trip(text)

    def test_bad_values_name_the_key_and_the_layer(self):
        e = self.check_bad("--hint-key-file", self.keys, "--flows-capacity", "0")
        self.assertIn("'flows.capacity' (from flag --flows-capacity)", e)
        e = self.check_bad("--hint-key-file", self.keys, env={"RTCEDGE_RELAY_CLUSTER_ID": "300"})
        self.assertIn("'cluster_id' (from env RTCEDGE_RELAY_CLUSTER_ID)", e)
        config = self.write("hint_key_file: %s\nflows:\n  idle_timeout: soon\n" % self.keys)
        e = self.check_bad("--config", config)
        self.assertIn("'flows.idle_timeout' (from config file '%s')" % config, e)
        self.assertIn("hint_key_file", self.check_bad())
        self.assertIn("/nonexistent/keys.yaml", self.check_bad("--hint-key-file", "/nonexistent/keys.yaml"))

    def test_unknown_file_key(self):
        config = self.write("hint_key_file: %s\nflows:\n  capcity: 3\n" % self.keys)
        self.assertIn("unknown key 'flows.capcity'", self.check_bad("--config", config))


class Transceiver(Base):
    prefix = "RTCEDGE_TRANSCEIVER_"

    def setUp(self):
        self.binary = ARGS.transceiver

    def test_layers_every_key_and_redaction(self):
        http_addr = "127.0.0.1:%d" % self.held_port(socket.SOCK_STREAM)
        media_port = self.held_port(socket.SOCK_DGRAM)
        config = self.write("http:\n  listen: '%s'\n  api_keys: ['key-one-0123456789', 'key-two-0123456789']\n"
                            "workers: 1\nmedia:\n  base_port: %d\nsessions: {max_per_worker: 5}\n"
                            % (http_addr, media_port))
        text, values = self.check_ok(
            "--config", config, "--backend-headers", "Authorization: Bearer backend-secret-token",
            env={"RTCEDGE_TRANSCEIVER_SESSIONS_MAX_PER_WORKER": "7", "RTCEDGE_TRANSCEIVER_AUDIO_SAMPLE_RATE": "48000",
                 "RTCEDGE_TRANSCEIVER_REGISTRY_REDIS_URL": "redis://:hunter2hunter2@127.0.0.1:6379"})
        self.assert_every_key(values)
        self.assertEqual(values["http.listen"], http_addr)
        self.assertEqual(values["sessions.max_per_worker"], 7, "env beats file")
        self.assertEqual(values["audio.sample_rate"], 48000)
        self.assertEqual(values["workers"], 1)
        self.assertEqual(values["sessions.connect_timeout"], "10s", "the default")
        self.assertEqual(values["http.api_keys"], ["<redacted>", "<redacted>"])
        self.assertEqual(values["backend.headers"], ["Authorization: <redacted>"])
        self.assertEqual(values["registry.redis_url"], "redis://:<redacted>@127.0.0.1:6379")
        for secret in ("key-one", "key-two", "backend-secret-token", "hunter2"):
            self.assertNotIn(secret, text)

    def test_output_reads_back(self):
        text, _ = self.check_ok("--workers", "2", "--relay-sources", "10.0.2.0/24",
                                "--backend-url", "ws://127.0.0.1:9000/voice")
        self.assert_round_trip(text)

    def test_bad_values_name_the_key_and_the_layer(self):
        e = self.check_bad("--audio-sample-rate", "44100")
        self.assertIn("'audio.sample_rate' (from flag --audio-sample-rate)", e)
        e = self.check_bad(env={"RTCEDGE_TRANSCEIVER_SESSIONS_DRAIN_TIMEOUT": "forever"})
        self.assertIn("'sessions.drain_timeout' (from env RTCEDGE_TRANSCEIVER_SESSIONS_DRAIN_TIMEOUT)", e)
        self.assertIn("http.api_keys", self.check_bad("--http-listen", "0.0.0.0:8080"))
        self.assertIn("/nonexistent/keys.yaml",
                      self.check_bad("--relay-vips", "198.18.0.1:3478", "--hint-key-file", "/nonexistent/keys.yaml"))

    def test_unknown_file_key(self):
        config = self.write("sessions: {max_per_workr: 5}\n")
        self.assertIn("unknown key 'sessions.max_per_workr'", self.check_bad("--config", config))


if __name__ == "__main__":
    unittest_main(globals(), "--relay", "--transceiver")
