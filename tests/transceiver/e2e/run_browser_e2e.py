#!/usr/bin/python3
"""run_browser_e2e.py — start a transceiver stack on loopback, run the end-to-end clients, tear down.

CTest entry point for the browser test (browser_e2e.mjs, headless Chromium through the demo
page) and the aiortc interop client (../interop/aiortc_client.py):

  run_browser_e2e.py --transceiver-bin build/bin/rtcedge-transceiver --relay-bin build/bin/rtcedge-relay --mode direct
  run_browser_e2e.py --mock --mode direct --client both       # against mock_transceiver.py (aiortc)
  run_browser_e2e.py ... --mode direct --browser firefox      # the browser client in Firefox ESR

--fleet (relay mode, --client aiortc-sideband) starts a redis-server on loopback and two
transceivers registered in it, pods A and B: the browser calls A, the app server uses B for
everything else (aiortc_sideband_client.py --app-url), which forwards it to A.

--browser firefox hands browser_e2e.mjs --browser firefox (puppeteer-core over WebDriver BiDi);
Firefox's fake microphone is a sine at the same 440 Hz, so the generated WAV is not passed.

Exit codes: 0 pass, 1 fail (also when chromium, node, playwright-core, aiortc or a binary is
missing: scripts/install-deps.sh installs them; the reason is printed). Nothing here needs a
kernel feature or a privilege, so nothing skips. Everything this script starts is stopped on
every exit path.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "support", "py"))
from rtcetest import outcome  # noqa: E402
from rtcetest.core import free_port, json_summary, log_to, tail  # noqa: E402
from rtcetest.redis import REDIS_SERVER  # noqa: E402

BROWSER_E2E = os.path.join(HERE, "browser_e2e.mjs")
ICE_RESTART_E2E = os.path.join(HERE, "ice_restart_e2e.mjs")
MOCK = os.path.join(HERE, "mock_transceiver.py")
AIORTC_CLIENT = os.path.join(REPO_ROOT, "tests", "transceiver", "interop", "aiortc_client.py")
AIORTC_REALTIME_CLIENT = os.path.join(REPO_ROOT, "tests", "transceiver", "interop", "aiortc_realtime_client.py")
AIORTC_SIDEBAND_CLIENT = os.path.join(REPO_ROOT, "tests", "transceiver", "interop", "aiortc_sideband_client.py")
# --client aiortc-sideband: the app server's key, a second server key that did not mint the
# call, and the tool timeout the client expects (realtime.sideband.tool_timeout).
SIDEBAND_SERVER_KEY = "rtcedge-sideband-app-key-0123456789"
SIDEBAND_OTHER_KEY = "rtcedge-sideband-other-key-0123456789"
SIDEBAND_TOOL_TIMEOUT_S = 1
# --fleet: the ek_ key secret both pods share (a key minted on one verifies on the other), and
# the registry TTL of the transceivers and the relay (which must match).
FLEET_KEY_SECRET = "fleet:rtcedge-fleet-e2e-secret-0123456789abcdef"
FLEET_REGISTRY_TTL = "3s"
SYSTEM_PYTHON = outcome.SYSTEM_PYTHON
log = log_to("run_browser_e2e")


class Stack:
    """The processes of one test stack, stopped in reverse start order."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.procs = []  # (name, Popen, log path)
        self.url = None
        self.app_url = None  # --fleet: pod B, the app server's pod (else the same as url)
        self.expect_path = None
        self.argv = {}  # name -> argv, for restart
        self.restarts = 0

    def spawn(self, name, argv):
        log_path = os.path.join(self.workdir, f"{name}.log")
        log(f"start {name}: {' '.join(argv)}")
        self.argv[name] = list(argv)
        out = open(log_path, "ab")
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        finally:
            out.close()
        self.procs.append((name, proc, log_path))
        return proc

    def restart(self, name):
        """SIGKILL `name` and start it again with the same argv (a crash and a supervisor)."""
        for i, (n, proc, log_path) in enumerate(self.procs):
            if n != name:
                continue
            log(f"SIGKILL {name} (pid {proc.pid}) and start it again")
            proc.kill()
            proc.wait(timeout=5)
            del self.procs[i]
            self.spawn(name, self.argv[name])
            self.restarts += 1
            return

    def check_alive(self):
        for name, proc, log_path in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited early with status {proc.returncode}; log {log_path}:\n"
                                   + tail(log_path))

    def stop(self):
        for name, proc, _ in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name, proc, _ in reversed(self.procs):
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                log(f"{name} ignored SIGTERM; killing pid {proc.pid}")
                proc.kill()
                proc.wait(timeout=5)
        self.procs = []

    def dump_logs(self):
        for name, _, log_path in self.procs:
            sys.stderr.write(f"----- {name} log (tail) -----\n{tail(log_path)}\n")


