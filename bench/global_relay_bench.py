#!/usr/bin/python3
"""global_relay_bench.py — the global relay against TURN (issue 13 §2): one client, three paths
to the same owning cluster, on modelled delays, in one run.

The topology is the global relay simulation's (global_sim_topology.GlobalSim in
tests/integration/): the client's one interface ends at its provider's router (isp) over
the access wire; the router reaches relay C (ingress only) next door and relay A (owner of
cluster A, transceiver A with the loopback echo behind it) over the public wire; C reaches
A over the backbone wire. This bench adds
coturn (`turnserver`) in relay C's namespace, at the ingress's spot:

    client ──access (A ms, loss L)── isp ── relay C: VIP C, TURN ──backbone (B ms)── relay A ── xcvr A
                                      └──────────── public (P ms) ─────────────> VIP A

  direct   the client's ICE pair is client -> VIP A over access + public (A + P one way);
  ingress  client -> VIP C (A), framed over the backbone to relay A's peers.listen (B);
  turn     client -> coturn next to VIP C (A): Allocate, ChannelBind, ChannelData; coturn
           relays from relay C's backbone address to VIP A (B). iceTransportPolicy "relay":
           aiortc 1.4 has no switch for it, so the bench passes aioice's
           transport_policy=RELAY and drops the host candidate's pairs (aioice 0.8 still
           checks from it), so every check and all media go through coturn.

Each "──" with a delay is a delay wire (delay_wire.py, a userspace netem: the kernel has
no sch_netem), the same one-way delay both ways; the loss, per direction on IPv4 UDP, is on
the access wire only, which every path crosses. Signaling (HTTP) reaches transceiver A
through a splice on loopback, undelayed and the same for every path; for the ingress path
the splice is the front door that adds X-Rtcedge-Region, so the answer names VIP C first.

Per session (aiortc client, this file's --client mode in the client namespace): time from
createOffer to the gathering done (TURN: the allocation) and to connectionState "connected";
media RTT from RTCP (the transceiver's report blocks echo the client's SR: each raw sample is
now - LSR time - DLSR, taken before aiortc's smoothing), the transceiver's own RTCP RTT, the
downlink jitter and loss (aiortc's inbound-rtp), the uplink loss as the transceiver saw it
(remote-inbound-rtp), echo frames carrying the tone, and which address the transceiver saw
as the client's. The selected ICE pair is checked against the path (its remote address, and a
relayed local candidate for TURN); a session that fails a check is not counted.

Printed: per condition and path, p50/p99 over sessions of each figure (p99 nearest rank) and
ratios of p50 against the direct path of the same condition and run; the machine.
Needs root, aiortc, numpy, turnserver (coturn). Exit 77 when something is missing. Usage:
  sudo bench/global_relay_bench.py [--build build] [--sessions 8] [--seconds 10]
       [--access-ms 15] [--backbone-ms 40] [--public-ms 55] [--loss 0,2,5] [--quick]
       [--paths direct,ingress,turn] [--json-out FILE] [--markdown-out FILE] [--logs-dir DIR]
"""

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(HERE, ".."))
E2E = os.path.join(REPO_ROOT, "tests", "transceiver", "e2e")
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "support", "py"))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "integration"))
sys.path.insert(0, E2E)

from rtcetest import outcome  # noqa: E402
from rtcetest.core import machine_info as machine, percentile, stats as summary, write_report  # noqa: E402

PATHS = ["direct", "ingress", "turn"]
# The TURN server's address, on relay C's access link next to VIP C (global_sim_topology's
# addresses are 198.18.0.0/15; this one is outside its VIP list).
TURN_IP, TURN_PORT = "198.18.255.31", 3478
TURN_USER, TURN_PASS, TURN_REALM = "bench", "bench-secret", "rtcedge.bench"


