#!/usr/bin/python3
"""chaos_aiortc_client.py — one aiortc audio session for the chaos tests (run_chaos_netns.py).

Owns: a WebRTC client that sends a 440 Hz tone, records the transceiver's echo frame by
frame, optionally impairs its own uplink, and reports per-frame figures as JSON:
  - frame arrival times (CLOCK_MONOTONIC, comparable with the test's clock: same host), so
    the test can count frames lost across an event it caused (a transceiver SIGKILL);
  - per 20 ms frame, whether the echo carries the tone (tone band >= --tone-fraction of the
    frame's energy and the frame above -45 dBFS), and the tone SNR over the whole window;
  - when the session ended as the client sees it (ICE consent expired, or DTLS closed);
  - the server's view of the session (GET /v1/sessions/{id}: jitter buffer, RTCP loss) just
    before the DELETE that ends it.

Uplink impairment (--impair): the netem model applied to every datagram the client sends
after --impair-after-s (STUN, DTLS, SRTP alike), either by tc netem on the client's veth
(--impair-with netem, run here because the client's namespace is the one the test made) or,
where the kernel has no sch_netem, by the same model in the client's datagram send path
(--impair-with shim: aioice's StunProtocol.send_data/send_stun, i.e. right at sendto).
Both act on the client's egress only, which is what tc netem on a root qdisc does.
--impair-with nft: loss and duplication only, in the kernel without netem: an nftables
output chain in the client's namespace (`numgen random` drop, and `dup to` the gateway),
a cross-check of the shim on a real network path.
  loss=P            drop P % of datagrams
  delay=D,jitter=J  hold each datagram D +- J ms (normal distribution; reorders as netem does)
  reorder=P,gap=D   P % go at once, the rest D ms late (netem "delay D reorder P")
  duplicate=P       send P % twice

--consent-interval-s/--consent-failures shorten aioice's RFC 7675 consent (5 s x 6 failures
by default) so that a dead server is noticed within the test's consent timeout.

aiortc 1.4's Opus encoder does not enable in-band FEC, so the transceiver's fec_recovered
stays 0 with this client: losses are concealed (PLC).
"""

import argparse
import asyncio
import json
import math
import os
import random
import re
import subprocess
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support", "py"))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))

import aioice.ice  # noqa: E402
import numpy as np  # noqa: E402
from aiortc import RTCPeerConnection, RTCSessionDescription  # noqa: E402

import aiortc_client as ac  # noqa: E402  (ToneTrack, frame_to_mono, analyse_tone, http)
from rtcetest.aio import receive_frames, record_connection, remote_audio  # noqa: E402


def parse_impairment(text):
    """'loss=5,delay=40,jitter=30' -> dict of floats; '' or 'none' -> {}."""
    out = {}
    if text and text != "none":
        for part in text.split(","):
            k, _, v = part.partition("=")
            if k not in ("loss", "delay", "jitter", "reorder", "gap", "duplicate"):
                raise ValueError("unknown impairment key %r" % k)
            out[k] = float(v)
    return out


def netem_args(imp):
    """The tc netem arguments for the same model."""
    args = []
    if "delay" in imp or "gap" in imp:
        args += ["delay", "%gms" % imp.get("delay", imp.get("gap", 0))]
        if imp.get("jitter"):
            args += ["%gms" % imp["jitter"], "distribution", "normal"]
    if imp.get("reorder"):
        args += ["reorder", "%g%%" % imp["reorder"]]
    if imp.get("loss"):
        args += ["loss", "%g%%" % imp["loss"]]
    if imp.get("duplicate"):
        args += ["duplicate", "%g%%" % imp["duplicate"]]
    return args


