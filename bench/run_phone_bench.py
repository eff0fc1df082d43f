#!/usr/bin/python3
"""run_phone_bench.py — phone calls through the edge (Twilio Media Streams, issue 29), in one run.

1. Added latency, each direction, against the same backend reached directly. One asyncio
   process plays the scripted Twilio (tests/transceiver/telephony/twilio_provider.py) and the
   backend, so one clock (time.monotonic) stamps both ends:
     inbound   caller → backend: the provider streams paced 20 ms μ-law media, silence with
               tone bursts whose onsets fall at a different sample of their frame each time;
               the backend finds each onset in what it receives;
     outbound  backend → caller: the backend speaks tone talkspurts at real-time pace, each
               started at a random moment; the provider finds each onset in the media it gets.
   An onset's time is the send time of the frame holding it, or the time the receiver starts
   that frame (the backend: on arrival; the provider: when its playout starts it), + the
   onset's offset in the frame ÷ the rate, with one detector for every path
   (bench/phone_backend.py). Paths:
     edge      provider → rtcedge-transceiver (signed webhook, TwiML, stream) → an
               rtcedge-dialect backend (binary PCM16 at 16 kHz);
     direct    provider → the same backend speaking Media Streams itself (JSON, base64 μ-law
               at 8 kHz): what a Pipecat-style bot does without an edge.
   Each round runs one edge call and one direct call at the same time; --rounds rounds.
2. Sessions per core: N concurrent phone calls (the provider streaming media both ways)
   against a fresh transceiver (--workers 1) per point, with the embedded echo and with the
   rtcedge-dialect bench backend (phone_backend.py --echo, its own process). Over a steady window: the
   transceiver's CPU (all threads' schedstat run time, utime+stime beside it), RSS per call,
   media delivered, and the load generator's own CPU and late sends (when those are high the
   point measured the generator, not the transceiver). --capacity-rounds R runs every point R
   times, interleaved, and reports medians; the marginal table gives what an added call costs
   (growth between two points ÷ the calls added).

With two or more CPUs the transceiver is pinned to CPU 0 and this process (and the backend
process) to CPU 1, as bench/run_peers_bench.sh does. Only 127.0.0.1 is used; every process
started here is stopped on exit, error or signal (and dies with this process: PDEATHSIG).

  bench/run_phone_bench.py --transceiver build/bin/rtcedge-transceiver [--rounds 3] [--onsets 20]
      [--calls 10,25,50] [--capacity-rounds 1] [--window 5] [--nice -10] [--markdown F] [--json F]
  bench/run_phone_bench.py --transceiver build/bin/rtcedge-transceiver --smoke   # CTest phone_bench_smoke
"""

import argparse
import asyncio
import base64
import ctypes
import glob
import math
import os
import random
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support", "py"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "transceiver", "telephony"))
sys.path.insert(0, HERE)
import websockets  # noqa: E402  python3-websockets (Debian 12: 10.4)
import twilio_provider as tp  # noqa: E402
import phone_backend as pb  # noqa: E402
from rtcetest.core import machine_info, percentile, tail, write_report  # noqa: E402
from rtcetest.transceiver import TransceiverProcess  # noqa: E402

AUTH_TOKEN = "phone-bench-auth-token-0123456789abcdef"
LATE_S = 0.005
MATCH_WINDOW_S = 0.2      # onsets are ≥ 250 ms apart
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def log(msg):
    print("[phone-bench] %s" % msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- processes

def _child_setup(cpus):
    """Popen preexec: die with this process (PR_SET_PDEATHSIG), and run on `cpus`."""
    def setup():
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except Exception:
            pass
        if cpus:
            os.sched_setaffinity(0, cpus)
    return setup


class Transceiver(TransceiverProcess):
    """rtcedge-transceiver with the Twilio endpoints on, one worker, on `cpus`."""

    def __init__(self, binary, extra, cpus):
        self.proc = None
        with tempfile.NamedTemporaryFile("w", prefix="rtce-phone-bench-token-", delete=False) as f:
            f.write(AUTH_TOKEN + "\n")
            self.token_file = f.name
        argv = ["--media-base-port", "0", "--telephony-twilio-auth-token-file", self.token_file,
                "--sessions-setup-rate", "1000", *extra]
        try:
            super().__init__(binary, argv, workers=1, log_prefix="rtce-phone-bench-",
                             preexec_fn=_child_setup(cpus))
        except BaseException:
            self.stop()
            raise

    def stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=10)
            if os.path.exists(self.log.name):
                os.unlink(self.log.name)
            self.proc = None
        if os.path.exists(self.token_file):
            os.unlink(self.token_file)

    def log_tail(self):
        return tail(self.log.name, 30) if self.proc is not None else "(stopped)"


