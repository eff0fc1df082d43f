#!/usr/bin/python3
"""mock_transceiver.py — a stand-in for rtcedge-transceiver's HTTP API, answering with aiortc.

Serves the same signaling surface as the C++ transceiver (WHIP-like, RFC 9725 as the model)
so the demo page, browser_e2e.mjs and aiortc_client.py can be developed and proven before
the real binary runs:

  GET    /                    transceiver/web/index.html, verbatim
  POST   /v1/sessions         SDP offer -> 201 + SDP answer + Location: /v1/sessions/{id}
  GET    /v1/sessions/{id}    JSON session state and stats
  DELETE /v1/sessions/{id}    204
  GET    /metrics             Prometheus text: rtcedge_transceiver_sessions_active, ..._created_total

The "backend" is an echo loopback: the received audio track is sent straight back. aiortc is
a full ICE agent, not ICE-lite, and it does not gather 127.0.0.1 by default (see
--include-loopback). Run with /usr/bin/python3 (Debian python3-aiortc 1.4).
"""

import argparse
import asyncio
import collections
import json
import logging
import os
import secrets
import signal
import socket
import sys
import time

from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import AudioStreamTrack
from aiortc.contrib.media import MediaBlackhole, MediaRelay

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "support", "py"))
from rtcetest.aio import allow_loopback_candidates, host_has_non_loopback_ipv4  # noqa: E402
DEFAULT_PAGE = os.path.join(REPO_ROOT, "transceiver", "web", "index.html")
MAX_BODY_BYTES = 64 * 1024
SESSION_PATH_PREFIX = "/v1/sessions"
ENDED_SESSION_LINGER_S = 30.0

log = logging.getLogger("mock-transceiver")


class Session:
    def __init__(self, session_id, pc, path_kind, backend_kind):
        self.id = session_id
        self.backend_kind = backend_kind
        self.pc = pc
        self.path_kind = path_kind
        self.created = time.monotonic()
        self.connected_at = None
        self.ended_at = None
        self.events = collections.deque(maxlen=50)
        self.event_seq = 0
        self.sink = None

    def add_event(self, event_type, **detail):
        self.event_seq += 1
        event = {"seq": self.event_seq, "t_ms": round((time.monotonic() - self.created) * 1000), "type": event_type}
        event.update(detail)
        self.events.append(event)
        log.info("session %s event %s", self.id, event)

    def state(self):
        if self.ended_at is not None:
            return "ended"
        pc_state = self.pc.connectionState
        if pc_state == "connected":
            return "connected"
        if pc_state in ("failed", "closed"):
            return "ended"
        if pc_state == "connecting" or self.pc.iceConnectionState == "checking":
            return "connecting"
        return "new"

    def client_address(self):
        # aiortc exposes no selected-pair API; read aioice's nominated pair when present.
        try:
            for transceiver in self.pc.getTransceivers():
                ice = transceiver.receiver.transport.transport
                pair = ice._connection._nominated.get(1)
                if pair is not None:
                    host, port = pair.remote_addr[0], pair.remote_addr[1]
                    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        except Exception:
            pass
        return None

    async def to_json(self):
        stats = {}
        try:
            report = await asyncio.wait_for(self.pc.getStats(), timeout=1.0)
            stats = dict(report)
        except Exception:
            pass
        inbound = next((s for s in stats.values() if s.type == "inbound-rtp"), None)
        outbound = next((s for s in stats.values() if s.type == "outbound-rtp"), None)
        remote_inbound = next((s for s in stats.values() if s.type == "remote-inbound-rtp"), None)
        transport = next((s for s in stats.values() if s.type == "transport"), None)
        packets_received = inbound.packetsReceived if inbound else 0
        packets_lost = max(0, inbound.packetsLost) if inbound else 0
        expected = packets_received + packets_lost
        dtls_state = "new"
        ice_state = self.pc.iceConnectionState
        for transceiver in self.pc.getTransceivers():
            dtls_state = transceiver.receiver.transport.state
            break
        return {
            "id": self.id,
            "state": self.state(),
            "ice_state": ice_state,
            "dtls_state": dtls_state,
            "path": self.path_kind,
            "client_address": self.client_address(),
            "codec": "opus/48000/2",
            "rtt_ms": round(remote_inbound.roundTripTime * 1000, 2) if remote_inbound else None,
            "jitter_ms": round(inbound.jitter / 48.0, 2) if inbound else 0,
            "loss": round(packets_lost / expected, 4) if expected else 0,
            "packets_received": packets_received,
            "packets_sent": outbound.packetsSent if outbound else 0,
            "bytes_received": transport.bytesReceived if transport else 0,
            "bytes_sent": transport.bytesSent if transport else 0,
            "time_to_connected_ms": (
                round((self.connected_at - self.created) * 1000) if self.connected_at else None
            ),
            "backend": {"kind": self.backend_kind, "state": "running" if self.state() == "connected" else "idle"},
            "events": list(self.events),
        }


