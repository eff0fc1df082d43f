#!/usr/bin/env python3
"""relay_registry_outage_test.py — issue 15 item 6, end to end with the real relay binary and
a real redis-server: Redis frozen (SIGSTOP) for longer than registry.ttl during a call.

Two transceiver endpoints register in Redis the way RegistryAgent does (hash + PEXPIRE +
set, re-registered every ttl/3). A client holds a call through the relay to endpoint 7.
Redis is frozen for 2.5 x ttl: nobody can heartbeat, every record expires inside the
frozen server. Endpoint 8 dies during the freeze; endpoint 7 heartbeats again 0.6 x ttl
after SIGCONT (its reconnect), finds its record gone and registers again. After SIGCONT:
  - the relay keeps endpoint 7 all along (the gauge never drops below 1, no "endpoint 7
    left"), and the call's media keeps arriving at the transceiver, none lost;
  - endpoint 8 leaves, but only one ttl after Redis came back (it had that long to
    register again), and within ttl + re-list + slack.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import proxy_v2  # noqa: E402
import stun_codec  # noqa: E402

RELAY = sys.argv[1] if len(sys.argv) > 1 else sys.exit("usage: relay_registry_outage_test.py path/to/rtcedge-relay")
CLUSTER = 9
TTL = 2.0  # registry.ttl, seconds
# A transceiver's first heartbeat after Redis returns comes later than the relay's first
# re-list: RegistryAgent's connection was reset by its command timeouts and reconnects
# after a backoff, then waits for its heartbeat tick. Modelled as a fixed delay after
# SIGCONT, so the test does not depend on which side reconnects first.
TRANSCEIVER_RETURN_DELAY = 0.6 * TTL
FREEZE = 2.5 * TTL


def free_port(kind):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout, step=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Redis:
    def __init__(self, tmp):
        self.port = free_port(socket.SOCK_STREAM)
        self.log = open(os.path.join(tmp, "redis.log"), "w")
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no"], stdout=self.log, stderr=subprocess.STDOUT)
        if not wait_until(lambda: self.command_ok(resp("PING")), 5):
            raise RuntimeError("redis-server did not answer PING")

    def command(self, payload, replies=1, timeout=0.3):
        """Sends pipelined commands on a fresh connection and returns the raw replies, or None
        when Redis does not answer in time (frozen): the heartbeat a transceiver could not
        deliver."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
                s.sendall(payload)
                got = b""
                while got.count(b"\r\n") < replies:
                    chunk = s.recv(4096)
                    if not chunk:
                        return None
                    got += chunk
                return got
        except OSError:
            return None

    def command_ok(self, payload, replies=1, timeout=0.3):
        return self.command(payload, replies, timeout) is not None

    def stop(self):
        self.proc.send_signal(signal.SIGCONT)
        self.proc.kill()
        self.proc.wait()