def log(msg):
    print("[global_relay_bench] %s" % msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- the aiortc client

def client_main(args):
    import aioice.ice
    import aiortc.rtcicetransport as rit
    from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection, RTCSessionDescription
    from aiortc.rtp import RtcpRrPacket, RtcpSrPacket
    from aiortc.rtcrtpsender import RTCRtpSender
    import chaos_aiortc_client as cc  # tone_frame, and its aiortc_client helpers (ToneTrack)
    from rtcetest.aio import receive_frames, record_connection, remote_audio
    import urllib.error
    import urllib.parse
    import urllib.request

    ac = cc.ac
    if os.environ.get("RTCE_BENCH_CLIENT_DEBUG"):
        import logging
        logging.basicConfig(level=logging.DEBUG, format="%(relativeCreated)d %(name)s %(message)s")
    local_ip = args.local_ip
    # One host address: the client's address on the link of this path, so no check leaves
    # by another link with a source address the far end cannot answer.
    aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: [local_ip]
    if args.turn:
        original_kwargs = rit.connection_kwargs

        def relay_only(servers):
            kw = original_kwargs(servers)
            kw["transport_policy"] = aioice.ice.TransportPolicy.RELAY
            return kw

        rit.connection_kwargs = relay_only
        # aioice 0.8 leaves the host candidate out of the offer under RELAY but still pairs
        # it with the answer's candidates; drop it so that every check goes through TURN.
        original_gather = aioice.ice.Connection.gather_candidates

        async def gather_relayed(self):
            await original_gather(self)
            # Not closed: its connection_lost would end the whole connection. The process
            # exits after one session.
            self._protocols = [p for p in self._protocols if p.local_candidate.type != "host"]

        aioice.ice.Connection.gather_candidates = gather_relayed

    rtt_samples = []
    original_rtcp = RTCRtpSender._handle_rtcp_packet

    async def raw_rtt(self, packet):
        # aiortc keeps only a smoothed RTT; take each sample before it is smoothed.
        if isinstance(packet, (RtcpRrPacket, RtcpSrPacket)):
            for report in packet.reports:
                if (report.ssrc == self._ssrc and report.dlsr and report.lsr
                        and getattr(self, "_RTCRtpSender__lsr", None) == report.lsr):
                    rtt = time.time() - self._RTCRtpSender__lsr_time - report.dlsr / 65536.0
                    rtt_samples.append(round(rtt * 1000.0, 2))
        await original_rtcp(self, packet)

    RTCRtpSender._handle_rtcp_packet = raw_rtt

    def http(method, url, body=None, headers=None, timeout=5.0):
        req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as res:
                return res.status, dict(res.headers), res.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers or {}), e.read()

    async def ahttp(*a, **kw):
        return await asyncio.wait_for(asyncio.to_thread(http, *a, **kw), kw.get("timeout", 5.0) + 2)

    result = {"path": args.path, "connected": False}

    async def run():
        config = None
        if args.turn:
            config = RTCConfiguration(iceServers=[RTCIceServer(
                urls="turn:%s?transport=udp" % args.turn, username=TURN_USER, credential=TURN_PASS)])
        pc = RTCPeerConnection(config) if config else RTCPeerConnection()
        connected = asyncio.Event()
        remote_track = remote_audio(pc)
        frames = []

        record_connection(pc, result, connected)

        def record(frame):
            mono, rate = ac.frame_to_mono(frame)
            has, _ = cc.tone_frame(mono, rate, 440.0, 0.5)
            frames.append((time.monotonic(), has))

        session_url = None
        recorder = None
        try:
            pc.addTransceiver(ac.ToneTrack(440.0, -12.0), direction="sendrecv")
            t0 = time.monotonic()
            await asyncio.wait_for(pc.setLocalDescription(await pc.createOffer()), 15)
            t_gathered = time.monotonic()
            result["gather_ms"] = round((t_gathered - t0) * 1000, 1)
            result["local_candidate_types"] = sorted({ln.split()[7] for ln in pc.localDescription.sdp.splitlines()
                                                      if ln.startswith("a=candidate:")})
            headers = {"Content-Type": "application/sdp"}
            status, rh, body = await ahttp("POST", args.url + "/v1/sessions", pc.localDescription.sdp.encode(),
                                           headers)
            if status != 201:
                result["error"] = "POST /v1/sessions: HTTP %d: %s" % (status, body[:200])
                return
            t_answer = time.monotonic()
            result["signaling_ms"] = round((t_answer - t_gathered) * 1000, 1)
            location = next((v for k, v in rh.items() if k.lower() == "location"), None)
            session_url = urllib.parse.urljoin(args.url + "/", location)
            # Keep only the candidate of this path (the answer names the ingress first and
            # the owner's own VIP as a fallback): each case measures one path.
            lines = body.decode().splitlines()
            cands = [ln for ln in lines if ln.startswith("a=candidate:")]
            result["answer_candidates"] = ["%s:%s" % (ln.split()[4], ln.split()[5]) for ln in cands]
            keep = [ln for ln in lines if not ln.startswith("a=candidate:")
                    or "%s %s" % (ln.split()[4], ln.split()[5]) == args.remote.replace(":", " ")]
            if len(keep) == len(lines) - len(cands):
                result["error"] = "the answer has no candidate %s: %s" % (args.remote, result["answer_candidates"])
                return
            await asyncio.wait_for(pc.setRemoteDescription(RTCSessionDescription("\r\n".join(keep) + "\r\n",
                                                                                 "answer")), 10)
            try:
                await asyncio.wait_for(connected.wait(), args.connect_timeout_s)
            except asyncio.TimeoutError:
                result["error"] = "not connected after %g s (states %s)" % (args.connect_timeout_s,
                                                                            result.get("states"))
                return
            result["connected"] = True
            result["connect_ms"] = round((result["connected_at"] - t0) * 1000, 1)
            result["answer_to_connected_ms"] = round((result["connected_at"] - t_answer) * 1000, 1)
            ice = pc.getTransceivers()[0].sender.transport.transport
            pair = ice._connection._nominated.get(1)
            if pair is not None:
                result["selected_pair"] = {"local_type": pair.local_candidate.type,
                                           "local": "%s:%d" % (pair.local_candidate.host, pair.local_candidate.port),
                                           "remote": "%s:%d" % (pair.remote_candidate.host,
                                                                pair.remote_candidate.port)}
            track = await asyncio.wait_for(remote_track, timeout=5)
            recorder = asyncio.ensure_future(receive_frames(track, record, ends=Exception))
            await asyncio.sleep(args.seconds)
            stats = await pc.getStats()
            for s in stats.values():
                if s.type == "inbound-rtp" and s.kind == "audio":
                    result["inbound"] = {"packets_received": s.packetsReceived, "packets_lost": s.packetsLost,
                                         "jitter_ms": round(s.jitter / 48.0, 2)}
                elif s.type == "remote-inbound-rtp" and s.kind == "audio":
                    result["remote_inbound"] = {"packets_lost": s.packetsLost, "fraction_lost": s.fractionLost,
                                                "rtt_ms": None if s.roundTripTime is None
                                                else round(s.roundTripTime * 1000, 2)}
                elif s.type == "outbound-rtp" and s.kind == "audio":
                    result["outbound"] = {"packets_sent": s.packetsSent}
            status, _, body = await ahttp("GET", session_url, timeout=3)
            if status == 200:
                sess = json.loads(body)
                result["session"] = {k: sess.get(k) for k in ("state", "client_address", "vip", "relay_address",
                                                             "rtt_ms", "jitter_ms", "loss", "path",
                                                             "rtp_packets_received", "time_to_connected_ms")}
        finally:
            if recorder is not None:
                recorder.cancel()
            if session_url:
                await ahttp("DELETE", session_url, timeout=3)
            await asyncio.wait_for(pc.close(), 5)
            result["rtt_samples_ms"] = rtt_samples
            if frames:
                skip = frames[0][0] + 1.0  # codec ramp-up
                win = [h for t, h in frames if t >= skip]
                result["echo_frames"] = len(frames)
                result["tone_fraction"] = round(sum(win) / len(win), 3) if win else 0.0

    budget = args.connect_timeout_s + args.seconds + 40
    try:
        asyncio.run(asyncio.wait_for(run(), budget))
    except asyncio.TimeoutError:
        result.setdefault("error", "watchdog: the session exceeded %.0f s" % budget)
    except Exception as e:  # reported in the JSON, never a bare traceback
        result.setdefault("error", "%s: %s" % (type(e).__name__, e))
    with open(args.json_out + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(args.json_out + ".tmp", args.json_out)
    return 0 if result.get("connected") and "error" not in result else 1


# ---------------------------------------------------------------------------- topology

def udp_rtt_ms(nt, near_ns, far_ns, far_ip, count=5):
    """A path as a bare UDP round trip (checks the wires): the median of `count` probes from
    near_ns to a socket at far_ip in far_ns, echoed by this process."""
    near = nt.socket_in(near_ns, socket.AF_INET)
    far = nt.socket_in(far_ns, socket.AF_INET)
    try:
        far.bind((far_ip, 0))
        near.settimeout(2.0)
        far.settimeout(2.0)
        rtts = []
        for i in range(count):
            t = time.monotonic()
            near.sendto(b"probe%d" % i, far.getsockname())
            try:
                data, peer = far.recvfrom(64)
                far.sendto(data, peer)
                near.recvfrom(64)
            except socket.timeout:
                continue  # lost on a lossy access: the median of the others
            rtts.append((time.monotonic() - t) * 1000.0)
        return round(percentile(rtts, 50), 1) if rtts else None
    finally:
        near.close()
        far.close()


# ---------------------------------------------------------------------------- the bench

def versions(turnserver):
    out = {"python": platform.python_version()}
    try:
        import aiortc
        import aioice
        out["aiortc"], out["aioice"] = aiortc.__version__, aioice.__version__
    except ImportError:
        pass
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "coturn"], capture_output=True, text=True)
    out["coturn"] = r.stdout.strip() or "?"
    return out


