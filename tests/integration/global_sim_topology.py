"""global_sim_topology.py — the global relay in network namespaces, with modelled link delays.

                 access wire              (router)                  backbone wire
   client ns  cl0 ~~~~~~~~~~~~~~ i_cl [isp ns] i_c ──── c_acc  relay C ns  c_bb ~~~~~~~~~~~ [bridge ns br0] ── a_bb  relay A ns
   198.18.10.2   (ACCESS_MS each way)  │          VIP_C 198.18.255.30   198.18.12.1 (BACKBONE_MS)   ├── b_bb  relay B ns
                                       └ i_pub ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~ a_pub (VIP_A 198.18.255.10)
                                             public wire (PUBLIC_MS each way)                         a_x ── x_a  xcvr A ns
                                                                                           relay B: b_x ── x_b  xcvr B ns

The client has one interface, as a real one does: its access link (a delay wire) ends at
its provider's router (isp ns), which reaches relay C's VIP next door and relay A's VIP over
the public internet (the public wire). So the ingress path is client -> access -> C ->
backbone -> A, and the public path client -> access -> public -> A; both start from the
same local ICE candidate, so the answer's candidate priorities alone choose between them.

Clusters: A = CLUSTER_A (relay A owns, transceiver A serves), B = CLUSTER_B (relay B owns,
transceiver B), C = CLUSTER_C (relay C: ingress only, no endpoints; its peers.clusters name A
and B at their peers.listen, with their key files). Each "~~~" is a delay wire
(delay_wire.py, a userspace netem: the kernel here has no sch_netem) in its own namespace;
the ends of a wire share one L2 segment. The backbone wire ends in a bridge namespace where
A's and B's backbone veths meet, so C reaches both over the one delayed link.
Only 198.18.0.0/15 is used; IPv6 is disabled in every namespace (IPv4 only).

Stable API (bench/global_relay_bench.py builds on it; add, do not change):

    sim = GlobalSim(tag="gs", access_ms=10, backbone_ms=25, public_ms=60, jitter_ms=0,
                    loss_pct=0, seed=1, workdir=None)
    sim.create()                  namespaces, veths, addresses, routes (raises; cleans its own)
    sim.prepare_for_xdp(obj)      xdp_pass on every veth end facing an XDP relay, forwarding on
    sim.start_wires()             the three delay wires (WireProcess), waits until they run
    sim.warm_neighbours()         ARP across the wires, so that XDP's first packet has a neighbour
    sim.make_keys(relay_bin)      one hint key file per cluster (start_relays calls it if needed)
    sim.start_relays(relay_bin, mode="userspace"|"xdp", extra=None) -> {"a","b","c": Service}
        A and C in `mode` (XDP on a_pub,a_x,a_bb and c_acc,c_bb; pins under pin_path(name),
        detached on cleanup), B always userspace; extra = {"a": [more argv], ...}
    sim.start_transceivers(transceiver_bin, extra_a=(), extra_b=()) -> {"a","b": Service}
    sim.relay_metrics("a"|"b"|"c"), sim.transceiver_metrics("a"|"b")  (prom_metrics.Metrics)
    sim.http_splice_to_a(region="near-c") -> HttpSplice listening on 127.0.0.1:port in the
        client namespace; every request it carries gets X-Rtcedge-Region: region (the front
        door's header; a client-supplied one is dropped) and goes to transceiver A's HTTP
        from relay A's namespace
    sim.stop_wires() -> {"access": counters, "backbone": ..., "public": ...}
    sim.modelled_rtt_ms("ingress"|"public")   2 x (access + backbone), 2 x (access + public)
    sim.keys[...]: hint key files, "a", "b", "c"; sim.ns[...]: namespace names by role
        (client, w_access, isp, relay_c, w_backbone, bridge, relay_a, xcvr_a, w_public,
        relay_b, xcvr_b); sim.logs() -> {name: log path}; the module's address constants
    sim.close()                   netns_topology.cleanup_all() (also atexit / on signal)

Names: namespaces are rtce-it-<pid>-<tag>-<role>, so netns_topology.sweep_stale removes the
leftovers of a SIGKILLed run, and pin directories /sys/fs/bpf/rtce-it-<pid>-<tag>-<relay>.
Everything is registered with netns_topology and removed on every exit path.
"""