class EchoBackendProcess:
    """bench/phone_backend.py --echo (the rtcedge dialect's echo) in its own process, on this
    process's CPUs."""

    def __init__(self, timeout=10):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "phone_backend.py"), "--echo"],
                                     stdout=subprocess.PIPE, text=True, preexec_fn=_child_setup(None))
        try:
            readable, _, _ = select.select([self.proc.stdout], [], [], timeout)
            line = self.proc.stdout.readline() if readable else ""
            m = re.match(r"listening on (ws://127\.0\.0\.1:\d+/)", line)
            if not m:
                raise RuntimeError("the echo backend did not start: %r" % line)
            self.url = m.group(1)
        except BaseException:
            self.stop()
            raise

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()


def cpu_ns(pid):
    """(run time of all the process's threads in ns from schedstat, utime+stime in ns)."""
    run = 0
    for path in glob.glob("/proc/%d/task/*/schedstat" % pid):
        try:
            with open(path) as f:
                run += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])   # utime, stime (fields 14 and 15)
    return run, ticks * 1_000_000_000 // CLOCK_TICKS


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def own_cpu_s():
    t = os.times()
    return t.user + t.system


# --------------------------------------------------------------------------- latency

async def send_paced(stream, frames, sent_at):
    """The provider's media, one frame every 20 ms on a fixed schedule; the send time of each."""
    t0 = time.monotonic()
    for i, frame in enumerate(frames):
        delay = t0 + i * tp.FRAME_S - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)  # the 20 ms media clock
        sent_at.append(time.monotonic())
        await stream.send_media(frame)


async def latency_call(kind, provider, edge_backend, direct_backend, script, streams):
    """Opens one call on `kind` ("edge" or "direct") bound to `script`; the open stream once
    the backend has its start."""
    call_sid = tp.twilio_sid("CA")
    if kind == "edge":
        edge_backend.scripts[call_sid] = script
        call = await provider.answer_async(call_sid=call_sid)
        stream = provider.stream(call)
    else:
        direct_backend.scripts[call_sid] = script
        stream = tp.TwilioStream(direct_backend.stream_url(call_sid), call_sid, provider.account_sid)
    streams.append(stream)
    await stream.begin()
    await asyncio.wait_for(script.backend_ready.wait(), 10)
    return stream


async def latency_round(r, args, provider, edge_backend, direct_backend):
    scripts = {kind: pb.CallScript(kind, args.onsets, args.cycle_ms / 1000, args.tone_ms / 1000, 0.4,
                                   seed=args.seed * 1000 + 2 * r + i)
               for i, kind in enumerate(("edge", "direct"))}
    streams = []
    try:
        opened = await asyncio.gather(*(latency_call(kind, provider, edge_backend, direct_backend, scripts[kind],
                                                     streams) for kind in ("edge", "direct")))
        by_kind = dict(zip(("edge", "direct"), opened))
        for s in scripts.values():
            s.go.set()
        await asyncio.gather(*(send_paced(by_kind[k], scripts[k].in_frames, scripts[k].in_sent_frames)
                               for k in by_kind))
        await asyncio.wait_for(asyncio.gather(*(s.spoken.wait() for s in scripts.values())), 30)
        await asyncio.sleep(0.3)  # the last talkspurt's way back
        for kind, stream in by_kind.items():
            await stream.send_stop()
        for kind, stream in by_kind.items():
            await stream.wait_closed(5)
            scripts[kind].out_received = [(m.at, m.pcm()) for m in stream.media()]
        await asyncio.wait_for(asyncio.gather(*(s.backend_done.wait() for s in scripts.values())), 5)
    finally:
        for s in streams:
            await s.shutdown()
    return scripts


def summarize(values_s):
    got = [v * 1000 for v in values_s if v is not None]
    if not got:
        return {"n": 0, "lost": len(values_s)}
    return {"n": len(got), "lost": len(values_s) - len(got), "median": statistics.median(got),
            "p95": percentile(got, 95), "min": min(got), "max": max(got), "mean": statistics.fmean(got)}