def nft_rules(imp, dev, gateway):
    """An nftables table that drops / duplicates the client's UDP as the netem model does."""
    if set(imp) - {"loss", "duplicate"}:
        raise ValueError("--impair-with nft supports loss and duplicate only")
    rules = []
    if imp.get("loss"):
        rules.append("meta l4proto udp numgen random mod 10000 < %d counter drop" % round(imp["loss"] * 100))
    if imp.get("duplicate"):
        rules.append('meta l4proto udp numgen random mod 10000 < %d counter dup to %s device "%s"'
                     % (round(imp["duplicate"] * 100), gateway, dev))
    return ("table ip rtce_chaos {\n chain out {\n  type filter hook output priority 0; policy accept;\n  %s\n }\n}\n"
            % "\n  ".join(rules))


def nft_counters():
    """{dropped, duplicated} from the table's rule counters."""
    out = {}
    r = subprocess.run(["nft", "list", "table", "ip", "rtce_chaos"], capture_output=True, text=True, timeout=10)
    for line in r.stdout.splitlines():
        m = re.search(r"counter packets (\d+)", line)
        if m:
            out["dropped" if line.rstrip().endswith("drop") else "duplicated"] = int(m.group(1))
    return out


class Impairer:
    """The netem model on the client's datagram sends (counts what it did)."""

    def __init__(self, imp, seed):
        self.imp = imp
        self.active = False
        self.rng = random.Random(seed)
        self.stats = {"sent": 0, "dropped": 0, "delayed": 0, "duplicated": 0, "sent_at_once": 0}

    def _delay_s(self):
        imp = self.imp
        if imp.get("reorder"):
            if self.rng.random() * 100 < imp["reorder"]:
                self.stats["sent_at_once"] += 1
                return 0.0
            return imp.get("gap", imp.get("delay", 10.0)) / 1000.0
        if "delay" in imp:
            return max(0.0, self.rng.gauss(imp["delay"], imp.get("jitter", 0.0))) / 1000.0
        return 0.0

    def send(self, transport, data, addr):
        if not self.active or transport is None:
            if transport is not None:
                transport.sendto(data, addr)
            return
        self.stats["sent"] += 1
        if self.imp.get("loss") and self.rng.random() * 100 < self.imp["loss"]:
            self.stats["dropped"] += 1
            return
        copies = 2 if self.imp.get("duplicate") and self.rng.random() * 100 < self.imp["duplicate"] else 1
        self.stats["duplicated"] += copies - 1
        loop = asyncio.get_running_loop()
        for _ in range(copies):
            delay = self._delay_s()
            if delay > 0:
                self.stats["delayed"] += 1
                loop.call_later(delay, _send_later, transport, data, addr)
            else:
                transport.sendto(data, addr)


def _send_later(transport, data, addr):
    if not transport.is_closing():
        transport.sendto(data, addr)


def install_shim(impairer):
    proto = aioice.ice.StunProtocol

    async def send_data(self, data, addr):
        impairer.send(self.transport, data, addr)

    def send_stun(self, message, addr):
        impairer.send(self.transport, bytes(message), addr)

    proto.send_data = send_data
    proto.send_stun = send_stun


def tone_frame(mono, rate, hz, fraction):
    """(has_tone, rms_dbfs) of one decoded frame: the tone's band (+-40 Hz, Hann window,
    zero-padded FFT) holds >= fraction of the frame's energy and the frame is not silence."""
    rms_db = 10 * math.log10(float(np.mean(mono ** 2)) + 1e-30)
    if rms_db < -45:
        return False, rms_db
    n = 4096
    power = np.abs(np.fft.rfft(mono * np.hanning(len(mono)), n)) ** 2
    bin_hz = rate / n
    lo, hi = int((hz - 40) / bin_hz), int(math.ceil((hz + 40) / bin_hz))
    total = power[1:].sum()
    return bool(total > 0 and power[lo:hi + 1].sum() / total >= fraction), rms_db


