#!/usr/bin/python3
"""datachannel_bench.py — what the oai-events data channel costs (issue 11 §5), in one run.

1. Event round trip client -> backend -> client, p50/p99 over --events sequential events:
   - "data channel": an aiortc Realtime call (POST /v1/realtime/calls) to a real
     rtcedge-transceiver whose backend is a WebSocket server in this process; the client
     sends conversation.item.create on oai-events, the transceiver forwards it to the backend,
     the backend answers conversation.item.created, which comes back on the channel;
   - "backend WebSocket alone" (the floor): the same event to the same backend over a direct
     WebSocket from the same process.
2. Cost per session: --sessions aiortc calls held for --hold-s, audio-only (/v1/sessions),
   then the same number with the data channel open and one event a second each way; the
   transceiver's resident memory and CPU time (from /proc) per session, against a baseline
   with no session.

Prints a Markdown table with the machine described (docs/benchmarks.md records a run).
  bench/datachannel_bench.py --transceiver build/bin/rtcedge-transceiver [--events 300] [--sessions 6]
"""

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support", "py"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "transceiver", "interop"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "transceiver", "e2e"))
import aiortc_client  # noqa: E402
import websockets  # noqa: E402
from aiortc import RTCPeerConnection, RTCSessionDescription  # noqa: E402
from run_browser_e2e import Stack, free_port, wait_http_ready  # noqa: E402
from rtcetest.aio import drain_remote_tracks  # noqa: E402


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(p / 100.0 * (len(ordered) - 1)))))]


class BenchBackend:
    """A backend speaking rtcedge's protocol: audio frames echoed, each conversation.item.create
    answered with conversation.item.created carrying the same item id."""

    def __init__(self):
        self.port = free_port()

    async def handle(self, ws, path=None):
        async for message in ws:
            if isinstance(message, bytes):
                await ws.send(message)
                continue
            event = json.loads(message)
            if event.get("type") == "conversation.item.create":
                item = event.get("item", {})
                await ws.send(json.dumps({"type": "conversation.item.created", "item": {"id": item.get("id")}}))
            elif event.get("type") == "session.ended":
                return

    async def start(self):
        self.server = await websockets.serve(self.handle, "127.0.0.1", self.port, max_size=1 << 20)


def item_event(n):
    return json.dumps({"type": "conversation.item.create",
                       "item": {"id": f"bench_{n}", "type": "message", "role": "user",
                                "content": [{"type": "input_text", "text": "ping"}]}})


class Call:
    """One aiortc call; with `realtime`, a Realtime call with oai-events open."""

    def __init__(self, url, realtime):
        self.url, self.realtime = url, realtime
        self.pc = RTCPeerConnection()
        self.replies = {}
        self.arrived = asyncio.Event()
        self.opened = asyncio.Event()
        self.channel = None
        self.location = None

    async def open(self, timeout_s=20):
        pc = self.pc

        drain_remote_tracks(pc)

        if self.realtime:
            self.channel = pc.createDataChannel("oai-events")
            self.channel.on("open", self.opened.set)
            self.channel.on("message", self.on_message)
        pc.addTransceiver(aiortc_client.ToneTrack(440, -20), direction="sendrecv")
        await asyncio.wait_for(pc.setLocalDescription(await pc.createOffer()), 10)
        path = "/v1/realtime/calls" if self.realtime else "/v1/sessions"
        status, headers, body = await aiortc_client.http("POST", self.url + path, "", body=pc.localDescription.sdp.encode(),
                                                         content_type="application/sdp")
        if status != 201:
            raise RuntimeError(f"POST {path}: HTTP {status}: {body[:200]!r}")
        self.location = urllib.parse.urljoin(self.url + "/", next(v for k, v in headers.items() if k.lower() == "location"))
        await asyncio.wait_for(pc.setRemoteDescription(RTCSessionDescription(body.decode(), "answer")), 10)
        deadline = time.monotonic() + timeout_s
        while pc.connectionState != "connected" or (self.realtime and not self.opened.is_set()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"call not up after {timeout_s} s ({pc.connectionState})")
            await asyncio.sleep(0.02)  # poll of a deadline-bounded wait

    def on_message(self, message):
        try:
            event = json.loads(message)
        except ValueError:
            return
        item = event.get("item") or {}
        if event.get("type") == "conversation.item.created" and str(item.get("id", "")).startswith("bench_"):
            self.replies[item["id"]] = time.perf_counter()
            self.arrived.set()

    async def round_trip(self, n, timeout_s=5):
        key = f"bench_{n}"
        sent = time.perf_counter()
        self.channel.send(item_event(n))
        deadline = time.monotonic() + timeout_s
        while key not in self.replies:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"no reply to event {n} within {timeout_s} s")
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), remaining)
            except asyncio.TimeoutError:
                pass
        return (self.replies.pop(key) - sent) * 1000

    async def close(self):
        if self.location:
            await aiortc_client.http("DELETE", self.location, "")
        await asyncio.wait_for(self.pc.close(), 5)


