#!/usr/bin/python3
"""The backends of bench/run_phone_bench.py, and the audio they and the scripted Twilio share:
one onset detector and one tone for every path, so the edge and the direct baseline are
measured with the same ruler.

    OnsetDetector        the first sample at or above half the tone's amplitude after at least
                         GAP_S without one: its time = the time the frame that holds it starts
                         + its offset in that frame ÷ the rate. A frame starts when it arrives
                         at the backend (inbound: audio is taken as it comes), and when the
                         provider's real-time playout starts it (outbound: playout_starts)
    onset_signal()       silence with tone bursts whose onsets fall at chosen samples
    RtcedgeBackend       an rtcedge-dialect backend (docs/backend-protocol.md): binary PCM16
                         20 ms frames at 16 kHz both ways, session.started first; keeps the
                         caller's frames for the detector and speaks timed talkspurts
    TwilioDirectBackend  the same backend speaking Twilio Media Streams itself (JSON, base64
                         μ-law at 8 kHz): what a Pipecat-style bot does without an edge

Run as a program it serves the rtcedge dialect's echo (EchoProtocol: every binary frame sent
straight back) on a loopback port and prints "listening on ws://127.0.0.1:<port>/" first; the
capacity points run it in its own process so that its CPU is counted apart from the load
generator's.

Python standard library and python3-websockets 10.4 only."""

import argparse
import array
import asyncio
import base64
import hashlib
import json
import math
import random
import sys
import time
import warnings

import websockets  # python3-websockets (Debian 12: 10.4)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # audioop: deprecated from 3.11, fine on 3.11
    import audioop

EDGE_RATE = 16000          # what the transceiver's backend hears and speaks (audio.sample_rate default)
PHONE_RATE = 8000          # Twilio Media Streams: μ-law at 8 kHz
FRAME_S = 0.02
TONE_HZ = 500
AMPLITUDE = 12000          # the detector's threshold is half of it
GAP_S = 0.06               # silence before a loud sample that makes it an onset
TAIL_S = 0.01              # silence at the end of every talkspurt, at least
# An onset lies in the first 15 ms of its frame, so that the edge's resampling (4 ms of filter
# delay) keeps it in the frame of the same number: its time then depends on that frame's send
# and arrival only, not on the spacing of two sends (a sender that is late with one frame and
# on time with the next would otherwise make an onset look early).
ONSET_SPAN_S = 0.015


def frame_samples(rate):
    return int(rate * FRAME_S)


# --------------------------------------------------------------------------- audio

def onset_signal(rate, onsets, tone_s, total_samples):
    """PCM16 at `rate`: silence, and a cosine burst of `tone_s` at each sample index of `onsets`
    (cosine: the onset's first sample is already at full amplitude, a sharp edge)."""
    out = array.array("h", bytes(2 * total_samples))
    tone_len = int(round(tone_s * rate))
    w = 2 * math.pi * TONE_HZ / rate
    for start in onsets:
        for i in range(min(tone_len, total_samples - start)):
            out[start + i] = int(round(AMPLITUDE * math.cos(w * i)))
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


def pcm_frames(pcm, rate):
    """PCM16 bytes cut into 20 ms frames (the last one padded with silence)."""
    step = frame_samples(rate) * 2
    frames = [pcm[i:i + step] for i in range(0, len(pcm), step)]
    if frames and len(frames[-1]) < step:
        frames[-1] += b"\0" * (step - len(frames[-1]))
    return frames


def ulaw(pcm):
    return audioop.lin2ulaw(pcm, 2)


def from_ulaw(data):
    return audioop.ulaw2lin(data, 2)