async def run(args, result):
    if args.consent_interval_s:
        aioice.ice.CONSENT_INTERVAL = args.consent_interval_s
    if args.consent_failures:
        aioice.ice.CONSENT_FAILURES = args.consent_failures
    imp = parse_impairment(args.impair)
    impairer = Impairer(imp, args.seed)
    if imp and args.impair_with == "shim":
        install_shim(impairer)
    result["impairment"] = {"model": imp, "by": args.impair_with if imp else None}

    pc = RTCPeerConnection()
    session_url = None
    frames = []  # (arrival monotonic, has_tone, rms_dbfs)
    audio = []
    connected = asyncio.Event()
    ended = asyncio.Event()
    remote_track = remote_audio(pc)

    closing = []  # our own hang-up is not the session ending under us

    def note_end(what):
        if not closing and "client_ended_at" not in result and "connected_at" in result:
            result["client_ended_at"] = time.monotonic()
            result["client_end_cause"] = what
            ended.set()

    record_connection(pc, result, connected, lambda state: note_end("connection " + state))

    @pc.on("iceconnectionstatechange")
    def on_ice():
        if pc.iceConnectionState in ("failed", "closed"):
            note_end("ice " + pc.iceConnectionState)

    def record(frame):
        mono, rate = ac.frame_to_mono(frame)
        has, rms = tone_frame(mono, rate, args.tone_hz, args.tone_fraction)
        frames.append((time.monotonic(), has, rms))
        audio.append((time.monotonic(), mono, rate))

    recorder = None
    tc_added = nft_added = False
    try:
        pc.addTransceiver(ac.ToneTrack(args.tone_hz, -12.0), direction="sendrecv")
        await asyncio.wait_for(pc.setLocalDescription(await pc.createOffer()), 10)
        status, headers, body = await ac.http("POST", f"{args.url}/v1/sessions", "",
                                              body=pc.localDescription.sdp.encode(), content_type="application/sdp")
        result["post_status"] = status
        if status != 201:
            result["error"] = f"POST /v1/sessions: HTTP {status}: {body.decode('utf-8', 'replace').strip()[:200]}"
            return
        location = next((v for k, v in headers.items() if k.lower() == "location"), None)
        session_url = urllib.parse.urljoin(args.url + "/", location)
        result["session_url"] = session_url
        await asyncio.wait_for(pc.setRemoteDescription(RTCSessionDescription(body.decode(), "answer")), 10)
        try:
            await asyncio.wait_for(connected.wait(), args.connect_timeout_s)
        except asyncio.TimeoutError:
            result["error"] = f"not connected after {args.connect_timeout_s} s (states {result.get('states')})"
            return
        result["connected"] = True
        track = await asyncio.wait_for(remote_track, timeout=5)
        recorder = asyncio.ensure_future(receive_frames(track, record, on_end=lambda: note_end("track ended")))
        if args.ready_file:
            with open(args.ready_file, "w") as f:
                f.write("%f\n" % result["connected_at"])
        # The window starts --impair-after-s after connecting, impaired or not (a clean
        # session is the baseline of the same run).
        await asyncio.sleep(args.impair_after_s)
        if imp:
            if args.impair_with == "netem":
                cmd = ["tc", "qdisc", "add", "dev", args.netem_dev, "root", "netem"] + netem_args(imp)
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
                if r.returncode != 0:
                    result["error"] = "%s: %s" % (" ".join(cmd), r.stderr.strip())
                    return
                tc_added = True
            elif args.impair_with == "nft":
                r = subprocess.run(["nft", "-f", "-"], input=nft_rules(imp, args.netem_dev, args.nft_gateway),
                                   capture_output=True, text=True, timeout=10)
                if r.returncode != 0:
                    result["error"] = "nft: %s" % r.stderr.strip()
                    return
                nft_added = True
            else:
                impairer.active = True
        result["impaired_from"] = time.monotonic()
        end_at = result["connected_at"] + args.seconds
        try:
            await asyncio.wait_for(ended.wait(), max(0.0, end_at - time.monotonic()))
        except asyncio.TimeoutError:
            pass
        result["impaired_until"] = time.monotonic()
        impairer.active = False
        if tc_added:
            subprocess.run(["tc", "qdisc", "del", "dev", args.netem_dev, "root"], capture_output=True, timeout=10)
            tc_added = False
        if nft_added:
            impairer.stats.update(nft_counters())
            subprocess.run(["nft", "delete", "table", "ip", "rtce_chaos"], capture_output=True, timeout=10)
            nft_added = False
    finally:
        closing.append(True)
        if tc_added:
            subprocess.run(["tc", "qdisc", "del", "dev", args.netem_dev, "root"], capture_output=True, timeout=10)
        if nft_added:
            subprocess.run(["nft", "delete", "table", "ip", "rtce_chaos"], capture_output=True, timeout=10)
        if recorder is not None:
            recorder.cancel()
        if session_url:
            status, _, body = await ac.http("GET", session_url, "", timeout=3)
            try:
                result["session"] = json.loads(body) if status == 200 else {"http_status": status}
            except ValueError:
                result["session"] = {"http_status": status}
            status, _, _ = await ac.http("DELETE", session_url, "", timeout=3)
            result["delete_status"] = status
        await asyncio.wait_for(pc.close(), 5)

    result["impairer"] = impairer.stats
    result["frames"] = [[round(t, 4), int(h), round(r, 1)] for t, h, r in frames]
    # Quality over the impaired window (the first --skip-s after connecting is codec ramp-up).
    lo = result.get("impaired_from", result["connected_at"] + args.skip_s)
    hi = result.get("impaired_until", time.monotonic())
    win = [(t, h) for t, h, _ in frames if lo <= t < hi]
    expected = (hi - lo) / 0.020
    result["window_s"] = round(hi - lo, 2)
    result["window_frames"] = len(win)
    result["window_frames_expected"] = round(expected)
    result["window_tone_fraction"] = round(sum(h for _, h in win) / len(win), 3) if win else 0.0
    if len(win) >= 2:
        result["window_max_gap_ms"] = round(max(b[0] - a[0] for a, b in zip(win, win[1:])) * 1000)
    pcm = [m for t, m, _ in audio if lo <= t < hi]
    if pcm and sum(len(m) for m in pcm) >= 24000:
        rate = audio[0][2]
        result["window_tone"] = ac.analyse_tone(np.concatenate(pcm), rate)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--seconds", type=float, default=8.0, help="session length after connecting")
    ap.add_argument("--skip-s", type=float, default=1.0)
    ap.add_argument("--tone-hz", type=float, default=440.0)
    ap.add_argument("--tone-fraction", type=float, default=0.5)
    ap.add_argument("--impair", default="", help="e.g. loss=5 | delay=40,jitter=30 | reorder=25,gap=20 | duplicate=5")
    ap.add_argument("--impair-with", choices=["shim", "netem", "nft"], default="shim")
    ap.add_argument("--nft-gateway", default="198.18.0.1", help="nft duplicate: the next hop the copy goes to")
    ap.add_argument("--netem-dev", default="cl0")
    ap.add_argument("--impair-after-s", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--consent-interval-s", type=float, default=0.0)
    ap.add_argument("--consent-failures", type=int, default=0)
    ap.add_argument("--connect-timeout-s", type=float, default=15.0)
    ap.add_argument("--ready-file", help="written with the connected time once the echo track is up")
    ap.add_argument("--json-out", required=True)
    args = ap.parse_args()
    result = {"connected": False}
    budget = args.connect_timeout_s + args.seconds + 30
    try:
        asyncio.run(asyncio.wait_for(run(args, result), budget))
    except asyncio.TimeoutError:
        result.setdefault("error", f"watchdog: the run exceeded {budget:.0f} s")
    except Exception as e:  # reported in the JSON, never a bare traceback
        result.setdefault("error", f"{type(e).__name__}: {e}")
    with open(args.json_out + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(args.json_out + ".tmp", args.json_out)
    return 0 if result.get("connected") and "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