def proc_usage(pid):
    """(resident bytes, CPU seconds) of a process."""
    with open(f"/proc/{pid}/statm") as f:
        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return rss, cpu


async def measure_sessions(url, pid, count, realtime, hold_s):
    calls = [Call(url, realtime) for _ in range(count)]
    for call in calls:
        await call.open()
    rss0, cpu0 = proc_usage(pid)
    t0 = time.monotonic()
    n = 0
    while time.monotonic() - t0 < hold_s:
        if realtime:
            for call in calls:
                await call.round_trip(10_000 + n)
            n += 1
        await asyncio.sleep(1.0)  # one event a second per call: the pace, not a wait for a condition
    rss1, cpu1 = proc_usage(pid)
    elapsed = time.monotonic() - t0
    for call in calls:
        await call.close()
    return {"rss": rss1, "cpu_percent": (cpu1 - cpu0) / elapsed * 100, "rss_during": (rss0 + rss1) / 2}


async def round_trips(args, url, backend):
    rows = {}
    call = Call(url, realtime=True)
    await call.open()
    for n in range(20):  # warm-up
        await call.round_trip(n)
    rows["data channel (client -> transceiver -> backend -> client)"] = [await call.round_trip(100 + n)
                                                                         for n in range(args.events)]
    await call.close()
    async with websockets.connect(f"ws://127.0.0.1:{backend.port}/") as ws:
        floor = []
        for n in range(20 + args.events):
            sent = time.perf_counter()
            await ws.send(item_event(n))
            await asyncio.wait_for(ws.recv(), 5)
            if n >= 20:
                floor.append((time.perf_counter() - sent) * 1000)
        rows["backend WebSocket alone (floor)"] = floor
    return rows


def with_transceiver(args, backend, body):
    """Runs `body(pid, url)` (a coroutine) against a fresh transceiver: each cost figure starts
    from a process that has held no session, so freed-but-kept heap does not hide a cost."""
    workdir = tempfile.mkdtemp(prefix="rtce-dc-bench-")
    stack = Stack(workdir)
    http_port = free_port()
    url = f"http://127.0.0.1:{http_port}"
    try:
        proc = stack.spawn("transceiver", [args.transceiver, "--http-listen", f"127.0.0.1:{http_port}", "--workers",
                                           "1", "--media-listen", "127.0.0.1", "--media-base-port",
                                           str(free_port(socket.SOCK_DGRAM)),
                                           "--backend-url", f"ws://127.0.0.1:{backend.port}/", "--log-level", "warn"])
        wait_http_ready(stack, url + "/metrics")

        async def run():
            await backend.start()
            try:
                return await body(proc.pid, url)
            finally:
                backend.server.close()
                await backend.server.wait_closed()

        return asyncio.run(run())
    finally:
        stack.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--transceiver", required=True)
    ap.add_argument("--events", type=int, default=300)
    ap.add_argument("--sessions", type=int, default=6)
    ap.add_argument("--hold-s", type=float, default=10)
    args = ap.parse_args()
    aiortc_client.allow_loopback_candidates()
    backend = BenchBackend()
    rows = with_transceiver(args, backend, lambda pid, url: round_trips(args, url, backend))
    cost, base = {}, {}
    for name, realtime in (("audio only", False), ("audio + oai-events", True)):
        async def measure(pid, url, realtime=realtime, name=name):
            base[name] = proc_usage(pid)[0]
            return await measure_sessions(url, pid, args.sessions, realtime, args.hold_s)
        cost[name] = with_transceiver(args, backend, measure)
    base_rss = min(base.values())
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True,
                         text=True).stdout.strip()
    print(f"Machine: {platform.node()}, {os.cpu_count()} CPUs ({cpu}), Linux {platform.release()}; "
          "client, backend and transceiver on one host, loopback.\n")
    print(f"Event round trip, {args.events} sequential events after 20 warm-up (ms):\n")
    print("| path | p50 | p99 | mean | ratio p50 to floor |\n|---|---|---|---|---|")
    floor = statistics.median(rows["backend WebSocket alone (floor)"])
    for name, values in rows.items():
        print(f"| {name} | {statistics.median(values):.2f} | {percentile(values, 99):.2f} | "
              f"{statistics.mean(values):.2f} | {statistics.median(values) / floor:.1f}x |")
    print(f"\nCost per session, {args.sessions} aiortc calls held {args.hold_s:.0f} s "
          f"(transceiver RSS with no session: {base_rss / 2**20:.1f} MiB):\n")
    print("| sessions | RSS per session (KiB) | transceiver CPU per session (% of a core) |\n|---|---|---|")
    for name, c in cost.items():
        print(f"| {name} | {(c['rss_during'] - base[name]) / args.sessions / 1024:.0f} | "
              f"{c['cpu_percent'] / args.sessions:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