def metric_value(base_url, name):
    """The sum of a Prometheus counter's samples at base_url/metrics (0 when unreachable)."""
    try:
        with urllib.request.urlopen(base_url + "/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return 0.0
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + " ") or line.startswith(name + "{"))


def wait_http_ready(stack, url, deadline_s=15.0):
    until = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < until:
        stack.check_alive()
        try:
            with urllib.request.urlopen(url, timeout=1.0) as res:
                if res.status == 200:
                    return
        except (urllib.error.URLError, OSError) as e:
            last = e
        time.sleep(0.1)
    raise RuntimeError(f"{url} not ready after {deadline_s} s (last error: {last})")


# =============================================================================================
# start_stack(mode): LEAD — the only place that knows the binaries' flags. They follow
# transceiver/service/transceiver_config.cpp as of this writing (ConfigLayers: key a.b_c ->
# flag --a-b-c); re-check them when the config changes. Contract: return a Stack whose .url
# serves GET /, /v1/sessions and /metrics, and whose .expect_path is the session JSON "path".
# =============================================================================================
EXAMPLE_BACKEND = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples",
                               "python_backend", "echo_backend.py")


def wait_tcp_listening(stack, port, timeout_s=10):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"the example backend did not listen on port {port} within {timeout_s}s")


def start_stack(mode, args, workdir):
    stack = Stack(workdir)
    http_port = free_port()
    stack.url = f"http://127.0.0.1:{http_port}"
    stack.expect_path = mode
    try:
        if args.mock:
            if mode != "direct":
                raise RuntimeError("the mock transceiver has no relay path; use --mode direct with --mock")
            stack.spawn("mock-transceiver", [SYSTEM_PYTHON, MOCK, "--http-listen", f"127.0.0.1:{http_port}",
                                             "--path", "direct", "--verbose"])
        else:
            hint_keys = os.path.join(workdir, "hint-keys.yaml")
            with open(hint_keys, "wb") as f:
                subprocess.run([args.relay_bin, "hint", "keygen"], stdout=f, check=True, timeout=10)
            # One worker on a known port, so the relay's endpoint 1 can point at it.
            media_port = free_port(socket.SOCK_DGRAM)
            transceiver = [args.transceiver_bin,
                           "--http-listen", f"127.0.0.1:{http_port}",
                           "--workers", "1",
                           "--media-listen", "127.0.0.1",
                           "--media-base-port", str(media_port),
                           "--hint-key-file", hint_keys,
                           "--hint-cluster-id", "0",
                           "--hint-endpoint-base-id", "1",
                           "--backend-echo-mode",
                           getattr(args, "echo_mode", None) or ("parrot" if args.client in ("aiortc-realtime", "aiortc-sideband") else "loopback")]
            # Callers that need more keys (../realtime_e2e: API keys, realtime.*) add flags here.
            transceiver += list(getattr(args, "extra_transceiver_args", []))
            if args.passthrough:
                transceiver += ["--audio-opus-passthrough", "true"]
            if args.backend == "python":
                # The example backend from examples/ over a real WebSocket instead of the embedded echo.
                backend_port = free_port()
                stack.spawn("backend", [SYSTEM_PYTHON, EXAMPLE_BACKEND, "--port", str(backend_port)])
                wait_tcp_listening(stack, backend_port)
                transceiver += ["--backend-url", f"ws://127.0.0.1:{backend_port}/"]
            if mode == "relay":
                vip_port = free_port(socket.SOCK_DGRAM)
                admin_port = free_port()
                stack.spawn("relay", [args.relay_bin, "--hint-key-file", hint_keys,
                                      "--listen", f"127.0.0.1:{vip_port}",
                                      "--endpoints", f"1=127.0.0.1:{media_port}",
                                      "--admin-listen", f"127.0.0.1:{admin_port}", "--workers", "1"])
                wait_http_ready(stack, f"http://127.0.0.1:{admin_port}/metrics")
                # relay.vips set = relay mode: the VIP is the only candidate in the answer.
                transceiver += ["--relay-vips", f"127.0.0.1:{vip_port}", "--relay-sources", "127.0.0.0/8,::1/128"]
            stack.spawn("transceiver", transceiver)
        wait_http_ready(stack, f"{stack.url}/metrics")
    except BaseException:
        stack.dump_logs()
        stack.stop()
        raise
    return stack


