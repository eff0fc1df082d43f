#!/usr/bin/python3
"""mock_realtime.py — a developer-only stand-in for the transceiver's Realtime surface, answering with aiortc.

Proves the realtime end-to-end pages and realtime_e2e.mjs's checks before the C++ server has
the endpoints (`run_realtime_e2e.py --mock`); never used by a CTest entry, which must run the
real binaries. What it serves (the shapes of /work/shared facts and issue 11):

  POST /v1/realtime/client_secrets   server key -> {"value":"ek_...","expires_at","session"}
  POST /v1/realtime/calls            raw SDP or multipart sdp+session, Bearer ek_ -> 201 + Location rtc_<id>
  POST /v1/realtime/calls/{id}/hangup -> 200
  OPTIONS *                          CORS: Authorization, Content-Type, X-OpenAI-Agents-SDK; exposes Location
  GET  /metrics                      rtcedge_transceiver_sessions_active

On `oai-events`: session.created on open, session.updated per session.update, a text
response to conversation.item.create + response.create, and a parrot: an energy VAD on the
received audio emits speech_started/speech_stopped and replays the utterance as a response;
output_audio_buffer.clear / response.cancel stop the replay and produce
output_audio_buffer.cleared. Run with /usr/bin/python3 (Debian python3-aiortc).
"""

import argparse
import asyncio
import email.parser
import email.policy
from fractions import Fraction
import json
import logging
import os
import secrets
import signal
import socket
import sys
import time

import av
import numpy
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from mock_transceiver import MockTransceiver  # noqa: E402
from rtcetest.aio import allow_loopback_candidates, host_has_non_loopback_ipv4  # noqa: E402

log = logging.getLogger("mock-realtime")
CORS = {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "POST, GET, OPTIONS",
        "Access-Control-Allow-Headers": "Authorization, Content-Type, X-OpenAI-Agents-SDK",
        "Access-Control-Expose-Headers": "Location"}
JSON = {"Content-Type": "application/json", **CORS}
SPEECH_DBFS, HANGOVER_FRAMES = -40.0, 15  # 300 ms of quiet ends an utterance
FAULT = None  # --fault: a negative control that realtime_e2e.mjs must catch


def err(status, message, code):
    body = {"error": {"message": message, "type": "invalid_request_error", "code": code, "param": None}}
    return status, JSON, json.dumps(body).encode()


class ParrotTrack(MediaStreamTrack):
    """Paced 20 ms frames at 48 kHz mono: the queued replay, else silence."""

    kind = "audio"

    def __init__(self):
        super().__init__()
        self.queue = []
        self.on_drained = None
        self._start = None
        self._ts = 0

    async def recv(self):
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.time()
        else:
            self._ts += 960
            wait = self._start + self._ts / 48000 - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
        pcm = self.queue.pop(0) if self.queue else numpy.zeros((1, 960), dtype=numpy.int16)
        frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
        frame.sample_rate, frame.pts, frame.time_base = 48000, self._ts, Fraction(1, 48000)
        if not self.queue and self.on_drained:
            drained, self.on_drained = self.on_drained, None
            drained()
        return frame


