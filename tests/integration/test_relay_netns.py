#!/usr/bin/python3
"""Network-namespace integration test of rtcedge-relay, on both data paths.

Topology (netns_topology.py): a client namespace, a relay namespace holding the VIP on its
client-facing veth, and a transceiver namespace running fake_transceiver.py with three
endpoint sockets (EP1 on 198.18.1.2:40001 over IPv4, EP2 on [fd00:198:18:2::2]:40002 over
IPv6, EP3 on 198.18.1.2:40003, which is only configured by the SIGHUP test).

It shows that the first STUN Binding request goes to the endpoint its hint names, later
non-STUN packets follow it, replies reach the client from the VIP (a bound VIP and a
wildcard listener answering from the address the client used), forged hints, unknown
endpoints and stray packets create no flow and are counted by reason, and forged
return-path datagrams reach no client; over IPv4 and IPv6. Also SIGHUP reload of the
endpoint table keeping flows, idle expiry, the flow-table bound, the flows-per-hint bound
against a replayed hint, and a clean SIGTERM exit.

Every such test class runs twice (unittest names end in _userspace / _xdp): with the
userspace relay, and with the XDP program attached natively to the relay namespace's veths
(--mode xdp; the userspace workers run alongside and take what XDP passes up). Each data
path has its own topology and fake transceiver. The same assertions hold on both; where a
data path counts differently by nature, the XDP run also checks that the XDP program (not
userspace) forwarded or dropped (rtcedge_relay_xdp_packets_total) and that userspace
received nothing of it. Wildcard listeners are userspace-only in XDP mode (the program
matches exact VIPs), so wildcard cases check the opposite. XdpTest adds what only XDP has:
a loader restart during traffic loses no packet, --mode auto falls back, bpftool sees the
flows, `rtcedge-relay detach` removes links and pins.

Usage: /usr/bin/python3 test_relay_netns.py [--relay PATH] [--xdp-pass-obj PATH]
[unittest args, e.g. -k Reload, -k xdp] (or RTCE_RELAY_BIN / RTCE_XDP_PASS_OBJ). Needs root;
otherwise it prints why and skips (exit 0). When XDP cannot attach here, the _xdp classes
print why and skip.
Standard library only. Namespaces and processes are removed even when a test fails, on
SIGTERM/SIGHUP/Ctrl-C, and (processes) when the test is SIGKILLed."""

import argparse
import base64
import binascii
import contextlib
import functools
import ipaddress
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support", "py"))
sys.path.insert(0, HERE)

import netns_topology as nt  # noqa: E402
import prom_metrics  # noqa: E402
import proxy_v2  # noqa: E402
import stun_codec  # noqa: E402
from rtcetest import core  # noqa: E402

RELAY_BIN = os.environ.get("RTCE_RELAY_BIN") or os.path.normpath(os.path.join(HERE, "../../build/bin/rtcedge-relay"))
XDP_PASS_OBJ = os.environ.get("RTCE_XDP_PASS_OBJ")  # default: ../bpf/xdp_pass.bpf.o next to the relay's bin/
BPFTOOL = "/usr/sbin/bpftool"
GOLDEN_DIR = os.path.normpath(os.path.join(HERE, "../golden"))

PWD = "rtce-integration-pwd-0123456789"  # server ICE pwd the fake transceiver knows (>= 22 chars)
CLIENT_UFRAG = "cli1"
CLUSTER = 7
EP_PORT = {1: 40001, 2: 40002, 3: 40003}
EP_ADDR = {1: "%s:%d" % (nt.XCVR_V4, 40001), 2: "[%s]:%d" % (nt.XCVR_V6, 40002), 3: "%s:%d" % (nt.XCVR_V4, 40003)}
# The relay's source address toward each endpoint (the link the endpoint is reached over).
EP_RELAY_SIDE = {1: nt.RELAY_XCVR_V4, 2: nt.RELAY_XCVR_V6, 3: nt.RELAY_XCVR_V4}
HINT_FAILURES = ("bad_length", "bad_char", "bad_version", "unknown_key", "bad_mac", "wrong_cluster")
FAMILIES = (4, 6)
MODES = ("userspace", "xdp")
XDP_IFACES = ("rc0", "rx0")  # the relay namespace's veths: client side, transceiver side
PIN_PATH = "%s/%s%d" % (nt.BPFFS, nt.NS_PREFIX, os.getpid())  # unique per run
C2T, T2C = "client_to_transceiver", "transceiver_to_client"
# The XDP reasons whose packets also count in the shared rtcedge_relay_received_packets_total.
XDP_FOLDED = ("forwarded", "forwarded_new_flow", "hint_rejected", "return_malformed", "return_no_flow",
              "return_wrong_sender", "hint_flow_limit", "source_prefix_flow_limit", "peer_untrusted",
              "peer_malformed", "peer_wrong_sender")

STATE = {}  # tmpdir, key file, pwds, per-data-path environments: set by setUpModule / env_for


def norm(addr):
    """(ip, port) with the address in canonical text form, IPv4-mapped shown as IPv4."""
    ip = ipaddress.ip_address(str(addr[0]).split("%")[0])
    if ip.version == 6 and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return (str(ip), int(addr[1]))


# rtcetest.core's deadline-bounded wait, polling every 20 ms (the relay answers in well under that).
poll_until = functools.partial(core.poll_until, interval=0.02)


# ---------------------------------------------------------------------------- hints

def mint(endpoint, cluster=CLUSTER, key_file=None):
    r = subprocess.run([RELAY_BIN, "hint", "encode", "--key-file", key_file or STATE["keys"],
                        "--cluster", str(cluster), "--endpoint", str(endpoint)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=10, check=True)
    ufrag = r.stdout.strip()
    assert len(ufrag) == 16, "unexpected ufrag %r" % ufrag
    return ufrag


def forged_ufrag(kind, endpoint=1):
    """A server ufrag that fails hint verification with reason `kind`."""
    good = mint(endpoint)
    raw = bytearray(base64.b64decode(good))
    if kind == "bad_mac":
        raw[11] ^= 0x01
    elif kind == "bad_version":
        raw[0] = (2 << 4) | (raw[0] & 0x0F)
    elif kind == "unknown_key":
        raw[0] = (raw[0] & 0xF0) | (((raw[0] & 0x0F) + 1) & 0x0F)
    elif kind == "bad_length":
        return good[:15]
    elif kind == "bad_char":
        return good[:6] + "-" + good[7:]
    elif kind == "wrong_cluster":
        return mint(endpoint, cluster=(CLUSTER + 1) % 256)
    else:
        raise ValueError(kind)
    return base64.b64encode(bytes(raw)).decode()


# ---------------------------------------------------------------------------- processes

class Peer:
    """fake_transceiver.py in the transceiver namespace; collects its JSON event lines."""

    def __init__(self, topo, log_path, pwds):
        argv = ["/usr/bin/python3", "-u", os.path.join(HERE, "fake_transceiver.py")]
        for ep, port in EP_PORT.items():
            argv += ["--endpoint", "EP%d=%d" % (ep, port)]
        for p in pwds:
            argv += ["--pwd", p]
        self._stderr = open(log_path, "w")
        self.proc = nt.start_in_netns(topo.xcvr, argv, stdout=subprocess.PIPE, stderr=self._stderr,
                                      text=True, bufsize=1)
        self.events = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._reader, name="peer-reader", daemon=True)
        self._thread.start()
        ready = self.wait_event(lambda e: e["event"] == "ready", since=0, timeout=10)
        if not ready:
            raise RuntimeError("fake transceiver did not become ready; stderr: %s" % open(log_path).read()[-2000:])

    def _reader(self):
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "garbage", "line": line}
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()

    def mark(self):
        with self._cond:
            return len(self.events)

    def since(self, mark, predicate=lambda e: True):
        with self._cond:
            return [e for e in self.events[mark:] if predicate(e)]

    def wait_event(self, predicate, since, timeout=3.0):
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for e in self.events[since:]:
                    if predicate(e):
                        return e
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def wait_count(self, predicate, since, n, timeout=3.0):
        """Waits until at least n events since `since` match; returns them."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [e for e in self.events[since:] if predicate(e)]
                left = deadline - time.monotonic()
                if len(found) >= n or left <= 0:
                    return found
                self._cond.wait(left)

    def stop(self):
        nt.stop_process(self.proc)
        nt.forget_process(self.proc)
        self._thread.join(timeout=5)  # EOF once the process is gone
        self._stderr.close()
        if not self._thread.is_alive():
            self.proc.stdout.close()


class Relay:
    """One rtcedge-relay process in the relay namespace, on its own set of ports.

    mode "userspace" runs in the userspace environment; "xdp" and "auto" in the XDP one,
    attached to XDP_IFACES with pins under PIN_PATH. Stopping an XDP relay also detaches it
    (`rtcedge-relay detach`, rm -rf as fallback) unless detach=False (a restart); the pins
    are removed at exit in any case."""

    _next_slot = 0

    def __init__(self, name, workers=2, endpoints=(1, 2), config_text=None, extra=(), cluster=CLUSTER,
                 key_file=None, mode="userspace", xdp_interfaces=XDP_IFACES, ports_of=None, reuse_pins=False,
                 vip_ports_of=None):
        env = env_for("userspace" if mode == "userspace" else "xdp")
        topo, tmp = env.topo, STATE["tmp"]
        if ports_of is not None:  # a restarted instance: the same ports as the one it replaces
            slot = ports_of.slot
        else:
            slot = Relay._next_slot
            Relay._next_slot += 1
        base = 20000 + 100 * slot
        self.slot = slot
        self.name = name
        self.mode = mode
        self.env = env
        self.workers = workers
        self.vip_port = base + 78  # bound to the VIP addresses
        self.wild_port = base + 79  # wildcard listeners (answer via IP_PKTINFO)
        if vip_ports_of is not None:  # a second instance on the same VIPs (SO_REUSEPORT group)
            self.vip_port, self.wild_port = vip_ports_of.vip_port, vip_ports_of.wild_port
        self.return_port = base + 10  # worker i uses return_port + i
        self.xdp_return_port = base + 30  # XDP forwards from and takes replies on this one
        self.admin_port = base + 90
        self.ns = topo.relay
        self.pin_path = PIN_PATH if mode != "userspace" else None
        self.log_path = os.path.join(tmp, "relay-%s.log" % name)
        self.config_path = os.path.join(tmp, "relay-%s.yaml" % name)
        self.returncode = None
        self.detach_rc = None
        self._cleanup = None
        if self.pin_path:
            if not reuse_pins and os.path.exists(self.pin_path):
                nt.remove_pins(self.pin_path)  # a previous relay's, never this one's state
            self._cleanup = nt.register_cleanup(self.detach)
        argv = [RELAY_BIN, "--mode", mode,
                "--listen", "%s:%d,[%s]:%d,0.0.0.0:%d,[::]:%d" % (nt.VIP_V4, self.vip_port, nt.VIP_V6,
                                                                 self.vip_port, self.wild_port, self.wild_port),
                "--return-listen", "[::]:%d" % self.return_port,
                "--workers", str(workers), "--cluster-id", str(cluster),
                "--hint-key-file", key_file or STATE["keys"],
                "--admin-listen", "127.0.0.1:%d" % self.admin_port,
                "--log-level", "debug"]
        if config_text is not None:
            self.write_config(config_text)
            argv += ["--config", self.config_path]
        elif endpoints:
            argv += ["--endpoints", ",".join("%d=%s" % (e, EP_ADDR[e]) for e in endpoints)]
        if mode != "userspace":
            argv += ["--xdp-interfaces", ",".join(xdp_interfaces),
                     "--xdp-relay-address4", nt.RELAY_XCVR_V4, "--xdp-relay-address6", nt.RELAY_XCVR_V6,
                     "--xdp-return-port", str(self.xdp_return_port), "--xdp-pin-path", self.pin_path]
        argv += list(extra)
        self._log = open(self.log_path, "a")
        # setns only (keep_mounts): `ip netns exec` would hide the bpf filesystem.
        self.proc = nt.start_in_netns(self.ns, argv, keep_mounts=True, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_ready()
        except BaseException:
            self.stop(signal.SIGKILL)
            raise

    def write_config(self, text):
        tmp_path = self.config_path + ".new"
        with open(tmp_path, "w") as f:
            f.write(text)
        os.replace(tmp_path, self.config_path)  # atomic: a SIGHUP never reads half a file

    def log_text(self):
        with contextlib.suppress(OSError):
            with open(self.log_path) as f:
                return f.read()
        return ""

    def vip(self, family, kind="bound"):
        ip = nt.VIP_V4 if family == 4 else nt.VIP_V6
        return (ip, self.vip_port if kind == "bound" else self.wild_port)

    @property
    def xdp_live(self):
        return self.mode == "xdp"

    def return_addresses(self, family, from_ns="xcvr"):
        """Where the relay takes transceiver replies for the flows it creates, as seen from
        the transceiver (or client) namespace: each worker's return socket, or in XDP mode
        the XDP return port on the transceiver-side address (routed from the client too)."""
        if self.xdp_live:
            return [(nt.RELAY_XCVR_V4 if family == 4 else nt.RELAY_XCVR_V6, self.xdp_return_port)]
        if from_ns == "xcvr":
            ip = nt.RELAY_XCVR_V4 if family == 4 else nt.RELAY_XCVR_V6
        else:
            ip = nt.RELAY_LINK_V4 if family == 4 else nt.RELAY_LINK_V6
        return [(ip, self.return_port + i) for i in range(self.workers)]

    def http_get(self, path, timeout=2.0):
        sock = nt.socket_in(self.ns, socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(("127.0.0.1", self.admin_port))
            return prom_metrics.fetch(sock, "127.0.0.1", path, timeout)
        finally:
            sock.close()

    def _wait_ready(self, timeout=10.0):
        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError("relay %s exited with %s during start-up:\n%s"
                                   % (self.name, self.proc.returncode, self.log_text()[-3000:]))
            with contextlib.suppress(OSError):
                return self.http_get("/readyz", timeout=0.5)[0] == 200
            return False

        if not poll_until(ready, timeout):
            raise RuntimeError("relay %s not ready within %.0fs:\n%s" % (self.name, timeout, self.log_text()[-3000:]))

    def metrics(self):
        status, body = self.http_get("/metrics")
        if status != 200:
            raise AssertionError("GET /metrics: HTTP %d" % status)
        return prom_metrics.parse(body)

    def wait_metrics(self, predicate, what, timeout=5.0):
        """Polls /metrics until predicate(snapshot) holds; fails with the last snapshot."""
        last = [None]

        def check():
            last[0] = self.metrics()
            return predicate(last[0])

        if not poll_until(check, timeout):
            raise AssertionError("relay %s: timed out after %.1fs waiting for %s; last metrics:\n%s\n--- relay log tail:\n%s"
                                 % (self.name, timeout, what, last[0], self.log_text()[-2000:]))
        return last[0]

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=5.0, detach=True):
        if self.returncode is None:
            t0 = time.monotonic()
            self.returncode = nt.stop_process(self.proc, sig, timeout)
            self.stop_seconds = time.monotonic() - t0
            nt.forget_process(self.proc)
            self._log.close()
        if detach:
            self.detach()
        elif self._cleanup is not None:
            # The pins now belong to whoever restarts with them (which registers its own
            # cleanup); PIN_PATH is also swept by the module cleanup.
            nt.unregister_cleanup(self._cleanup)
            self._cleanup = None
        return self.returncode

    def detach(self):
        """`rtcedge-relay detach --pin-path`, then rm -rf whatever is left. Idempotent."""
        if self._cleanup is not None:
            nt.unregister_cleanup(self._cleanup)
            self._cleanup = None
        rc = nt.detach_pins(RELAY_BIN, self.pin_path) if self.pin_path else None
        if rc is not None:
            self.detach_rc = rc


class Client:
    """A UDP client socket in the client namespace."""

    def __init__(self, family, ns):
        af = socket.AF_INET if family == 4 else socket.AF_INET6
        self.family = family
        self.sock = nt.socket_in(ns, af)
        self.sock.bind((nt.CLIENT_V4 if family == 4 else nt.CLIENT_V6, 0))
        self.addr = norm(self.sock.getsockname())

    def close(self):
        self.sock.close()

    def send(self, dst, data):
        self.sock.sendto(data, dst)

    def recv(self, timeout):
        self.sock.settimeout(timeout)
        try:
            data, src = self.sock.recvfrom(65535)
        except socket.timeout:
            return None, None
        return data, norm(src)

    def pending(self, timeout=0.2):
        """Whatever arrives within `timeout` (used after the relay has already counted a
        drop, so nothing can still be in flight)."""
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < 16:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            data, src = self.recv(left)
            if data is None:
                break
            got.append((data, src))
        return got

    def exchange(self, dst, request, answer, attempts, timeout):
        """Sends request() to dst (a new one each attempt, at most `attempts`) and waits up to
        `timeout` after each for a datagram that answer(data) turns into something not None;
        (that, the address it came from), or None after the last attempt."""
        for _ in range(attempts):
            self.send(dst, request())
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                data, src = self.recv(max(0.01, deadline - time.monotonic()))
                if data is None:
                    break
                got = answer(data)
                if got is not None:
                    return got, src
        return None

    def stun(self, dst, ufrag, pwd=PWD, attempts=3, timeout=1.0):
        """Sends a Binding request (retried at most `attempts` times); returns the parsed
        response and the address it came from."""
        sent = set()

        def request():
            txid, req = stun_codec.binding_request(ufrag, CLIENT_UFRAG, pwd)
            sent.add(txid)
            return req

        def answer(data):
            if stun_codec.looks_like_stun(data):
                msg = stun_codec.parse(data)
                if msg.txid in sent:
                    return msg
            return None
        got = self.exchange(dst, request, answer, attempts, timeout)
        if got is None:
            raise AssertionError("no STUN response from %s for ufrag %s after %d attempts" % (dst, ufrag, attempts))
        return got

    def echo(self, dst, payload, attempts=3, timeout=1.0):
        got = self.exchange(dst, lambda: payload, lambda data: data if data.endswith(payload) else None,
                            attempts, timeout)
        if got is None:
            raise AssertionError("no echo from %s for %r after %d attempts" % (dst, payload[:8], attempts))
        return got


def media_payloads(n):
    """Non-STUN payloads as WebRTC sends them after ICE: DTLS, RTP, RTCP (RFC 7983 ranges)."""
    out = [bytes([0x16, 0xFE, 0xFD]) + os.urandom(29)]  # DTLS handshake record
    for seq in range(n):
        out.append(struct.pack("!BBHII", 0x80, 0x6F, seq, 960 * seq, 0x1234ABCD) + os.urandom(40))  # RTP/Opus
    out.append(struct.pack("!BBHI", 0x80, 0xC8, 6, 0x1234ABCD) + os.urandom(20))  # RTCP SR
    return out


# ---------------------------------------------------------------------------- module fixture

def setUpModule():
    reason = nt.netns_unavailable_reason()
    if reason:
        print("SKIPPED: relay network-namespace integration test: %s" % reason, flush=True)
        raise unittest.SkipTest(reason)
    if not os.access(RELAY_BIN, os.X_OK):
        raise RuntimeError("relay binary %s not found; build it or pass --relay PATH" % RELAY_BIN)
    nt.sweep_stale()
    unittest.addModuleCleanup(nt.cleanup_all)  # namespaces, processes, pins
    nt.register_cleanup(lambda: os.path.exists(PIN_PATH) and nt.remove_pins(PIN_PATH))
    tmp = nt.make_scratch_dir()  # keys, config files, logs; removed with the namespaces
    STATE["tmp"] = tmp
    STATE["env"] = {}
    keys = os.path.join(tmp, "hint-keys.yaml")
    with open(keys, "w") as f:
        subprocess.run([RELAY_BIN, "hint", "keygen"], stdout=f, check=True, timeout=10)
    STATE["keys"] = keys
    pwds = [PWD]
    golden = golden_capture()
    if golden:
        pwds.append(golden["server_pwd"])
    STATE["pwds"] = pwds


class Env:
    """One data path's world: its own three namespaces and fake transceiver."""

    def __init__(self, mode):
        self.mode = mode
        self.topo = nt.Topology(tag=mode).create()
        self.peer = None
        if mode == "xdp":
            try:
                self.topo.prepare_for_xdp(xdp_pass_obj())
            except Exception:
                self.topo.destroy()
                raise
        self.peer = Peer(self.topo, os.path.join(STATE["tmp"], "fake-transceiver-%s.log" % mode), STATE["pwds"])