class MockTransceiver:
    def __init__(self, args):
        self.args = args
        self.sessions = {}
        self.sessions_created_total = 0
        self.sessions_rejected_total = 0
        self.relay = MediaRelay()

    def active_sessions(self):
        return sum(1 for s in self.sessions.values() if s.state() != "ended")

    # ------------------------------------------------------------------ HTTP plumbing
    async def handle_connection(self, reader, writer):
        try:
            while True:
                request = await asyncio.wait_for(self.read_request(reader), timeout=30)
                if request is None:
                    break
                method, target, headers, body = request
                try:
                    status, resp_headers, resp_body = await self.route(method, target, headers, body)
                except Exception as e:  # a mock bug must show as a 500, not as a dropped connection
                    log.exception("handler failed")
                    status, resp_headers, resp_body = 500, {"Content-Type": "text/plain"}, f"{e!r}\n".encode()
                keep_alive = headers.get("connection", "").lower() != "close"
                await self.write_response(writer, status, resp_headers, resp_body, keep_alive)
                if not keep_alive:
                    break
        except (asyncio.TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except ValueError as e:
            await self.write_response(writer, 400, {"Content-Type": "text/plain"}, str(e).encode(), False)
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def read_request(self, reader):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            if not e.partial:
                return None  # peer closed between requests
            raise
        except asyncio.LimitOverrunError:
            raise ValueError("header too large")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            raise ValueError("bad request line")
        headers = {}
        for line in lines[1:]:
            if not line:
                continue
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0") or 0)
        if length < 0 or length > MAX_BODY_BYTES:
            raise ValueError("body too large")
        body = await reader.readexactly(length) if length else b""
        return parts[0].upper(), parts[1], headers, body

    async def write_response(self, writer, status, headers, body, keep_alive):
        reasons = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 401: "Unauthorized",
                   404: "Not Found", 405: "Method Not Allowed", 415: "Unsupported Media Type",
                   429: "Too Many Requests", 503: "Service Unavailable", 500: "Internal Server Error"}
        lines = [f"HTTP/1.1 {status} {reasons.get(status, 'Status')}"]
        headers = dict(headers)
        headers["Content-Length"] = str(len(body))
        headers["Cache-Control"] = "no-store"
        headers["Connection"] = "keep-alive" if keep_alive else "close"
        for name, value in headers.items():
            lines.append(f"{name}: {value}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()

    # ------------------------------------------------------------------ routes
    async def route(self, method, target, headers, body):
        path = target.split("?", 1)[0]
        text = {"Content-Type": "text/plain; charset=utf-8"}
        if path in ("/", "/index.html"):
            if method != "GET":
                return 405, text, b"method not allowed\n"
            with open(self.args.page, "rb") as f:
                return 200, {"Content-Type": "text/html; charset=utf-8"}, f.read()
        if path == "/metrics" and method == "GET":
            return 200, {"Content-Type": "text/plain; version=0.0.4"}, self.metrics().encode()
        if path == SESSION_PATH_PREFIX:
            if method != "POST":
                return 405, text, b"method not allowed\n"
            return await self.create_session(headers, body)
        if path.startswith(SESSION_PATH_PREFIX + "/"):
            session = self.sessions.get(path[len(SESSION_PATH_PREFIX) + 1:])
            if session is None:
                return 404, text, b"no such session\n"
            if method == "GET":
                return 200, {"Content-Type": "application/json"}, json.dumps(await session.to_json()).encode()
            if method == "DELETE":
                await self.end_session(session, "client.hangup")
                self.sessions.pop(session.id, None)
                return 204, {}, b""
            return 405, text, b"method not allowed\n"
        return 404, text, b"not found\n"

    def authorized(self, headers):
        if not self.args.api_key:
            return True
        return headers.get("authorization", "") in (f"Bearer {k}" for k in self.args.api_key)

    async def create_session(self, headers, body):
        text = {"Content-Type": "text/plain; charset=utf-8"}
        if not self.authorized(headers):
            return 401, dict(text, **{"WWW-Authenticate": 'Bearer realm="rtcedge"'}), b"missing or bad API key\n"
        if headers.get("content-type", "").split(";")[0].strip().lower() != "application/sdp":
            return 415, text, b"Content-Type must be application/sdp\n"
        if self.active_sessions() >= self.args.max_sessions:
            self.sessions_rejected_total += 1
            return 503, dict(text, **{"Retry-After": "2"}), b"at capacity\n"
        offer_sdp = body.decode("utf-8", "replace")
        if "m=audio" not in offer_sdp:
            return 400, text, b"offer has no audio m-section\n"

        session_id = secrets.token_hex(8)
        pc = RTCPeerConnection()
        session = Session(session_id, pc, self.args.path,
                          "echo-loopback" if self.args.backend == "echo" else "mute")
        session.add_event("session.created")

        @pc.on("track")
        def on_track(track):
            session.add_event("track.received", kind=track.kind)
            if track.kind != "audio":
                return
            if self.args.backend == "mute":
                # Negative control for the audio checks: consume the input, send silence.
                session.sink = MediaBlackhole()
                session.sink.addTrack(track)
                asyncio.ensure_future(session.sink.start())
                pc.addTrack(AudioStreamTrack())
                session.add_event("backend.mute.started")
            else:
                pc.addTrack(self.relay.subscribe(track))
                session.add_event("backend.echo.started")

        @pc.on("iceconnectionstatechange")
        def on_ice():
            session.add_event("ice.state", state=pc.iceConnectionState)

        @pc.on("connectionstatechange")
        async def on_conn():
            session.add_event("connection.state", state=pc.connectionState)
            if pc.connectionState == "connected" and session.connected_at is None:
                session.connected_at = time.monotonic()
            if pc.connectionState in ("failed", "closed"):
                await self.end_session(session, f"connection.{pc.connectionState}")

        try:
            await asyncio.wait_for(pc.setRemoteDescription(RTCSessionDescription(offer_sdp, "offer")), 5)
            answer = await pc.createAnswer()
            await asyncio.wait_for(pc.setLocalDescription(answer), 10)
        except Exception as e:
            await pc.close()
            return 400, text, f"cannot negotiate: {type(e).__name__}: {e}\n".encode()
        self.sessions[session_id] = session
        self.sessions_created_total += 1
        log.info("session %s created", session_id)
        return 201, {"Content-Type": "application/sdp", "Location": f"{SESSION_PATH_PREFIX}/{session_id}"}, \
            pc.localDescription.sdp.encode()

    async def end_session(self, session, reason):
        if session.ended_at is None:
            session.ended_at = time.monotonic()
            session.add_event("session.ended", reason=reason)
        if session.sink is not None:
            await session.sink.stop()
            session.sink = None
        await session.pc.close()

    async def reap(self):
        while True:
            await asyncio.sleep(1)
            now = time.monotonic()
            for sid, s in list(self.sessions.items()):
                if s.ended_at is not None and now - s.ended_at > ENDED_SESSION_LINGER_S:
                    self.sessions.pop(sid, None)

    def metrics(self):
        return (
            "# HELP rtcedge_transceiver_sessions_active Sessions not yet ended.\n"
            "# TYPE rtcedge_transceiver_sessions_active gauge\n"
            f"rtcedge_transceiver_sessions_active {self.active_sessions()}\n"
            "# HELP rtcedge_transceiver_sessions_created_total Sessions created.\n"
            "# TYPE rtcedge_transceiver_sessions_created_total counter\n"
            f"rtcedge_transceiver_sessions_created_total {self.sessions_created_total}\n"
            "# HELP rtcedge_transceiver_sessions_rejected_total Offers refused for capacity.\n"
            "# TYPE rtcedge_transceiver_sessions_rejected_total counter\n"
            f"rtcedge_transceiver_sessions_rejected_total {self.sessions_rejected_total}\n"
        )


async def serve(args):
    mock = MockTransceiver(args)
    host, port = args.http_listen.rsplit(":", 1)
    server = await asyncio.start_server(mock.handle_connection, host, int(port),
                                        family=socket.AF_INET, reuse_address=True)
    bound = server.sockets[0].getsockname()
    # One machine-readable line so a runner using port 0 can find us.
    print(json.dumps({"listening": f"http://{bound[0]}:{bound[1]}"}), flush=True)
    reaper = asyncio.ensure_future(mock.reap())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    reaper.cancel()
    server.close()
    for s in list(mock.sessions.values()):
        await mock.end_session(s, "shutdown")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--http-listen", default="127.0.0.1:8080", help="HOST:PORT (port 0 = ephemeral)")
    ap.add_argument("--page", default=DEFAULT_PAGE, help="demo page served at /")
    ap.add_argument("--api-key", action="append", default=[], help="require Authorization: Bearer KEY")
    ap.add_argument("--max-sessions", type=int, default=16)
    ap.add_argument("--backend", choices=["echo", "mute"], default="echo",
                    help="echo the caller's audio (default) or send silence (a negative control)")
    ap.add_argument("--path", choices=["direct", "relay"], default="direct", help="value reported as path")
    ap.add_argument("--include-loopback", choices=["auto", "yes", "no"], default="auto",
                    help="gather a 127.0.0.1 host candidate (auto: only when no other IPv4 exists)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(message)s")
    if args.include_loopback == "yes" or (args.include_loopback == "auto" and not host_has_non_loopback_ipv4()):
        allow_loopback_candidates()
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
