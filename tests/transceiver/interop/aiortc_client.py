#!/usr/bin/python3
"""aiortc_client.py — a non-browser WebRTC client (aiortc) against an rtcedge transceiver.

Sends a sine tone over a WHIP-like session (POST /v1/sessions, SDP offer after complete ICE
gathering), records what comes back and, with --expect-echo, checks that the dominant
received frequency is the tone. Prints one JSON result; DELETEs the session at the end.

  /usr/bin/python3 aiortc_client.py --url http://127.0.0.1:8080 --seconds 4 --tone-hz 440 --expect-echo

Exit code 0 = connected (and, with --expect-echo, the echoed tone was heard), 1 = failed,
2 = bad usage. Every network step has a timeout; a global watchdog bounds the whole run.
Needs Debian python3-aiortc (1.4) and python3-numpy.
"""

import argparse
import asyncio
import fractions
import json
import math
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import os

import aioice.ice
import numpy as np
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError
from av import AudioFrame

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support", "py"))
from rtcetest.aio import allow_loopback_candidates, receive_frames, remote_audio  # noqa: E402,F401

SAMPLE_RATE = 48000
FRAME_SAMPLES = 960  # 20 ms
TIME_BASE = fractions.Fraction(1, SAMPLE_RATE)


class ToneTrack(MediaStreamTrack):
    """A mono s16 sine at real-time pace: frame n is released at start + n * 20 ms."""

    kind = "audio"

    def __init__(self, hz, dbfs):
        super().__init__()
        self._phase_step = 2 * math.pi * hz / SAMPLE_RATE
        self._amplitude = 32767 * 10 ** (dbfs / 20.0)
        self._pts = 0
        self._start = None

    async def recv(self):
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.monotonic()
        due = self._start + self._pts / SAMPLE_RATE
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        n = np.arange(self._pts, self._pts + FRAME_SAMPLES)
        samples = np.round(self._amplitude * np.sin(self._phase_step * n)).astype(np.int16)
        frame = AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = SAMPLE_RATE
        frame.pts = self._pts
        frame.time_base = TIME_BASE
        self._pts += FRAME_SAMPLES
        return frame


def frame_to_mono(frame):
    """Decoded frames arrive packed (s16, interleaved channels) or planar; average to mono float."""
    data = frame.to_ndarray()
    channels = len(frame.layout.channels)
    if frame.format.is_planar:
        mono = data.astype(np.float64).mean(axis=0)
    else:
        mono = data.reshape(-1, channels).astype(np.float64).mean(axis=1)
    scale = 32768.0 if data.dtype == np.int16 else 1.0
    return mono / scale, frame.sample_rate


def analyse_tone(samples, sample_rate):
    """Dominant frequency in 50 Hz..min(fs/2, 20 kHz), and tone band (+-5 Hz) vs the rest."""
    n = 1 << int(math.floor(math.log2(len(samples))))
    block = samples[:n] * np.hanning(n)
    power = np.abs(np.fft.rfft(block)) ** 2
    bin_hz = sample_rate / n
    lo = int(math.ceil(50 / bin_hz))
    hi = min(len(power) - 2, int(min(sample_rate / 2, 20000) / bin_hz))
    peak = lo + int(np.argmax(power[lo:hi + 1]))
    a, b, c = np.log(power[peak - 1:peak + 2] + 1e-30)
    denom = a - 2 * b + c
    offset = 0.5 * (a - c) / denom if denom != 0 else 0.0
    band = max(3, int(math.ceil(5 / bin_hz)))
    in_band = power[max(lo, peak - band):peak + band + 1].sum()
    rest = power[lo:hi + 1].sum() - in_band
    return {
        "dominant_hz": round((peak + offset) * bin_hz, 2),
        "tone_snr_db": round(10 * math.log10(in_band / max(rest, 1e-30)), 1),
        "rms_dbfs": round(10 * math.log10(float(np.mean(samples ** 2)) + 1e-30), 1),
        "fft_size": n,
    }


def http_request(method, url, api_key, body=None, content_type=None, timeout=5.0):
    """Blocking HTTP (run in a thread). Returns (status, headers, body bytes); status 0 = no answer."""
    headers = {}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    if content_type:
        headers["Content-Type"] = content_type
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            return res.status, dict(res.headers), res.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers or {}), e.read()
    except (urllib.error.URLError, OSError) as e:
        return 0, {}, str(e).encode()