async def latency_phase(args, cpus_tx):
    edge_backend = await pb.RtcedgeBackend().start()
    direct_backend = await pb.TwilioDirectBackend().start()
    tx = None
    samples = {(path, d): [] for path in ("edge", "direct") for d in ("inbound", "outbound")}
    frames = {"edge": [0, 0], "direct": [0, 0]}
    try:
        tx = await asyncio.to_thread(Transceiver, args.transceiver, ["--backend-url", edge_backend.url], cpus_tx)
        provider = tp.TwilioProvider(tx.http_port, AUTH_TOKEN)
        for r in range(args.rounds):
            try:
                scripts = await latency_round(r, args, provider, edge_backend, direct_backend)
            except Exception as e:
                raise RuntimeError("latency round %d: %s\n--- transceiver log ---\n%s" % (r, e, tx.log_tail())) from e
            for path, script in scripts.items():
                lat = script.latencies(MATCH_WINDOW_S)
                for d in ("inbound", "outbound"):
                    samples[(path, d)].extend(lat[d])
                frames[path][0] += script.backend_frames_in
                frames[path][1] += len(script.out_received)
            log("latency round %d/%d: edge in %s out %s; direct in %s out %s (ms, medians)" % (
                r + 1, args.rounds,
                *("%.1f" % (summarize(scripts[p].latencies(MATCH_WINDOW_S)[d]).get("median", math.nan))
                  for p in ("edge", "direct") for d in ("inbound", "outbound"))))
    finally:
        if tx is not None:
            tx.stop()
        await edge_backend.stop()
        await direct_backend.stop()
    out = {"%s_%s" % k: summarize(v) for k, v in samples.items()}
    out["raw_ms"] = {"%s_%s" % k: [None if v is None else round(v * 1000, 3) for v in vs] for k, vs in samples.items()}
    out["frames"] = {p: {"backend_received": f[0], "provider_received": f[1]} for p, f in frames.items()}
    return out


# --------------------------------------------------------------------------- sessions per core