# RegistryAgent's heartbeat (redis-sync/redis_registry.cpp): extends the record only if it
# still exists; 0 tells the agent to register again.
HEARTBEAT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'load', ARGV[2], 'draining', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
"""


class Endpoint(threading.Thread):
    """A transceiver endpoint as RegistryAgent runs it: a UDP socket the relay forwards to,
    registered in Redis, heartbeated every ttl/3 and registered again when the heartbeat
    says the record is gone — until it dies (alive cleared)."""

    def __init__(self, redis, endpoint_id):
        super().__init__(daemon=True)
        self.redis, self.id = redis, endpoint_id
        self.key = "rtce:{c%d}:ep:%d" % (CLUSTER, endpoint_id)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.address = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.alive = threading.Event()
        self.alive.set()
        self.done = threading.Event()
        self.hold_until = 0.0  # monotonic time before which no heartbeat is attempted
        self.registrations = 0

    def register(self):
        self.registrations += 1
        return self.redis.command_ok(
            resp("HSET", self.key, "address", self.address, "capacity", 10, "load", 0, "draining", 0)
            + resp("PEXPIRE", self.key, int(TTL * 1000)) + resp("SADD", "rtce:{c%d}:eps" % CLUSTER, self.id)
            + resp("PUBLISH", "rtce:{c%d}:events" % CLUSTER, "up %d" % self.id), replies=4)

    def run(self):
        while not self.done.wait(TTL / 3):
            if not self.alive.is_set() or time.monotonic() < self.hold_until:
                continue
            reply = self.redis.command(resp("EVAL", HEARTBEAT, 1, self.key, self.id, 0, 0, int(TTL * 1000)))
            if reply is not None and reply.startswith(b":0"):
                self.register()


def endpoints_gauge(admin_port):
    try:
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % admin_port, timeout=1).read().decode()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        if line.startswith("rtcedge_relay_endpoints ") or line.startswith("rtcedge_relay_flows_endpoint_gone_total "):
            name, value = line.split()
            values[name] = float(value)
    return values


def main():
    failures = []

    def check(name, ok, detail=""):
        print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
        if not ok:
            failures.append(name)

    tmp = tempfile.mkdtemp(prefix="rtce-registry-outage-")
    keys = os.path.join(tmp, "keys.yaml")
    with open(keys, "w") as f:
        subprocess.run([RELAY, "hint", "keygen", "--id", "1"], stdout=f, check=True)
    os.chmod(keys, 0o600)
    redis = Redis(tmp)
    ep7, ep8 = Endpoint(redis, 7), Endpoint(redis, 8)
    relay = None
    log_path = os.path.join(tmp, "relay.log")
    try:
        for e in (ep7, ep8):
            e.register()
            e.start()
        vip_port, admin_port = free_port(socket.SOCK_DGRAM), free_port(socket.SOCK_STREAM)
        relay = subprocess.Popen([RELAY, "--listen", "127.0.0.1:%d" % vip_port, "--return-listen", "[::]:0",
                                  "--workers", "1", "--pin-cpus", "false", "--cluster-id", str(CLUSTER),
                                  "--hint-key-file", keys, "--admin-listen", "127.0.0.1:%d" % admin_port,
                                  "--registry-redis-url", "redis://127.0.0.1:%d" % redis.port,
                                  "--registry-ttl", "%dms" % int(TTL * 1000)],
                                 stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
        ok = wait_until(lambda: (endpoints_gauge(admin_port) or {}).get("rtcedge_relay_endpoints") == 2, 10)
        check("relay routes to both registered endpoints", ok, open(log_path).read()[-2000:])
        if not ok:
            return 1

        # The call: a Binding request with endpoint 7's hint creates the flow; then media.
        ufrag = subprocess.run([RELAY, "hint", "encode", "--key-file", keys, "--cluster", str(CLUSTER),
                                "--endpoint", "7"], capture_output=True, text=True, check=True).stdout.strip()
        client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        client.bind(("127.0.0.1", 0))
        _, request = stun_codec.binding_request(ufrag, "cli1", "pwd")
        client.sendto(request, ("127.0.0.1", vip_port))
        ep7.sock.settimeout(2)
        framed, _ = ep7.sock.recvfrom(2048)
        header, _ = proxy_v2.parse(framed)
        check("the call's first packet reaches endpoint 7 framed", header.client == client.getsockname())

        received = []
        stop_media = threading.Event()
        stop_receiving = threading.Event()

        def receive():
            ep7.sock.settimeout(0.1)
            while not stop_receiving.is_set():
                try:
                    data, _ = ep7.sock.recvfrom(2048)
                except socket.timeout:
                    continue
                _, offset = proxy_v2.parse(data)
                received.append(data[offset:])

        receiver = threading.Thread(target=receive, daemon=True)
        receiver.start()
        sent = []

        def media():  # 50 packets/s, RTP-looking (first byte 0x80): never parsed by the relay
            seq = 0
            while not stop_media.is_set():
                payload = b"\x80\x78" + seq.to_bytes(4, "big") + b"\0" * 100
                client.sendto(payload, ("127.0.0.1", vip_port))
                sent.append(payload)
                seq += 1
                stop_media.wait(0.02)

        sender = threading.Thread(target=media, daemon=True)
        sender.start()

        samples = []  # (time, endpoints gauge)
        redis.proc.send_signal(signal.SIGSTOP)
        ep8.alive.clear()  # endpoint 8 dies during the freeze
        frozen_until = time.monotonic() + FREEZE
        ep7.hold_until = frozen_until + TRANSCEIVER_RETURN_DELAY
        while time.monotonic() < frozen_until:  # the freeze itself: the relay is sampled throughout
            g = endpoints_gauge(admin_port)
            if g:
                samples.append((time.monotonic(), g["rtcedge_relay_endpoints"]))
            time.sleep(0.05)
        redis.proc.send_signal(signal.SIGCONT)
        resumed = time.monotonic()

        left_at = None
        deadline = resumed + TTL + 3.0
        while time.monotonic() < deadline:
            g = endpoints_gauge(admin_port)
            if g:
                samples.append((time.monotonic(), g["rtcedge_relay_endpoints"]))
                if g["rtcedge_relay_endpoints"] == 1 and left_at is None:
                    left_at = time.monotonic()
                if left_at is not None and time.monotonic() > left_at + TTL:
                    break  # past endpoint 8's removal by one more ttl: 7 must still be there
            time.sleep(0.05)
        stop_media.set()
        sender.join()
        # The last datagrams in flight on loopback: wait for them, not for a guessed time.
        wait_until(lambda: len(received) >= len(sent), 3)
        stop_receiving.set()
        receiver.join()

        lowest = min(v for _, v in samples)
        check("the relay never dropped the live endpoint (gauge >= 1 throughout)", lowest >= 1,
              "lowest %s; samples after resume: %s" % (lowest, [(round(t - resumed, 2), v) for t, v in samples
                                                              if t >= resumed][:40]))
        check("the dead endpoint leaves after Redis returns", left_at is not None)
        if left_at is not None:
            waited = left_at - resumed
            check("... not before it had one ttl to register again (%.2f s)" % waited, waited >= TTL * 0.95)
            check("... and within ttl + re-list + 1.5 s", waited <= TTL + 1.0 + 1.5, "%.2f s" % waited)
        log = open(log_path).read()
        check("no 'endpoint 7 left' in the relay log", "endpoint 7 left" not in log, log[-3000:])
        check("'endpoint 8 left' in the relay log", "endpoint 8 left" in log, log[-3000:])
        check("the relay says why it keeps the missing endpoints", "kept for" in log, log[-3000:])
        g = endpoints_gauge(admin_port) or {}
        check("no flow removed for a departed endpoint",
              g.get("rtcedge_relay_flows_endpoint_gone_total") == 0, str(g))
        lost = len(sent) - len(received)
        check("the call lost no media across the freeze (%d sent, %d received)" % (len(sent), len(received)),
              lost == 0 and received == sent)
        relay.send_signal(signal.SIGTERM)
        check("relay exits 0 on SIGTERM", relay.wait(timeout=10) == 0)
        relay = None
    finally:
        for e in (ep7, ep8):
            e.done.set()
        if relay is not None:
            relay.kill()
            relay.wait()
        redis.stop()
        subprocess.run(["rm", "-rf", tmp])
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