class Call:
    def __init__(self, call_id, pc, session_cfg):
        self.id, self.pc, self.cfg = call_id, pc, session_cfg
        self.dc = None
        self.out = ParrotTrack()
        self.response_id = None
        self.ended = False

    def send(self, ev):
        ev.setdefault("event_id", "event_" + secrets.token_hex(6))
        if self.dc is not None and self.dc.readyState == "open":
            self.dc.send(json.dumps(ev))

    def session_obj(self):
        return {"type": "realtime", "object": "realtime.session", "id": "sess_" + self.id, "model": "rtcedge-mock",
                "output_modalities": ["audio"], "instructions": self.cfg.get("instructions", ""), "tracing": None,
                "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}},
                          "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "mock", "speed": 1}}}

    def on_event(self, ev):
        t = ev.get("type")
        if t == "session.update":
            self.cfg.update({k: v for k, v in (ev.get("session") or {}).items() if k == "instructions"})
            self.send({"type": "session.updated", "session": self.session_obj()})
        elif t == "conversation.item.create":
            self.last_text = " ".join(c.get("text", "") for c in (ev.get("item") or {}).get("content", []))
            self.send({"type": "conversation.item.created", "item": ev.get("item")})
        elif t == "response.create":
            rid = "resp_" + secrets.token_hex(6)
            text = getattr(self, "last_text", "")
            self.send({"type": "response.created", "response": {"id": rid, "status": "in_progress"}})
            self.send({"type": "response.output_text.done", "response_id": rid, "text": text})
            self.send({"type": "response.done", "response": {"id": rid, "status": "completed",
                                                             "output": [{"type": "message", "content": [
                                                                 {"type": "output_text", "text": text}]}]}})
        elif t in ("output_audio_buffer.clear", "response.cancel"):
            if self.out.queue or t == "output_audio_buffer.clear":
                if FAULT != "ignore-clear":
                    self.out.queue.clear()
                if self.response_id:
                    rid, self.response_id = self.response_id, None
                    self.send({"type": "output_audio_buffer.cleared", "response_id": rid})
                    self.send({"type": "response.done", "response": {"id": rid, "status": "cancelled"}})
        else:
            self.send({"type": "error", "error": {"type": "invalid_request_error", "code": "unknown_event",
                                                  "message": f"mock: {t} not handled", "event_id": ev.get("event_id")}})

    def start_replay(self, frames):
        rid = self.response_id = "resp_" + secrets.token_hex(6)
        self.send({"type": "response.created", "response": {"id": rid, "status": "in_progress"}})
        self.send({"type": "output_audio_buffer.started", "response_id": rid})

        def drained():
            if self.response_id == rid:
                self.response_id = None
                self.send({"type": "output_audio_buffer.stopped", "response_id": rid})
                self.send({"type": "response.done", "response": {"id": rid, "status": "completed"}})
        self.out.on_drained = drained
        self.out.queue = [f * 0 for f in frames] if FAULT == "mute" else list(frames)

    async def listen(self, track):
        """The parrot's VAD: frames above SPEECH_DBFS are speech; HANGOVER_FRAMES of quiet end it."""
        t0, speech, quiet, item = time.monotonic(), [], 0, None
        while not self.ended:
            try:
                frame = await track.recv()
            except Exception:
                return
            pcm = frame.to_ndarray().reshape(-1, len(frame.layout.channels))[:, 0].astype(numpy.int16)
            level = 10 * numpy.log10(numpy.mean((pcm / 32768.0) ** 2) + 1e-12)
            now_ms = int((time.monotonic() - t0) * 1000)
            if item is None and level > SPEECH_DBFS and not self.out.queue:
                item, speech, quiet = "item_" + secrets.token_hex(6), [], 0
                self.send({"type": "input_audio_buffer.speech_started", "audio_start_ms": now_ms, "item_id": item})
            if item is not None:
                speech.append(pcm.reshape(1, -1))
                quiet = quiet + 1 if level <= SPEECH_DBFS else 0
                if quiet >= HANGOVER_FRAMES:
                    self.send({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": now_ms, "item_id": item})
                    self.send({"type": "input_audio_buffer.committed", "item_id": item})
                    item = None
                    self.start_replay(speech[:-HANGOVER_FRAMES])


class MockRealtime(MockTransceiver):
    def __init__(self, args):
        super().__init__(args)
        self.calls = {}

    def active_sessions(self):
        return sum(1 for c in self.calls.values() if not c.ended)

    async def route(self, method, target, headers, body):
        path = target.split("?", 1)[0]
        if method == "OPTIONS":
            return 204, CORS, b""
        if path == "/metrics":
            return await super().route(method, target, headers, body)
        bearer = headers.get("authorization", "").removeprefix("Bearer ")
        if path == "/v1/realtime/client_secrets" and method == "POST":
            if bearer != self.args.server_key:
                return err(401, "server API key required", "invalid_api_key")
            req = json.loads(body or b"{}")
            value = "ek_" + secrets.token_hex(12)
            self.keys[value] = req.get("session") or {}
            return 200, JSON, json.dumps({"value": value, "expires_at": int(time.time()) + 60,
                                          "session": self.keys[value]}).encode()
        if path == "/v1/realtime/calls" and method == "POST":
            if bearer not in self.keys:
                return err(401, "ephemeral key required", "invalid_api_key")
            return await self.create_call(headers, body, dict(self.keys[bearer]))
        parts = path.split("/")
        if len(parts) == 6 and parts[:4] == ["", "v1", "realtime", "calls"] and parts[5] == "hangup":
            call = self.calls.get(parts[4])
            if call is None:
                return err(404, "no such call", "call_not_found")
            call.ended = True
            await call.pc.close()
            return 200, JSON, b"{}"
        return err(404, f"mock: no route {method} {path}", "not_found")

    async def create_call(self, headers, body, cfg):
        ctype = headers.get("content-type", "")
        if ctype.startswith("multipart/form-data"):
            msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
            fields = {p.get_param("name", header="content-disposition"): p.get_payload(decode=True)
                      for p in msg.iter_parts()}
            if "sdp" not in fields:
                return err(400, "multipart without an sdp part", "missing_sdp")
            offer = fields["sdp"].decode()
            if "session" in fields:
                cfg.update(json.loads(fields["session"]))
        elif ctype.startswith("application/sdp"):
            offer = body.decode()
        else:
            return err(415, "application/sdp or multipart/form-data", "unsupported_media_type")
        call = Call("rtc_" + secrets.token_hex(8), RTCPeerConnection(), cfg)
        pc = call.pc

        @pc.on("datachannel")
        def on_dc(dc):
            call.dc = dc
            call.send({"type": "session.created", "session": call.session_obj()})
            dc.on("message", lambda m: call.on_event(json.loads(m)) if isinstance(m, str) else None)

            @dc.on("close")
            def on_close():  # the client hung up (aiortc sees no DTLS close_notify event)
                call.ended = True

        @pc.on("track")
        def on_track(track):
            if track.kind == "audio":
                asyncio.ensure_future(call.listen(track))

        @pc.on("connectionstatechange")
        async def on_conn():
            if pc.connectionState in ("failed", "closed"):
                call.ended = True

        await pc.setRemoteDescription(RTCSessionDescription(offer, "offer"))
        pc.addTrack(call.out)
        answer = await pc.createAnswer()
        await pc.setLocalDescription(answer)
        self.calls[call.id] = call
        return 201, {"Content-Type": "application/sdp", "Location": f"/v1/realtime/calls/{call.id}", **CORS}, \
            pc.localDescription.sdp.encode()


async def serve(args):
    mock = MockRealtime(args)
    mock.keys = {}
    server = await asyncio.start_server(mock.handle_connection, "127.0.0.1", 0, family=socket.AF_INET)
    bound = server.sockets[0].getsockname()
    print(json.dumps({"listening": f"http://{bound[0]}:{bound[1]}"}), flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    for c in mock.calls.values():
        await c.pc.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server-key", required=True)
    ap.add_argument("--fault", choices=["ignore-clear", "mute"],
                    help="negative controls: keep playing after clear (cleared is still sent), or replay silence")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    global FAULT
    FAULT = args.fault
    args.api_key, args.max_sessions, args.path, args.backend, args.page = [], 16, "direct", "echo", None
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(message)s")
    if not host_has_non_loopback_ipv4():
        allow_loopback_candidates()
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