class LoadStream(tp.TwilioStream):
    """The scripted provider's stream, lighter for the capacity points, where the generator's
    CPU bounds what can be measured: media that arrives is counted, not kept and parsed (the
    echoes play without a pause, so the service sends no marks to echo; anything else is kept
    as usual), and media is sent from a template rather than through json.dumps. What goes on
    the wire is what TwilioStream sends."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.media_received = 0
        self._template = ('{"event":"media","sequenceNumber":"%%d","media":{"track":"inbound","chunk":"%%d",'
                          '"timestamp":"%%d","payload":"%%s"},"streamSid":"%s"}' % self.stream_sid)

    async def _receive(self):
        try:
            async for raw in self.ws:
                if isinstance(raw, str) and '"event":"media"' in raw[:40]:
                    self.media_received += 1
                    continue
                self.received.append(tp.Received(len(self.received), time.monotonic(), raw))
        except websockets.ConnectionClosed:
            pass
        finally:
            self._closed.set()
            self._wake.set()
            await self._notify()

    async def send_media_b64(self, payload_b64):
        self._seq += 1
        self._chunk += 1
        await self.ws.send(self._template % (self._seq, self._chunk, (self._chunk - 1) * 20, payload_b64))
        self.media_sent += 1


class LoadCall:
    """One call of a capacity point: its stream and a task sending media every 20 ms."""

    def __init__(self, stream, frames, stats):
        self.stream = stream
        self.frames = frames
        self.stats = stats
        self.task = None

    async def run(self, phase):
        await asyncio.sleep(phase)  # calls start at different moments of the 20 ms period
        t0 = time.monotonic()
        i = 0
        while True:
            due = t0 + i * tp.FRAME_S
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)  # the 20 ms media clock
            now = time.monotonic()
            if self.stats["counting"]:
                self.stats["sent"] += 1
                if now - due > LATE_S:
                    self.stats["late"] += 1
            await self.stream.send_media_b64(self.frames[i % len(self.frames)])
            i += 1


async def capacity_point(args, backend_kind, n, cpus_tx):
    backend = None
    tx = None
    calls = []
    stats = {"counting": False, "sent": 0, "late": 0}
    try:
        # The embedded echo as the WebRTC points of docs/benchmarks.md run it (loopback, 100 ms).
        extra = ["--backend-echo-delay", "100ms"]
        if backend_kind == "bench":
            backend = await asyncio.to_thread(EchoBackendProcess)
            extra = ["--backend-url", backend.url]
        tx = await asyncio.to_thread(Transceiver, args.transceiver, extra, cpus_tx)
        pid = tx.proc.pid
        await asyncio.sleep(0.3)
        idle_rss = rss_kib(pid)
        provider = tp.TwilioProvider(tx.http_port, AUTH_TOKEN)
        frames = [base64.b64encode(f).decode()
                  for f in tp.tone_frames(440, 0.6, amplitude=6000) + tp.silence_frames(0.4)]
        gate = asyncio.Semaphore(8)
        rng = random.Random(args.seed + n)

        async def open_one():
            async with gate:
                call = await provider.answer_async()
                stream = LoadStream(call.stream_url, call.call_sid, provider.account_sid, dict(call.twiml.parameters),
                                    auth_token=AUTH_TOKEN)
                c = LoadCall(stream, frames, stats)
                calls.append(c)
                await stream.begin()
                c.task = asyncio.create_task(c.run(rng.uniform(0, tp.FRAME_S)))

        t_setup = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*(open_one() for _ in range(n))), 30 + n)
        setup_s = time.monotonic() - t_setup
        await asyncio.sleep(args.warmup)

        def media_counts():
            return sum(c.stream.media_received for c in calls)

        received0 = media_counts()
        stats.update(counting=True, sent=0, late=0)
        own0, t0 = own_cpu_s(), time.monotonic()
        tx0 = cpu_ns(pid)
        be0 = cpu_ns(backend.proc.pid) if backend else None
        await asyncio.sleep(args.window)
        tx1 = cpu_ns(pid)
        be1 = cpu_ns(backend.proc.pid) if backend else None
        own1, t1 = own_cpu_s(), time.monotonic()
        stats["counting"] = False
        rss = rss_kib(pid)
        received1 = media_counts()
        window = t1 - t0
        connected = sum(1 for c in calls if c.task is not None and not c.stream.is_closed)
        if not tx.alive():
            raise RuntimeError("the transceiver exited: %s" % tx.log_tail())
        tx_ms = (tx1[0] - tx0[0]) / 1e6
        per_call_s = tx_ms / (connected * window) if connected else math.nan
        point = {
            "backend": backend_kind, "calls": n, "connected": connected, "setup_s": round(setup_s, 2),
            "window_s": round(window, 2),
            "media_delivered": (received1 - received0) / (connected * 50 * window) if connected else 0,
            "media_received": received1 - received0,
            "tx_cores": tx_ms / 1000 / window,
            "tx_cores_stat": (tx1[1] - tx0[1]) / 1e9 / window,
            "cpu_ms_per_call_s": per_call_s,
            "calls_per_core": 1000 / per_call_s if per_call_s and per_call_s > 0 else math.nan,
            "rss_idle_kib": idle_rss, "rss_kib": rss,
            "rss_kib_per_call": (rss - idle_rss) / connected if connected else math.nan,
            "generator_cores": (own1 - own0) / window,
            "generator_late": stats["late"] / stats["sent"] if stats["sent"] else math.nan,
            "generator_sent": stats["sent"],
            "backend_cores": (be1[0] - be0[0]) / 1e9 / window if backend else None,
        }
        log("capacity %s N=%d: %.3f ms per call-second, %.0f%% media, generator %.2f cores, %.1f%% late" % (
            backend_kind, n, per_call_s, 100 * point["media_delivered"], point["generator_cores"],
            100 * point["generator_late"]))
        return point
    finally:
        for c in calls:
            if c.task is not None:
                c.task.cancel()
        for c in calls:
            if c.task is not None:
                try:
                    await c.task
                except BaseException:
                    pass
        await asyncio.gather(*(stop_stream(c.stream) for c in calls), return_exceptions=True)
        if tx is not None:
            tx.stop()
        if backend is not None:
            backend.stop()


async def stop_stream(stream):
    try:
        if not stream.is_closed:
            await asyncio.wait_for(stream.send_stop(), 2)
    except Exception:
        pass
    await stream.shutdown()


# --------------------------------------------------------------------------- report

def fmt(v, digits=1):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return "%.*f" % (digits, v)


def report(args, info, lat, cap, elapsed):
    lines = []
    lines.append("Machine: %s, %d CPUs, kernel %s, load average %s at the start, %s at the end; Python %s, "
                 "websockets %s; %s." % (info["cpu"], info["nproc"], info["kernel"], info["loadavg"],
                                         info["loadavg_end"], info["python"], info["websockets"], info["pinning"]))
    lines.append("Command: `%s` (%.0f s)" % (info["command"], elapsed))
    lines.append("")
    if lat:
        lines.append("Latency: %d round(s), each one edge call and one direct call at once; %d onsets per call and "
                     "direction; ms." % (args.rounds, args.onsets))
        lines.append("")
        lines.append("| direction | path | onsets measured | median | p95 | min | max |")
        lines.append("|---|---|---|---:|---:|---:|---:|")
        for d, what in (("inbound", "caller → backend"), ("outbound", "backend → caller")):
            e, dr = lat["edge_" + d], lat["direct_" + d]
            for label, s in (("edge (Twilio → rtcedge → rtcedge-dialect backend)", e),
                             ("direct (Twilio → the backend speaking Media Streams)", dr)):
                lines.append("| %s (%s) | %s | %d/%d | %s | %s | %s | %s |" % (
                    d, what, label, s["n"], s["n"] + s["lost"], fmt(s.get("median"), 2), fmt(s.get("p95"), 2),
                    fmt(s.get("min"), 2), fmt(s.get("max"), 2)))
            if e["n"] and dr["n"]:
                lines.append("| %s (%s) | **added by the edge** (edge − direct) | | **%s** | **%s** | | |" % (
                    d, what, fmt(e["median"] - dr["median"], 2), fmt(e["p95"] - dr["p95"], 2)))
        lines.append("")
    if cap:
        rounds = args.capacity_rounds
        lines.append("Sessions per core: a fresh transceiver (--workers 1) per point, %g s warm-up, %g s window; "
                     "CPU = run time of all its threads (schedstat; utime+stime in brackets)."
                     % (args.warmup, args.window))
        if rounds > 1:
            lines.append("Each figure is the median of %d interleaved rounds; CPU ms per call-second gives their "
                         "(min–max)." % rounds)
        lines.append("")
        lines.append("| backend | calls | connected | media delivered | transceiver CPU (cores) "
                     "| CPU ms per call-second | calls per core | RSS KiB per call | generator CPU (cores) "
                     "| generator sends > 5 ms late | backend process CPU (cores) |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for p in aggregate(cap):
            spread = " (%s–%s)" % (fmt(p["cpu_ms_min"], 2), fmt(p["cpu_ms_max"], 2)) if rounds > 1 else ""
            lines.append("| %s | %d | %d | %.1f %% | %.3f (%.3f) | %s%s | %s | %s | %.2f | %.1f %% | %s |" % (
                backend_name(p["backend"]), p["calls"], p["connected"], 100 * p["media_delivered"], p["tx_cores"],
                p["tx_cores_stat"], fmt(p["cpu_ms_per_call_s"], 3), spread, fmt(p["calls_per_core"], 0),
                fmt(p["rss_kib_per_call"], 0), p["generator_cores"], 100 * p["generator_late"],
                fmt(p["backend_cores"], 2)))
        lines.append("")
        margins = aggregate_marginal(cap)
        if margins:
            lines.append("Marginal, between two points of the same backend: what an added call costs, without what "
                         "the process pays once or per wake-up whatever the load%s." %
                         (" (median of the rounds' margins)" if rounds > 1 else ""))
            lines.append("")
            lines.append("| backend | calls | CPU ms per added call-second | calls per core at that rate "
                         "| RSS KiB per added call |")
            lines.append("|---|---|---:|---:|---:|")
            for m in margins:
                lines.append("| %s | %d → %d | %s | %s | %s |" % (
                    backend_name(m["backend"]), m["from"], m["to"], fmt(m["cpu_ms_per_call_s"], 3),
                    fmt(m["calls_per_core"], 0), fmt(m["rss_kib_per_call"], 0)))
            lines.append("")
    return "\n".join(lines)


def backend_name(kind):
    return "embedded echo" if kind == "echo" else "rtcedge-dialect bench backend (echo)"


def _median(values):
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return statistics.median(values) if values else None


AGGREGATED = ("media_delivered", "media_received", "tx_cores", "tx_cores_stat", "cpu_ms_per_call_s", "rss_idle_kib",
              "rss_kib", "rss_kib_per_call", "generator_cores", "generator_late", "backend_cores")


def aggregate(cap):
    """One row per (backend, calls): the median over rounds of each figure, the fewest calls
    connected, the spread of CPU ms per call-second."""
    groups = {}
    for p in cap:
        groups.setdefault((p["backend"], p["calls"]), []).append(p)
    out = []
    for (backend, calls), ps in groups.items():
        row = {"backend": backend, "calls": calls, "rounds": len(ps), "connected": min(p["connected"] for p in ps)}
        for key in AGGREGATED:
            row[key] = _median([p[key] for p in ps])
        per_call = [p["cpu_ms_per_call_s"] for p in ps if not math.isnan(p["cpu_ms_per_call_s"])]
        row["cpu_ms_min"] = min(per_call) if per_call else None
        row["cpu_ms_max"] = max(per_call) if per_call else None
        ms = row["cpu_ms_per_call_s"]
        row["calls_per_core"] = 1000 / ms if ms else None
        out.append(row)
    return out


def aggregate_marginal(cap):
    """marginal() per round, then the median over rounds of each step."""
    groups = {}
    for r in sorted(set(p.get("round", 0) for p in cap)):
        for m in marginal([p for p in cap if p.get("round", 0) == r]):
            groups.setdefault((m["backend"], m["from"], m["to"]), []).append(m)
    out = []
    for (backend, a, b), ms in groups.items():
        cpu = _median([m["cpu_ms_per_call_s"] for m in ms])
        out.append({"backend": backend, "from": a, "to": b, "rounds": len(ms), "cpu_ms_per_call_s": cpu,
                    "calls_per_core": 1000 / cpu if cpu and cpu > 0 else None,
                    "rss_kib_per_call": _median([m["rss_kib_per_call"] for m in ms])})
    return out


def marginal(cap):
    """Growth between consecutive points (by calls) of one backend, per added call."""
    out = []
    for backend in dict.fromkeys(p["backend"] for p in cap):
        points = sorted((p for p in cap if p["backend"] == backend and p["connected"] > 0),
                        key=lambda p: p["connected"])
        for a, b in zip(points, points[1:]):
            dn = b["connected"] - a["connected"]
            if dn <= 0:
                continue
            ms = (b["tx_cores"] - a["tx_cores"]) * 1000 / dn
            out.append({"backend": backend, "from": a["connected"], "to": b["connected"], "cpu_ms_per_call_s": ms,
                        "calls_per_core": 1000 / ms if ms > 0 else math.nan,
                        "rss_kib_per_call": (b["rss_kib"] - b["rss_idle_kib"] - a["rss_kib"] + a["rss_idle_kib"]) / dn})
    return out


# --------------------------------------------------------------------------- smoke checks

def smoke_failures(lat, cap):
    """Sanity only, no timing thresholds: every path and direction measured onsets whose
    latencies are finite and positive; media flowed both ways on every capacity call."""
    bad = []
    for key in ("edge_inbound", "edge_outbound", "direct_inbound", "direct_outbound"):
        s = lat[key]
        if s["n"] == 0:
            bad.append("%s: no onset measured (%d lost)" % (key, s["lost"]))
        for v in lat["raw_ms"][key]:
            if v is not None and not (math.isfinite(v) and v > 0):
                bad.append("%s: latency %r ms is not finite and positive" % (key, v))
    for path, f in lat["frames"].items():
        if f["backend_received"] == 0 or f["provider_received"] == 0:
            bad.append("latency %s: no media (%s)" % (path, f))
    for p in cap:
        if p["connected"] != p["calls"]:
            bad.append("capacity %s N=%d: %d calls connected" % (p["backend"], p["calls"], p["connected"]))
        if p["media_received"] == 0:
            bad.append("capacity %s N=%d: no media came back" % (p["backend"], p["calls"]))
        if not (p["tx_cores"] > 0):
            bad.append("capacity %s N=%d: no transceiver CPU measured" % (p["backend"], p["calls"]))
    return bad


# --------------------------------------------------------------------------- main

async def run(args, cpus_tx):
    lat = None
    cap = []
    if args.rounds > 0:
        lat = await latency_phase(args, cpus_tx)
    for r in range(args.capacity_rounds):   # interleaved: every point once, then again
        for backend_kind in args.backends:
            for n in args.calls:
                point = await capacity_point(args, backend_kind, n, cpus_tx)
                point["round"] = r
                cap.append(point)
    return lat, cap


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--transceiver", required=True, help="rtcedge-transceiver binary")
    ap.add_argument("--rounds", type=int, default=3, help="latency rounds (one edge + one direct call each; 0: none)")
    ap.add_argument("--onsets", type=int, default=20, help="onsets per call and direction")
    ap.add_argument("--cycle-ms", type=int, default=300, help="time between onsets (ms)")
    ap.add_argument("--tone-ms", type=int, default=100, help="length of a tone burst (ms)")
    ap.add_argument("--calls", default="10,25,50", help="concurrent calls per capacity point (empty: none)")
    ap.add_argument("--backends", default="echo,bench", help="capacity backends: echo (embedded), bench")
    ap.add_argument("--capacity-rounds", type=int, default=1,
                    help="run every capacity point this many times, interleaved; medians are reported")
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--no-pin", action="store_true", help="do not pin the transceiver to CPU 0 and the rest to CPU 1")
    ap.add_argument("--nice", type=int, default=0,
                    help="run everything at this niceness (e.g. -10 on a machine shared with builds; needs root)")
    ap.add_argument("--markdown", help="write the table here")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--max-seconds", type=float, default=900, help="the whole run's deadline")
    ap.add_argument("--smoke", action="store_true",
                    help="CTest twin: 1 round of 4 onsets, 3 calls per backend for 1 s; sanity checks only")
    args = ap.parse_args()
    if args.smoke:
        args.rounds, args.onsets, args.calls, args.warmup, args.window = 1, 4, "3", 0.5, 1.0
        args.max_seconds = min(args.max_seconds, 50)
    args.calls = [int(x) for x in args.calls.split(",") if x.strip()]
    args.backends = [x for x in args.backends.split(",") if x.strip()]
    for b in args.backends:
        if b not in ("echo", "bench"):
            ap.error("--backends: echo or bench, not %r" % b)
    if not os.access(args.transceiver, os.X_OK):
        ap.error("--transceiver %s is not executable" % args.transceiver)

    # SIGTERM (ctest's timeout, a Ctrl-C from a wrapper) unwinds like Ctrl-C: finally blocks stop
    # every process started here.
    def on_sigterm(_signum, _frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, on_sigterm)
    if args.nice:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, args.nice)   # children inherit it
        except OSError as e:
            log("--nice %d: %s; running at the default priority" % (args.nice, e))
            args.nice = 0
    cpus = sorted(os.sched_getaffinity(0))
    pin = not args.no_pin and len(cpus) >= 2
    cpus_tx = {cpus[0]} if pin else None
    if pin:
        os.sched_setaffinity(0, {cpus[1]})  # before any thread or child: they inherit it
    info = machine_info()
    info.update(python=sys.version.split()[0], websockets=websockets.__version__,
                pinning=("transceiver on CPU %d, load generator and backends on CPU %d" % (cpus[0], cpus[1])
                         if pin else "no pinning") + ("; nice %d" % args.nice if args.nice else ""),
                command=" ".join(["bench/run_phone_bench.py"] + sys.argv[1:]))
    try:
        info["commit"] = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        info["commit"] = ""
    started = time.monotonic()

    async def bounded():
        return await asyncio.wait_for(run(args, cpus_tx), args.max_seconds)
    try:
        lat, cap = asyncio.run(bounded())
    except asyncio.TimeoutError:
        log("the run passed its %.0f s deadline" % args.max_seconds)
        return 1
    except KeyboardInterrupt:
        log("interrupted; every process started here was stopped")
        return 130
    elapsed = time.monotonic() - started
    info["loadavg_end"] = " ".join("%.2f" % x for x in os.getloadavg())
    table = report(args, info, lat, cap, elapsed)
    write_report(table, args.markdown, args.json, {"machine": info, "latency": lat, "capacity": aggregate(cap),
                                                   "capacity_points": cap, "marginal": aggregate_marginal(cap),
                                                   "elapsed_s": elapsed})
    if args.smoke:
        bad = smoke_failures(lat, cap)
        for b in bad:
            log("FAIL: " + b)
        if bad:
            return 1
        log("smoke: every path measured, media flowed (%.1f s)" % elapsed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