def xdp_pass_obj():
    return XDP_PASS_OBJ or os.path.normpath(os.path.join(os.path.dirname(RELAY_BIN), "../bpf/xdp_pass.bpf.o"))


def xdp_unavailable_reason():
    """None when this host can run the relay's XDP data path on veth, else why not."""
    if os.geteuid() != 0:
        return "not root"
    if not os.path.exists(xdp_pass_obj()):
        return "%s not built (bpf/CMakeLists.txt builds it; pass --xdp-pass-obj)" % xdp_pass_obj()
    return nt.ensure_bpffs()


def env_for(mode):
    """The data path's environment, created on first use. For "xdp", raises SkipTest (and
    prints the reason) when XDP cannot run here."""
    envs = STATE["env"]
    if mode not in envs:
        reason = xdp_unavailable_reason() if mode == "xdp" else None
        if reason is None:
            try:
                envs[mode] = Env(mode)
            except Exception as e:
                if mode != "xdp":
                    raise
                reason = "cannot prepare the veths for XDP: %s" % e
        if reason is not None:
            envs[mode] = reason
            print("SKIPPED: XDP data path tests: %s" % reason, flush=True)
    if isinstance(envs[mode], str):
        raise unittest.SkipTest("XDP data path unavailable: " + envs[mode])
    return envs[mode]


def golden_capture():
    """The real Chromium Binding request in tests/golden, or None when absent."""
    try:
        with open(os.path.join(GOLDEN_DIR, "chrome_binding_request.json")) as f:
            meta = json.load(f)
        with open(os.path.join(GOLDEN_DIR, "chrome_binding_request.hex")) as f:
            meta["bytes"] = bytes.fromhex("".join(f.read().split()))
        meta["key_file"] = os.path.join(GOLDEN_DIR, "hint-keys.yaml")
        if not os.path.exists(meta["key_file"]):
            return None
        return meta
    except (OSError, ValueError, KeyError):
        return None


class RelayTestCase(unittest.TestCase):
    """Helpers shared by the test classes. MODE is the data path ("userspace" or "xdp");
    per_data_path() makes one subclass of each test class per mode."""

    relay = None
    MODE = "userspace"

    @classmethod
    def setUpClass(cls):
        env_for(cls.MODE)  # skips the class when its data path cannot run here

    @classmethod
    def start_relay(cls, name, **kwargs):
        kwargs.setdefault("mode", cls.MODE)
        relay = Relay("%s-%s" % (name, cls.MODE), **kwargs)
        cls.addClassCleanup(relay.stop)
        return relay

    def start_side_relay(self, ns, argv, admin_port, name):
        """A second relay (the global relay's other role) run by hand in namespace ns, with its
        admin endpoint on 127.0.0.1:admin_port there; waits for /readyz and returns a
        function that reads its metrics. Stopped at cleanup."""
        log = open(os.path.join(STATE["tmp"], "relay-%s-%s.log" % (name, self.MODE)), "a")
        self.addCleanup(log.close)
        proc = nt.start_in_netns(ns, argv, stdout=log, stderr=subprocess.STDOUT)

        def stop():
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
        self.addCleanup(stop)

        def get(path):
            sock = nt.socket_in(ns, socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.settimeout(2.0)
                sock.connect(("127.0.0.1", admin_port))
                return prom_metrics.fetch(sock, "127.0.0.1", path, 2.0)
            finally:
                sock.close()

        def ready():
            if proc.poll() is not None:
                raise AssertionError("%s relay exited with %s" % (name, proc.returncode))
            with contextlib.suppress(OSError):
                return get("/readyz")[0] == 200
            return False
        self.assertTrue(poll_until(ready, 10), "%s relay not ready" % name)
        return lambda: prom_metrics.parse(get("/metrics")[1])

    def new_relay(self, name, **kwargs):
        kwargs.setdefault("mode", self.MODE)
        relay = Relay("%s-%s" % (name, self.MODE), **kwargs)
        self.addCleanup(relay.stop, signal.SIGKILL)
        return relay

    @property
    def env(self):
        return env_for(self.MODE)

    @property
    def topo(self):
        return self.env.topo

    @property
    def peer(self):
        return self.env.peer

    @property
    def xdp(self):
        return self.MODE == "xdp"

    def client(self, family):
        c = Client(family, self.topo.client)
        self.addCleanup(c.close)
        return c

    # -------------------------------------------------------------- per-data-path checks

    @staticmethod
    def xdp_count(m, reason, direction=C2T):
        return m.get("rtcedge_relay_xdp_packets_total", reason=reason, direction=direction)

    @classmethod
    def xdp_delta(cls, before, after, reason, direction=C2T):
        return cls.xdp_count(after, reason, direction) - cls.xdp_count(before, reason, direction)

    def assert_role_packets(self, before, after, role, name="rtcedge_relay_role_packets_total", what=""):
        """At least 5 packets each way counted for `role` (ingress, owner) between the snapshots."""
        for d in (C2T, T2C):
            self.assertGreaterEqual(prom_metrics.delta(before, after, name, role=role, direction=d), 5, what + d)

    @classmethod
    def userspace_received(cls, m, direction):
        """What the userspace workers received: the shared counter minus what XDP folds in."""
        return (m.get("rtcedge_relay_received_packets_total", direction=direction)
                - sum(cls.xdp_count(m, r, direction) for r in XDP_FOLDED))

    def assert_mode_metric(self, m, mode):
        self.assertEqual(m.get("rtcedge_relay_mode", mode=mode), 1, "rtcedge_relay_mode{mode=%s}" % mode)
        self.assertEqual(m.get("rtcedge_relay_mode", mode="xdp" if mode == "userspace" else "userspace"), 0)

    def assert_xdp_passed_up(self, before, after, reason, n=1):
        """XDP mode: the program passed exactly n packets up for `reason` and forwarded none
        (userspace then decided). Nothing to check in userspace mode."""
        if not self.xdp:
            return
        if reason == "pass_not_ours":
            # ARP, and any neighbour traffic the kernel sends in the window, lands here too
            # (seen once in CI: 2 for one datagram): at least ours, and not many more.
            self.assertIn(self.xdp_delta(before, after, reason), range(n, n + 3), "XDP %s" % reason)
        else:
            self.assertEqual(self.xdp_delta(before, after, reason), n, "XDP %s" % reason)
        for r in ("forwarded", "forwarded_new_flow"):
            self.assertEqual(self.xdp_delta(before, after, r), 0, "XDP %s moved" % r)

    def establish(self, family, endpoint, kind="bound", relay=None):
        """First packet: a STUN Binding request whose hint names `endpoint`. Checks the
        response came from the VIP, is a valid Binding success for this client, and came
        from that endpoint; returns (client, vip)."""
        relay = relay or self.relay
        client = self.client(family)
        vip = relay.vip(family, kind)
        mark = self.peer.mark()
        msg, src = client.stun(vip, mint(endpoint))
        self.check_binding_success(msg, src, client, vip, "EP%d" % endpoint, PWD)
        ev = self.peer.wait_event(lambda e: e["event"] == "stun" and tuple(e["client"]) == client.addr, mark)
        self.assertIsNotNone(ev, "fake transceiver logged no STUN for %s" % (client.addr,))
        self.assertEqual(ev["ep"], "EP%d" % endpoint, "first STUN reached the wrong endpoint")
        self.assertEqual(ev["family"], family)
        self.assertEqual(norm(ev["vip"]), norm(vip), "PROXY header names the wrong VIP")
        self.assertEqual(norm(ev["from"])[0], EP_RELAY_SIDE[endpoint], "framed datagram from an unexpected relay address")
        return client, vip

    def check_binding_success(self, msg, src, client, vip, ep_name, pwd):
        self.assertEqual(src, norm(vip), "STUN response did not come from the VIP")
        self.assertEqual(msg.msg_type, stun_codec.BINDING_SUCCESS)
        self.assertTrue(msg.integrity_ok(pwd.encode()), "MESSAGE-INTEGRITY of the response does not verify")
        self.assertTrue(msg.fingerprint_ok(), "FINGERPRINT of the response does not verify")
        self.assertEqual(norm(msg.xor_mapped_address()), client.addr, "XOR-MAPPED-ADDRESS is not the client")
        self.assertEqual(msg.get(stun_codec.ATTR_SOFTWARE), b"rtce-fake-transceiver " + ep_name.encode(),
                         "the response came from the wrong endpoint")

    def check_media_follows(self, client, vip, endpoint, n=4):
        ep = b"EP%d:" % endpoint
        mark = self.peer.mark()
        payloads = media_payloads(n)
        for payload in payloads:
            data, src = client.echo(vip, payload)
            self.assertEqual(src, norm(vip), "reply did not come from the VIP")
            self.assertEqual(data, ep + payload, "non-STUN packet answered by the wrong endpoint")
        # The transceiver saw every one of them, framed for this client and VIP.
        seen = self.peer.wait_count(lambda e: e["event"] == "data" and tuple(e["client"]) == client.addr,
                                    mark, len(payloads))
        self.assertGreaterEqual(len(seen), len(payloads), seen)
        for e in seen:
            self.assertEqual((e["ep"], norm(e["vip"])), ("EP%d" % endpoint, norm(vip)), e)

    def assert_no_flow_for(self, relay, client, vip, before, peer_mark):
        """Nothing reached the transceiver or came back, no flow exists: a non-STUN packet
        from the same client is dropped as no_flow."""
        self.assertEqual(client.pending(), [], "the client got an answer")
        self.assertEqual(self.peer.since(peer_mark, lambda e: tuple(e.get("client", ())) == client.addr), [],
                         "the datagram reached the transceiver")
        probe = relay.metrics()
        client.send(vip, media_payloads(1)[1])
        after = relay.wait_metrics(lambda m: m.dropped("no_flow") > probe.dropped("no_flow"), "no_flow drop")
        self.assertEqual(after.dropped("no_flow") - probe.dropped("no_flow"), 1)
        self.assertEqual(after.get("rtcedge_relay_flows_created_total"), before.get("rtcedge_relay_flows_created_total"))
        self.assertEqual(after.get("rtcedge_relay_flows_active"), before.get("rtcedge_relay_flows_active"))
        self.assertEqual(client.pending(), [])

    def assert_only_drop(self, before, after, reasons):
        """Every drop reason changed by exactly `reasons` (a dict), others not at all."""
        changed = {}
        for (name, labels), value in after.samples.items():
            if name == "rtcedge_relay_dropped_packets_total":
                d = value - before.get(name, **dict(labels))
                if d:
                    changed[dict(labels)["reason"]] = d
        self.assertEqual(changed, {k: float(v) for k, v in reasons.items() if v})

    def stream_through(self, client, vip, during, count=8000, tail=200):
        """~200 pps on client's flow; during() runs from datagram 100 on (its return value and
        timestamps in the box: "start", "value", "end"; what it raised is raised after the
        stream); the stream goes on `tail` datagrams after it returned."""
        box = {}

        def run():
            box["start"] = time.monotonic()
            try:
                box["value"] = during()
            except Exception as e:  # reported after the stream
                box["error"] = e
            box["end"] = time.monotonic()

        got, arrivals, count, _ = self.flow_echo_stream(client, vip, count, 200.0, during=run, at=100, tail=tail)
        if "error" in box:
            raise box["error"]
        return got, arrivals, count, box

    def flow_echo_stream(self, client, vip, count, rate, during=None, at=0, tail=None):
        """Sends at most `count` numbered RTP-like datagrams at `rate` per second on an
        established flow (from a thread) while another thread collects the echoes; calls
        during() on this thread once datagram `at` has gone out (processes must be started
        from the main thread: PR_SET_PDEATHSIG fires when the thread that forked them ends).
        With `tail`, the stream ends `tail` datagrams after during() returned. Returns (set
        of echoed sequence numbers, arrival times, datagrams sent, send duration)."""
        got, arrivals = set(), []
        done = threading.Event()
        marker = os.urandom(4)

        def receive():
            deadline = time.monotonic() + count / rate + 10.0
            client.sock.settimeout(0.2)
            while time.monotonic() < deadline and not (done.is_set() and len(got) >= timing["sent"]):
                try:
                    data, _ = client.sock.recvfrom(2048)
                except socket.timeout:
                    if done.is_set() and time.monotonic() > done.finished_at + 3.0:
                        break
                    continue
                if data.startswith(b"EP1:") and data[4 + 12:4 + 16] == marker:
                    got.add(struct.unpack("!I", data[4 + 16:4 + 20])[0])
                    arrivals.append(time.monotonic())

        reached, finished = threading.Event(), threading.Event()
        timing = {"sent": 0}

        def send():
            t0 = time.monotonic()
            stop_at = count
            for i in range(count):
                if tail is not None and finished.is_set() and stop_at == count:
                    stop_at = min(count, i + tail)
                if i >= stop_at:
                    break
                wait = t0 + i / rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)  # pacing of a bounded stream, not synchronisation
                client.send(vip, struct.pack("!BBHI", 0x80, 0x6F, i & 0xFFFF, 0x5EED) + bytes(4) + marker
                            + struct.pack("!I", i) + bytes(40))
                timing["sent"] = i + 1
                if i == at:
                    reached.set()
            timing["sent_for"] = time.monotonic() - t0
            done.finished_at = time.monotonic()
            done.set()

        client.sock.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE: hold every echo
        receiver = threading.Thread(target=receive, name="echo-receiver", daemon=True)
        sender = threading.Thread(target=send, name="stream-sender", daemon=True)
        receiver.start()
        sender.start()
        try:
            if during is not None and reached.wait(timeout=count / rate + 5.0):
                during()
        finally:
            finished.set()
            sender.join(timeout=count / rate + 10.0)
            receiver.join(timeout=15.0)
        self.assertFalse(sender.is_alive() or receiver.is_alive(), "stream threads did not finish")
        return got, arrivals, timing["sent"], timing["sent_for"]