async def http(method, url, api_key, **kw):
    timeout = kw.get("timeout", 5.0)
    return await asyncio.wait_for(asyncio.to_thread(http_request, method, url, api_key, **kw), timeout + 2)


async def run(args, result):
    pc = RTCPeerConnection()
    session_url = None
    recorder = None
    connected = asyncio.Event()
    failed = asyncio.Event()
    received = []
    frames = {"count": 0, "rate": SAMPLE_RATE, "arrivals": []}  # arrival: seconds after connected
    remote_track = remote_audio(pc)
    t0 = time.monotonic()
    connected_at = {}

    @pc.on("connectionstatechange")
    def on_state():
        result.setdefault("states", []).append(pc.connectionState)
        if pc.connectionState == "connected":
            if result.get("time_to_connected_ms") is None:
                connected_at["t"] = time.monotonic()
                result["time_to_connected_ms"] = round((connected_at["t"] - t0) * 1000)
            connected.set()
        elif pc.connectionState in ("failed", "closed"):
            failed.set()

    def record(frame):  # an outage (a relay restart) is not the end: receive_frames keeps listening
        mono, rate = frame_to_mono(frame)
        received.append(mono)
        frames["count"] += 1
        frames["rate"] = rate
        frames["arrivals"].append(time.monotonic() - frames.get("connected_at", t0))

    try:
        pc.addTransceiver(ToneTrack(args.tone_hz, args.tone_dbfs), direction="sendrecv")
        # aiortc gathers every candidate inside setLocalDescription: the offer is non-trickle.
        await asyncio.wait_for(pc.setLocalDescription(await pc.createOffer()), 10)
        offer_sdp = pc.localDescription.sdp
        if args.offer_without_candidates:
            # What a client that POSTs right after setLocalDescription sends (as the demo page
            # and Realtime-style clients do): no candidate lines at all.
            offer_sdp = "".join(l for l in offer_sdp.splitlines(keepends=True)
                                if not l.startswith(("a=candidate:", "a=end-of-candidates")))
            result["offer_candidates"] = offer_sdp.count("a=candidate:")
        post_started = time.monotonic()
        status, headers, body = await http("POST", f"{args.url}/v1/sessions", args.api_key,
                                           body=offer_sdp.encode(), content_type="application/sdp")
        result["post_status"] = status
        if status != 201:
            result["error"] = f"POST /v1/sessions: HTTP {status}: {body.decode('utf-8', 'replace').strip()}"
            return
        location = next((v for k, v in headers.items() if k.lower() == "location"), None)
        if not location:
            result["error"] = "201 without a Location header"
            return
        session_url = urllib.parse.urljoin(args.url + "/", location)
        result["session_url"] = session_url
        await asyncio.wait_for(pc.setRemoteDescription(RTCSessionDescription(body.decode(), "answer")), 10)

        done, _ = await asyncio.wait([asyncio.ensure_future(connected.wait()), asyncio.ensure_future(failed.wait())],
                                     timeout=args.connect_timeout_s, return_when=asyncio.FIRST_COMPLETED)
        for d in done:
            d.result()
        if not connected.is_set():
            result["error"] = f"not connected after {args.connect_timeout_s} s (states {result.get('states')})"
            return
        result["connected"] = True
        # From the offer POST (gathering excluded), as bench/run_connect_bench.sh compares clients.
        result["post_to_connected_ms"] = round((connected_at["t"] - post_started) * 1000, 1)
        frames["connected_at"] = time.monotonic()

        track = await asyncio.wait_for(remote_track, timeout=5)
        recorder = asyncio.ensure_future(receive_frames(track, record, wait_s=2.0))
        await asyncio.sleep(args.seconds)
    finally:
        if recorder is not None:
            recorder.cancel()
        result["frames_received"] = frames["count"]
        if args.expect_frames_after_s is not None:
            result["frames_after_s"] = sum(1 for a in frames["arrivals"] if a >= args.expect_frames_after_s)
        arrivals = frames["arrivals"]
        if len(arrivals) >= 2:  # the longest silence between echoed frames: a path's outage
            result["max_gap_ms"] = round(max(b - a for a, b in zip(arrivals, arrivals[1:])) * 1000)
        if session_url and args.hang_up_first:
            # What WHIP clients do on hang-up: close the PeerConnection (DTLS close_notify ends
            # the session on the server), then DELETE the session URL: 200 with the final state.
            await asyncio.wait_for(pc.close(), 5)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                status, _, body = await http("GET", session_url, args.api_key, timeout=3)
                if status == 200 and json.loads(body).get("state") == "ended":
                    break
                await asyncio.sleep(0.05)  # poll interval of a deadline-bounded wait
            status, _, body = await http("DELETE", session_url, args.api_key, timeout=3)
            result["delete_status"] = status
            try:
                result["session"] = json.loads(body) if status == 200 else {"http_status": status}
            except ValueError:
                result["session"] = {"http_status": status, "body": body.decode("utf-8", "replace")[:200]}
        elif session_url:
            status, _, body = await http("GET", session_url, args.api_key, timeout=3)
            try:
                result["session"] = json.loads(body) if status == 200 else {"http_status": status}
            except ValueError:
                result["session"] = {"http_status": status, "body": body.decode("utf-8", "replace")[:200]}
            status, _, _ = await http("DELETE", session_url, args.api_key, timeout=3)
            result["delete_status"] = status
        await asyncio.wait_for(pc.close(), 5)

    rate = frames["rate"]
    audio = np.concatenate(received) if received else np.zeros(0)
    skip = int(args.skip_s * rate)  # the first second holds codec and jitter-buffer ramp-up
    if audio.size - skip >= rate // 2:
        result.update(analyse_tone(audio[skip:], rate))
        result["analysed_seconds"] = round((audio.size - skip) / rate, 2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--seconds", type=float, default=4.0, help="how long to record after connecting")
    ap.add_argument("--tone-hz", type=float, default=440.0)
    ap.add_argument("--tone-dbfs", type=float, default=-12.0)
    ap.add_argument("--skip-s", type=float, default=1.0, help="received audio ignored at the start")
    ap.add_argument("--expect-echo", action="store_true", help="require the tone to come back")
    ap.add_argument("--min-snr-db", type=float, default=10.0)
    ap.add_argument("--expect-frames-after-s", type=float, default=None,
                    help="require >= 1 s of echoed frames arriving this long after connecting (audio "
                         "survived whatever happened before, e.g. a relay restart)")
    ap.add_argument("--connect-timeout-s", type=float, default=10.0)
    ap.add_argument("--hang-up-first", action="store_true",
                    help="close the PeerConnection, then DELETE: require 200 with the ended state (peer_closed)")
    ap.add_argument("--offer-without-candidates", action="store_true",
                    help="strip a=candidate lines from the offer (a client that does not wait for gathering)")
    ap.add_argument("--include-loopback", choices=["auto", "yes", "no"], default="auto",
                    help="gather a 127.0.0.1 candidate (auto: only when the host has no other IPv4)")
    args = ap.parse_args()
    args.url = args.url.rstrip("/")
    if args.seconds <= args.skip_s or not (0 < args.tone_hz < SAMPLE_RATE / 2):
        ap.error("need --seconds > --skip-s and 0 < --tone-hz < 24000")
    if args.include_loopback == "yes" or (
            args.include_loopback == "auto"
            and not any(a != "127.0.0.1" for a in aioice.ice.get_host_addresses(True, False))):
        allow_loopback_candidates()

    result = {"connected": False, "time_to_connected_ms": None, "frames_received": 0,
              "dominant_hz": None, "tone_snr_db": None}
    budget = args.connect_timeout_s + args.seconds + 40
    try:
        asyncio.run(asyncio.wait_for(run(args, result), budget))
    except asyncio.TimeoutError:
        result.setdefault("error", f"watchdog: the whole run exceeded {budget:.0f} s")
    except Exception as e:  # report, never a traceback without the JSON
        result.setdefault("error", f"{type(e).__name__}: {e}")

    ok = result["connected"]
    if args.expect_echo:
        hz = result.get("dominant_hz")
        result["echo_ok"] = bool(
            hz is not None and abs(hz - args.tone_hz) <= 0.03 * args.tone_hz
            and (result.get("tone_snr_db") or -1e9) >= args.min_snr_db)
        ok = ok and result["echo_ok"]
    if args.expect_frames_after_s is not None:
        ok = ok and result.get("frames_after_s", 0) >= 50  # 1 s of 20 ms frames
    if args.hang_up_first:
        session = result.get("session") or {}
        result["delete_after_close_ok"] = (result.get("delete_status") == 200 and session.get("state") == "ended"
                                           and session.get("end_reason") == "peer_closed")
        ok = ok and result["delete_after_close_ok"]
    result["passed"] = bool(ok)
    print(json.dumps(result, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
