#!/usr/bin/python3
"""chaos_outage.py — the pieces of run_chaos_netns.py --scenario redis-outage that are not the
scenario itself.

Imported by the harness:
  RespClient      a few Redis commands over a socket made inside a namespace (INFO, SMEMBERS,
                  HGETALL, SCAN), no redis-cli process per sample;
  HealthPoller    a thread that GETs /healthz and /readyz of the relay and the transceivers
                  every --interval and keeps every answer that was not 200 (time, target, what);
  frame_figures   frames received, lost and the longest gap of one client's echo in a window;
  TcpForward      127.0.0.1:port of one namespace forwarded to 127.0.0.1:port of another (the
                  Redis Sentinel group / Cluster of --scenario redis-failover, reached by the
                  transceivers from their namespace);
  print_outage_tables  the tables of one redis-outage result (also bench/chaos_bench.py's).
Run as a script (inside the client namespace) it is the prober: one aiortc process that starts
a new session every --interval-s (at most --count), each POSTed to the next URL of --urls-file
(re-read at every session; a 503 or a refused connection moves to the next URL, as a load
balancer would), connected, held --hold-s while the echo is recorded, and DELETEd. One JSON line
per session in --jsonl-out: start (CLOCK_MONOTONIC), URL, POST status, connect_ms (POST sent ->
ICE/DTLS connected), first_echo_ms, echo frames, fraction of 20 ms frames with the tone,
error. aiortc's imports are paid once, so a session a second stays cheap on a small machine.
"""

import json
import os
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support", "py"))

import netns_topology as nt  # noqa: E402


# ---------------------------------------------------------------------------- Redis