# ---------------------------------------------------------------------------- tests

class RoutingTest(RelayTestCase):
    """One relay (2 workers) with endpoints 1 (IPv4) and 2 (IPv6 transport)."""

    @classmethod
    def setUpClass(cls):
        cls.relay = cls.start_relay("routing", workers=2, endpoints=(1, 2), extra=["--flows-idle-timeout", "120s"])

    def test_first_stun_follows_hint_then_media_follow_replies_from_vip(self):
        for family in FAMILIES:
            for kind in ("bound", "wildcard"):
                for endpoint in (1, 2):
                    with self.subTest(family=family, vip=kind, endpoint=endpoint):
                        before = self.relay.metrics()
                        client, vip = self.establish(family, endpoint, kind)
                        self.check_media_follows(client, vip, endpoint)
                        # A later STUN (consent check) on the flow goes the same way.
                        msg, src = client.stun(vip, mint(endpoint))
                        self.check_binding_success(msg, src, client, vip, "EP%d" % endpoint, PWD)
                        after = self.relay.metrics()
                        self.assertEqual(prom_metrics.delta(before, after, "rtcedge_relay_flows_created_total"), 1)
                        self.assertEqual(prom_metrics.delta(before, after, "rtcedge_relay_flows_active"), 1)
                        for d in (C2T, T2C):
                            self.assertGreaterEqual(prom_metrics.delta(
                                before, after, "rtcedge_relay_forwarded_packets_total", direction=d), 8, d)
                        self.assert_only_drop(before, after, {})
                        self.assert_forwarded_by(before, after, "xdp" if self.xdp and kind == "bound" else "userspace")

    def assert_forwarded_by(self, before, after, path):
        """Which data path carried the session: in XDP mode a bound VIP's flow is created
        and carried by the program, both ways, and the userspace workers receive none of it;
        a wildcard listener's is all userspace (XDP passes it up as not ours)."""
        if not self.xdp:
            self.assertFalse(after.has("rtcedge_relay_xdp_packets_total", reason="forwarded", direction=C2T))
            self.assert_mode_metric(after, "userspace")
            return
        self.assert_mode_metric(after, "xdp")
        xdp_new = self.xdp_delta(before, after, "forwarded_new_flow")
        xdp_fwd = {d: self.xdp_delta(before, after, "forwarded", d) for d in (C2T, T2C)}
        user = {d: self.userspace_received(after, d) - self.userspace_received(before, d) for d in (C2T, T2C)}
        if path == "xdp":
            self.assertEqual(xdp_new, 1, "XDP did not create the flow")
            self.assertGreaterEqual(xdp_fwd[C2T], 7, "XDP did not forward the session's packets")
            self.assertGreaterEqual(xdp_fwd[T2C], 8, "XDP did not carry the replies")
            self.assertEqual(user, {C2T: 0, T2C: 0}, "userspace received packets of an XDP flow")
            self.assertEqual(self.xdp_delta(before, after, "pass_no_neigh") + self.xdp_delta(
                before, after, "pass_no_neigh", T2C), 0)
        else:
            self.assertEqual((xdp_new, xdp_fwd[C2T], xdp_fwd[T2C]), (0, 0, 0), "XDP forwarded a wildcard flow")
            self.assertGreaterEqual(self.xdp_delta(before, after, "pass_not_ours"), 8)
            for d in (C2T, T2C):
                self.assertGreaterEqual(user[d], 8, d)

    def test_forged_hints_create_no_flow(self):
        for family in FAMILIES:
            for reason in HINT_FAILURES:
                with self.subTest(family=family, reason=reason):
                    client = self.client(family)
                    vip = self.relay.vip(family)
                    ufrag = forged_ufrag(reason)
                    before = self.relay.metrics()
                    mark = self.peer.mark()
                    _, req = stun_codec.binding_request(ufrag, CLIENT_UFRAG, PWD)
                    client.send(vip, req)
                    after = self.relay.wait_metrics(lambda m: m.dropped("hint_rejected") > before.dropped("hint_rejected"),
                                                    "hint_rejected for " + reason)
                    self.assert_only_drop(before, after, {"hint_rejected": 1})
                    for r in HINT_FAILURES:
                        self.assertEqual(after.hint_failures(r) - before.hint_failures(r), 1 if r == reason else 0, r)
                    if self.xdp:  # dropped by the program itself, never seen by userspace
                        self.assertEqual(self.xdp_delta(before, after, "hint_rejected"), 1)
                        self.assertEqual(self.userspace_received(after, C2T), self.userspace_received(before, C2T))
                    self.assert_no_flow_for(self.relay, client, vip, before, mark)

    def test_unknown_endpoint_creates_no_flow(self):
        for family, kind in ((f, k) for f in FAMILIES for k in ("wildcard", "bound")):
            with self.subTest(family=family, vip=kind):
                client = self.client(family)
                vip = self.relay.vip(family, kind)
                before = self.relay.metrics()
                mark = self.peer.mark()
                _, req = stun_codec.binding_request(mint(9), CLIENT_UFRAG, PWD)
                client.send(vip, req)
                after = self.relay.wait_metrics(
                    lambda m: m.dropped("unknown_endpoint") > before.dropped("unknown_endpoint"), "unknown_endpoint")
                self.assert_only_drop(before, after, {"unknown_endpoint": 1})
                self.assertEqual(sum(after.hint_failures(r) - before.hint_failures(r) for r in HINT_FAILURES), 0)
                # XDP passes it up (userspace may know newer endpoints) and userspace drops it.
                self.assert_xdp_passed_up(before, after, "unknown_endpoint" if kind == "bound" else "pass_not_ours")
                self.assert_no_flow_for(self.relay, client, vip, before, mark)

    def test_stray_packets_create_no_flow(self):
        txid = stun_codec.new_txid()
        good = stun_codec.binding_request(mint(1), CLIENT_UFRAG, PWD)[1]
        # (name, datagram, userspace drop reason, the XDP program's pass reason)
        cases = [
            ("rtp", media_payloads(1)[1], "no_flow", "no_flow"),
            ("dtls", media_payloads(1)[0], "no_flow", "no_flow"),
            ("binding_indication", stun_codec.encode(stun_codec.BINDING_INDICATION, txid, []), "stun_not_binding_request",
             "stun_not_binding_request"),
            ("binding_success", stun_codec.binding_success(txid, nt.CLIENT_V4, 1, PWD), "stun_not_binding_request",
             "stun_not_binding_request"),
            ("no_username", stun_codec.encode(stun_codec.BINDING_REQUEST, txid, [(stun_codec.ATTR_PRIORITY, b"\0\0\0\1")],
                                              integrity_key=PWD.encode()), "stun_no_username", "stun_no_username"),
            ("truncated", good[:-8], "stun_malformed", "stun_malformed"),
            # > the relay's 9216-byte buffers; IP-fragmented on the 1500-byte link
            ("oversize", b"\x80" + bytes(9300), "oversize", "pass_fragment"),
            ("username_without_colon", stun_codec.encode(stun_codec.BINDING_REQUEST, txid,
                                                         [(stun_codec.ATTR_USERNAME, mint(1).encode())]), "stun_malformed",
             "stun_malformed"),
        ]
        for family in FAMILIES:
            for name, payload, reason, xdp_reason in cases:
                with self.subTest(family=family, packet=name):
                    client = self.client(family)
                    vip = self.relay.vip(family)
                    before = self.relay.metrics()
                    mark = self.peer.mark()
                    client.send(vip, payload)
                    after = self.relay.wait_metrics(lambda m: m.dropped(reason) > before.dropped(reason), reason)
                    self.assert_only_drop(before, after, {reason: 1})
                    self.assertEqual(after.get("rtcedge_relay_flows_created_total"),
                                     before.get("rtcedge_relay_flows_created_total"))
                    self.assert_xdp_passed_up(before, after, xdp_reason)
                    self.assert_no_flow_for(self.relay, client, vip, before, mark)

    def test_replies_reach_a_client_the_relay_has_no_neighbour_entry_for(self):
        """A client that appears at an on-link address the relay host never sent to (a phone
        that moved, issue 17): its checks arrive, but the relay has no neighbour entry for it.
        XDP cannot send the replies itself (bpf_fib_lookup: no neighbour) and passes them up;
        the workers' sockets on xdp.return_port must send them from the VIP, which makes the
        kernel resolve the neighbour so the next replies take the fast path again."""
        for family in FAMILIES:
            with self.subTest(family=family):
                ip = nt.CLIENT_V4 if family == 4 else nt.CLIENT_V6
                self.addCleanup(self.topo.warm_neighbours)
                nt.run(["ip", "-n", self.topo.relay, "-%d" % family, "neigh", "flush", "dev", "rc0"])
                self.assertNotIn(ip, self.topo.neighbours(self.topo.relay, "rc0"))
                before = self.relay.metrics()
                client, vip = self.establish(family, 1 if family == 4 else 2)
                self.check_media_follows(client, vip, 1 if family == 4 else 2, n=4)
                after = self.relay.metrics()
                self.assert_only_drop(before, after, {})
                if self.xdp:
                    passed = self.xdp_delta(before, after, "pass_no_neigh", T2C)
                    sent = prom_metrics.delta(before, after, "rtcedge_relay_xdp_passed_up_returns_total")
                    self.assertGreaterEqual(passed, 1, "the reply found a neighbour entry: nothing was tested")
                    self.assertEqual(sent, passed, "a passed-up reply was not sent by a worker")
                    self.assertGreaterEqual(self.xdp_delta(before, after, "forwarded", T2C), 1,
                                            "the neighbour was never resolved: every reply stayed on the slow path")

    def test_return_path_accepts_only_the_flow_owner(self):
        for family in FAMILIES:
            with self.subTest(family=family):
                client, vip = self.establish(family, 1 if family == 4 else 2)
                framed = proxy_v2.encode(client.addr, vip) + b"FORGED-REPLY"
                # Senders that do not own the flow: another port on the transceiver host
                # (both families), and the client host itself.
                senders = [("xcvr", 4, nt.XCVR_V4), ("xcvr", 6, nt.XCVR_V6), ("client", family,
                                                                           nt.CLIENT_V4 if family == 4 else nt.CLIENT_V6)]
                for where, fam, ip in senders:
                    ns = self.topo.xcvr if where == "xcvr" else self.topo.client
                    s = nt.socket_in(ns, socket.AF_INET if fam == 4 else socket.AF_INET6)
                    self.addCleanup(s.close)
                    s.bind((ip, 0))
                    before = self.relay.metrics()
                    addrs = self.relay.return_addresses(fam, where)
                    for dst in addrs:
                        s.sendto(framed, dst)
                    # Exactly one return port knows the flow (wrong sender): in XDP mode the
                    # program's (the only one); else one worker's, the others have no such flow.
                    want = {"return_wrong_sender": 1, "return_no_flow": len(addrs) - 1}
                    after = self.relay.wait_metrics(
                        lambda m: all(m.dropped(r) - before.dropped(r) >= n for r, n in want.items()),
                        "return-path drops from %s/%s" % (where, ip))
                    self.assert_only_drop(before, after, want)
                    self.assertEqual(prom_metrics.delta(before, after, "rtcedge_relay_forwarded_packets_total",
                                                        direction="transceiver_to_client"), 0)
                    if self.xdp:  # the program dropped it: userspace never saw it
                        self.assertEqual(self.xdp_delta(before, after, "return_wrong_sender", T2C), 1)
                        self.assertEqual(self.userspace_received(after, T2C), self.userspace_received(before, T2C))
                    self.assertEqual(client.pending(), [], "a forged reply reached the client")

                # Not PROXY v2 at all, and a well-formed header for a flow nobody has.
                s = nt.socket_in(self.topo.xcvr, socket.AF_INET6)
                self.addCleanup(s.close)
                s.bind((nt.XCVR_V6, 0))
                before = self.relay.metrics()
                nobody = proxy_v2.encode((client.addr[0], client.addr[1] ^ 0x5A5A or 1), vip) + b"x"
                addrs = self.relay.return_addresses(6)
                for dst in addrs:
                    s.sendto(b"\x0d\x0a not a proxy header", dst)
                    s.sendto(nobody, dst)
                want = {"return_malformed": len(addrs), "return_no_flow": len(addrs)}
                after = self.relay.wait_metrics(
                    lambda m: all(m.dropped(r) - before.dropped(r) >= n for r, n in want.items()), "return_malformed")
                self.assert_only_drop(before, after, want)
                if self.xdp:
                    for r in want:
                        self.assertEqual(self.xdp_delta(before, after, r, T2C), 1, r)
                self.assertEqual(client.pending(), [])
                # The real owner still gets through.
                self.check_media_follows(client, vip, 1 if family == 4 else 2, n=1)


