#!/usr/bin/python3
"""Starts the rtcedge stack on loopback for the transceiver's interop and browser tests:
rtcedge-transceiver alone (direct mode) or behind the userspace rtcedge-relay (relay
mode), with a fresh hint key, free ports, readiness waits with deadlines, and teardown
that kills everything even when the test fails. Standard library only.

As a module: `with Stack(transceiver_bin, relay_bin, mode) as s: s.url ...`
As a program: `rtce_stack.py --transceiver BIN --relay BIN --mode relay -- CMD ARGS...`
runs CMD with RTCE_URL, RTCE_MODE, RTCE_RELAY_ADMIN in its environment and exits with its
code; the stack's logs are printed when CMD fails."""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_udp_range(count):
    """A base port with `count` consecutive free UDP ports (best effort, bounded tries)."""
    for _ in range(50):
        base = free_port(socket.SOCK_DGRAM)
        if base + count >= 65535:
            continue
        socks = []
        try:
            for i in range(count):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                socks.append(s)
                s.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free UDP port range")


def wait_http(url, deadline_s, proc=None):
    deadline = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except Exception as e:  # noqa: BLE001 - any failure means not yet
            last = e
        time.sleep(0.05)
    raise RuntimeError(f"{url} not ready within {deadline_s}s: {last}")


class Stack:
    def __init__(self, transceiver_bin, relay_bin=None, mode="direct", workers=2, extra_args=()):
        if mode not in ("direct", "relay"):
            raise ValueError(mode)
        if mode == "relay" and not relay_bin:
            raise ValueError("relay mode needs the relay binary")
        self.transceiver_bin, self.relay_bin, self.mode = transceiver_bin, relay_bin, mode
        self.workers, self.extra_args = workers, list(extra_args)
        self.procs, self.logs = [], []
        self.dir = tempfile.TemporaryDirectory(prefix="rtce-stack-")

    def _spawn(self, name, argv):
        log = open(os.path.join(self.dir.name, name + ".log"), "w+")
        self.logs.append((name, log))
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.dump_logs()
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        if exc[0] is not None:
            self.dump_logs()
        self.stop()

    def start(self):
        http_port = free_port()
        media_base = free_udp_range(self.workers)
        self.url = f"http://127.0.0.1:{http_port}"
        args = [self.transceiver_bin, "--http-listen", f"127.0.0.1:{http_port}", "--workers", str(self.workers),
                "--media-base-port", str(media_base)]
        self.relay_admin = None
        if self.mode == "relay":
            keys = os.path.join(self.dir.name, "hint-keys.yaml")
            with open(keys, "w") as f:
                subprocess.run([self.relay_bin, "hint", "keygen", "--id", "1"], stdout=f, check=True, timeout=10)
            vip_port = free_port(socket.SOCK_DGRAM)
            admin_port = free_port()
            endpoints = ",".join(f"{1 + i}=127.0.0.1:{media_base + i}" for i in range(self.workers))
            self.relay_admin = f"http://127.0.0.1:{admin_port}"
            self.vip = f"127.0.0.1:{vip_port}"
            relay = self._spawn("relay", [self.relay_bin, "--hint-key-file", keys, "--listen", self.vip,
                                          "--endpoints", endpoints, "--admin-listen", f"127.0.0.1:{admin_port}",
                                          "--workers", "1", "--pin-cpus", "false"])
            wait_http(self.relay_admin + "/readyz", 10, relay)
            args += ["--relay-vips", self.vip, "--hint-key-file", keys]
        self.transceiver = self._spawn("transceiver", args + self.extra_args)
        wait_http(self.url + "/readyz", 15, self.transceiver)

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 10
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []

    def dump_logs(self, tail=80):
        for name, log in self.logs:
            log.flush()
            log.seek(0)
            lines = log.read().splitlines()[-tail:]
            sys.stderr.write(f"---- {name} log (last {len(lines)} lines) ----\n" + "\n".join(lines) + "\n")

    def log_text(self, name):
        for n, log in self.logs:
            if n == name:
                log.flush()
                log.seek(0)
                return log.read()
        return ""


def main():
    ap = argparse.ArgumentParser(description="run a command against a loopback rtcedge stack")
    ap.add_argument("--transceiver", required=True)
    ap.add_argument("--relay")
    ap.add_argument("--mode", choices=["direct", "relay"], default="direct")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    with Stack(a.transceiver, a.relay, a.mode, a.workers) as s:
        env = dict(os.environ, RTCE_URL=s.url, RTCE_MODE=a.mode, RTCE_RELAY_ADMIN=s.relay_admin or "")
        rc = subprocess.call(cmd, env=env)
        if rc != 0:
            s.dump_logs()
    sys.exit(rc)


if __name__ == "__main__":
    main()