class RespClient:
    """One connection to redis-server from inside `ns`; cmd(...) -> the decoded reply (bytes
    as str, arrays as lists, errors raised as RuntimeError)."""

    def __init__(self, ns, host, port, timeout=2.0):
        self.sock = nt.socket_in(ns, socket.AF_INET, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect((host, port))
        self.buf = b""
        self.sent = {}  # command -> calls this client made, so its own load can be subtracted

    def close(self):
        self.sock.close()

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode("utf-8", "replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RuntimeError("unexpected RESP reply %r" % line[:40])

    def own(self):
        """Commands this client made so far (the one in progress excluded)."""
        return sum(self.sent.values())

    def cmd(self, *args):
        name = str(args[0]).lower()
        self.sent[name] = self.sent.get(name, 0) + 1
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self._reply()

    def info(self, section):
        """INFO <section> as a dict of strings."""
        out = {}
        for line in self.cmd("INFO", section).splitlines():
            if ":" in line and not line.startswith("#"):
                k, _, v = line.partition(":")
                out[k] = v.strip()
        return out

    def commandstats(self, subtract_own=True):
        """INFO commandstats -> {command: calls}, without this client's own commands."""
        own = dict(self.sent)
        out = {}
        for k, v in self.info("commandstats").items():
            if k.startswith("cmdstat_"):
                fields = dict(p.split("=", 1) for p in v.split(",") if "=" in p)
                name = k[len("cmdstat_"):]
                n = int(fields.get("calls", 0)) - (own.get(name, 0) if subtract_own else 0)
                if n > 0:
                    out[name] = n
        return out

    def scan_count(self, pattern):
        cursor, n = "0", 0
        while True:
            cursor, keys = self.cmd("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
            n += len(keys)
            if cursor == "0":
                return n

    def registry(self, cluster):
        """{endpoint id: address} of the live registry records of `cluster` (docs/redis.md)."""
        prefix = "rtce:{c%d}:" % cluster
        out = {}
        for i in self.cmd("SMEMBERS", prefix + "eps") or []:
            fields = self.cmd("HGETALL", prefix + "ep:" + i) or []
            rec = dict(zip(fields[::2], fields[1::2]))
            if rec.get("address"):
                out[int(i)] = rec["address"]
        return out


def read_registry_cache(path):
    """{id: address} of a relay's registry.cache_file (loader/sync/registry_cache.h), or None."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    if not lines or not lines[0].startswith("rtcedge-registry-cache "):
        return None
    out = {}
    for line in lines[1:]:
        parts = line.split()
        if len(parts) == 2:
            out[int(parts[0])] = parts[1]
    return out


class TcpForward(nt.HttpSplice):
    """127.0.0.1:`port` inside `listen_ns` joined to 127.0.0.1:`port` inside `upstream_ns`: a
    Redis deployment whose nodes bind and announce 127.0.0.1 (rtcetest.redis) is then reachable,
    at the same addresses, from a second namespace."""

    def __init__(self, listen_ns, upstream_ns, port):
        super().__init__(listen_ns, upstream_ns, ("127.0.0.1", port), listen_port=port)


# ---------------------------------------------------------------------------- tables

def print_outage_tables(res):
    """The markdown tables of one --scenario redis-outage result (its JSON): the established
    sessions' audio, the new sessions by phase, the restart, drain, health and convergence
    figures. run_chaos_netns.py --table and bench/chaos_bench.py redis-outage print them."""
    cfg, conv, ev = res.get("config", {}), res.get("convergence", {}), res.get("events_s", {})
    print("events (s after the kill): drain of b %s, b exited %s, relay stop %s, relay ready %s, Redis back %s\n"
          % (ev.get("drain_at"), ev.get("b_exited_at"), ev.get("relay_stop_at"), ev.get("relay_ready_at"),
             ev.get("redis_back_at")))
    print("| established session | outage: echo frames lost / expected (relay restart aside) | longest gap (ms) "
          "| relay restart gap (ms) | after Redis back: frames lost / longest gap (ms) | at the end |")
    print("|---|---|---|---|---|---|")
    for s in res.get("sessions", []):
        if s["transceiver"] == "a":
            wo, ab = s["outage_without_restart"], s["after_redis_back"]
            print("| %s | %d / %d | %d | %d | %d / %d | %s |" % (
                s["session"], wo["lost"], wo["expected"], wo["max_gap_ms"], s["restart_gap_ms"], ab["lost"],
                ab["max_gap_ms"], "up" if s["state_before_delete"] == "connected" else s["state_before_delete"]))
        else:
            bd = s["before_drain"]
            print("| %s (drained b) | %d / %d until the drain | %d | - | - | ended, last echo %s s after SIGTERM |"
                  % (s["session"], bd["lost"], bd["expected"], bd["max_gap_ms"], s["last_echo_after_drain_s"]))
    print("\n| new sessions | started | connected and echoed the tone | connect p50 (ms) | p99 | max "
          "| moved to the next URL (b's 503) |")
    print("|---|---|---|---|---|---|---|")
    for ph, v in ((res.get("new_sessions") or {}).get("by_phase") or {}).items():
        print("| %s | %d | %d | %s | %s | %s | %d |" % (ph, v["sessions"], v["ok"], v["connect_ms_p50"],
                                                    v["connect_ms_p99"], v["connect_ms_max"], v["retried_to_next_url"]))
    rr, dr, h = (res.get(k) or {} for k in ("relay_restart", "drain", "health"))
    samples = conv.get("redis_load_per_s") or []
    stats = conv.get("commandstats_first_%ds" % len(samples)) or {}
    print("\n| measure | value |")
    print("|---|---|")
    for label, v in (
            ("relay restart mid-outage: stop (s) / exit -> /readyz 200 from the cache (s)",
             "%s / %s" % (rr.get("stop_s"), rr.get("start_to_ready_s"))),
            ("drain of b: exit code / SIGTERM -> exit (s), sessions.drain_timeout %gs" % cfg.get("drain_timeout_s", 0),
             "%s / %s" % (dr.get("exit_code"), dr.get("exit_after_s"))),
            ("health polls / non-200 unexpected / expected (restart, drain)",
             "%d / %d / %d" % (sum((h.get("polls") or {}).values()), len(h.get("unexpected") or []),
                               h.get("expected", 0))),
            ("unexpected non-200", "; ".join("%s %s at %+.1f s: %s" % (u["target"], u["path"], u["t"], u["answer"])
                                             for u in (h.get("unexpected") or [])[:4]) or "none"),
            ("Redis back -> live transceivers registered (s)", conv.get("transceivers_registered_s")),
            ("Redis back -> relay's view matches Redis (s)", conv.get("registered_s")),
            ("relay's endpoints at their lowest after Redis's return",
             (conv.get("relay_endpoints_min") or {}).get("value")),
            ("Redis back -> rtcedge_relay_flow_store_up 1 (s)", conv.get("flow_store_up_s")),
            ("Redis back -> live flows in the store again (s)", conv.get("flows_rewritten_s")),
            ("Redis: peak commands/s by rtcedge in the first %d s" % len(samples), res.get("redis_peak_commands_per_s")),
            ("Redis: commands/s by rtcedge (the harness's own excluded), per second",
             " ".join(str(x["per_s"]) for x in samples)),
            ("Redis: connected_clients, per second", " ".join(str(x["connected_clients"]) for x in samples)),
            ("Redis: calls per command, first %d s" % len(samples),
             ", ".join("%s %d" % kv for kv in sorted(stats.items(), key=lambda kv: -kv[1])))):
        print("| %s | %s |" % (label, v))


# ---------------------------------------------------------------------------- health

class HealthPoller:
    """GETs every target's /healthz and /readyz every `interval` seconds on its own thread.
    targets: {name: (ns, host, port)}. Keeps, per target and path, the number of polls and
    every non-200 answer as (monotonic time, status or error text). Targets may be removed
    (a transceiver that drained and exited) with stop_target()."""

    def __init__(self, targets, interval=0.5):
        self.targets = dict(targets)
        self.interval = interval
        self.lock = threading.Lock()
        self.polls = {}
        self.bad = []
        self.stopped_at = {}
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop_target(self, name):
        with self.lock:
            self.targets.pop(name, None)
            self.stopped_at[name] = time.monotonic()

    def stop(self):
        self._stop.set()
        self.thread.join(timeout=10)

    def _run(self):
        while not self._stop.is_set():
            t0 = time.monotonic()
            with self.lock:
                targets = list(self.targets.items())
            for name, (ns, host, port) in targets:
                for path in ("/healthz", "/readyz"):
                    try:
                        status, body = nt.http_get_in(ns, host, port, path, timeout=1.0)
                        what = status if status == 200 else "%s %s" % (status, body.strip()[:80])
                    except Exception as e:  # refused while a process restarts, a timeout
                        status, what = None, "%s: %s" % (type(e).__name__, e)
                    with self.lock:
                        key = "%s %s" % (name, path)
                        self.polls[key] = self.polls.get(key, 0) + 1
                        if status != 200:
                            self.bad.append((time.monotonic(), name, path, what))
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - t0)))

    def summary(self, excused):
        """excused(name, path, t) -> True for an answer expected not to be 200 (the relay
        while it restarts, a transceiver once it drains). Returns (polls, unexpected, excused
        list), the lists as dicts."""
        with self.lock:
            bad = list(self.bad)
            polls = dict(self.polls)
        unexpected, expected = [], []
        for t, name, path, what in bad:
            row = {"t": t, "target": name, "path": path, "answer": what}
            (expected if excused(name, path, t) else unexpected).append(row)
        return polls, unexpected, expected


# ---------------------------------------------------------------------------- audio

def frame_figures(frames, lo, hi, frame_s=0.020):
    """Echo frames of one client in [lo, hi): received, expected, lost, longest gap (ms,
    including the edges of the window, so a session whose echo stopped shows the gap)."""
    times = [f[0] for f in frames if lo <= f[0] < hi]
    expected = int(round((hi - lo) / frame_s))
    edges = [lo] + times + [hi]
    gap = max(b - a for a, b in zip(edges, edges[1:])) if hi > lo else 0.0
    return {"frames": len(times), "expected": expected, "lost": max(0, expected - len(times)),
            "max_gap_ms": round(gap * 1000)}


def longest_gap(frames, lo, hi):
    """(start, ms) of the longest gap between echo frames in [lo, hi), edges included."""
    times = [lo] + [f[0] for f in frames if lo <= f[0] < hi] + [hi]
    best = (lo, 0.0)
    for a, b in zip(times, times[1:]):
        if b - a > best[1]:
            best = (a, b - a)
    return best[0], round(best[1] * 1000)


# ---------------------------------------------------------------------------- prober

def _prober_main():
    import argparse
    import asyncio
    import urllib.parse

    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(HERE, "..", "interop"))
    import chaos_aiortc_client as cc  # noqa: E402 (its tone_frame)
    import aiortc_client as ac  # noqa: E402 (ToneTrack, frame_to_mono, http)
    from aiortc import RTCPeerConnection, RTCSessionDescription  # noqa: E402
    from rtcetest.aio import receive_frames, record_connection, remote_audio  # noqa: E402

    ap = argparse.ArgumentParser(description="a new aiortc session every --interval-s")
    ap.add_argument("--urls-file", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--interval-s", type=float, default=1.0)
    ap.add_argument("--hold-s", type=float, default=2.0)
    ap.add_argument("--connect-timeout-s", type=float, default=15.0)
    ap.add_argument("--tone-hz", type=float, default=440.0)
    ap.add_argument("--jsonl-out", required=True)
    ap.add_argument("--ready-file", required=True)
    ap.add_argument("--go-file", required=True, help="sessions start once this file exists")
    args = ap.parse_args()

    out = open(args.jsonl_out, "a", buffering=1)

    def urls():
        try:
            with open(args.urls_file) as f:
                return [u.strip() for u in f if u.strip()]
        except OSError:
            return []

    async def one(n, start):
        r = {"n": n, "start": start}
        pc = RTCPeerConnection()
        frames = []
        connected = asyncio.Event()
        remote_track = remote_audio(pc)
        record_connection(pc, r, connected)
        recorder = None
        session_url = None
        try:
            pc.addTransceiver(ac.ToneTrack(args.tone_hz, -12.0), direction="sendrecv")
            await asyncio.wait_for(pc.setLocalDescription(await pc.createOffer()), 10)
            offer = pc.localDescription.sdp.encode()
            tried = []
            body, headers, base = None, {}, None
            candidates = urls()
            for i in range(max(1, len(candidates))):
                if not candidates:
                    break
                base = candidates[(n + i) % len(candidates)]
                r["post_at"] = time.monotonic()
                try:
                    status, headers, body = await ac.http("POST", base + "/v1/sessions", "", body=offer,
                                                          content_type="application/sdp", timeout=5)
                except Exception as e:  # a transceiver that exited: the next one
                    status = "%s" % type(e).__name__
                tried.append([base, status])
                if status == 201:
                    break
            r["tried"] = tried
            r["url"] = base
            r["post_status"] = tried[-1][1] if tried else None
            if r["post_status"] != 201:
                r["error"] = "POST: %s" % tried
                return
            location = next((v for k, v in headers.items() if k.lower() == "location"), None)
            session_url = urllib.parse.urljoin(base + "/", location)
            await asyncio.wait_for(pc.setRemoteDescription(RTCSessionDescription(body.decode(), "answer")), 10)
            try:
                await asyncio.wait_for(connected.wait(), args.connect_timeout_s)
            except asyncio.TimeoutError:
                r["error"] = "not connected after %g s (states %s)" % (args.connect_timeout_s, r.get("states"))
                return
            r["connect_ms"] = round((r["connected_at"] - r["post_at"]) * 1000)
            track = await asyncio.wait_for(remote_track, timeout=5)

            def record(frame):
                mono, rate = ac.frame_to_mono(frame)
                has, _ = cc.tone_frame(mono, rate, args.tone_hz, 0.5)
                frames.append((time.monotonic(), has))

            recorder = asyncio.ensure_future(receive_frames(track, record))
            await asyncio.sleep(args.hold_s)
        except Exception as e:
            r.setdefault("error", "%s: %s" % (type(e).__name__, e))
        finally:
            if recorder is not None:
                recorder.cancel()
            if session_url:
                try:
                    status, _, _ = await ac.http("DELETE", session_url, "", timeout=3)
                    r["delete_status"] = status
                except Exception as e:
                    r["delete_status"] = type(e).__name__
            try:
                await asyncio.wait_for(pc.close(), 5)
            except Exception:
                pass
            if frames:
                r["first_echo_ms"] = round((frames[0][0] - r["post_at"]) * 1000)
            # The tone over the hold, after the codec's first 200 ms.
            win = [h for t, h in frames if t >= (r.get("connected_at") or 0) + 0.2]
            r["echo_frames"] = len(frames)
            r["tone_fraction"] = round(sum(win) / len(win), 3) if win else 0.0
            r["end"] = time.monotonic()
            r.pop("states", None)
            out.write(json.dumps(r) + "\n")

    async def run():
        with open(args.ready_file, "w") as f:
            f.write("ready\n")
        while not os.path.exists(args.go_file):
            await asyncio.sleep(0.05)
        t0 = time.monotonic()
        tasks = []
        for n in range(args.count):
            at = t0 + n * args.interval_s
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            tasks.append(asyncio.ensure_future(one(n, time.monotonic())))
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(run())
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(_prober_main())