def prerequisites(args):
    """Raises outcome.Unavailable (skip) or outcome.SetupError (fail) when the bench cannot run."""
    outcome.require_executables(transceiver_bin=args.transceiver_bin, relay_bin=args.relay_bin)
    outcome.require_netns()
    outcome.require_aiortc()
    outcome.require_tool(args.turnserver, "coturn")
    outcome.require_tool("ethtool")
    outcome.require_tool("ss", "iproute2")


class Bench:
    """GlobalSim (tests/integration/global_sim_topology.py) plus what only this bench
    needs: coturn in relay C's namespace (the ingress's spot) and the wires with loss on the
    access only."""

    def __init__(self, args, nt, gs, workdir):
        self.args, self.nt, self.gs, self.workdir = args, nt, gs, workdir
        self.sim = gs.GlobalSim(tag="grb", access_ms=args.access_ms, backbone_ms=args.backbone_ms,
                                public_ms=args.public_ms, workdir=workdir).create()
        if args.relay_mode == "xdp":
            self.sim.prepare_for_xdp(args.xdp_pass_obj)  # before any wire or relay starts
        ns = self.sim.ns
        # The TURN server's address sits next to VIP C on relay C's access link; the client's
        # provider routes it there. coturn relays from relay C's backbone address, so it
        # reaches VIP A over the backbone, as the ingress does.
        self.ip("relay_c", "addr", "add", TURN_IP + "/32", "dev", "c_acc")
        self.ip("isp", "route", "add", TURN_IP + "/32", "via", gs.RELAY_C_ACC_V4, "dev", "i_c")
        self.ip("relay_c", "route", "add", gs.VIP_A_V4 + "/32", "via", gs.RELAY_A_BB_V4, "dev", "c_bb")
        self.services = []
        self.ns = ns

    def ip(self, role, *args):
        return self.nt.run(["ip", "-n", self.sim.ns[role]] + list(args))

    def start(self):
        a, sim = self.args, self.sim
        self.relays = sim.start_relays(a.relay_bin, mode=a.relay_mode)
        self.xcvrs = sim.start_transceivers(a.transceiver_bin)
        self.services = list(self.relays.values()) + list(self.xcvrs.values())
        # The front door: the ingress path's requests carry the region of relay C; the
        # direct and TURN paths' requests none, so the answer names VIP A alone.
        self.splices = {"ingress": sim.http_splice_to_a("near-c"), "direct": sim.http_splice_to_a(None)}
        self.splices["turn"] = self.splices["direct"]
        self.start_turn()

    def start_wires(self, loss, seed):
        """The simulation's three wires, with the loss on the access wire only (GlobalSim.start_wires puts
        one loss on every wire): every path crosses the access, so every path sees it."""
        sim, gs = self.sim, self.gs
        plan = {"access": ("w_access", "wc", "wr", loss), "backbone": ("w_backbone", "wr", "wb", 0.0),
                "public": ("w_public", "wc", "wr", 0.0)}
        for i, (name, (role, if_a, if_b, lp)) in enumerate(plan.items()):
            d = sim.delays[name]
            sim.wires[name] = gs.delay_wire.WireProcess(sim.ns[role], if_a, if_b, d, d, loss_pct=lp,
                                                        seed=seed * 10 + i, max_seconds=3600,
                                                        workdir=self.workdir, rt_priority=10)
        for w in sim.wires.values():
            w.wait_ready()
        sim.warm_neighbours()

    def start_turn(self):
        a, gs = self.args, self.gs
        tdir = os.path.join(self.workdir, "turn")
        os.makedirs(tdir, exist_ok=True)
        conf = os.path.join(tdir, "turnserver.conf")
        lines = [
            "listening-ip=%s" % TURN_IP, "listening-port=%d" % TURN_PORT, "relay-ip=%s" % gs.RELAY_C_BB_V4,
            "min-port=49152", "max-port=49999", "lt-cred-mech", "fingerprint", "realm=%s" % TURN_REALM,
            "user=%s:%s" % (TURN_USER, TURN_PASS), "no-tls", "no-dtls", "no-tcp", "no-tcp-relay", "no-cli",
            "no-multicast-peers", "no-rfc5780", "no-stun-backward-compatibility",
            # 198.18.0.0/15 is special-purpose (RFC 2544); allow exactly the owner's VIP.
            "allowed-peer-ip=%s" % gs.VIP_A_V4,
            "userdb=%s" % os.path.join(tdir, "turndb"), "pidfile=%s" % os.path.join(tdir, "turnserver.pid"),
            "log-file=%s" % os.path.join(tdir, "turn.log"), "simple-log", "new-log-timestamp",
        ]
        with open(conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.turn = gs.Service("turnserver", self.sim.ns["relay_c"], [shutil.which(a.turnserver), "-c", conf],
                               self.workdir)
        self.services.append(self.turn)

        def listening():
            self.turn.check_alive()
            r = self.nt.run(["ip", "netns", "exec", self.sim.ns["relay_c"], "ss", "-Hlun", "src",
                             "%s:%d" % (TURN_IP, TURN_PORT)], check=False)
            return bool(r.stdout.strip())

        if not gs.poll_until(listening, 15):
            raise RuntimeError("turnserver is not listening on %s:%d within 15 s" % (TURN_IP, TURN_PORT))

    def wire_rtts(self):
        gs, ns, nt = self.gs, self.sim.ns, self.nt
        return {"direct": udp_rtt_ms(nt, ns["client"], ns["relay_a"], gs.VIP_A_V4),
                "ingress": udp_rtt_ms(nt, ns["client"], ns["relay_c"], gs.VIP_C_V4),
                "turn": udp_rtt_ms(nt, ns["client"], ns["relay_c"], TURN_IP),
                "backbone": udp_rtt_ms(nt, ns["relay_c"], ns["relay_a"], gs.RELAY_A_BB_V4)}

    def run_session(self, path, tag):
        a = self.args
        out = os.path.join(self.workdir, "client-%s.json" % tag)
        gs = self.gs
        argv = ["/usr/bin/python3", os.path.abspath(__file__), "--client", "--path", path,
                "--url", "http://127.0.0.1:%d" % self.splices[path].port, "--seconds", "%g" % a.seconds,
                "--json-out", out, "--local-ip", gs.CLIENT_V4]
        if path == "direct":
            argv += ["--remote", "%s:%d" % (gs.VIP_A_V4, gs.VIP_PORT)]
        elif path == "ingress":
            argv += ["--remote", "%s:%d" % (gs.VIP_C_V4, gs.VIP_PORT)]
        else:
            argv += ["--remote", "%s:%d" % (gs.VIP_A_V4, gs.VIP_PORT), "--turn", "%s:%d" % (TURN_IP, TURN_PORT)]
        logp = os.path.join(self.workdir, "client-%s.log" % tag)
        with open(logp, "wb") as logf:
            proc = self.nt.start_in_netns(self.sim.ns["client"], argv, stdout=logf, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL)
        try:
            proc.wait(timeout=a.seconds + 90)
        except subprocess.TimeoutExpired:
            self.nt.stop_process(proc)
        self.nt.forget_process(proc)
        try:
            with open(out) as f:
                r = json.load(f)
        except (OSError, ValueError) as e:
            with open(logp, "rb") as f:
                r = {"path": path, "error": "no result (%s): %s" % (e, f.read()[-1500:].decode("utf-8", "replace"))}
        r["checks"] = self.check(path, r)
        return r

    def check(self, path, r):
        """Why this session does not count for its path (empty: it does)."""
        bad = []
        if not r.get("connected") or r.get("error"):
            bad.append(r.get("error") or "not connected")
            return bad
        pair = r.get("selected_pair") or {}
        gs = self.gs
        want_remote = {"direct": gs.VIP_A_V4, "ingress": gs.VIP_C_V4, "turn": gs.VIP_A_V4}[path]
        if not pair.get("remote", "").startswith(want_remote + ":"):
            bad.append("selected pair %s is not to %s" % (pair, want_remote))
        if (pair.get("local_type") == "relay") != (path == "turn"):
            bad.append("selected local candidate is %s" % pair.get("local_type"))
        sess = r.get("session") or {}
        want_client = {"direct": gs.CLIENT_V4, "ingress": gs.CLIENT_V4, "turn": gs.RELAY_C_BB_V4}[path]
        if not (sess.get("client_address") or "").startswith(want_client + ":"):
            bad.append("the transceiver saw the client at %s, not %s" % (sess.get("client_address"), want_client))
        if (r.get("tone_fraction") or 0) < 0.5:
            bad.append("the echo carried the tone in %.0f %% of frames" % (100 * (r.get("tone_fraction") or 0)))
        return bad

    def stop(self):
        for svc in reversed(self.services):
            svc.stop()
        self.sim.stop_wires()


def figures(sessions):
    ok = [s for s in sessions if not s["checks"]]
    rtt = [x for s in ok for x in s.get("rtt_samples_ms") or []]
    per_session_rtt = [percentile(s["rtt_samples_ms"], 50) for s in ok if s.get("rtt_samples_ms")]

    def get(s, *keys):
        for k in keys:
            s = (s or {}).get(k)
        return s

    def loss_pct(s, where):
        got = get(s, where, "packets_received") if where == "inbound" else get(s, "outbound", "packets_sent")
        lost = get(s, where, "packets_lost")
        if got is None or lost is None:
            return None
        total = got + lost if where == "inbound" else got
        return round(100.0 * lost / total, 2) if total else None

    return {
        "sessions": len(sessions), "ok": len(ok),
        "connect_ms": summary([s.get("connect_ms") for s in ok]),
        "gather_ms": summary([s.get("gather_ms") for s in ok]),
        "answer_to_connected_ms": summary([s.get("answer_to_connected_ms") for s in ok]),
        "rtt_ms": summary(rtt), "rtt_session_p50_ms": summary(per_session_rtt),
        "xcvr_rtt_ms": summary([get(s, "session", "rtt_ms") for s in ok]),
        "jitter_ms": summary([get(s, "inbound", "jitter_ms") for s in ok]),
        "down_loss_pct": summary([loss_pct(s, "inbound") for s in ok]),
        "up_loss_pct": summary([loss_pct(s, "remote_inbound") for s in ok]),
        "tone_fraction": summary([s.get("tone_fraction") for s in ok]),
        "failures": [s["checks"] for s in sessions if s["checks"]],
    }


def fmt(s, key="p50", digits=0):
    if not s:
        return "—"
    return ("%%.%df" % digits) % s[key]


def ratio(a, b, key="p50"):
    if not a or not b or not b[key]:
        return "—"
    return "%.2f" % (a[key] / b[key])


def report(args, conds, mach, vers, t_total):
    L = []
    L.append("Machine: %d CPUs (`nproc`), %s, kernel %s (`uname -r`); load average %s at the start, %s at the end "
             "(shared with other jobs). aiortc %s / aioice %s client, coturn %s, relays A and C on the %s data path, "
             "rtcedge-transceiver with the loopback echo. %d sessions per path and condition (after %d uncounted "
             "warm-up session(s) per path), %g s of media each, paths interleaved; %.0f s in all."
             % (mach["nproc"], mach["cpu"], mach["kernel"], mach["loadavg"], machine()["loadavg"],
                vers.get("aiortc", "?"), vers.get("aioice", "?"), vers.get("coturn", "?"), args.relay_mode, args.sessions,
                args.warmup, args.seconds, t_total))
    L.append("")
    L.append("Modelled one-way delays: access (client to ingress / TURN) %g ms, backbone (ingress / TURN to owner) "
             "%g ms, public transit %g ms (direct = access + public transit = %g ms one way)."
             % (args.access_ms, args.backbone_ms, args.public_ms, args.access_ms + args.public_ms)
             + " Bare UDP round trip of the backbone wire: %s ms." % "/".join(
                 "%s" % c["ping"].get("backbone") for c in conds))
    L.append("")
    L.append("| access loss | path | sessions ok | connected p50 | p99 | / direct | TURN alloc + gather p50 "
             "| answer to connected p50 | media RTT p50 | p99 | / direct | xcvr RTT p50 | jitter p50 | p99 "
             "| loss down p50 | loss up p50 | wire RTT |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in conds:
        base = c["paths"].get("direct") or {}
        for p in PATHS:
            f = c["paths"].get(p)
            if not f:
                continue
            L.append("| %g %% | %s | %d / %d |" % (c["loss"], p, f["ok"], f["sessions"]) + " %s |" * 14 % (
                fmt(f["connect_ms"]), fmt(f["connect_ms"], "p99"),
                "1" if p == "direct" else ratio(f["connect_ms"], base.get("connect_ms")), fmt(f["gather_ms"]),
                fmt(f["answer_to_connected_ms"]), fmt(f["rtt_ms"], digits=1), fmt(f["rtt_ms"], "p99", 1),
                "1" if p == "direct" else ratio(f["rtt_ms"], base.get("rtt_ms")), fmt(f["xcvr_rtt_ms"], digits=1),
                fmt(f["jitter_ms"], digits=1), fmt(f["jitter_ms"], "p99", 1), fmt(f["down_loss_pct"], digits=2),
                fmt(f["up_loss_pct"], digits=2), "%s" % (c["ping"].get(p) or "—")))
    L.append("")
    L.append("Times in ms. *connected*: createOffer to RTCPeerConnection `connected` (gathering, the POST, ICE, "
             "DTLS); *TURN alloc + gather*: createOffer to the local description (for TURN the two Allocate round "
             "trips); *media RTT*: every raw RTCP round trip the client measured (now - LSR - DLSR from the "
             "transceiver's report blocks), p50/p99 over all samples of all sessions; *xcvr RTT*: the "
             "transceiver's own RTCP RTT at the end of each session (GET /v1/sessions/{id}); *jitter*: aiortc's "
             "inbound-rtp interarrival jitter of the echo; *loss down/up*: % of the echo's packets lost (aiortc "
             "inbound-rtp) and of the client's packets lost as the transceiver's RR reports it; *wire RTT*: a bare "
             "UDP round trip through the same wires before the condition's sessions (client to the owner VIP, to "
             "the ingress VIP, to the TURN address; the backbone leg of the ingress and TURN paths is not in it). "
             "Ratios are of p50s against the direct path of the same condition in the same run.")
    bad = [(c["loss"], p, fl) for c in conds for p, f in c["paths"].items() for fl in f["failures"]]
    if bad:
        L.append("")
        for loss, p, fl in bad:
            L.append("- %g %% %s: %s" % (loss, p, "; ".join(str(x) for x in fl)))
    return "\n".join(L) + "\n"


def bench_main(args):
    import global_sim_topology as gs
    import netns_topology as nt

    code = outcome.unmet(lambda: prerequisites(args))
    if code is not None:
        return code
    if args.quick:
        args.sessions, args.seconds, args.loss, args.warmup = 1, 3.0, "2", 0
    losses = [float(x) for x in args.loss.split(",") if x.strip()]
    if not 1 <= args.sessions <= 100 or not 1 <= args.seconds <= 120 or not losses:
        raise SystemExit("error: --sessions 1..100, --seconds 1..120, --loss a list")
    mach, vers = machine(), versions(args.turnserver)
    log("machine: %(nproc)d CPUs, %(cpu)s, kernel %(kernel)s, load average %(loadavg)s" % mach)
    log("relays A and C: %s data path" % args.relay_mode)
    nt.sweep_stale()
    nt.install_signal_cleanup()
    workdir = nt.make_scratch_dir()
    t0 = time.monotonic()
    conds = []
    try:
        b = Bench(args, nt, gs, workdir)
        b.start()
        for ci, loss in enumerate(losses):
            b.start_wires(loss, ci + 1)
            ping = b.wire_rtts()
            log("loss %g %%: wire UDP RTT %s" % (loss, ping))
            sessions = {p: [] for p in PATHS if p in args.paths.split(",")}
            if ci == 0:
                # The first session of each path pays for cold caches (neighbours, the
                # transceiver's first session, coturn's first allocation): not counted.
                for p in sessions:
                    for i in range(args.warmup):
                        r = b.run_session(p, "warmup-%s-%d" % (p, i))
                        log("warm-up %s: %s" % (p, "; ".join(r["checks"]) or "connected %s ms" % r.get("connect_ms")))
            for i in range(args.sessions):
                # Interleaved, so that drift in the machine's load hits every path alike.
                for p in sessions:
                    r = b.run_session(p, "%g-%s-%d" % (loss, p, i))
                    sessions[p].append(r)
                    log("loss %g %% %s #%d: %s" % (loss, p, i, "; ".join(r["checks"]) or
                                                  "connected %s ms, RTT samples %s, tone %s" % (
                                                      r.get("connect_ms"), r.get("rtt_samples_ms"),
                                                      r.get("tone_fraction"))))
                    for s in b.services:
                        s.check_alive()
            wires = b.sim.stop_wires()
            conds.append({"loss": loss, "ping": ping, "wires": wires,
                          "paths": {p: figures(v) for p, v in sessions.items()}, "sessions": sessions})
        b.stop()
    finally:
        if args.logs_dir:
            shutil.copytree(workdir, args.logs_dir, dirs_exist_ok=True)
        nt.cleanup_all()
    table = report(args, conds, mach, vers, time.monotonic() - t0)
    write_report(table, args.markdown_out, args.json_out,
                 {"machine": mach, "versions": vers, "args": vars(args), "conditions": conds}, indent=1)
    complete = all(f["ok"] == f["sessions"] == args.sessions for c in conds for p, f in c["paths"].items()
                   if p in args.paths.split(","))
    if args.quick:
        log("quick: %s" % ("every path connected and carried the tone" if complete else "a path failed"))
    return 0 if complete else 1


def main():
    build = os.path.join(REPO_ROOT, "build")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=build)
    ap.add_argument("--transceiver-bin")
    ap.add_argument("--relay-bin")
    ap.add_argument("--turnserver", default="turnserver")
    ap.add_argument("--sessions", type=int, default=8, help="sessions per path and condition")
    ap.add_argument("--warmup", type=int, default=1, help="uncounted sessions per path at the start")
    ap.add_argument("--seconds", type=float, default=10.0, help="media per session, after connecting")
    ap.add_argument("--access-ms", type=float, default=15.0, help="one way, client to ingress / TURN")
    ap.add_argument("--backbone-ms", type=float, default=40.0, help="one way, ingress / TURN to the owner")
    ap.add_argument("--public-ms", type=float, default=55.0, help="one way public transit (direct: access + this)")
    ap.add_argument("--loss", default="0,2,5", help="access loss per direction, %%, one condition each")
    ap.add_argument("--paths", default=",".join(PATHS), help="comma-separated subset of " + ",".join(PATHS))
    ap.add_argument("--relay-mode", choices=("userspace", "xdp"), default="userspace",
                    help="data path of relays A and C (B stays userspace)")
    ap.add_argument("--xdp-pass-obj", help="default: BUILD/bpf/xdp_pass.bpf.o")
    ap.add_argument("--quick", action="store_true", help="smoke: 1 session per path, 3 s, 2 %% loss")
    ap.add_argument("--json-out")
    ap.add_argument("--markdown-out")
    ap.add_argument("--logs-dir", help="copy every process's log (relays, transceiver, coturn, clients) here")
    # internal mode: one session, run by the bench in the client's namespace
    ap.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--local-ip", help=argparse.SUPPRESS)
    ap.add_argument("--remote", help=argparse.SUPPRESS)
    ap.add_argument("--turn", help=argparse.SUPPRESS)
    ap.add_argument("--connect-timeout-s", type=float, default=15.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        return client_main(args)
    args.transceiver_bin = args.transceiver_bin or os.path.join(args.build, "bin", "rtcedge-transceiver")
    args.relay_bin = args.relay_bin or os.path.join(args.build, "bin", "rtcedge-relay")
    args.xdp_pass_obj = args.xdp_pass_obj or os.path.join(args.build, "bpf", "xdp_pass.bpf.o")
    return bench_main(args)


if __name__ == "__main__":
    sys.exit(main())