class ReloadTest(RelayTestCase):
    """SIGHUP re-reads the config file: the endpoint table changes, flows stay."""

    @staticmethod
    def config(endpoints):
        return "endpoints:\n" + "".join('  - "%d=%s"\n' % (e, EP_ADDR[e]) for e in endpoints)

    @classmethod
    def setUpClass(cls):
        cls.relay = cls.start_relay("reload", workers=2, config_text=cls.config((1, 2)),
                                    extra=["--flows-idle-timeout", "120s"])

    def reload(self, text, result="ok"):
        before = self.relay.metrics()
        self.relay.write_config(text)
        self.relay.send_signal(signal.SIGHUP)
        return self.relay.wait_metrics(
            lambda m: prom_metrics.delta(before, m, "rtcedge_relay_config_reloads_total", result=result) == 1,
            "config reload result=%s" % result)

    def expect_unknown_endpoint(self, endpoint, family=4):
        client = self.client(family)
        vip = self.relay.vip(family)
        before = self.relay.metrics()
        mark = self.peer.mark()
        client.send(vip, stun_codec.binding_request(mint(endpoint), CLIENT_UFRAG, PWD)[1])
        after = self.relay.wait_metrics(lambda m: m.dropped("unknown_endpoint") > before.dropped("unknown_endpoint"),
                                        "unknown_endpoint for %d" % endpoint)
        self.assert_only_drop(before, after, {"unknown_endpoint": 1})
        self.assert_no_flow_for(self.relay, client, vip, before, mark)

    def test_sighup_reloads_endpoints_and_keeps_flows(self):
        a, vip_a = self.establish(4, 1)
        b, vip_b = self.establish(6, 2)
        m0 = self.relay.metrics()
        self.assertEqual(m0.get("rtcedge_relay_endpoints"), 2)
        self.expect_unknown_endpoint(3)

        # Add endpoint 3.
        m1 = self.reload(self.config((1, 2, 3)))
        self.assertEqual(m1.get("rtcedge_relay_endpoints"), 3)
        self.assertEqual(m1.get("rtcedge_relay_flows_active"), m0.get("rtcedge_relay_flows_active"), "reload dropped flows")
        self.check_media_follows(a, vip_a, 1, n=2)
        self.check_media_follows(b, vip_b, 2, n=2)
        c, vip_c = self.establish(4, 3)
        self.check_media_follows(c, vip_c, 3, n=2)
        d, vip_d = self.establish(6, 3, kind="wildcard")
        self.check_media_follows(d, vip_d, 3, n=2)

        # Remove endpoint 1: its flow goes (its sessions went with it), new hints for it
        # are refused, the other flows stay.
        m2 = self.reload(self.config((2, 3)))
        self.assertEqual(m2.get("rtcedge_relay_endpoints"), 2)
        self.relay.wait_metrics(lambda m: prom_metrics.delta(m1, m, "rtcedge_relay_flows_endpoint_gone_total") == 1,
                                "the flow of endpoint 1 removed")
        before = self.relay.metrics()
        mark = self.peer.mark()
        a.send(vip_a, media_payloads(1)[1])
        after = self.relay.wait_metrics(lambda m: m.dropped("no_flow") > before.dropped("no_flow"),
                                        "no_flow for the removed flow")
        self.assert_only_drop(before, after, {"no_flow": 1})
        self.assert_no_flow_for(self.relay, a, vip_a, before, mark)
        self.expect_unknown_endpoint(1)

        # A broken file is refused and changes nothing.
        m3 = self.reload("endpoints: [\n", result="error")
        self.assertEqual(m3.get("rtcedge_relay_endpoints"), 2)
        for client, vip, ep in ((b, vip_b, 2), (c, vip_c, 3), (d, vip_d, 3)):
            self.check_media_follows(client, vip, ep, n=1)
        end = self.relay.metrics()
        self.assertEqual(prom_metrics.delta(m0, end, "rtcedge_relay_flows_created_total"), 2)
        self.assertEqual(prom_metrics.delta(m0, end, "rtcedge_relay_flows_expired_total"), 0)
        self.assertEqual(end.get("rtcedge_relay_flows_active"), 3)