import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support", "py"))
sys.path.insert(0, HERE)

import delay_wire  # noqa: E402
import netns_topology as nt  # noqa: E402
import prom_metrics  # noqa: E402
from rtcetest import core, netns  # noqa: E402

CLUSTER_A, CLUSTER_B, CLUSTER_C = 1, 2, 3
CLIENT_V4, ISP_CL_V4 = "198.18.10.2", "198.18.10.1"  # access segment (the wire)
CLIENT_C_V4 = CLIENT_V4  # the client's address, as relay C and the transceiver see it
ISP_PUB_V4, RELAY_A_PUB_V4 = "198.18.11.2", "198.18.11.1"  # public segment (the wire)
ISP_C_V4, RELAY_C_ACC_V4 = "198.18.15.1", "198.18.15.2"  # isp <-> relay C, no delay
RELAY_C_BB_V4, RELAY_A_BB_V4, RELAY_B_BB_V4 = "198.18.12.1", "198.18.12.2", "198.18.12.3"  # backbone
RELAY_A_X_V4, XCVR_A_V4 = "198.18.13.1", "198.18.13.2"
RELAY_B_X_V4, XCVR_B_V4 = "198.18.14.1", "198.18.14.2"
VIP_A_V4, VIP_B_V4, VIP_C_V4 = "198.18.255.10", "198.18.255.20", "198.18.255.30"
VIP_PORT = 3478
XDP_RETURN_PORT = 3479
PEER_PORT = 3480
MEDIA_PORT = 40000
HTTP_PORT = 8080
ADMIN_PORT = 9478  # each relay's admin listens on 127.0.0.1 of its own namespace
ENDPOINT_A, ENDPOINT_B = 1, 1
REGION_HEADER = "X-Rtcedge-Region"


log = core.log_to("global_sim")
poll_until = core.poll_until
http_get_in = nt.http_get_in


def Service(name, ns, argv, workdir, keep_mounts=False):
    """One process started inside a namespace (rtcetest.netns.Service), logged as global_sim."""
    return netns.Service(name, ns, argv, workdir, keep_mounts=keep_mounts, log=log)


HttpSplice = nt.HttpSplice