class OnsetDetector:
    """Streaming onset detection over frames in order. feed(pcm, rate, starts_at) returns the
    onset times found in the frame (starts_at: when the frame's first sample counts as heard);
    `onsets` keeps them all."""

    def __init__(self, threshold=AMPLITUDE // 2, gap_s=GAP_S):
        self.threshold = threshold
        self.gap_s = gap_s
        self.last_loud = None
        self.onsets = []
        self.frames = 0
        self.samples = 0

    def feed(self, pcm, rate, starts_at):
        self.frames += 1
        found = []
        view = memoryview(pcm).cast("h")
        self.samples += len(view)
        if audioop.max(pcm, 2) < self.threshold:
            return found
        threshold = self.threshold
        for k, x in enumerate(view):
            if x >= threshold or -x >= threshold:
                t = starts_at + k / rate
                if self.last_loud is None or t - self.last_loud > self.gap_s:
                    found.append(t)
                self.last_loud = t
        self.onsets.extend(found)
        return found


def playout_starts(arrivals, frame_s=FRAME_S):
    """When a real-time player (Twilio's playout buffer, as twilio_provider.TwilioStream models
    it) starts each 20 ms frame: at its arrival, or when the frame before it has played if that
    is later; an underrun restarts the clock at the next arrival. Two frames sent together are
    heard one after the other, not at once."""
    out = []
    play_end = None
    for at in arrivals:
        start = at if play_end is None or play_end < at else play_end
        out.append(start)
        play_end = start + frame_s
    return out


def match_onsets(sent, detected, window_s):
    """Latency (s) of each sent onset: the first detection in [sent − 2 ms, sent + window_s)
    (None: lost). Every detection is used once."""
    out = []
    detected = sorted(detected)
    j = 0
    for s in sorted(sent):
        while j < len(detected) and detected[j] < s - 0.002:
            j += 1
        if j < len(detected) and detected[j] < s + window_s:
            out.append(detected[j] - s)
            j += 1
        else:
            out.append(None)
    return out


# --------------------------------------------------------------------------- one call's script

class CallScript:
    """What one call of the latency run does and what it measured, shared by the provider side
    (run_phone_bench.py) and the backend side. Inbound: the caller's signal (8 kHz, continuous
    media) with `onsets` tone bursts, each onset at a different sample of its frame (within
    ONSET_SPAN_S). Outbound: `onsets` talkspurts of tone_s, each starting at a random moment (so
    its phase against the edge's 20 ms playout clock is random) and at a random sample of its
    first frame (within ONSET_SPAN_S)."""

    def __init__(self, name, onsets, cycle_s, tone_s, lead_s, seed):
        self.name = name
        self.onsets = onsets
        self.cycle_s = cycle_s
        self.tone_s = tone_s
        self.lead_s = lead_s
        rng = random.Random(seed)
        n8 = frame_samples(PHONE_RATE)
        lead_frames, cycle_frames = round(lead_s / FRAME_S), max(1, round(cycle_s / FRAME_S))
        # Onset i: frame lead + i·cycle, at sample 53·i mod 120 of it (the first ONSET_SPAN_S).
        span8 = int(ONSET_SPAN_S * PHONE_RATE)
        self.in_positions = [(lead_frames + i * cycle_frames) * n8 + (i * 53) % span8 for i in range(onsets)]
        total = (lead_frames + onsets * cycle_frames + 5) * n8
        self.in_frames = [ulaw(f) for f in pcm_frames(onset_signal(PHONE_RATE, self.in_positions, tone_s, total),
                                                      PHONE_RATE)]
        self.out_gaps = [rng.uniform(cycle_s - tone_s - 0.05, cycle_s - tone_s + 0.05) for _ in range(onsets)]
        self.out_offsets = [rng.randrange(0, int(ONSET_SPAN_S * EDGE_RATE)) / EDGE_RATE for _ in range(onsets)]
        # Filled as the call runs (time.monotonic()); the detectors run afterwards, over what
        # was stored with its arrival time, so that nothing but stamping and storing competes
        # with the timestamps while the call runs.
        self.in_sent_frames = []    # send time of each of in_frames, by the provider
        self.in_received = []       # (arrival time, PCM16, rate) at the backend
        self.out_sent = []          # the backend's onsets as sent
        self.out_received = []      # (arrival time, PCM16 8 kHz) at the provider
        self.backend_ready = asyncio.Event()
        self.go = asyncio.Event()
        self.spoken = asyncio.Event()
        self.backend_done = asyncio.Event()
        self.backend_frames_in = 0

    def in_sent_onsets(self):
        """The caller's onsets as sent: the send time of the frame holding each + its offset."""
        n8 = frame_samples(PHONE_RATE)
        return [self.in_sent_frames[p // n8] + (p % n8) / PHONE_RATE for p in self.in_positions
                if p // n8 < len(self.in_sent_frames)]

    def latencies(self, window_s):
        """{"inbound": [s or None], "outbound": [s or None]} with the one detector on both.
        Inbound, a frame's first sample counts from its arrival (a backend takes audio as it
        comes). Outbound, from when the provider starts playing it (playout_starts)."""
        inbound, outbound = OnsetDetector(), OnsetDetector()
        for at, pcm, rate in self.in_received:
            inbound.feed(pcm, rate, at)
        for start, (_, pcm) in zip(playout_starts([at for at, _ in self.out_received]), self.out_received):
            outbound.feed(pcm, PHONE_RATE, start)
        return {"inbound": match_onsets(self.in_sent_onsets(), inbound.onsets, window_s),
                "outbound": match_onsets(self.out_sent, outbound.onsets, window_s)}

    def talkspurt(self, rate, offset_s):
        """The frames of one talkspurt at `rate`: offset_s of silence, tone_s of tone, then at
        least TAIL_S of silence. The silent tail matters at the edge: its 16→8 kHz resampler
        keeps the last 4 ms of a talkspurt in its filter and plays them at the start of the
        next one, so a tone that ran to the last sample would put 4 ms of it before the next
        onset (docs/benchmarks.md, "Phone calls")."""
        k = int(round(offset_s * rate))
        n = k + int(round((self.tone_s + TAIL_S) * rate))
        return pcm_frames(onset_signal(rate, [k], self.tone_s, n), rate), k / rate

    async def speak(self, send_frame, rate):
        """The backend's talkspurts at real-time pace: send_frame(pcm) for each 20 ms frame;
        records when each onset went out (the frame's send time + the onset's offset in it)."""
        await asyncio.sleep(self.lead_s)
        for m in range(self.onsets):
            frames, onset_in_frame = self.talkspurt(rate, self.out_offsets[m])
            t0 = time.monotonic()
            for i, frame in enumerate(frames):
                delay = t0 + i * FRAME_S - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)  # real-time pace, as a TTS stream is sent
                sent_at = time.monotonic()
                await send_frame(frame)
                if i == 0:
                    self.out_sent.append(sent_at + onset_in_frame)
            await asyncio.sleep(self.out_gaps[m])  # random: a new phase against the playout clock
        self.spoken.set()


# --------------------------------------------------------------------------- rtcedge dialect

class RtcedgeBackend:
    """An rtcedge-dialect backend on 127.0.0.1 (python3-websockets). Each connection is bound
    to the CallScript registered under its twilio.call_sid (session.started's metadata); the
    caller's frames are kept with their arrival times, and once the script's `go` is set the
    backend speaks its talkspurts."""

    def __init__(self):
        self.scripts = {}        # call_sid -> CallScript
        self.server = None
        self.port = None

    async def start(self, port=0):
        self.server = await websockets.serve(self._session, "127.0.0.1", port, max_size=1 << 20,
                                             compression=None, ping_interval=None)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    @property
    def url(self):
        return "ws://127.0.0.1:%d/" % self.port

    async def stop(self):
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _session(self, ws, _path=None):
        try:
            await self._latency_session(ws)
        except websockets.ConnectionClosed:
            pass

    async def _latency_session(self, ws):
        script = None
        speaker = None
        try:
            async for message in ws:
                at = time.monotonic()
                if isinstance(message, bytes):
                    if script is not None:
                        script.backend_frames_in += 1
                        script.in_received.append((at, message, EDGE_RATE))
                    continue
                event = json.loads(message)
                if event.get("type") == "session.started" and script is None:
                    if event.get("sample_rate") != EDGE_RATE or event.get("encoding") != "pcm_s16le":
                        raise RuntimeError("the bench expects pcm_s16le at %d Hz: %s" % (EDGE_RATE, event))
                    script = self.scripts.get(event.get("metadata", {}).get("twilio.call_sid"))
                    if script is None:
                        raise RuntimeError("session.started for an unknown call: %s" % event.get("metadata"))
                    script.backend_ready.set()
                    speaker = asyncio.create_task(self._speak_when_told(script, ws))
        finally:
            if speaker is not None and not speaker.done():
                speaker.cancel()
            if script is not None:
                script.backend_done.set()

    @staticmethod
    async def _speak_when_told(script, ws):
        await script.go.wait()
        try:
            await script.speak(ws.send, EDGE_RATE)
        except websockets.ConnectionClosed:
            pass


# --------------------------------------------------------------------------- Twilio Media Streams, direct

class TwilioDirectBackend:
    """The same backend reached directly: it serves Twilio's Media Streams WebSocket itself
    (connected, start with the CallSid, media JSON with base64 μ-law at 8 kHz, stop) and
    answers with media messages {"event":"media","streamSid":…,"media":{"payload":…}}, the
    shape the edge sends too. Bound to the CallScript registered under the start's callSid."""

    def __init__(self):
        self.scripts = {}
        self.server = None
        self.port = None

    async def start(self):
        self.server = await websockets.serve(self._session, "127.0.0.1", 0, max_size=1 << 20,
                                             compression=None, ping_interval=None)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    def stream_url(self, call_sid):
        return "ws://127.0.0.1:%d/twilio/%s" % (self.port, call_sid)

    async def stop(self):
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _session(self, ws, _path=None):
        script = None
        speaker = None
        try:
            async for message in ws:
                at = time.monotonic()
                event = json.loads(message)
                kind = event.get("event")
                if kind == "media" and script is not None:
                    script.backend_frames_in += 1
                    script.in_received.append((at, from_ulaw(base64.b64decode(event["media"]["payload"])),
                                               PHONE_RATE))
                elif kind == "start" and script is None:
                    start = event["start"]
                    script = self.scripts.get(start.get("callSid"))
                    if script is None:
                        raise RuntimeError("start for an unknown call: %s" % start.get("callSid"))
                    script.backend_ready.set()
                    sid = start.get("streamSid")
                    speaker = asyncio.create_task(self._speak_when_told(script, ws, sid))
                elif kind == "stop":
                    break
        except websockets.ConnectionClosed:
            pass
        finally:
            if speaker is not None and not speaker.done():
                speaker.cancel()
            if script is not None:
                script.backend_done.set()

    @staticmethod
    async def _speak_when_told(script, ws, stream_sid):
        prefix = '{"event":"media","streamSid":%s,"media":{"payload":"' % json.dumps(stream_sid)

        async def send_frame(pcm8k):
            await ws.send(prefix + base64.b64encode(ulaw(pcm8k)).decode() + '"}}')

        await script.go.wait()
        try:
            await script.speak(send_frame, PHONE_RATE)
        except websockets.ConnectionClosed:
            pass


# --------------------------------------------------------------------------- the echo process

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class EchoProtocol(asyncio.Protocol):
    """The rtcedge dialect's echo for the capacity points: every binary message goes straight
    back, text (session.started, session.quality, session.ended) is read and ignored. RFC 6455
    by hand on asyncio's Protocol — the upgrade, masked client frames, fragments, ping → pong,
    close → close — because python3-websockets costs ~0.2 ms of CPU per echoed frame and this
    ~0.1 ms: on the load generator's CPU that is the difference between 50 and 100 calls."""

    def __init__(self):
        self.transport = None
        self.buf = bytearray()
        self.upgraded = False
        self.fragments = None     # (opcode, [payloads]) of a fragmented message

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.buf += data
        if not self.upgraded:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > 16384:
                    self.transport.close()
                return
            head = bytes(self.buf[:end]).decode("latin-1")
            del self.buf[:end + 4]
            key = None
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "sec-websocket-key":
                    key = value.strip()
            if key is None:
                self.transport.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                self.transport.close()
                return
            accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
            self.transport.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                  "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n" % accept).encode())
            self.upgraded = True
        while self._one_frame():
            pass

    def _one_frame(self):
        buf = self.buf
        if len(buf) < 2:
            return False
        fin, opcode = buf[0] & 0x80, buf[0] & 0x0F
        masked, n = buf[1] & 0x80, buf[1] & 0x7F
        at = 2
        if n == 126:
            if len(buf) < 4:
                return False
            n, at = int.from_bytes(buf[2:4], "big"), 4
        elif n == 127:
            if len(buf) < 10:
                return False
            n, at = int.from_bytes(buf[2:10], "big"), 10
        if len(buf) < at + (4 if masked else 0) + n:
            return False
        if masked:
            mask = bytes(buf[at:at + 4])
            at += 4
            raw = bytes(buf[at:at + n])
            payload = (int.from_bytes(raw, "little") ^ int.from_bytes((mask * (n // 4 + 1))[:n], "little")
                       ).to_bytes(n, "little")
        else:
            payload = bytes(buf[at:at + n])
        del buf[:at + n]
        if opcode >= 8:                                   # control frames: never fragmented
            if opcode == 8:                               # close: answer with the same code, then close
                self._send(8, payload[:2])
                self.transport.close()
                return False
            if opcode == 9:                               # ping
                self._send(10, payload)
            return True
        if opcode != 0:                                   # a new message
            self.fragments = (opcode, [payload])
        elif self.fragments is not None:                  # a continuation
            self.fragments[1].append(payload)
        if fin and self.fragments is not None:
            kind, parts = self.fragments
            self.fragments = None
            if kind == 2:                                 # binary: audio, echoed
                self._send(2, b"".join(parts))
        return True

    def _send(self, opcode, payload):
        n = len(payload)
        if n < 126:
            head = bytes((0x80 | opcode, n))
        elif n < 65536:
            head = bytes((0x80 | opcode, 126)) + n.to_bytes(2, "big")
        else:
            head = bytes((0x80 | opcode, 127)) + n.to_bytes(8, "big")
        self.transport.write(head + payload)


async def serve_echo():
    loop = asyncio.get_running_loop()
    server = await loop.create_server(EchoProtocol, "127.0.0.1", 0)
    print("listening on ws://127.0.0.1:%d/" % server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--echo", action="store_true", help="serve the rtcedge dialect's echo (the default)")
    ap.parse_args()
    try:
        asyncio.run(serve_echo())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