class IdleExpiryTest(RelayTestCase):
    @classmethod
    def setUpClass(cls):
        cls.relay = cls.start_relay("idle", workers=1, endpoints=(1, 2), extra=["--flows-idle-timeout", "1s"])

    def xdp_flow_ports(self):
        """Client ports of the flows in the XDP program's map (bpftool, BTF field names)."""
        r = subprocess.run([BPFTOOL, "map", "dump", "pinned", self.relay.pin_path + "/maps/flows", "-j"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=10)
        self.assertEqual(r.returncode, 0, r.stderr)
        return sorted(socket.ntohs(e["formatted"]["key"]["client_port_be"]) for e in json.loads(r.stdout))

    def test_idle_flow_expires_and_active_flow_stays(self):
        # flows.idle_timeout holds on both data paths: in XDP mode the flows live in the
        # program's map (bound VIPs), and the loader's sweep deletes the idle one from it.
        idle, vip_i = self.establish(4, 1)
        last_idle_packet = time.monotonic()
        busy, vip_b = self.establish(6, 2)
        before = self.relay.metrics()
        self.assertEqual(before.get("rtcedge_relay_flows_active"), 2)
        if self.xdp:
            self.assertEqual(self.xdp_flow_ports(), sorted((idle.addr[1], busy.addr[1])))

        # Keep `busy` talking (one packet per poll) until the idle flow has expired.
        deadline = time.monotonic() + 6.0
        expired = None
        for _ in range(200):
            if time.monotonic() >= deadline:
                break
            busy.echo(vip_b, media_payloads(1)[1])
            m = self.relay.metrics()
            if prom_metrics.delta(before, m, "rtcedge_relay_flows_expired_total") >= 1:
                expired = m
                break
            time.sleep(0.05)  # pacing of the keep-alive media, inside a deadline-bounded poll
        self.assertIsNotNone(expired, "idle flow did not expire within 6s")
        self.assertGreaterEqual(time.monotonic() - last_idle_packet, 0.9, "flow expired before its idle timeout")
        self.assertEqual(prom_metrics.delta(before, expired, "rtcedge_relay_flows_expired_total"), 1)
        self.assertEqual(expired.get("rtcedge_relay_flows_active"), 1)
        if self.xdp:  # the sweep deleted it from the map; the busy flow stayed in XDP's hands
            self.assertEqual(self.xdp_flow_ports(), [busy.addr[1]])
            self.assertGreaterEqual(self.xdp_delta(before, expired, "forwarded"), 1)
            self.assertEqual(self.userspace_received(expired, C2T), self.userspace_received(before, C2T))
        self.check_media_follows(busy, vip_b, 2, n=1)  # the active flow was kept

        # The expired flow is gone: media from it is dropped and reaches nobody ...
        mark = self.peer.mark()
        m = self.relay.metrics()
        idle.send(vip_i, media_payloads(1)[1])
        after = self.relay.wait_metrics(lambda x: x.dropped("no_flow") > m.dropped("no_flow"), "no_flow after expiry")
        self.assert_only_drop(m, after, {"no_flow": 1})
        if self.xdp:  # the program no longer knows it and passed it up
            self.assertEqual(self.xdp_delta(m, after, "no_flow"), 1)
        self.assertEqual(idle.pending(), [])
        self.assertEqual(self.peer.since(mark, lambda e: tuple(e.get("client", ())) == idle.addr), [])
        # ... until the next STUN check (soft state) re-creates it.
        msg, src = idle.stun(vip_i, mint(1))
        self.check_binding_success(msg, src, idle, vip_i, "EP1", PWD)
        self.check_media_follows(idle, vip_i, 1, n=1)
        self.assertEqual(prom_metrics.delta(m, self.relay.metrics(), "rtcedge_relay_flows_created_total"), 1)


class TableBoundTest(RelayTestCase):
    @classmethod
    def setUpClass(cls):
        cls.relay = cls.start_relay("bound", workers=1, endpoints=(1, 2),
                                    extra=["--flows-capacity", "2", "--flows-evict-idle-after", "1h",
                                           "--flows-idle-timeout", "120s"])

    def test_full_table_refuses_new_flows(self):
        # flows.capacity bounds the userspace tables (the XDP map has a fixed size): in XDP
        # mode the flows go through the wildcard listeners, which userspace serves.
        kind = "wildcard" if self.xdp else "bound"
        m0 = self.relay.metrics()
        self.assertEqual(m0.get("rtcedge_relay_flow_capacity"), 2)
        a, vip_a = self.establish(4, 1, kind)
        b, vip_b = self.establish(6, 2, kind)
        for family in FAMILIES:
            with self.subTest(family=family):
                c = self.client(family)
                vip = self.relay.vip(family, kind)
                before = self.relay.metrics()
                mark = self.peer.mark()
                c.send(vip, stun_codec.binding_request(mint(1), CLIENT_UFRAG, PWD)[1])
                after = self.relay.wait_metrics(
                    lambda m: m.dropped("flow_table_full") > before.dropped("flow_table_full"), "flow_table_full")
                self.assert_only_drop(before, after, {"flow_table_full": 1})
                self.assertEqual(after.get("rtcedge_relay_flows_active"), 2)
                self.assertEqual(prom_metrics.delta(before, after, "rtcedge_relay_flows_evicted_total"), 0)
                self.assert_no_flow_for(self.relay, c, vip, before, mark)
        self.check_media_follows(a, vip_a, 1, n=1)
        self.check_media_follows(b, vip_b, 2, n=1)
        self.assertEqual(prom_metrics.delta(m0, self.relay.metrics(), "rtcedge_relay_flows_created_total"), 2)


class HintFlowLimitTest(RelayTestCase):
    """Issue 15 #4: one valid hint replayed from many sources creates at most
    flows.max_per_hint flows (one worker here, so the bound is exact on both data paths);
    other hints still get flows, and the replay's own flows keep forwarding."""

    MAX = 3

    @classmethod
    def setUpClass(cls):
        cls.relay = cls.start_relay("hintlimit", workers=1, endpoints=(1, 2),
                                    extra=["--flows-max-per-hint", str(cls.MAX), "--flows-idle-timeout", "120s"])

    def test_replayed_hint_creates_at_most_the_bound(self):
        replays = 20
        for family in FAMILIES:
            with self.subTest(family=family):
                vip = self.relay.vip(family)
                _, req = stun_codec.binding_request(mint(1), CLIENT_UFRAG, PWD)
                clients = [self.client(family) for _ in range(replays)]
                before = self.relay.metrics()
                for c in clients:
                    c.send(vip, req)
                after = self.relay.wait_metrics(
                    lambda m: prom_metrics.delta(before, m, "rtcedge_relay_flows_created_total")
                    + m.dropped("hint_flow_limit") - before.dropped("hint_flow_limit") >= replays,
                    "every replay created a flow or was dropped as hint_flow_limit")
                self.assertEqual(prom_metrics.delta(before, after, "rtcedge_relay_flows_created_total"), self.MAX)
                self.assert_only_drop(before, after, {"hint_flow_limit": replays - self.MAX})
                if self.xdp:  # the program dropped them; userspace saw none of the replay
                    self.assertEqual(self.xdp_delta(before, after, "hint_flow_limit"), replays - self.MAX)
                    self.assertEqual(self.xdp_delta(before, after, "forwarded_new_flow"), self.MAX)
                    self.assertEqual(self.userspace_received(after, C2T), self.userspace_received(before, C2T))
                # Exactly MAX of the replaying clients got a STUN answer (their flows exist).
                answered = [c for c in clients if c.pending(timeout=0.05)]
                self.assertEqual(len(answered), self.MAX)
                self.check_media_follows(answered[0], vip, 1, n=1)
                # A new call (another hint) is not affected.
                c, v = self.establish(family, 2)
                self.check_media_follows(c, v, 2, n=1)


class ShutdownTest(RelayTestCase):
    def test_sigterm_exits_zero_promptly(self):
        relay = self.new_relay("shutdown", workers=2, endpoints=(1, 2))
        client, vip = self.establish(4, 1, relay=relay)
        client.echo(vip, b"\x80" + os.urandom(20))
        rc = relay.stop(signal.SIGTERM, timeout=5.0, detach=False)
        self.assertEqual(rc, 0, "relay exited with %s on SIGTERM:\n%s" % (rc, relay.log_text()[-2000:]))
        self.assertLess(relay.stop_seconds, 5.0)
        self.assertIn("stopped", relay.log_text())
        if self.xdp:
            # The pinned links outlive the loader: established flows keep working.
            for dev in XDP_IFACES:
                self.assertIsNotNone(self.topo.xdp_attached(self.topo.relay, dev), dev)
            data, src = client.echo(vip, b"\x80" + os.urandom(20))
            self.assertEqual(src, norm(vip))
        relay.detach()
        self.assertFalse(os.path.exists(PIN_PATH))


class ChromeCaptureReplayTest(RelayTestCase):
    """The first Binding request a real Chromium sent (tests/golden), replayed byte for
    byte: its hint (cluster 1, endpoint 2, golden key) routes it to EP2."""

    def test_chromium_first_packet_routes_by_hint(self):
        golden = golden_capture()
        if not golden:
            self.skipTest("tests/golden capture not present")
        raw = golden["bytes"]
        msg = stun_codec.parse(raw)
        self.assertTrue(msg.integrity_ok(golden["server_pwd"].encode()))
        self.assertTrue(msg.fingerprint_ok())
        hint = json.loads(subprocess.run([RELAY_BIN, "hint", "decode", "--key-file", golden["key_file"],
                                             golden["server_ufrag"]], stdout=subprocess.PIPE, text=True,
                                            timeout=10, check=True).stdout)
        relay = self.new_relay("chrome", workers=1, endpoints=(1, 2), cluster=hint["cluster_id"],
                               key_file=golden["key_file"])
        ep = hint["endpoint_id"]
        self.assertIn(ep, (1, 2))
        for family in FAMILIES:
            with self.subTest(family=family):
                client = self.client(family)
                vip = relay.vip(family)
                client.send(vip, raw)
                data, src = client.recv(3.0)
                self.assertIsNotNone(data, "no answer to the Chromium Binding request")
                resp = stun_codec.parse(data)
                self.assertEqual(resp.txid, msg.txid)
                self.check_binding_success(resp, src, client, vip, "EP%d" % ep, golden["server_pwd"])
        if self.xdp:  # the program verified the hint and made both flows
            self.assertEqual(self.xdp_count(relay.metrics(), "forwarded_new_flow"), len(FAMILIES))


class XdpTest(RelayTestCase):
    """What only the XDP data path has: pinned links and maps that outlive the loader,
    --mode auto's fallback, bpftool's view of the flows, and `rtcedge-relay detach`."""

    MODE = "xdp"

    def test_loader_restart_during_traffic_loses_no_packet(self):
        self.restart_during_traffic("restart")

    def test_upgrade_from_pins_without_the_port_filter_loses_no_packet(self):
        # Pins of a loader that predates `vip_ports`: the new loader creates the map and must
        # fill it from the pinned VIPs before its program replaces the old one.
        self.restart_during_traffic(
            "upgrade", before_start=lambda: os.remove(os.path.join(PIN_PATH, "maps", "vip_ports")))

    def restart_during_traffic(self, name, before_start=None):
        first = self.new_relay("%s-a" % name, workers=1)
        client, vip = self.establish(4, 1, relay=first)
        self.check_media_follows(client, vip, 1, n=1)
        box = {}

        def restart():
            box["sigterm"] = time.monotonic()
            box["rc"] = first.stop(signal.SIGTERM, detach=False)  # the pins stay: the program forwards on
            box["exited"] = time.monotonic()
            try:
                if before_start is not None:
                    before_start()
                box["second"] = self.new_relay("%s-b" % name, workers=1, ports_of=first, reuse_pins=True)
            except Exception as e:  # reported after the stream
                box["error"] = e
            box["ready"] = time.monotonic()

        # ~2k pps from 0.1 s before the SIGTERM until 1000 datagrams (0.5 s) after the new
        # instance is ready; at most 8000 (4 s).
        rate = 2000.0
        got, arrivals, count, sent_for = self.flow_echo_stream(client, vip, 8000, rate, during=restart, at=200,
                                                               tail=1000)
        self.assertNotIn("error", box, box.get("error"))
        self.assertEqual(box.get("rc"), 0, first.log_text()[-2000:])
        second = box["second"]
        gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
        STATE.setdefault("report", []).append(
            name + ": relay down %.0f ms (SIGTERM -> exit %.0f ms -> new instance ready), %s the stream; "
            "%d pkts in %.2fs, %d echoed, largest echo gap %.1f ms"
            % ((box["ready"] - box["sigterm"]) * 1e3, (box["exited"] - box["sigterm"]) * 1e3,
               "within" if arrivals and box["ready"] < arrivals[-1] else "NOT within", count, sent_for, len(got),
               max(gaps) * 1e3 if gaps else -1))
        nt._log(STATE["report"][-1])
        missing = sorted(set(range(count)) - got)
        self.assertEqual(missing, [], "%d of %d datagrams lost across the restart (first: %s)"
                         % (len(missing), count, missing[:10]))
        # The new instance replaced the program behind the pinned links, kept the maps ...
        log = second.log_text()
        for dev in XDP_IFACES:
            self.assertIn("replaced the program on %s" % dev, log)
        m = second.metrics()
        self.assert_mode_metric(m, "xdp")
        self.assertGreaterEqual(self.xdp_count(m, "forwarded"), count, "counters did not survive the restart")
        self.assertEqual(m.get("rtcedge_relay_flows_active"), 1)
        # ... and the flow still works, by XDP, as does a new one.
        before = second.metrics()
        self.check_media_follows(client, vip, 1, n=2)
        after = second.metrics()
        self.assertGreaterEqual(self.xdp_delta(before, after, "forwarded"), 4)
        self.assertEqual(self.userspace_received(after, C2T), self.userspace_received(before, C2T))
        other, vip6 = self.establish(6, 2, relay=second)
        self.check_media_follows(other, vip6, 2, n=1)
        self.assertEqual(self.xdp_delta(after, second.metrics(), "forwarded_new_flow"), 1)

    def check_fallback(self, relay, why):
        log = relay.log_text()
        self.assertIn("mode=auto: XDP unavailable", log)
        self.assertIn(why, log)
        self.assertIn("relay up: mode=userspace", log)
        m = relay.metrics()
        self.assert_mode_metric(m, "userspace")
        self.assertFalse(any(k[0] == "rtcedge_relay_xdp_packets_total" for k in m.samples))
        self.assertIsNone(self.topo.xdp_attached(self.topo.relay, "rc0"), "a program was left on rc0")
        self.assertFalse(os.path.exists(PIN_PATH), "pins left behind by a failed attach")
        for family, ep in ((4, 1), (6, 2)):
            before = relay.metrics()
            client, vip = self.establish(family, ep, relay=relay)
            self.check_media_follows(client, vip, ep, n=2)
            after = relay.metrics()
            self.assertGreaterEqual(self.userspace_received(after, C2T) - self.userspace_received(before, C2T), 5)

    def test_auto_falls_back_without_the_interface(self):
        relay = self.new_relay("auto-noif", mode="auto", xdp_interfaces=("rc0", "nosuch0"))
        self.check_fallback(relay, "no interface named 'nosuch0'")

    def test_auto_falls_back_when_a_foreign_program_is_attached(self):
        # A program attached without a link (iproute2, netlink) cannot be replaced by a link.
        self.topo._ip(self.topo.relay, "link", "set", "dev", "rx0", "xdpdrv", "obj", xdp_pass_obj(), "sec", "xdp")
        self.addCleanup(self.topo._ip, self.topo.relay, "link", "set", "dev", "rx0", "xdpdrv", "off")
        foreign = self.topo.xdp_attached(self.topo.relay, "rx0")
        self.assertIsNotNone(foreign)
        # rc0 attaches first and is undone when rx0 refuses: nothing is left half-attached.
        relay = self.new_relay("auto-busy", mode="auto")
        self.check_fallback(relay, "native XDP attach on rx0 failed")
        self.assertEqual(self.topo.xdp_attached(self.topo.relay, "rx0"), foreign, "the foreign program was touched")

    def test_second_loader_on_the_same_interfaces_is_refused(self):
        # Issue 15 item 14: a second XDP instance on interfaces (and pins) that a running
        # loader owns would replace its program and rewrite its maps. It is refused before it
        # touches either, even on other VIP ports, and the first one forwards on.
        first = self.new_relay("xdp-lock-a", workers=1)
        client, vip = self.establish(4, 1, relay=first)
        links_before = {dev: self.topo.xdp_attached(self.topo.relay, dev) for dev in XDP_IFACES}
        argv = [RELAY_BIN, "--mode", "xdp", "--listen", "%s:%d" % (nt.VIP_V4, first.vip_port + 50),
                "--return-listen", "[::]:%d" % (first.return_port + 50), "--workers", "1",
                "--cluster-id", str(CLUSTER), "--hint-key-file", STATE["keys"],
                "--admin-listen", "127.0.0.1:%d" % (first.admin_port + 5),
                "--xdp-interfaces", ",".join(XDP_IFACES), "--xdp-pin-path", PIN_PATH,
                "--xdp-relay-address4", nt.RELAY_XCVR_V4, "--xdp-return-port", str(first.xdp_return_port + 50)]
        second = nt.start_in_netns(self.topo.relay, argv, keep_mounts=True, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        try:
            out, _ = second.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            out = None
        finally:
            if second.poll() is None:
                second.kill()
                second.communicate()
            nt.forget_process(second)
        self.assertIsNotNone(out, "the second loader was not refused: it ran on the first one's interfaces")
        self.assertEqual(second.returncode, 1, out)
        self.assertRegex(out, r"cannot start: XDP interface %s is already served by another rtcedge-relay "
                              r"\(pid %d\)" % (XDP_IFACES[0], first.proc.pid))
        self.assertEqual({dev: self.topo.xdp_attached(self.topo.relay, dev) for dev in XDP_IFACES}, links_before,
                         "the refused loader touched the attached program")
        self.check_media_follows(client, vip, 1, n=2)

    def test_bpftool_dumps_flows_with_named_fields(self):
        if not os.access(BPFTOOL, os.X_OK):
            self.skipTest("%s not installed" % BPFTOOL)
        relay = self.new_relay("bpftool", workers=1)
        sessions = [self.establish(4, 1, relay=relay) + (1,), self.establish(6, 2, relay=relay) + (2,)]
        r = subprocess.run([BPFTOOL, "map", "dump", "pinned", PIN_PATH + "/maps/flows", "-j"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=10)
        self.assertEqual(r.returncode, 0, r.stderr)
        entries = [e["formatted"] for e in json.loads(r.stdout)]
        self.assertEqual(len(entries), 2, entries)
        for client, vip, ep in sessions:
            fam = 4 if client.family == 4 else 6
            raw_ip = socket.inet_pton(socket.AF_INET if fam == 4 else socket.AF_INET6, client.addr[0])
            want_port = socket.htons(client.addr[1])  # __u16 in network order, printed as a number
            match = [e for e in entries if e["key"]["client_port_be"] == want_port]
            self.assertEqual(len(match), 1, (client.addr, entries))
            key, value = match[0]["key"], match[0]["value"]
            self.assertEqual(bytes(int(b, 0) if isinstance(b, str) else b for b in key["client_addr"])[:len(raw_ip)],
                             raw_ip)
            self.assertEqual(key["vip_port_be"], socket.htons(vip[1]))
            self.assertEqual(value["endpoint_id"], ep)
            self.assertEqual(value["endpoint"]["port_be"], socket.htons(EP_PORT[ep]))
            self.assertGreater(value["created_ns"], 0)

    def test_detach_removes_links_and_pins(self):
        relay = self.new_relay("detach", workers=1)
        for dev in XDP_IFACES:
            self.assertIsNotNone(self.topo.xdp_attached(self.topo.relay, dev), dev)
            self.assertTrue(os.path.exists(os.path.join(PIN_PATH, "links", dev)))
        self.assertTrue(os.path.exists(os.path.join(PIN_PATH, "maps", "flows")))
        peers = {dev: self.topo.xdp_attached(ns, dev) for ns, dev in ((self.topo.client, "cl0"), (self.topo.xcvr, "xc0"))}
        r = subprocess.run([RELAY_BIN, "detach", "--pin-path", PIN_PATH], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=10)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertFalse(os.path.exists(PIN_PATH), os.listdir(PIN_PATH) if os.path.isdir(PIN_PATH) else "")
        for dev in XDP_IFACES:
            self.assertIsNone(self.topo.xdp_attached(self.topo.relay, dev), "XDP still on %s after detach" % dev)
        for ns, dev in ((self.topo.client, "cl0"), (self.topo.xcvr, "xc0")):
            self.assertEqual(self.topo.xdp_attached(ns, dev), peers[dev], "detach touched %s" % dev)
        # The relay process runs on: its userspace workers now carry the traffic.
        before = relay.metrics()
        client, vip = self.establish(4, 1, relay=relay)
        self.check_media_follows(client, vip, 1, n=1)
        after = relay.metrics()
        self.assertEqual(self.xdp_delta(before, after, "forwarded_new_flow"), 0)
        self.assertGreaterEqual(self.userspace_received(after, C2T) - self.userspace_received(before, C2T), 4)
        # Nothing left to detach: the command says so and fails.
        r = subprocess.run([RELAY_BIN, "detach", "--pin-path", PIN_PATH], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=10)
        self.assertNotEqual(r.returncode, 0)


class RedisInNamespace:
    """A private redis-server on the relay namespace's loopback (the flow store), started
    and stopped by the test; nothing persists (--save '' --appendonly no)."""

    PORT = 26379

    def __init__(self, ns):
        self.ns = ns
        self.proc = None
        self.log_path = os.path.join(STATE["tmp"], "redis-%s.log" % ns)

    @staticmethod
    def unavailable_reason():
        return None if shutil.which("redis-server") and shutil.which("redis-cli") else "redis-server not installed"

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.PORT

    def start(self):
        self._log = open(self.log_path, "a")
        self.proc = nt.start_in_netns(self.ns, ["redis-server", "--port", str(self.PORT), "--bind", "127.0.0.1",
                                                "--save", "", "--appendonly", "no"],
                                      stdout=self._log, stderr=subprocess.STDOUT)
        if not poll_until(lambda: self.cli("PING") == "PONG", 10.0):
            raise RuntimeError("redis-server did not answer PING:\n" + open(self.log_path).read()[-2000:])

    def stop(self, sig=signal.SIGKILL):
        if self.proc is not None:
            nt.stop_process(self.proc, sig)
            nt.forget_process(self.proc)
            self.proc = None
            self._log.close()

    def cli(self, *args):
        r = subprocess.run(["ip", "netns", "exec", self.ns, "redis-cli", "-p", str(self.PORT)] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=10)
        return r.stdout.strip() if r.returncode == 0 else None

    def flow_keys(self):
        out = self.cli("--scan", "--pattern", "rtce:c%d:flow:*" % CLUSTER)
        return [k for k in (out or "").splitlines() if k]

    def has_flow_of(self, client_addr):
        host, port = client_addr
        needle = ("[%s]:%d|" % (host, port)) if ":" in host else ("%s:%d|" % (host, port))
        return any(needle in k for k in self.flow_keys())


class PeerIngress:
    """An ingress relay of the global relay (cluster 9, userspace) in the client namespace,
    VIP INGRESS_VIP, that forwards flows whose hint names CLUSTER to the relay under test's
    peers.listen (198.18.0.1:PEER_PORT), which owns them."""

    PEER_PORT = 24480
    INGRESS_VIP = "198.18.0.250"
    INGRESS_ADMIN = 24490

    def start_ingress(self):
        run_in = self.topo.client
        subprocess.run(["ip", "-n", run_in, "addr", "replace", "%s/32" % self.INGRESS_VIP, "dev", "lo"],
                       check=True, timeout=10)
        self.addCleanup(subprocess.run, ["ip", "-n", run_in, "addr", "del", "%s/32" % self.INGRESS_VIP, "dev", "lo"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
        peers = os.path.join(STATE["tmp"], "owner-peers-%s.yaml" % self.MODE)
        with open(peers, "w") as f:
            json.dump({"peers": {"clusters": [{"cluster": CLUSTER, "address": "%s:%d" % (nt.RELAY_LINK_V4, self.PEER_PORT),
                                               "hint_key_file": STATE["keys"]}]}}, f)
        argv = [RELAY_BIN, "--listen", "%s:3478" % self.INGRESS_VIP, "--return-listen", "[::]:24410",
                "--workers", "1", "--pin-cpus", "false", "--cluster-id", "9", "--hint-key-file", STATE["keys"],
                "--admin-listen", "127.0.0.1:%d" % self.INGRESS_ADMIN, "--config", peers]
        return self.start_side_relay(run_in, argv, self.INGRESS_ADMIN, "ingress-client-ns")

    def owner_args(self):
        return ["--peers-listen", "%s:%d" % (nt.RELAY_LINK_V4, self.PEER_PORT),
                "--peers-trusted", "%s/32" % nt.CLIENT_V4]


class FlowRecoveryTest(PeerIngress, RelayTestCase):
    """Flows recovered from the shared flow store (redis-sync): a relay that never saw a flow
    (restarted after SIGKILL, a second instance after a re-hash, a node whose pins are gone)
    forwards it from its first non-STUN packet, looked up in a real redis-server."""

    TTL = "6s"
    REFRESH = "1s"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        reason = RedisInNamespace.unavailable_reason()
        if reason:
            print("SKIPPED: flow recovery tests: %s" % reason, flush=True)
            raise unittest.SkipTest(reason)
        cls.redis = RedisInNamespace(env_for(cls.MODE).topo.relay)
        cls.redis.start()
        cls.addClassCleanup(cls.redis.stop)

    def setUp(self):
        if self.redis.proc is None:
            self.redis.start()
        self.redis.cli("FLUSHALL")

    def store_args(self, url=None):
        return ["--flow-store-redis-url", url or self.redis.url, "--flow-store-ttl", self.TTL,
                "--flow-store-refresh-interval", self.REFRESH]

    def wait_stored(self, client, timeout=5.0):
        self.assertTrue(poll_until(lambda: self.redis.has_flow_of(client.addr), timeout),
                        "flow of %s never reached Redis; keys: %s" % (client.addr, self.redis.flow_keys()))

    def recovery_stream(self, client, vip, replace):
        """~200 pps on an established flow; replace() (from datagram 100 on) swaps the relay.
        The stream goes on for 400 datagrams (2 s) after the replacement is ready. Returns the
        echoed set, the arrival times, how many were sent, and the box: "start" (replace()
        began), "value" (the new relay), "end" (it was ready)."""
        return self.stream_through(client, vip, replace, count=2000, tail=400)

    def report_gap(self, what, arrivals, box):
        before = [t for t in arrivals if t < box["start"]]
        after = [t for t in arrivals if t >= box["end"]]
        self.assertTrue(after, "%s: no echo after the new relay was ready" % what)
        gap = (after[0] - before[-1]) * 1e3 if before else float("nan")
        first = (after[0] - box["end"]) * 1e3
        STATE.setdefault("report", []).append(
            "%s (%s): relay replaced in %.0f ms; echo gap %.0f ms; first echo %.0f ms after the new relay was ready"
            % (what, self.MODE, (box["end"] - box["start"]) * 1e3, gap, first))
        nt._log(STATE["report"][-1])
        return first

    def assert_recovered_without_stun(self, relay, client, vip, got, count, tail=300):
        """The last `tail` datagrams all came back, and `relay` forwarded the flow without any
        STUN: it created no flow itself and recovered exactly one from the store."""
        missing = sorted(set(range(count - tail, count)) - got)
        self.assertEqual(missing, [], "the stream did not resume: %d of the last %d datagrams missing"
                         % (len(missing), tail))
        m = relay.metrics()
        self.assertEqual(m.get("rtcedge_relay_flows_created_total"), 0, "the new relay saw a STUN")
        self.assertEqual(m.get("rtcedge_relay_flows_recovered_total"), 1)
        self.assertGreaterEqual(m.get("rtcedge_relay_flow_store_lookups_total", result="found"), 1)
        for reason in ("flow_not_recovered", "flow_lookup_timeout", "flow_lookup_queue_full",
                       "flow_lookup_rate_limited", "unknown_endpoint"):
            self.assertEqual(m.dropped(reason), 0, reason)
        if self.xdp:
            # The recovered flow went into the XDP map: the rest of the stream took XDP.
            self.assertEqual(m.get("rtcedge_relay_xdp_flows_installed_total"), 1)
            self.assertGreaterEqual(self.xdp_count(m, "forwarded"), tail // 2)
        return m

    def test_relay_killed_media_resumes_from_the_store_before_any_stun(self):
        first = self.new_relay("fs-kill-a", workers=1, extra=self.store_args())
        client, vip = self.establish(4, 1, relay=first)
        self.check_media_follows(client, vip, 1, n=1)
        self.wait_stored(client)

        def replace():
            first.stop(signal.SIGKILL, detach=True)  # XDP: the pins go too, as when a node is replaced
            return self.new_relay("fs-kill-b", workers=1, ports_of=first, extra=self.store_args())

        got, arrivals, count, box = self.recovery_stream(client, vip, replace)
        self.report_gap("relay SIGKILL + restart", arrivals, box)
        self.assert_recovered_without_stun(box["value"], client, vip, got, count)

    def test_owner_relay_killed_media_resumes_from_the_store_before_any_stun(self):
        # The global relay's owner role: the flow enters at the ingress relay in the client
        # namespace; the relay under test owns it, stores it with that ingress as its one
        # sender, and after a SIGKILL and restart takes the ingress's media from the store.
        first = self.new_relay("fs-owner-a", workers=1, extra=self.owner_args() + self.store_args())
        self.start_ingress()
        client, vip = self.client(4), (self.INGRESS_VIP, 3478)
        msg, src = client.stun(vip, mint(1))
        self.check_binding_success(msg, src, client, vip, "EP1", PWD)
        self.check_media_follows(client, vip, 1, n=1)
        self.wait_stored(client)
        records = [self.redis.cli("GET", k) or "" for k in self.redis.flow_keys()]
        self.assertTrue(any(r.startswith("o1@%s:" % nt.CLIENT_V4) for r in records),
                        "no owner record naming the ingress: %s" % records)

        def replace():
            first.stop(signal.SIGKILL, detach=True)
            return self.new_relay("fs-owner-b", workers=1, ports_of=first,
                                  extra=self.owner_args() + self.store_args())

        got, arrivals, count, box = self.recovery_stream(client, vip, replace)
        self.report_gap("owner relay SIGKILL + restart", arrivals, box)
        m = self.assert_recovered_without_stun(box["value"], client, vip, got, count)
        self.assertGreaterEqual(m.get("rtcedge_relay_role_packets_total" if not self.xdp else
                                      "rtcedge_relay_xdp_role_packets_total", role="owner", direction=T2C), 1)

    def test_second_instance_forwards_from_the_first_non_stun_packet(self):
        if self.xdp:
            self.skipTest("one XDP program per interface: a second loader shares the pinned maps "
                          "(the restart test covers a node whose pins are gone)")
        first = self.new_relay("fs-second-a", workers=1, extra=self.store_args())
        client, vip = self.establish(4, 1, relay=first)
        self.wait_stored(client)

        def replace():
            # A second instance joins the VIPs' SO_REUSEPORT group, as a load balancer would add
            # a relay; then the first dies and the kernel re-hashes its flows to the second.
            # Joining a served VIP is refused unless asked for (docs/operations.md).
            second = self.new_relay("fs-second-b", workers=1, vip_ports_of=first,
                                    extra=self.store_args() + ["--join-existing", "true"])
            first.stop(signal.SIGKILL)
            return second

        got, arrivals, count, box = self.recovery_stream(client, vip, replace)
        self.report_gap("second instance after re-hash", arrivals, box)
        m = self.assert_recovered_without_stun(box["value"], client, vip, got, count)
        # Everything the second instance received from the client, it forwarded.
        self.assertEqual(m.get("rtcedge_relay_received_packets_total", direction=C2T),
                         m.get("rtcedge_relay_forwarded_packets_total", direction=C2T))
        self.assertEqual(m.dropped("no_flow"), 0)

    def test_redis_restart_during_traffic(self):
        relay = self.new_relay("fs-redis-restart", workers=2, extra=self.store_args())
        client, vip = self.establish(4, 1, relay=relay)
        self.wait_stored(client)
        self.redis.stop(signal.SIGKILL)
        relay.wait_metrics(lambda m: m.get("rtcedge_relay_flow_store_up") == 0, "flow_store_up 0")

        # Established flows go on: Redis is not on their path.
        got, _, count, _ = self.flow_echo_stream(client, vip, 300, 200.0)
        self.assertEqual(sorted(set(range(count)) - got), [], "media lost while Redis was down")
        # New sessions still work through the hint; the store's failures are counted.
        other, vip6 = self.establish(6, 2, relay=relay)
        self.check_media_follows(other, vip6, 2, n=2)
        down = relay.wait_metrics(
            lambda m: m.get("rtcedge_relay_flow_store_events_total", event="error")
            + m.get("rtcedge_relay_flow_store_events_total", event="dropped") > 0, "store errors counted")
        self.assertEqual(down.get("rtcedge_relay_flow_store_up"), 0)

        # Redis comes back empty: the relay reconnects, and both flows are written again by
        # the refresh (every flow_store.refresh_interval while they carry packets).
        self.redis.start()
        relay.wait_metrics(lambda m: m.get("rtcedge_relay_flow_store_up") == 1, "flow_store_up 1 again", timeout=6.0)
        deadline = time.monotonic() + 8.0
        while time.monotonic() < deadline and not (self.redis.has_flow_of(client.addr)
                                                    and self.redis.has_flow_of(other.addr)):
            client.echo(vip, media_payloads(1)[1])
            other.echo(vip6, media_payloads(1)[1])
        self.assertTrue(self.redis.has_flow_of(client.addr) and self.redis.has_flow_of(other.addr),
                        "flows not rewritten after Redis came back: %s" % self.redis.flow_keys())
        self.assertGreaterEqual(relay.metrics().get("rtcedge_relay_flow_store_events_total", event="reconnect"), 1)
        self.assertIsNone(relay.proc.poll(), "the relay died")

    def test_store_unreachable_at_start_keeps_the_relay_serving(self):
        relay = self.new_relay("fs-no-redis", workers=1, extra=self.store_args("redis://127.0.0.1:1"))
        client, vip = self.establish(4, 1, relay=relay)
        self.check_media_follows(client, vip, 1, n=2)
        m = relay.metrics()
        self.assertEqual(m.get("rtcedge_relay_flow_store_up"), 0)
        status, _ = relay.http_get("/readyz")
        self.assertEqual(status, 200, "a Redis outage must not make the relay unready")
        # A flow it does not know: the lookup fails, its packets are counted, nothing hangs.
        stranger = self.client(4)
        before = relay.metrics()
        stranger.send(vip, media_payloads(1)[1])
        after = relay.wait_metrics(lambda m: m.dropped("flow_not_recovered") + m.dropped("flow_lookup_timeout")
                                   > before.dropped("flow_not_recovered") + before.dropped("flow_lookup_timeout"),
                                   "the stranger's packet dropped after a failed lookup")
        self.assertEqual(after.get("rtcedge_relay_flows_recovered_total"), 0)
        self.assertEqual(stranger.pending(), [])


class GlobalRelayTest(RelayTestCase):
    """The global relay (issue 13, docs/global-relay.md) with the relay namespace's relay as
    the ingress of cluster CLUSTER, and a second relay, cluster 2's owner (userspace), in the
    transceiver namespace in front of the fake transceiver:

        client -> VIP (ingress, this data path) -> 198.18.1.2:PEER_PORT (owner) -> EP1

    In XDP mode the program does the ingress role itself: it creates the flow from the hint
    of cluster 2 (verified with cluster 2's keys), frames it to the owner from the XDP return
    port and strips the owner's replies to the client; no userspace worker sees the flow."""

    PEER_PORT = 23480
    OWNER_ADMIN = 23490

    def start_owner(self, keys):
        argv = [RELAY_BIN, "--listen", "%s:%d" % (nt.XCVR_V4, 23478), "--return-listen", "[::]:23410",
                "--workers", "1", "--pin-cpus", "false", "--cluster-id", "2", "--hint-key-file", keys,
                "--endpoints", "1=%s" % EP_ADDR[1], "--admin-listen", "127.0.0.1:%d" % self.OWNER_ADMIN,
                "--peers-listen", "%s:%d" % (nt.XCVR_V4, self.PEER_PORT),
                "--peers-trusted", "%s/32,%s/128" % (nt.RELAY_XCVR_V4, nt.RELAY_XCVR_V6)]
        return self.start_side_relay(self.topo.xcvr, argv, self.OWNER_ADMIN, "owner")

    def owner_of_cluster2(self, tag):
        """Cluster 2's keys (a file), its owner relay started (its metrics()), and the ingress
        configuration (a file) naming that owner as cluster 2's peer; files tagged `tag`."""
        cluster2_keys = os.path.join(STATE["tmp"], "cluster2-keys%s-%s.yaml" % (tag, self.MODE))
        with open(cluster2_keys, "w") as f:
            subprocess.run([RELAY_BIN, "hint", "keygen", "--id", "4"], stdout=f, check=True, timeout=10)
        owner_metrics = self.start_owner(cluster2_keys)
        peers = os.path.join(STATE["tmp"], "peers%s-%s.yaml" % (tag, self.MODE))
        with open(peers, "w") as f:
            json.dump({"peers": {"clusters": [{"cluster": 2, "address": "%s:%d" % (nt.XCVR_V4, self.PEER_PORT),
                                               "hint_key_file": cluster2_keys}]}}, f)
        return cluster2_keys, owner_metrics, peers

    def test_a_flow_of_another_cluster_crosses_the_ingress_and_the_owner(self):
        cluster2_keys, owner_metrics, peers = self.owner_of_cluster2("")
        ingress = self.new_relay("ingress", workers=1, endpoints=(), extra=["--config", peers])
        client = self.client(4)
        vip = ingress.vip(4)
        before = ingress.metrics()
        msg, src = client.stun(vip, mint(1, cluster=2, key_file=cluster2_keys))
        self.check_binding_success(msg, src, client, vip, "EP1", PWD)
        for payload in media_payloads(4):
            data, src = client.echo(vip, payload)
            self.assertEqual((data, src), (b"EP1:" + payload, norm(vip)))
        after = ingress.metrics()
        self.assert_only_drop(before, after, {})
        om = owner_metrics()
        for d in (C2T, T2C):
            self.assertGreaterEqual(om.get("rtcedge_relay_role_packets_total", role="owner", direction=d), 5, d)
        self.assertEqual(om.get("rtcedge_relay_flows_active"), 1)
        if self.xdp:
            self.assertEqual(self.xdp_delta(before, after, "forwarded_new_flow"), 1, "XDP did not create the flow")
            self.assertGreaterEqual(self.xdp_delta(before, after, "forwarded"), 4)
            self.assertGreaterEqual(self.xdp_delta(before, after, "forwarded", T2C), 5, "XDP did not strip the replies")
            self.assertEqual(self.userspace_received(after, C2T), self.userspace_received(before, C2T),
                             "a userspace worker saw the XDP ingress flow")
        else:
            self.assert_role_packets(before, after, "ingress")

    def test_a_restarted_ingress_recovers_its_flow_from_the_store_before_any_check(self):
        # docs/global-relay.md, Flow store: the ingress writes its flow with the owning
        # cluster; SIGKILLed (XDP: pins gone too) and started again, it forwards the client's
        # media from the store's answer, and in XDP mode puts the flow into the flows map with
        # role ingress, so the rest of the call takes XDP.
        reason = RedisInNamespace.unavailable_reason()
        if reason:
            self.skipTest(reason)
        redis = GlobalRelayRedis(self.topo.relay)
        redis.start()
        self.addCleanup(redis.stop)
        cluster2_keys, owner_metrics, peers = self.owner_of_cluster2("-fs")
        extra = ["--config", peers, "--flow-store-redis-url", redis.url, "--flow-store-ttl", "6s",
                 "--flow-store-refresh-interval", "1s"]
        first = self.new_relay("ingress-fs-a", workers=1, endpoints=(), extra=extra)
        client = self.client(4)
        vip = first.vip(4)
        msg, src = client.stun(vip, mint(1, cluster=2, key_file=cluster2_keys))
        self.check_binding_success(msg, src, client, vip, "EP1", PWD)
        self.assertEqual(client.echo(vip, b"\x80\x6fbefore")[0], b"EP1:\x80\x6fbefore")
        self.assertTrue(poll_until(lambda: [redis.cli("GET", k) for k in redis.flow_keys()] == ["c2"], 5.0),
                        "the ingress flow's record (c2) never reached Redis: %s" % redis.flow_keys())
        first.stop(signal.SIGKILL, detach=True)
        second = self.new_relay("ingress-fs-b", workers=1, endpoints=(), ports_of=first, extra=extra)
        before = second.metrics()
        for payload in media_payloads(4):
            data, src = client.echo(vip, payload)
            self.assertEqual((data, src), (b"EP1:" + payload, norm(vip)))
        m = second.metrics()
        self.assertEqual(m.get("rtcedge_relay_flows_created_total"), 0, "the restarted ingress saw a STUN")
        self.assertEqual(m.get("rtcedge_relay_flows_recovered_total"), 1)
        self.assertEqual(m.dropped("flow_cluster_gone"), 0)
        self.assertEqual(owner_metrics().dropped("peer_wrong_sender"), 0, "the owner refused the restarted ingress")
        if self.xdp:
            self.assertEqual(m.get("rtcedge_relay_xdp_flows_installed_total"), 1)
            self.assertGreaterEqual(self.xdp_delta(before, m, "forwarded"), 2, "the recovered flow did not take XDP")
            self.assertGreaterEqual(self.xdp_delta(before, m, "forwarded", T2C), 3, "XDP did not strip the replies")


class GlobalRelayRedis(RedisInNamespace):
    """The flow store of GlobalRelayTest, on a port of its own."""

    PORT = 26380


class GlobalOwnerTest(PeerIngress, RelayTestCase):
    """The owner role of the global relay in this data path: an ingress relay (cluster 9,
    userspace) runs in the client namespace with its VIP INGRESS_VIP, and forwards a flow
    whose hint names cluster CLUSTER to the relay under test's peers.listen, which hands it
    to the fake transceiver and sends the replies back to the ingress:

        client -> INGRESS_VIP (ingress, client ns) -> 198.18.0.1:PEER_PORT (owner, this data
        path) -> EP1, and back the same way

    In XDP mode the program does the owner role: it takes the peer's framed datagrams on
    rc0 (peers.trusted in the peer_trusted map), creates the owner flow, forwards them to
    EP1 unchanged and sends EP1's replies back to the ingress from peers.listen; no
    userspace worker sees any of it."""

    def test_a_peer_ingress_flow_is_owned_here(self):
        owner = self.new_relay("owner", workers=1, extra=self.owner_args())
        ingress_metrics = self.start_ingress()
        client = self.client(4)
        vip = (self.INGRESS_VIP, 3478)
        before = owner.metrics()
        msg, src = client.stun(vip, mint(1))
        self.check_binding_success(msg, src, client, vip, "EP1", PWD)
        for payload in media_payloads(4):
            data, src = client.echo(vip, payload)
            self.assertEqual((data, src), (b"EP1:" + payload, vip))
        after = owner.metrics()
        self.assert_only_drop(before, after, {})
        im = ingress_metrics()
        for d in (C2T, T2C):
            self.assertGreaterEqual(im.get("rtcedge_relay_role_packets_total", role="ingress", direction=d), 5, d)
        if self.xdp:
            self.assert_role_packets(before, after, "owner", "rtcedge_relay_xdp_role_packets_total", "XDP owner ")
            self.assertEqual(self.xdp_delta(before, after, "forwarded_new_flow"), 1, "XDP did not create the flow")
            self.assertEqual(self.userspace_received(after, C2T), self.userspace_received(before, C2T),
                             "a userspace worker saw the XDP owner flow")
            self.assertEqual(self.userspace_received(after, T2C), self.userspace_received(before, T2C),
                             "a userspace worker saw the owner flow's replies")
        else:
            self.assert_role_packets(before, after, "owner")


class RedisFailoverTest(RelayTestCase):
    """The flow store and the registry on a Redis Sentinel group and on a Redis Cluster (issue
    28: redis+sentinel://, redis+cluster://), run inside the relay namespace (rtcetest.redis
    with an `ip netns exec` prefix). A master dies mid-stream: the established flow loses no
    datagram (Redis is not on the packet path), a new flow establishes during the failover
    (by its hint; its store write fails and is counted, or lands after the switch), and once
    the replica took over, a SIGKILLed and restarted relay recovers both flows from the store
    without any STUN. The Cluster case then moves a flow's slots to another master under a
    stream (the relay's refreshes follow ASK/MOVED) and restarts the relay again, the moved
    slots of the other flow unknown to the new relay's slot map (its lookup follows MOVED).
    The figures (failover, a flow written after the kill readable from the store, gaps) are
    logged and printed at the end. Run on its own: -k RedisFailover (CTest
    relay_netns_redis_failover); the full run's CTest entry excludes it."""

    # A flow idle for longer than the TTL leaves the store (the relay refreshes active flows
    # only); the new flows idle through a relay restart under a stream (gap, then the stream's
    # 3 s wind-down), so a TTL well above that.
    TTL = "20s"
    REFRESH = "1s"
    KEY_PREFIX = "rtce:c%d:flow:" % CLUSTER
    BOUND = 15.0  # seconds from the master's death until a flow written after it is recoverable

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        reason = RedisInNamespace.unavailable_reason()
        if reason:
            print("SKIPPED: redis failover tests: %s" % reason, flush=True)
            raise unittest.SkipTest(reason)
        from rtcetest import redis as rtce_redis  # subprocess + tempfile only; imported where used
        cls.rtce_redis = rtce_redis

    def ns_prefix(self):
        return ["ip", "netns", "exec", self.topo.relay]

    def store_args(self, url):
        return ["--flow-store-redis-url", url, "--flow-store-ttl", self.TTL,
                "--flow-store-refresh-interval", self.REFRESH, "--registry-redis-url", url]

    def flow_key(self, client, vip):
        def text(addr):
            host, port = norm(addr)
            return ("[%s]:%d" % (host, port)) if ":" in host else ("%s:%d" % (host, port))
        return self.KEY_PREFIX + text(client.addr) + "|" + text(vip)

    @staticmethod
    def key_slot(key):
        """Redis Cluster's slot of a key without a hash tag: CRC16/XMODEM mod 16384."""
        return binascii.crc_hqx(key.encode(), 0) % 16384

    def report(self, line):
        STATE.setdefault("report", []).append("%s (%s)" % (line, self.MODE))
        nt._log(STATE["report"][-1])

    @staticmethod
    def store_events(m):
        return {e: m.get("rtcedge_relay_flow_store_events_total", event=e)
                for e in ("error", "timeout", "reconnect", "dropped")}

    @classmethod
    def events_delta(cls, before, after):
        b, a = cls.store_events(before), cls.store_events(after)
        return " ".join("%s +%d" % (e, a[e] - b[e]) for e in a)

    def keep_alive_until(self, clients, predicate, timeout, what):
        """Echoes on every (client, vip) (their flows stay active: the relay refreshes them)
        until predicate() holds; the monotonic time it first did."""
        deadline = time.monotonic() + timeout
        while True:
            if predicate():
                return time.monotonic()
            if time.monotonic() > deadline:
                raise AssertionError("timed out after %.0fs waiting for %s" % (timeout, what))
            for client, vip in clients:
                client.echo(vip, media_payloads(1)[1])
            time.sleep(0.05)  # pacing of the keep-alive echoes of a deadline-bounded wait

    def restart_relay(self, relay, name, url, after_ready, others, box):
        """SIGKILLs `relay` (XDP: its pins go too) and starts `name` on its ports; then
        after_ready(new relay), if given; then one echo on each of `others` (flows the new
        relay has not seen), timed from the new relay's readiness into box["others_ms"]."""
        relay.stop(signal.SIGKILL, detach=True)
        new = self.new_relay(name, workers=1, ports_of=relay, extra=self.store_args(url))
        ready = box["ready"] = time.monotonic()
        if after_ready is not None:
            after_ready(new)
        box["others_ms"] = []
        for other, other_vip in others:
            t0 = time.monotonic()
            with contextlib.suppress(AssertionError):  # assert_recovered_both says why
                other.echo(other_vip, media_payloads(1)[1])
                box["others_ms"].append("%.0f ms (%.0f ms after ready)"
                                        % ((time.monotonic() - t0) * 1e3, (time.monotonic() - ready) * 1e3))
        return new

    def restart_during_stream(self, what, relay, name, url, client, vip, others=(), after_ready=None):
        """restart_relay() from datagram 100 of a stream on client's flow; checks the stream
        resumed and reports the gap."""
        obox = {}
        got, arrivals, count, box = self.stream_through(
            client, vip, lambda: self.restart_relay(relay, name, url, after_ready, others, obox), tail=300)
        new = box["value"]
        missing = sorted(set(range(count - 300, count)) - got)
        self.assertEqual(missing, [], "%s: the stream did not resume: %d of the last 300 datagrams missing; "
                         "relay log:\n%s" % (what, len(missing), new.log_text()[-3000:]))
        # The longest silence between two echoes from the replacement on (a few echoes of the
        # old relay may still arrive after it began).
        around = [t for t in arrivals if box["start"] - 0.1 <= t]
        self.assertTrue(len(around) > 1, what)
        gap = max(b - a for a, b in zip(around, around[1:]))
        self.report("%s: relay replaced in %.0f ms; stream's longest echo gap %.0f ms; the other flow's first "
                    "echo: %s" % (what, (obox["ready"] - box["start"]) * 1e3, gap * 1e3,
                                  ", ".join(obox["others_ms"]) or "none"))
        return new

    def assert_recovered_both(self, relay, others, store_state=None):
        """Each (client, vip) of `others` (flows the relay has not seen since its restart)
        answers at once; the relay created no flow (no STUN) and recovered every one of them
        plus the streamed one from the store. store_state(): what the store holds (for the
        failure message)."""
        for client, vip in others:
            try:
                client.echo(vip, media_payloads(1)[1])
            except AssertionError as e:
                raise AssertionError("%s: flow %s not recovered; store: %s; metrics: %s; relay log tail:\n%s"
                                     % (e, self.flow_key(client, vip), store_state() if store_state else "?",
                                        relay.metrics(), relay.log_text()[-4000:])) from None
        m = relay.metrics()
        n = 1 + len(others)
        self.assertEqual(m.get("rtcedge_relay_flows_created_total"), 0, "the restarted relay saw a STUN")
        self.assertEqual(m.get("rtcedge_relay_flows_recovered_total"), n, relay.log_text()[-3000:])
        self.assertGreaterEqual(m.get("rtcedge_relay_flow_store_lookups_total", result="found"), n)
        for reason in ("flow_not_recovered", "flow_lookup_timeout", "flow_lookup_rate_limited", "unknown_endpoint"):
            self.assertEqual(m.dropped(reason), 0, reason)
        # The stream's packets that arrive while the first lookup is out wait in a bounded
        # queue; a restarted relay's first lookup on a Cluster (slot map, connections to
        # each master, a dead seed skipped) can outlast it at 200 pps: counted, reported.
        queue_full = m.dropped("flow_lookup_queue_full")
        if queue_full:
            self.report("note: %s dropped %d packets as flow_lookup_queue_full while its first lookup was out"
                        % (relay.name, queue_full))
        self.assertLess(queue_full, 100, "flow_lookup_queue_full")
        if self.xdp:
            self.assertEqual(m.get("rtcedge_relay_xdp_flows_installed_total"), n)
        return m

    def assert_none_lost(self, got, count, relay, what):
        """Every one of `count` streamed datagrams echoed; else the missing ranges, the relay's
        drop counters and its log tail (a loss under a loaded CI run must say where it was)."""
        missing = sorted(set(range(count)) - got)
        if not missing:
            return
        ranges, start = [], missing[0]
        for a, b in zip(missing, missing[1:] + [None]):
            if b != a + 1:
                ranges.append("%d" % a if a == start else "%d-%d" % (start, a))
                start = b
        drops = relay.metrics().by_label("rtcedge_relay_dropped_packets_total", "reason")
        self.fail("%s: %d of %d datagrams not echoed (%s); relay drops %s; relay log tail:\n%s"
                  % (what, len(missing), count, ", ".join(ranges[:20]), {r: n for r, n in drops.items() if n},
                     relay.log_text()[-3000:]))

    def client_in_slots(self, family, vip, slots):
        """A client whose flow key (with this VIP) hashes into `slots` (a container)."""
        for _ in range(200):
            c = Client(family, self.topo.client)
            if self.key_slot(self.flow_key(c, vip)) in slots:
                self.addCleanup(c.close)
                return c
            c.close()
        raise AssertionError("no client port whose flow key lands in the wanted slots")

    def establish_client(self, client, endpoint, relay):
        """establish() with a given client socket."""
        vip = relay.vip(client.family)
        msg, src = client.stun(vip, mint(endpoint))
        self.check_binding_success(msg, src, client, vip, "EP%d" % endpoint, PWD)
        self.check_media_follows(client, vip, endpoint, n=1)

    # -------------------------------------------------------------- Sentinel

    def test_sentinel_master_killed_mid_stream(self):
        group = self.rtce_redis.RedisSentinelGroup(replicas=1, sentinels=3, prefix=self.ns_prefix())
        self.addCleanup(group.stop)
        group.start()
        url = group.url()

        def master():
            return group.node_by_port(group.master_port())

        def stored(key, node=None):
            node = node or master()
            return node is not None and node.running and node.cli("EXISTS", key) == "1"

        relay = self.new_relay("rf-sentinel-a", workers=1, extra=self.store_args(url))
        relay.wait_metrics(lambda m: m.get("rtcedge_relay_flow_store_up") == 1, "flow_store_up 1")
        client, vip = self.establish(4, 1, relay=relay)
        self.check_media_follows(client, vip, 1, n=1)
        key1 = self.flow_key(client, vip)
        self.assertTrue(poll_until(lambda: stored(key1), 5.0), "flow never reached the master")
        replica = next(n for n in group.data_nodes if n.port != group.master_port())
        self.assertTrue(poll_until(lambda: stored(key1, replica), 5.0), "flow never reached the replica")
        before = relay.metrics()
        box = {}

        def kill_master_and_establish():
            box["kill"] = time.monotonic()
            box["old"] = group.kill_master()
            # A new session during the failover: its hint routes it; the store write fails
            # (counted) or lands once the relay has moved to the new master.
            other, vip6 = self.establish(6, 2, relay=relay)
            box["established"] = time.monotonic()
            box["other"] = (other, vip6)
            box["new"] = group.wait_for_failover(box["old"], timeout=20)
            box["failover"] = time.monotonic()
            key2 = self.flow_key(other, vip6)
            box["written"] = self.keep_alive_until([(other, vip6)], lambda: stored(key2), self.BOUND,
                                                   "the new flow's key on the new master")
            box["up"] = relay.wait_metrics(lambda m: m.get("rtcedge_relay_flow_store_up") == 1,
                                           "flow_store_up 1 after the failover", timeout=self.BOUND)

        got, _, count, _ = self.stream_through(client, vip, kill_master_and_establish)
        self.assertNotEqual(box["old"], 0)
        self.assert_none_lost(got, count, relay, "the established flow while the master died and the sentinels "
                              "failed over")
        other, vip6 = box["other"]
        t = {k: (box[k] - box["kill"]) * 1e3 for k in ("established", "failover", "written")}
        self.report("Sentinel master SIGKILL mid-stream (%d datagrams, none lost): new flow established %.0f ms "
                    "after the kill; sentinels failed over in %.0f ms; a flow written after the kill readable "
                    "from the new master %.0f ms after the kill; store events %s"
                    % (count, t["established"], t["failover"], t["written"], self.events_delta(before, box["up"])))
        self.assertLess(t["written"], self.BOUND * 1e3)
        self.assertTrue(stored(key1), "the established flow is not on the new master")

        # The old master comes back as a replica: the relay keeps writing to the new one.
        group.restart(box["old"])
        mark = relay.metrics()
        until = time.monotonic() + 2.0  # two refresh intervals
        self.keep_alive_until([(client, vip), (other, vip6)], lambda: time.monotonic() > until, 5.0,
                              "2 s of refreshes")
        after = relay.metrics()
        self.assertEqual(prom_metrics.delta(mark, after, "rtcedge_relay_flow_store_events_total", event="error"), 0,
                         "store errors after the old master came back as a replica: %s"
                         % self.events_delta(mark, after))
        self.assertEqual(group.master_port(), box["new"])

        # A restarted relay finds the new master through the sentinels and recovers both flows.
        new = self.restart_during_stream("Sentinel: relay SIGKILL + restart after the failover", relay,
                                         "rf-sentinel-b", url, client, vip, others=[(other, vip6)])
        key2 = self.flow_key(other, vip6)
        self.assert_recovered_both(new, [(other, vip6)], lambda: {
            "master": group.master_port(), "pttl": {k: master().cli("PTTL", k) for k in (key1, key2)},
            "keys": master().cli("--scan", "--pattern", self.KEY_PREFIX + "*")})
        self.report("Sentinel: relay restarted %.1f s after the master's SIGKILL recovered both flows without STUN"
                    % (time.monotonic() - box["kill"]))
        self.assertIsNone(new.proc.poll(), "the relay died")

    # -------------------------------------------------------------- Cluster

    def test_cluster_master_killed_then_slots_migrated(self):
        cluster = self.rtce_redis.RedisClusterNodes(masters=3, replicas_per_master=1, prefix=self.ns_prefix())
        self.addCleanup(cluster.stop)
        cluster.start()
        url = cluster.url()

        def owner(key):
            port = cluster.master_of_slot(self.key_slot(key))
            i = cluster.index_of_port(port)
            return cluster.node(i) if port and i < cluster.size() else None

        def stored(key):
            node = owner(key)
            return node is not None and node.cli("EXISTS", key) == "1"

        def store_state():
            return {"pttl": {k: (owner(k).port, owner(k).cli("PTTL", k)) for k in (key1, key2)},
                    "keys": {n.port: n.cli("--scan", "--pattern", self.KEY_PREFIX + "*")
                             for n in cluster.nodes if n.running}}

        relay = self.new_relay("rf-cluster-a", workers=1, extra=self.store_args(url))
        relay.wait_metrics(lambda m: m.get("rtcedge_relay_flow_store_up") == 1, "flow_store_up 1")
        client, vip = self.establish(4, 1, relay=relay)
        self.check_media_follows(client, vip, 1, n=1)
        key1 = self.flow_key(client, vip)
        slot1 = self.key_slot(key1)
        self.assertEqual(cluster.node(0).cli("CLUSTER", "KEYSLOT", key1), str(slot1))
        self.assertTrue(poll_until(lambda: stored(key1), 5.0), "flow never reached its slot's master")
        victim_port = cluster.master_of_slot(slot1)
        victim = cluster.index_of_port(victim_port)
        victim_id = cluster.node(victim).cli("CLUSTER", "MYID")
        replica = next(cluster.index_of_port(int(f[1].split("@")[0].rsplit(":", 1)[1]))
                       for f in map(str.split, cluster.node(victim).cli("CLUSTER", "NODES").splitlines())
                       if len(f) > 3 and f[3] == victim_id)
        self.assertTrue(poll_until(lambda: key1 in (cluster.node(replica).cli("--scan", "--pattern", key1) or ""), 5.0),
                        "flow never reached the replica")
        # The victim's slots, for the new flow: its key must land on the shard that fails over.
        victim_slots = set()
        for _, port, _, ranges in cluster._parse_nodes(cluster.node(victim).cli("CLUSTER", "NODES")):
            if port == victim_port:
                for a, b in ranges:
                    victim_slots.update(range(a, b + 1))
        other = self.client_in_slots(4, vip, victim_slots)
        key2 = self.flow_key(other, vip)
        before = relay.metrics()
        box = {}

        def kill_master_and_establish():
            box["kill"] = time.monotonic()
            cluster.kill(victim)
            self.establish_client(other, 1, relay)
            box["established"] = time.monotonic()
            wait = time.monotonic() + self.BOUND
            core.wait_for(lambda: cluster.master_of_slot(slot1) not in (0, victim_port), self.BOUND,
                          "the replica to take slot %d over" % slot1)
            cluster.wait_state_ok(max(0.1, wait - time.monotonic()))
            box["failover"] = time.monotonic()
            box["written"] = self.keep_alive_until([(other, vip)], lambda: stored(key2), self.BOUND,
                                                   "the new flow's key on the promoted replica")
            box["up"] = relay.wait_metrics(lambda m: m.get("rtcedge_relay_flow_store_up") == 1,
                                           "flow_store_up 1 after the failover", timeout=self.BOUND)

        got, _, count, _ = self.stream_through(client, vip, kill_master_and_establish)
        self.assert_none_lost(got, count, relay, "the established flow while its slot's master died and the "
                              "cluster failed over")
        t = {k: (box[k] - box["kill"]) * 1e3 for k in ("established", "failover", "written")}
        self.report("Cluster master (slot %d, the new flow's slot %d) SIGKILL mid-stream (%d datagrams, none lost): "
                    "new flow established %.0f ms after the kill; replica promoted, cluster_state ok in %.0f ms; "
                    "a flow written after the kill readable from the store %.0f ms after the kill; store events %s"
                    % (slot1, self.key_slot(key2), count, t["established"], t["failover"], t["written"],
                       self.events_delta(before, box["up"])))
        self.assertLess(t["written"], self.BOUND * 1e3)
        self.assertEqual(cluster.index_of_port(cluster.master_of_slot(slot1)), replica)
        self.assertTrue(stored(key1), "the established flow is not on the promoted replica")

        relay = self.restart_during_stream("Cluster: relay SIGKILL + restart after the failover", relay,
                                           "rf-cluster-b", url, client, vip, others=[(other, vip)])
        self.assert_recovered_both(relay, [(other, vip)], store_state)
        self.report("Cluster: relay restarted %.1f s after the master's SIGKILL recovered both flows without STUN"
                    % (time.monotonic() - box["kill"]))

        # Slots move under a stream: the first flow's range goes to another master; the
        # relay's refreshes meet ASK (slot migrating) and MOVED (after it) and land there.
        def elsewhere(slot):
            src = cluster.index_of_port(cluster.master_of_slot(slot))
            return next(i for i in range(cluster.size()) if i != src and cluster.node(i).running
                        and cluster.node(i).role() == "master")

        first1, last1 = max(0, slot1 - 1), min(16383, slot1 + 1)
        to1 = elsewhere(slot1)
        mark = relay.metrics()

        def migrate1():
            cluster.migrate_slots(first1, last1, to1)
            box["migrated1"] = time.monotonic()
            # A refresh rewrites the key (a fresh TTL) on its new master within a refresh interval
            # or two. Between writes its PTTL only falls, so a sample above the one before shows a
            # write between them, wherever in the refresh cycle the first sample fell (comparing
            # with the first sample alone waits for luck when a refresh had just landed).
            last = [int(cluster.node(to1).cli("PTTL", key1) or -2)]

            def rewritten():
                sample = int(cluster.node(to1).cli("PTTL", key1) or -2)
                grew, last[0] = sample > last[0], sample
                return grew

            self.keep_alive_until([], rewritten, 5.0, "a refresh of the moved flow on its new master")
            box["refreshed1"] = time.monotonic()

        got, _, count, sbox = self.stream_through(client, vip, migrate1)
        self.assert_none_lost(got, count, relay, "the established flow while its slots moved")
        after = relay.metrics()
        self.report("Cluster: slots %d-%d moved to another master under the stream (none of %d datagrams lost) in "
                    "%.0f ms; the relay's refresh landed there %.0f ms later; store events %s"
                    % (first1, last1, count, (box["migrated1"] - sbox["start"]) * 1e3,
                       (box["refreshed1"] - box["migrated1"]) * 1e3, self.events_delta(mark, after)))
        self.assertEqual(cluster.index_of_port(cluster.master_of_slot(slot1)), to1)

        # Restart again; right after the new relay loaded its slot map, the second flow's
        # range moves too: its first packet's lookup meets MOVED.
        slot2 = self.key_slot(key2)
        first2, last2 = max(0, slot2 - 1), min(16383, slot2 + 1)
        to2 = elsewhere(slot2)

        def migrate2(new):
            t0 = time.monotonic()
            cluster.migrate_slots(first2, last2, to2)
            box["migrated2"] = time.monotonic() - t0

        relay = self.restart_during_stream("Cluster: relay SIGKILL + restart after the slot migration, then the "
                                           "other flow's slots moved", relay, "rf-cluster-c", url, client, vip,
                                           others=[(other, vip)], after_ready=migrate2)
        self.assertEqual(cluster.index_of_port(cluster.master_of_slot(slot2)), to2)
        self.assert_recovered_both(relay, [(other, vip)], store_state)
        self.report("Cluster: slots %d-%d moved in %.0f ms after the restarted relay loaded its map; both flows "
                    "recovered without STUN" % (first2, last2, box["migrated2"] * 1e3))
        self.assertIsNone(relay.proc.poll(), "the relay died")


class CodecSelfTest(unittest.TestCase):
    """The test's own STUN and PROXY v2 codecs against a real capture and round trips."""

    def test_stun_codec_verifies_chromium_capture(self):
        golden = golden_capture()
        if not golden:
            self.skipTest("tests/golden capture not present")
        msg = stun_codec.parse(golden["bytes"])
        self.assertEqual(msg.username(), golden["username"])
        self.assertTrue(msg.integrity_ok(golden["server_pwd"].encode()))
        self.assertFalse(msg.integrity_ok(b"wrong-password-wrong-password"))
        self.assertTrue(msg.fingerprint_ok())

    def test_proxy_v2_round_trip(self):
        for client, vip, length in (((nt.CLIENT_V4, 50000), (nt.VIP_V4, 3478), proxy_v2.LEN_V4),
                                    ((nt.CLIENT_V6, 50001), (nt.VIP_V6, 3478), proxy_v2.LEN_V6)):
            hdr = proxy_v2.encode(client, vip)
            self.assertEqual(len(hdr), length)
            parsed, off = proxy_v2.parse(hdr + b"payload")
            self.assertEqual((parsed.client, parsed.vip, off), (client, vip, length))
        with self.assertRaises(proxy_v2.ProxyV2Error):
            proxy_v2.parse(b"\x16\xfe\xfd" + b"\0" * 40)


def per_data_path(*classes):
    """Replaces each test class by one subclass per data path: <Name>_userspace, <Name>_xdp."""
    for base in classes:
        for mode in MODES:
            name = "%s_%s" % (base.__name__, mode)
            globals()[name] = type(name, (base,), {"MODE": mode, "__module__": __name__, "__qualname__": name})
        del globals()[base.__name__]


per_data_path(RoutingTest, ReloadTest, IdleExpiryTest, TableBoundTest, HintFlowLimitTest, ShutdownTest,
              ChromeCaptureReplayTest, FlowRecoveryTest, GlobalRelayTest, GlobalOwnerTest, RedisFailoverTest)


def main():
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--relay", help="path to rtcedge-relay (default: $RTCE_RELAY_BIN or build/bin)")
    ap.add_argument("--xdp-pass-obj", help="path to xdp_pass.bpf.o (default: $RTCE_XDP_PASS_OBJ or build/bpf)")
    ap.add_argument("--exclude", action="append", default=[], metavar="NAME",
                    help="leave out the test classes whose name contains NAME (repeatable)")
    ap.add_argument("--all-skipped-exit", type=int, default=0, metavar="CODE",
                    help="exit status when every selected test was skipped (default 0; CTest: 77)")
    args, rest = ap.parse_known_args()
    global RELAY_BIN, XDP_PASS_OBJ
    if args.relay:
        RELAY_BIN = os.path.abspath(args.relay)
    if args.xdp_pass_obj:
        XDP_PASS_OBJ = os.path.abspath(args.xdp_pass_obj)

    class Loader(unittest.TestLoader):
        def getTestCaseNames(self, testCaseClass):
            if any(x in testCaseClass.__name__ for x in args.exclude):
                return []
            return super().getTestCaseNames(testCaseClass)

    nt.install_signal_cleanup()
    t0 = time.monotonic()
    try:
        prog = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2, testLoader=Loader())
    finally:
        nt.cleanup_all()
    for line in STATE.get("report", []):
        print(line, flush=True)
    print("relay netns integration: %.1fs" % (time.monotonic() - t0), flush=True)
    result = prog.result
    if result.wasSuccessful() and result.skipped and len(result.skipped) >= result.testsRun:
        sys.exit(args.all_skipped_exit)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