def metric_sample(base_url, name, labels):
    """The sum of the samples of `name` at base_url/metrics whose labels include every
    `labels` pair (0 when unreachable)."""
    try:
        with urllib.request.urlopen(base_url + "/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return 0.0
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(w in line.split("}", 1)[0] for w in wanted):
            total += float(line.rsplit(" ", 1)[1])
    return total


def wait_redis(stack, port, timeout_s=10):
    """PING answered +PONG on 127.0.0.1:port (RESP inline command; no redis-cli needed)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stack.check_alive()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(64).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"redis-server on port {port} did not answer PING within {timeout_s}s")


def wait_relay_endpoints(stack, admin_url, count, timeout_s=15):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stack.check_alive()
        if metric_value(admin_url, "rtcedge_relay_endpoints") == count:
            return
        time.sleep(0.05)
    raise RuntimeError(f"the relay did not list {count} registered endpoints within {timeout_s}s "
                       f"(rtcedge_relay_endpoints {metric_value(admin_url, 'rtcedge_relay_endpoints')})")


def start_fleet_stack(args, workdir):
    """--fleet: redis-server, the relay reading the registry, pods A and B registered in it
    (their own HTTP and media ports and pod identities; the hint key file, API keys and ek_
    key secrets of the fleet). stack.url is A (the browser's), stack.app_url B (the app
    server's). A registers before B starts, so B's registry watch lists A from its start."""
    stack = Stack(workdir)
    stack.expect_path = "relay"
    try:
        redis_port = free_port()
        redis_dir = os.path.join(workdir, "redis")
        os.mkdir(redis_dir)
        stack.spawn("redis", [REDIS_SERVER, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", redis_dir])
        wait_redis(stack, redis_port)
        registry = ["--registry-redis-url", f"redis://127.0.0.1:{redis_port}", "--registry-ttl", FLEET_REGISTRY_TTL]
        hint_keys = os.path.join(workdir, "hint-keys.yaml")
        with open(hint_keys, "wb") as f:
            subprocess.run([args.relay_bin, "hint", "keygen"], stdout=f, check=True, timeout=10)
        vip_port = free_port(socket.SOCK_DGRAM)
        admin_url = f"http://127.0.0.1:{free_port()}"
        # No --endpoints: the relay's only endpoints are the registry's.
        stack.spawn("relay", [args.relay_bin, "--hint-key-file", hint_keys, "--listen", f"127.0.0.1:{vip_port}",
                              "--admin-listen", admin_url[len("http://"):], "--workers", "1"] + registry)
        wait_http_ready(stack, f"{admin_url}/metrics")
        urls = {}
        for count, pod in enumerate(("a", "b"), start=1):
            # Ports picked once the previous pod holds its own.
            http_port = free_port()
            media_port = free_port(socket.SOCK_DGRAM)
            urls[pod] = f"http://127.0.0.1:{http_port}"
            stack.spawn(f"transceiver-{pod}",
                        [args.transceiver_bin, "--http-listen", f"127.0.0.1:{http_port}", "--workers", "1",
                         "--media-listen", "127.0.0.1", "--media-base-port", str(media_port),
                         "--hint-key-file", hint_keys, "--hint-cluster-id", "0",
                         "--registry-pod-identity", f"e2e-pod-{pod}",
                         "--realtime-key-secrets", FLEET_KEY_SECRET,
                         "--backend-echo-mode", "parrot",
                         "--relay-vips", f"127.0.0.1:{vip_port}", "--relay-sources", "127.0.0.0/8,::1/128"]
                        + registry + list(getattr(args, "extra_transceiver_args", [])))
            wait_http_ready(stack, f"{urls[pod]}/metrics")
            wait_relay_endpoints(stack, admin_url, count)
        stack.url, stack.app_url = urls["a"], urls["b"]
        stack.relay_admin_url = admin_url
    except BaseException:
        stack.dump_logs()
        stack.stop()
        raise
    return stack


def prerequisites(args):
    """Raises outcome.SetupError naming what is missing (a test here never skips)."""
    if args.client in ("browser", "both", "browser-ice-restart"):
        if args.browser == "firefox":
            outcome.require_firefox(args.firefox, args.node)
        else:
            outcome.require_browser(args.chromium, args.node)
    if args.client in ("aiortc", "both", "aiortc-realtime", "aiortc-sideband") or args.mock:
        outcome.require_aiortc()
    if args.client == "aiortc-sideband":
        outcome.require_python_modules("websockets")  # the app server's sideband (python3-websockets)
    if args.fleet:
        outcome.require_file(REDIS_SERVER, "redis-server; scripts/install-deps.sh installs it")
    if not args.mock:
        outcome.require_executables(transceiver_bin=args.transceiver_bin, relay_bin=args.relay_bin)


def run_client(name, argv, timeout_s):
    log(f"run {name}: {' '.join(argv)}")
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=sys.stderr, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        log(f"{name} did not finish within {timeout_s} s")
        return False, None
    return proc.returncode == 0, json_summary(proc.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transceiver-bin")
    ap.add_argument("--relay-bin")
    ap.add_argument("--mode", choices=["direct", "relay"], default="direct")
    ap.add_argument("--mock", action="store_true", help="use mock_transceiver.py (aiortc) instead of the binaries")
    ap.add_argument("--client", choices=["browser", "aiortc", "both", "aiortc-realtime", "aiortc-sideband",
                                         "browser-ice-restart"],
                    default="browser",
                    help="aiortc-realtime: a Realtime-style call with the oai-events data channel "
                         "(../interop/aiortc_realtime_client.py; the echo backend runs in parrot mode); "
                         "aiortc-sideband: that call plus an app server's sideband WebSocket "
                         "(../interop/aiortc_sideband_client.py; two server keys, tool timeout 1 s); "
                         "browser-ice-restart: Chromium restarts ICE mid-call over PATCH (ice_restart_e2e.mjs)")
    ap.add_argument("--gap-only", action="store_true",
                    help="browser-ice-restart: stop before the PATCH (connect, tone, gap on the normal call)")
    ap.add_argument("--passthrough", action="store_true", help="Opus passthrough mode (no transcoding)")
    ap.add_argument("--hang-up-first", action="store_true",
                    help="the aiortc client closes its PeerConnection, then DELETEs (expects 200 + final state)")
    ap.add_argument("--offer-without-candidates", action="store_true",
                    help="the aiortc client POSTs an offer with no a=candidate line")
    ap.add_argument("--backend", choices=["echo", "python"], default="echo",
                    help="embedded echo, or examples/python_backend/echo_backend.py over WebSocket")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--browser", choices=["chromium", "firefox"], default="chromium",
                    help="the browser of --client browser/both (browser_e2e.mjs --browser)")
    ap.add_argument("--firefox", default="/usr/bin/firefox-esr")
    ap.add_argument("--node", default="node")
    ap.add_argument("--timeout-s", type=float, default=90)
    ap.add_argument("--relay-restart-at", type=float, default=None,
                    help="relay mode, aiortc: SIGKILL the relay this many seconds into the call and start "
                         "it again with the same (default, ephemeral return port) config; the echo must "
                         "come back")
    ap.add_argument("--fleet", action="store_true",
                    help="--mode relay --client aiortc-sideband: a redis-server and two transceivers "
                         "registered in it; the browser calls pod A, the app server uses pod B, which "
                         "forwards to A (calls_forwarded_total checked on B)")
    ap.add_argument("--screenshot", help="PNG of the demo page while connected")
    ap.add_argument("--keep-workdir", action="store_true", help="keep logs and tone.wav for inspection")
    args = ap.parse_args()
    if args.browser == "firefox" and args.client == "browser-ice-restart":
        ap.error("--browser firefox: only browser_e2e.mjs (--client browser or both) runs Firefox")
    if args.fleet and (args.mode != "relay" or args.client != "aiortc-sideband" or args.mock):
        ap.error("--fleet runs the aiortc-sideband client in relay mode (--mode relay --client aiortc-sideband)")

    code = outcome.unmet(lambda: prerequisites(args))
    if code is not None:
        return code
    if args.client == "aiortc-sideband":
        args.extra_transceiver_args = ["--http-api-keys", f"{SIDEBAND_SERVER_KEY},{SIDEBAND_OTHER_KEY}",
                                       "--realtime-sideband-tool-timeout", f"{SIDEBAND_TOOL_TIMEOUT_S}s"]

    workdir = tempfile.mkdtemp(prefix="rtcedge-e2e-")
    stack = None
    results = {"mode": args.mode, "mock": args.mock, "clients": {}}
    ok = True
    try:
        tone_wav = os.path.join(workdir, "tone.wav")
        subprocess.run([sys.executable, os.path.join(HERE, "generate_tone.py"), tone_wav], check=True,
                       stdout=subprocess.DEVNULL, timeout=60)
        stack = start_fleet_stack(args, workdir) if args.fleet else start_stack(args.mode, args, workdir)
        log(f"stack up at {stack.url}" + (f", app server's pod at {stack.app_url}" if stack.app_url else ""))
        if args.client in ("browser", "both"):
            argv = [args.node, BROWSER_E2E, "--url", stack.url, "--expect-path", stack.expect_path,
                    "--timeout-s", str(int(args.timeout_s))]
            if args.browser == "firefox":
                argv += ["--browser", "firefox", "--firefox", args.firefox]
            else:
                argv += ["--tone-wav", tone_wav, "--chromium", args.chromium]
            if args.screenshot:
                argv += ["--screenshot", os.path.abspath(args.screenshot)]
            passed, summary = run_client("browser_e2e", argv, args.timeout_s + 45)
            results["clients"]["browser"] = {"passed": passed, "summary": summary}
            ok = ok and passed
        if args.client == "browser-ice-restart":
            argv = [args.node, ICE_RESTART_E2E, "--url", stack.url, "--expect-path", stack.expect_path,
                    "--timeout-s", str(int(args.timeout_s)), "--tone-wav", tone_wav, "--chromium", args.chromium]
            if args.gap_only:
                argv.append("--gap-only")
            passed, summary = run_client("ice_restart_e2e", argv, args.timeout_s + 45)
            results["clients"]["browser-ice-restart"] = {"passed": passed, "summary": summary}
            if summary and "gap_ms" in summary:
                results["gap_ms"] = summary["gap_ms"]
            ok = ok and passed
        if args.client in ("aiortc", "both"):
            stack.check_alive()
            argv = [SYSTEM_PYTHON, AIORTC_CLIENT, "--url", stack.url, "--seconds", "4", "--tone-hz", "440",
                    "--expect-echo"]
            restarter = None
            if args.relay_restart_at is not None:
                # Clients refresh consent every ~5 s (aioice: 5 s +-20 %, no USE-CANDIDATE): the new
                # relay learns the flow from the next check at the latest. Frames after restart + 9 s
                # prove audio came back.
                argv = [SYSTEM_PYTHON, AIORTC_CLIENT, "--url", stack.url, "--seconds", "15", "--tone-hz", "440",
                        "--expect-frames-after-s", str(args.relay_restart_at + 9)]
                stop_restarter = threading.Event()

                def restart_when_connected():
                    # `relay_restart_at` seconds after the session connected (not after the client
                    # started: importing aiortc takes seconds on a loaded machine).
                    deadline = time.monotonic() + 30
                    while time.monotonic() < deadline and not stop_restarter.is_set():
                        if metric_value(stack.url, "rtcedge_transceiver_sessions_connected_total") >= 1:
                            if not stop_restarter.wait(args.relay_restart_at):
                                stack.restart("relay")
                            return
                        stop_restarter.wait(0.05)

                restarter = threading.Thread(target=restart_when_connected, daemon=True)
                restarter.start()
            if args.offer_without_candidates:
                argv.append("--offer-without-candidates")
            if args.hang_up_first:
                argv.append("--hang-up-first")
            try:
                passed, summary = run_client("aiortc_client", argv, 90)
            finally:
                if restarter is not None:
                    stop_restarter.set()
                    restarter.join(timeout=10)
            if restarter is not None:
                results["relay_restarts"] = stack.restarts
            results["clients"]["aiortc"] = {"passed": passed, "summary": summary}
            ok = ok and passed
        if args.client == "aiortc-realtime":
            stack.check_alive()
            passed, summary = run_client("aiortc_realtime_client",
                                         [SYSTEM_PYTHON, AIORTC_REALTIME_CLIENT, "--url", stack.url], 90)
            if passed and metric_value(stack.url, "rtcedge_transceiver_data_channels_opened_total") < 1:
                passed, summary = False, dict(summary or {}, error="data_channels_opened_total did not count the channel")
            results["clients"]["aiortc-realtime"] = {"passed": passed, "summary": summary}
            ok = ok and passed
        if args.client == "aiortc-sideband":
            stack.check_alive()
            argv = [SYSTEM_PYTHON, AIORTC_SIDEBAND_CLIENT, "--url", stack.url,
                    "--api-key", SIDEBAND_SERVER_KEY, "--other-api-key", SIDEBAND_OTHER_KEY,
                    "--tool-timeout-s", str(SIDEBAND_TOOL_TIMEOUT_S)]
            if stack.app_url:
                argv += ["--app-url", stack.app_url]
            passed, summary = run_client("aiortc_sideband_client", argv, 75)
            results["clients"]["aiortc-sideband"] = {"passed": passed, "summary": summary}
            ok = ok and passed
        if args.fleet:
            # B forwarded the app server's sideband and HTTP requests; the call and its media
            # were A's (the relay routed them to A's registered endpoint), none B's.
            fleet = {"forwarded_by_b": {kind: metric_sample(stack.app_url, "rtcedge_transceiver_calls_forwarded_total",
                                                            {"kind": kind}) for kind in ("websocket", "http")},
                     "sessions_connected": {"a": metric_value(stack.url, "rtcedge_transceiver_sessions_connected_total"),
                                            "b": metric_value(stack.app_url,
                                                              "rtcedge_transceiver_sessions_connected_total")},
                     "relay_endpoints": metric_value(stack.relay_admin_url, "rtcedge_relay_endpoints")}
            results["fleet"] = fleet
            problems = [f"B's calls_forwarded_total{{kind=\"{kind}\"}} is {value:g}, not >= 1"
                        for kind, value in fleet["forwarded_by_b"].items() if value < 1]
            if fleet["sessions_connected"]["a"] < 1 or fleet["sessions_connected"]["b"] != 0:
                problems.append(f"the call's session connected on {fleet['sessions_connected']}, not on A alone")
            if problems:
                results["fleet"]["problems"] = problems
                ok = False
        stack.check_alive()
    except Exception as e:
        results["error"] = f"{type(e).__name__}: {e}"
        ok = False
    finally:
        if stack is not None:
            if not ok:
                stack.dump_logs()
            stack.stop()
        if args.keep_workdir:
            log(f"workdir kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    results["passed"] = ok
    print(json.dumps(results, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