class GlobalSim:
    ROLES = ("client", "w_access", "isp", "relay_c", "w_backbone", "bridge", "relay_a", "xcvr_a", "w_public",
             "relay_b", "xcvr_b")

    def __init__(self, tag="gs", access_ms=10.0, backbone_ms=25.0, public_ms=60.0, jitter_ms=0.0, loss_pct=0.0,
                 seed=1, workdir=None):
        self.tag = tag
        self.prefix = "%s%d-%s" % (nt.NS_PREFIX, os.getpid(), tag)
        self.ns = {r: "%s-%s" % (self.prefix, r.replace("_", "")) for r in self.ROLES}
        self.delays = {"access": access_ms, "backbone": backbone_ms, "public": public_ms}
        self.jitter_ms, self.loss_pct, self.seed = jitter_ms, loss_pct, seed
        self.workdir = workdir or nt.make_scratch_dir()
        self.wires = {}
        self.relays = {}
        self.transceivers = {}
        self.keys = {}
        self.xdp = False
        self.pin_paths = {}
        # (ns role, dev, peer ns role, peer dev) of every veth; the wire ends have no address.
        self.veths = [
            ("client", "cl0", "w_access", "wc"), ("w_access", "wr", "isp", "i_cl"),
            ("isp", "i_c", "relay_c", "c_acc"),
            ("relay_c", "c_bb", "w_backbone", "wr"), ("w_backbone", "wb", "bridge", "br_w"),
            ("bridge", "br_a", "relay_a", "a_bb"), ("bridge", "br_b", "relay_b", "b_bb"),
            ("isp", "i_pub", "w_public", "wc"), ("w_public", "wr", "relay_a", "a_pub"),
            ("relay_a", "a_x", "xcvr_a", "x_a"), ("relay_b", "b_x", "xcvr_b", "x_b"),
        ]

    # ------------------------------------------------------------------ namespaces and links

    def _ip(self, role, *args):
        return nt.run(["ip", "-n", self.ns[role]] + list(args))

    def _exec(self, role, *argv, check=True):
        return nt.run(["ip", "netns", "exec", self.ns[role]] + list(argv), check=check)

    def create(self):
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def _create(self):
        for role in self.ROLES:
            with nt._lock:
                nt.run(["ip", "netns", "add", self.ns[role]])
                nt._namespaces.append(self.ns[role])
            self._exec(role, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                       "net.ipv6.conf.default.disable_ipv6=1")
            self._ip(role, "link", "set", "lo", "up")
        for a, da, b, db in self.veths:
            nt.run(["ip", "link", "add", da, "netns", self.ns[a], "type", "veth", "peer", "name", db,
                    "netns", self.ns[b]])
        self._ip("bridge", "link", "add", "br0", "type", "bridge", "stp_state", "0", "forward_delay", "0")
        for dev in ("br_w", "br_a", "br_b"):
            self._ip("bridge", "link", "set", dev, "master", "br0")
        addrs = [
            ("client", "cl0", [CLIENT_V4 + "/24"]), ("isp", "i_cl", [ISP_CL_V4 + "/24"]),
            ("isp", "i_c", [ISP_C_V4 + "/24"]), ("isp", "i_pub", [ISP_PUB_V4 + "/24"]),
            ("relay_c", "c_acc", [RELAY_C_ACC_V4 + "/24", VIP_C_V4 + "/32"]),
            ("relay_c", "c_bb", [RELAY_C_BB_V4 + "/24"]),
            ("relay_a", "a_bb", [RELAY_A_BB_V4 + "/24"]),
            ("relay_a", "a_pub", [RELAY_A_PUB_V4 + "/24", VIP_A_V4 + "/32"]),
            ("relay_a", "a_x", [RELAY_A_X_V4 + "/24"]), ("xcvr_a", "x_a", [XCVR_A_V4 + "/24"]),
            ("relay_b", "b_bb", [RELAY_B_BB_V4 + "/24", VIP_B_V4 + "/32"]),
            ("relay_b", "b_x", [RELAY_B_X_V4 + "/24"]), ("xcvr_b", "x_b", [XCVR_B_V4 + "/24"]),
        ]
        for role, dev, v4s in addrs:
            for a in v4s:
                self._ip(role, "addr", "add", a, "dev", dev)
        # A partial (offloaded) checksum would cross the wire unfinished; GRO would hand the
        # wire merged super-frames. Off on every veth end.
        for a, da, b, db in self.veths:
            for role, dev in ((a, da), (b, db)):
                self._exec(role, "ethtool", "-K", dev, "tx", "off", "gro", "off", "tso", "off", "gso", "off",
                           check=False)
        for a, da, b, db in self.veths:
            self._ip(a, "link", "set", da, "up")
            self._ip(b, "link", "set", db, "up")
        self._ip("bridge", "link", "set", "br0", "up")
        self._ip("client", "route", "add", "default", "via", ISP_CL_V4, "dev", "cl0")
        self._exec("isp", "sysctl", "-qw", "net.ipv4.conf.all.forwarding=1")
        self._ip("isp", "route", "add", VIP_C_V4 + "/32", "via", RELAY_C_ACC_V4, "dev", "i_c")
        self._ip("isp", "route", "add", VIP_A_V4 + "/32", "via", RELAY_A_PUB_V4, "dev", "i_pub")
        self._ip("relay_c", "route", "add", "198.18.10.0/24", "via", ISP_C_V4, "dev", "c_acc")
        self._ip("relay_a", "route", "add", "198.18.10.0/24", "via", ISP_PUB_V4, "dev", "a_pub")
        self._wait_links()

    def _wait_links(self, timeout=5.0):
        pending = [(a, da) for a, da, _, _ in self.veths] + [(b, db) for _, _, b, db in self.veths]
        deadline = time.monotonic() + timeout
        while pending:
            pending = [(r, d) for r, d in pending
                       if json.loads(self._ip(r, "-j", "link", "show", "dev", d).stdout)[0].get("operstate") != "UP"]
            if pending and time.monotonic() > deadline:
                raise RuntimeError("links not up within %.0f s: %s" % (timeout, pending))
            if pending:
                time.sleep(0.02)  # poll interval of a deadline-bounded wait

    def prepare_for_xdp(self, xdp_pass_obj):
        """xdp_pass on every veth end whose peer is an XDP relay's interface (frames the relay's
        program XDP_TXes or redirects into a veth are only delivered to an end running XDP), and
        forwarding in the relay namespaces (bpf_fib_lookup refuses without it)."""
        self.xdp = True
        for role, dev in (("isp", "i_c"), ("w_backbone", "wr"), ("bridge", "br_a"), ("w_public", "wr"),
                          ("xcvr_a", "x_a")):
            delay_wire.attach_xdp_pass(self.ns[role], dev, xdp_pass_obj)
        for role in ("relay_a", "relay_c"):
            self._exec(role, "sysctl", "-qw", "net.ipv4.conf.all.forwarding=1")

    # ------------------------------------------------------------------ wires

    def start_wires(self, max_seconds=600):
        plan = {"access": "w_access", "backbone": "w_backbone", "public": "w_public"}
        for i, (name, role) in enumerate(plan.items()):
            d = self.delays[name]
            self.wires[name] = delay_wire.WireProcess(self.ns[role], "wc" if name != "backbone" else "wr",
                                                      "wr" if name != "backbone" else "wb", d, d,
                                                      jitter_ms=self.jitter_ms, loss_pct=self.loss_pct,
                                                      seed=self.seed + i, max_seconds=max_seconds,
                                                      workdir=self.workdir, rt_priority=10)
        for w in self.wires.values():
            w.wait_ready()

    def stop_wires(self):
        out = {name: w.stop() for name, w in self.wires.items()}
        self.wires = {}
        return out

    def modelled_rtt_ms(self, path="ingress"):
        if path == "ingress":
            return 2 * (self.delays["access"] + self.delays["backbone"])
        if path == "public":
            return 2 * (self.delays["access"] + self.delays["public"])
        raise ValueError(path)

    def warm_neighbours(self, timeout=5.0):
        """Each relay namespace resolves its on-link peers (a datagram to the discard port;
        the ICMP error that comes back is ignored) and waits for usable entries."""
        usable = {"REACHABLE", "STALE", "DELAY", "PROBE", "PERMANENT"}
        want = [("relay_c", "c_acc", ISP_C_V4), ("relay_c", "c_bb", RELAY_A_BB_V4),
                ("relay_c", "c_bb", RELAY_B_BB_V4),
                ("relay_a", "a_bb", RELAY_C_BB_V4), ("relay_a", "a_pub", ISP_PUB_V4), ("relay_a", "a_x", XCVR_A_V4),
                ("relay_b", "b_bb", RELAY_C_BB_V4), ("relay_b", "b_x", XCVR_B_V4),
                ("client", "cl0", ISP_CL_V4), ("isp", "i_c", RELAY_C_ACC_V4), ("isp", "i_pub", RELAY_A_PUB_V4)]
        socks = []
        try:
            for role, _, ip in want:
                s = nt.socket_in(self.ns[role], socket.AF_INET)
                socks.append(s)
                s.sendto(b"rtce-it neighbour probe", (ip, 9))
            deadline = time.monotonic() + timeout
            while True:
                missing = []
                for role, dev, ip in want:
                    entries = json.loads(self._ip(role, "-4", "-j", "neigh", "show", "dev", dev).stdout or "[]")
                    states = {e["dst"]: (e.get("state") or ["NONE"])[0] for e in entries}
                    if states.get(ip) not in usable:
                        missing.append((role, dev, ip, states.get(ip)))
                if not missing:
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError("neighbours not resolved within %.0f s: %s" % (timeout, missing))
                time.sleep(0.02)  # poll interval of a deadline-bounded wait
        finally:
            for s in socks:
                s.close()

    # ------------------------------------------------------------------ processes

    def make_keys(self, relay_bin):
        for name, key_id in (("a", 11), ("b", 12), ("c", 13)):
            path = os.path.join(self.workdir, "cluster-%s-keys.yaml" % name)
            with open(path, "wb") as f:
                subprocess.run([relay_bin, "hint", "keygen", "--id", str(key_id)], stdout=f, check=True, timeout=10)
            self.keys[name] = path
        return self.keys

    def pin_path(self, relay):
        return "%s/%s-%s" % (nt.BPFFS, self.prefix, relay)

    def start_relays(self, relay_bin, mode="userspace", extra=None):
        """Relays A (owner of CLUSTER_A), B (owner of CLUSTER_B, always userspace) and C
        (ingress only). extra: {"a": [...], "c": [...]} more arguments. Waits for /readyz."""
        if not self.keys:
            self.make_keys(relay_bin)
        extra = extra or {}
        peers = os.path.join(self.workdir, "relay-c-peers.yaml")
        with open(peers, "w") as f:
            json.dump({"peers": {"clusters": [
                {"cluster": CLUSTER_A, "address": "%s:%d" % (RELAY_A_BB_V4, PEER_PORT), "hint_key_file": self.keys["a"]},
                {"cluster": CLUSTER_B, "address": "%s:%d" % (RELAY_B_BB_V4, PEER_PORT), "hint_key_file": self.keys["b"]},
            ]}}, f)  # JSON is YAML

        def common(cluster, vip, key):
            return [relay_bin, "--listen", "%s:%d" % (vip, VIP_PORT), "--workers", "1", "--pin-cpus", "false",
                    "--cluster-id", str(cluster), "--hint-key-file", self.keys[key],
                    "--admin-listen", "127.0.0.1:%d" % ADMIN_PORT]

        def xdp_args(relay, ifaces, addr):
            path = self.pin_path(relay)
            if os.path.exists(path):
                nt.remove_pins(path)
            self.pin_paths[relay] = path
            nt.register_cleanup(lambda: nt.detach_pins(relay_bin, path, log))
            return ["--mode", "xdp", "--xdp-interfaces", ",".join(ifaces), "--xdp-relay-address4", addr,
                    "--xdp-return-port", str(XDP_RETURN_PORT), "--xdp-pin-path", path]

        argv_a = common(CLUSTER_A, VIP_A_V4, "a") + [
            "--endpoints", "%d=%s:%d" % (ENDPOINT_A, XCVR_A_V4, MEDIA_PORT),
            "--peers-listen", "%s:%d" % (RELAY_A_BB_V4, PEER_PORT), "--peers-trusted", RELAY_C_BB_V4 + "/32"]
        argv_b = common(CLUSTER_B, VIP_B_V4, "b") + [
            "--endpoints", "%d=%s:%d" % (ENDPOINT_B, XCVR_B_V4, MEDIA_PORT),
            "--peers-listen", "%s:%d" % (RELAY_B_BB_V4, PEER_PORT), "--peers-trusted", RELAY_C_BB_V4 + "/32"]
        argv_c = common(CLUSTER_C, VIP_C_V4, "c") + ["--config", peers]
        if mode == "xdp":
            argv_a += xdp_args("a", ["a_pub", "a_x", "a_bb"], RELAY_A_X_V4)
            argv_c += xdp_args("c", ["c_acc", "c_bb"], RELAY_C_BB_V4)
        xdp = mode == "xdp"
        self.relays = {
            "a": Service("relay-a", self.ns["relay_a"], argv_a + list(extra.get("a", ())), self.workdir, keep_mounts=xdp),
            "b": Service("relay-b", self.ns["relay_b"], argv_b + list(extra.get("b", ())), self.workdir),
            "c": Service("relay-c", self.ns["relay_c"], argv_c + list(extra.get("c", ())), self.workdir, keep_mounts=xdp),
        }
        for name, svc in self.relays.items():
            svc.wait_http("127.0.0.1", ADMIN_PORT, "/readyz")
        return self.relays

    def start_transceivers(self, transceiver_bin, extra_a=(), extra_b=()):
        """Transceiver A: relay mode behind relay A, the answer's ingress chosen by the front
        door's header: region near-c = VIP C. Transceiver B: relay mode behind relay B."""
        if not self.keys:
            raise RuntimeError("start_relays (or make_keys) first: the transceivers share the relays' keys")

        def argv(ip, vip, prefix, cluster, key, endpoint):
            return [transceiver_bin, "--http-listen", "%s:%d" % (ip, HTTP_PORT),
                    "--http-allow-public-without-keys", "true", "--workers", "1",
                    "--media-listen", ip, "--media-base-port", str(MEDIA_PORT),
                    "--relay-vips", "%s:%d" % (vip, VIP_PORT), "--relay-sources", prefix, "--direct-enabled", "false",
                    "--hint-key-file", self.keys[key], "--hint-cluster-id", str(cluster),
                    "--hint-endpoint-base-id", str(endpoint), "--backend-echo-mode", "loopback",
                    "--sessions-drain-timeout", "1s"]
        a = argv(XCVR_A_V4, VIP_A_V4, "198.18.13.0/24", CLUSTER_A, "a", ENDPOINT_A) + [
            "--relay-ingress-header", REGION_HEADER, "--relay-ingress-regions", "near-c=%s:%d" % (VIP_C_V4, VIP_PORT)]
        b = argv(XCVR_B_V4, VIP_B_V4, "198.18.14.0/24", CLUSTER_B, "b", ENDPOINT_B)
        self.transceivers = {
            "a": Service("transceiver-a", self.ns["xcvr_a"], a + list(extra_a), self.workdir),
            "b": Service("transceiver-b", self.ns["xcvr_b"], b + list(extra_b), self.workdir),
        }
        self.transceivers["a"].wait_http(XCVR_A_V4, HTTP_PORT, "/metrics")
        self.transceivers["b"].wait_http(XCVR_B_V4, HTTP_PORT, "/metrics")
        return self.transceivers

    def relay_metrics(self, relay):
        status, body = http_get_in(self.ns["relay_" + relay], "127.0.0.1", ADMIN_PORT, "/metrics")
        if status != 200:
            raise RuntimeError("relay %s GET /metrics: HTTP %d" % (relay, status))
        return prom_metrics.parse(body)

    def transceiver_metrics(self, xcvr):
        ip = XCVR_A_V4 if xcvr == "a" else XCVR_B_V4
        status, body = http_get_in(self.ns["xcvr_" + xcvr], ip, HTTP_PORT, "/metrics")
        if status != 200:
            raise RuntimeError("transceiver %s GET /metrics: HTTP %d" % (xcvr, status))
        return prom_metrics.parse(body)

    def http_splice_to_a(self, region="near-c"):
        splice = HttpSplice(self.ns["client"], self.ns["relay_a"], (XCVR_A_V4, HTTP_PORT),
                            header=REGION_HEADER if region else None, value=region)
        nt.register_cleanup(splice.close)
        return splice

    def logs(self):
        out = {s.name: s.log_path for s in list(self.relays.values()) + list(self.transceivers.values())}
        out.update({"wire-" + n: w.log_path for n, w in self.wires.items()})
        return out

    def close(self):
        nt.cleanup_all()
