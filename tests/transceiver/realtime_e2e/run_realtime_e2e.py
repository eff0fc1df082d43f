#!/usr/bin/python3
"""run_realtime_e2e.py — the Realtime-compatible edge end to end: a transceiver, an app origin, Chromium.

CTest entry point of the realtime browser tests (realtime_e2e.mjs drives the pages):

  run_realtime_e2e.py --transceiver-bin build/bin/rtcedge-transceiver --relay-bin build/bin/rtcedge-relay \\
      --mode direct|relay --scenario agents|multipart|sideband

It starts the stack with ../e2e/run_browser_e2e.py's start_stack (the embedded echo backend
in parrot mode, a server API key, the realtime.* keys of REALTIME_CONFIG), bundles
page/agent_page.mjs (the unchanged @openai/agents-realtime) with esbuild, and serves the
pages from an "app" origin on another port: GET /token there mints an ephemeral key from the
transceiver's /v1/realtime/client_secrets with the server key, as an app backend does.

--scenario sideband: /token?policy=sideband mints the key with SIDEBAND_POLICY as the session's
client.data_channel; the driver attaches the app server's sidebands (sideband.mjs): the openai
SDK's OpenAIRealtimeWS through a TLS terminator whose self-signed certificate this runner makes
with openssl (the driver's NODE_EXTRA_CA_CERTS trusts it), and a bare ws WebSocket.

Exit codes: 0 pass, 1 fail (also when chromium, node, playwright-core or this folder's npm
tools are missing; the reason is printed). Nothing here needs a kernel feature or a privilege,
so nothing skips. Developers only, never CTest: `--stub-server` replaces the transceiver with a stub that
mints keys and logs the calls POST (the page flow up to the POST); `--mock` with
mock_realtime.py (aiortc), which answers the calls and speaks the events (every check).

--block-udp (issue 26): the agents scenario over ICE-TCP, in ../e2e/run_browser_e2e_tcp.py's
namespaces and stack (its setup, start_transceiver, block_udp, tcp_figures, check_tcp_round):
the relay (--relay-mode userspace|xdp, ICE-TCP on 443) and the transceiver (parrot echo, the
realtime flags) in their namespaces, Chromium and the app origin in the client namespace,
which drops every UDP datagram it sends (nftables, counted). Every check of the agents
scenario, the selected pair is the VIP's TCP port, and the transceiver's session (GET
/v1/sessions/<id> after the call) says transport tcp, the relay's ICE-TCP counters carry the
media. Root only: exit 77 without root, netns or nftables (--relay-mode xdp: native XDP on veth).
"""

import argparse
import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import types
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
E2E_DIR = os.path.join(REPO_ROOT, "tests", "transceiver", "e2e")
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "support", "py"))
sys.path.insert(0, E2E_DIR)
import netns_topology as nt  # noqa: E402
from rtcetest import outcome  # noqa: E402
from rtcetest.core import json_summary, tail  # noqa: E402
from rtcetest import netns as harness  # noqa: E402
from run_browser_e2e import SYSTEM_PYTHON, Stack, start_stack  # noqa: E402
import run_browser_e2e_tcp as tcp  # noqa: E402

TOOLS = os.path.join(HERE, "tools")
DRIVER = os.path.join(HERE, "realtime_e2e.mjs")
PAGES = os.path.join(HERE, "page")
# The app backend's server API key (http.api_keys): it alone may mint ephemeral keys.
SERVER_KEY = "rtcedge-e2e-server-key-0123456789"
# The realtime.* keys of the transceiver, in one place (key a.b_c -> flag --a-b-c; lists are
# comma-separated). A fleet's shared ephemeral-key secret, as docs/configuration.md tells a
# deployment to set it; dropping the entry makes the transceiver generate one at start, which
# also works for a single process.
REALTIME_CONFIG = {"realtime.key_secrets": "e2e:" + "rtcedge-realtime-e2e-secret-0123456789"}
# The fake microphone: tone bursts, so the echo backend's VAD sees speech start and stop, and
# the parrot's replay (as long as the burst) ends well before the next burst starts.
BURST_ON_S, BURST_OFF_S = 1.5, 3.5
# The sideband scenario's data-channel policy, minted into the browser's key by the app origin
# (session.client.data_channel). Server events: what @openai/agents-realtime 0.20.0 reads
# (openaiRealtimeBase.mjs _onMessage, openaiRealtimeWebRtc.mjs: session.updated acknowledges
# connect(), response.created/done drive its response.create sequencer and interrupt(),
# conversation.item.* build its history, the output_audio_buffer.* / VAD / transcript / text
# events its listeners and the page use) minus the function-call ones: the SDK dispatches a tool
# from response.output_item.added/done (a function_call item) and answers "Tool ... not found"
# when the agent has none, so response.output_item.* and response.function_call_arguments.* are
# withheld (the sideband answers the call). Client events: what the SDK's WebRTC transport sends
# (session.update; conversation.item.create/retrieve; response.create; response.cancel and
# output_audio_buffer.clear for interrupt()). conversation.item.delete is left off (the SDK
# sends it only from updateHistory()), so the page can send it to be refused.
SIDEBAND_POLICY = {
    "allowed_client_events": ["session.update", "conversation.item.create", "conversation.item.retrieve",
                              "response.create", "response.cancel", "output_audio_buffer.clear"],
    "allowed_server_events": [
        "session.updated", "error", "rate_limits.updated",
        "response.created", "response.done",
        "response.content_part.added", "response.content_part.done",
        "response.output_text.delta", "response.output_text.done",
        "response.output_audio.delta", "response.output_audio.done",
        "response.output_audio_transcript.delta", "response.output_audio_transcript.done",
        "conversation.item.added", "conversation.item.done", "conversation.item.retrieved",
        "conversation.item.deleted", "conversation.item.truncated",
        "conversation.item.input_audio_transcription.delta", "conversation.item.input_audio_transcription.completed",
        "input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed", "input_audio_buffer.cleared",
        "output_audio_buffer.started", "output_audio_buffer.stopped", "output_audio_buffer.cleared",
    ],
}
KEY_POLICIES = {"sideband": SIDEBAND_POLICY}


def log(msg):
    print(f"[run_realtime_e2e] {msg}", file=sys.stderr, flush=True)


def flag_of(key):
    return "--" + key.replace(".", "-").replace("_", "-")


def transceiver_args():
    """The transceiver flags the realtime pages need: the server API key, REALTIME_CONFIG."""
    extra = [flag_of("http.api_keys"), SERVER_KEY]
    for key, value in REALTIME_CONFIG.items():
        extra += [flag_of(key), str(value)]
    return extra


def in_netns(ns):
    """Sockets made in the body live in network namespace ns (None: this process's own)."""
    return nt.entered(ns) if ns else contextlib.nullcontext()


class AppHandler(http.server.SimpleHTTPRequestHandler):
    """The app origin: the pages and the bundle (static), and /token (an app backend's job)."""

    def __init__(self, *a, transceiver_url=None, netns=None, **kw):
        self.transceiver_url = transceiver_url
        self.netns = netns  # where transceiver_url is reachable (the app origin's namespace)
        super().__init__(*a, **kw)

    def log_message(self, fmt, *a):
        log("app: " + (fmt % a))

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def do_GET(self):
        path, _, query = self.path.partition("?")
        if path != "/token":
            return super().do_GET()
        # The key's session config; the page names the instructions so the driver can find
        # them again in session.created.
        params = urllib.parse.parse_qs(query)
        instructions = params.get("instructions", ["rtcedge end-to-end agent"])[0]
        session = {"type": "realtime", "instructions": instructions}
        # The app's own policy for the browser's channel, by name (the page cannot write one).
        policy = params.get("policy", [None])[0]
        if policy is not None:
            if policy not in KEY_POLICIES:
                self.send_error(400, f"unknown policy {policy!r}")
                return
            session["client"] = {"data_channel": KEY_POLICIES[policy]}
        body = json.dumps({"expires_after": {"anchor": "created_at", "seconds": 600}, "session": session}).encode()
        req = urllib.request.Request(f"{self.transceiver_url}/v1/realtime/client_secrets", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {SERVER_KEY}",
                                              "Content-Type": "application/json"})
        try:
            with in_netns(self.netns), urllib.request.urlopen(req, timeout=5) as r:
                status, reply = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, reply = e.code, e.read()
        except OSError as e:
            status, reply = 502, json.dumps({"error": {"message": f"client_secrets unreachable: {e}"}}).encode()
        log(f"app: /token <- client_secrets {status} {reply[:200]!r}")
        if status != 200:  # the page reports this message as the reason it could not start
            text = reply[:300].decode("utf-8", "replace")
            reply = json.dumps({"error": {"message": f"client_secrets answered {status}: {text}"}}).encode()
        self.send_response(200 if status == 200 else 502)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


class StubHandler(http.server.BaseHTTPRequestHandler):
    """--stub-server only: mints ek_ keys and logs the calls POST, then refuses it (404)."""

    def log_message(self, fmt, *a):
        log("stub: " + (fmt % a))

    def cors(self):
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-OpenAI-Agents-SDK")
        self.send_header("Access-Control-Allow-Methods", "POST, GET, OPTIONS")
        self.send_header("Access-Control-Expose-Headers", "Location")

    def reply(self, status, obj, ctype="application/json"):
        body = obj.encode() if isinstance(obj, str) else json.dumps(obj).encode()
        self.send_response(status)
        self.cors()
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_OPTIONS(self):
        log(f"stub: preflight {self.path} {self.headers.get('Access-Control-Request-Headers')}")
        self.send_response(204)
        self.cors()
        self.end_headers()

    def do_GET(self):
        self.reply(200, "rtcedge_transceiver_sessions_active 0\n", "text/plain")

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/v1/realtime/client_secrets":
            ok = self.headers.get("Authorization") == f"Bearer {SERVER_KEY}"
            return self.reply(200 if ok else 401, {"value": "ek_stub" + os.urandom(8).hex(),
                                                   "expires_at": int(time.time()) + 60, "session": {}})
        log(f"stub: POST {self.path} headers {dict(self.headers)} body {len(body)} bytes, "
            f"a=candidate lines: {body.count(b'a=candidate:')}")
        self.reply(404, {"error": {"message": "stub server: no calls endpoint", "type": "invalid_request_error",
                                   "code": "stub", "param": None}})


def serve(handler, netns=None):
    """An HTTP server on 127.0.0.1 (of network namespace netns, when given): (server, URL)."""
    with in_netns(netns):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def serve_app(www, transceiver_url, netns=None):
    """The app origin (pages, bundle, /token) on 127.0.0.1 of netns, minting keys from
    transceiver_url as seen from there: (server, URL)."""
    return serve(functools.partial(AppHandler, directory=www, transceiver_url=transceiver_url, netns=netns), netns)


def make_tone_wav(workdir):
    """The fake microphone's WAV: two cycles of BURST_ON_S of 440 Hz, BURST_OFF_S of silence."""
    tone_wav = os.path.join(workdir, "tone.wav")
    subprocess.run([sys.executable, os.path.join(E2E_DIR, "generate_tone.py"), tone_wav, "--seconds",
                    str(2 * (BURST_ON_S + BURST_OFF_S)), "--on-s", str(BURST_ON_S), "--off-s", str(BURST_OFF_S)],
                   check=True, stdout=subprocess.DEVNULL, timeout=60)
    return tone_wav


def make_tls_cert(workdir):
    """A self-signed certificate for localhost/127.0.0.1 (the sideband's TLS terminator): (cert, key)."""
    cert, key = os.path.join(workdir, "tls-cert.pem"), os.path.join(workdir, "tls-key.pem")
    out = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                          "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                          "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                         capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise RuntimeError(f"openssl req failed:\n{out.stdout}{out.stderr}")
    return cert, key


def sideband_argv(workdir):
    """The sideband scenario's driver flags (certificate made here) and its environment: the
    driver trusts the terminator's certificate as an app server trusts its ingress's CA."""
    cert, key = make_tls_cert(workdir)
    argv = ["--server-key", SERVER_KEY, "--tls-cert", cert, "--tls-key", key,
            "--data-channel-policy", json.dumps(SIDEBAND_POLICY)]
    return argv, {**os.environ, "NODE_EXTRA_CA_CERTS": cert}


def driver_argv(args, scenario, app_url, transceiver_url, tone_wav, workdir, expect_candidate=None,
                expect_selected=None):
    """realtime_e2e.mjs's command line; args has node, chromium, timeout_s, max_interrupt_ms,
    max_excess_ms (add_driver_options)."""
    argv = [args.node, DRIVER, "--scenario", scenario, "--app-url", app_url,
            "--calls-url", f"{transceiver_url}/v1/realtime/calls", "--tone-wav", tone_wav,
            "--timeout-s", str(int(args.timeout_s)), "--chromium", args.chromium,
            "--max-interrupt-ms", str(args.max_interrupt_ms), "--max-excess-ms", str(args.max_excess_ms),
            "--artifacts", os.path.join(workdir, "artifacts")]
    if expect_candidate:
        argv += ["--expect-answer-candidate", expect_candidate]
    if expect_selected:
        argv += ["--expect-selected-candidate", expect_selected]
    return argv


def add_driver_options(ap):
    """The driver's bounds, the same flags in every runner of realtime_e2e.mjs."""
    ap.add_argument("--max-interrupt-ms", type=float, default=250,
                    help="interrupt() to silent received audio, measured in the browser (jitter buffer included)")
    ap.add_argument("--max-excess-ms", type=float, default=80,
                    help="the fall time beyond the receive path's own delay: what the server adds (one frame + slack)")


def figures(browser):
    """The driver summary's figures (text turn, VAD, echo, interrupt without its level series)."""
    b = browser or {}
    out = {k: b.get(k) for k in ("text_turn", "vad", "echo", "interrupt", "tool_round", "tool_tone", "hangup")
           if b.get(k) is not None}
    if isinstance(out.get("interrupt"), dict):  # the level series stays in the browser part only
        out["interrupt"] = {k: v for k, v in out["interrupt"].items() if k != "levels_dbfs"}
    return out


def wait_listening(stack, log_path, timeout_s=20):
    """The mock prints {"listening": URL} once bound to its ephemeral port."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stack.check_alive()
        with open(log_path, "rb") as f:
            for line in f:
                if line.startswith(b'{"listening"'):
                    return json.loads(line)["listening"]
        time.sleep(0.1)
    raise RuntimeError(f"the mock did not listen within {timeout_s} s:\n{tail(log_path)}")


def require_tools(args):
    """Chromium, node, playwright-core and this folder's npm tools (outcome.SetupError); the
    sideband scenario also openai and ws (dependencies of @openai/agents-realtime) and openssl."""
    outcome.require_browser(args.chromium, args.node)
    pkgs = ["@openai/agents-realtime", "esbuild"]
    if getattr(args, "scenario", None) == "sideband":
        pkgs += ["openai", "ws"]
        if not shutil.which("openssl"):
            raise outcome.SetupError("openssl not found (the sideband scenario makes its TLS certificate with it)")
    for pkg in pkgs:
        outcome.require_file(os.path.join(TOOLS, "node_modules", pkg), "run npm ci in %s" % TOOLS)


def prerequisites(args):
    """Raises outcome.SetupError naming what is missing (a test here never skips)."""
    require_tools(args)
    if args.mock:
        outcome.require_aiortc()
    if not (args.stub_server or args.mock):
        outcome.require_executables(transceiver_bin=args.transceiver_bin, relay_bin=args.relay_bin)


def build_www(workdir, node):
    """The app origin's files: both pages and the esbuild bundle of agent_page.mjs."""
    www = os.path.join(workdir, "www")
    os.makedirs(www)
    for page in ("agent.html", "multipart.html"):
        shutil.copy(os.path.join(PAGES, page), www)
    out = subprocess.run([node, os.path.join(TOOLS, "bundle.mjs"), os.path.join(PAGES, "agent_page.mjs"),
                          os.path.join(www, "agent_bundle.js")], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"esbuild failed:\n{out.stdout}{out.stderr}")
    log(f"bundle: {out.stdout.strip()}")
    return www


def tcp_args(args):
    """args as run_browser_e2e_tcp's functions read them (mode = the relay's data path)."""
    return argparse.Namespace(**{**vars(args), "mode": args.relay_mode, "browser": "chromium"})


def session_json(topo, call_id):
    """The transceiver's GET /v1/sessions/<id> for call id rtc_<id> (ended calls are remembered)."""
    if not (isinstance(call_id, str) and call_id.startswith("rtc_")):
        return {"error": "no call id (%r)" % (call_id,)}
    status, body = nt.http_get_in(topo.xcvr, nt.XCVR_V4, tcp.HTTP_PORT, "/v1/sessions/" + call_id[len("rtc_"):],
                                  headers={"Authorization": "Bearer " + SERVER_KEY})
    return json.loads(body) if status == 200 else {"error": "HTTP %d: %s" % (status, body[:200])}


def run_block_udp(args, workdir, results):
    """--block-udp: the agents scenario in namespaces, the client's UDP dropped (harness.netns_main)."""
    check = harness.checker(results, log)
    targs = tcp_args(args)
    topo, keys, relay_argv = tcp.setup(targs, workdir)
    relay = harness.Service("relay", topo.relay, relay_argv, workdir, keep_mounts=args.relay_mode == "xdp", log=log)
    results.setdefault("logs", {})["relay"] = relay.log_path
    relay.wait_http("127.0.0.1", tcp.RELAY_ADMIN_PORT, "/readyz")
    xcvr = tcp.start_transceiver(targs, topo, keys, workdir, results, echo_mode="parrot", extra=transceiver_args())
    splice = nt.HttpSplice(topo.client, topo.relay, (nt.XCVR_V4, tcp.HTTP_PORT))
    nt.register_cleanup(splice.close)
    transceiver_url = "http://127.0.0.1:%d" % splice.port
    tone_wav = make_tone_wav(workdir)
    app, app_url = serve_app(build_www(workdir, args.node), transceiver_url, topo.client)
    nt.register_cleanup(app.shutdown)
    log(f"transceiver {transceiver_url}, app origin {app_url} (both in {topo.client})")

    tcp.block_udp(topo.client)
    vip = nt.VIP_V4
    argv = driver_argv(args, "agents", app_url, transceiver_url, tone_wav, workdir,
                       expect_candidate="%s:%d" % (vip, tcp.VIP_PORT), expect_selected="%s:%d" % (vip, tcp.TCP_PORT))
    log(f"run {' '.join(argv)}")
    before = tcp.counters(topo)
    rc, summary = harness.run_json_client(topo.client, argv, args.timeout_s + 45, "realtime_e2e", log)
    after = tcp.counters(topo)
    results["browser"] = summary
    results["figures"] = figures(summary)
    session = session_json(topo, (summary.get("page_state") or {}).get("callId"))
    fig = {"transport": session.get("transport"), "session_state": session.get("state"),
           "end_reason": session.get("end_reason"), "session_error": session.get("error"),
           **tcp.tcp_figures(before, after)}
    results["tcp"] = fig
    check("realtime_e2e.mjs passed (agents: connect, oai-events both ways, VAD, echo, interrupt, close)", rc == 0,
          {"exit": rc, "failed": [c["name"] for c in summary.get("checks", []) if not c.get("ok")],
           "error": summary.get("error")})
    dropped = tcp.udp_dropped(topo.client)
    results["udp_datagrams_dropped"] = dropped
    tcp.check_tcp_round(check, fig, dropped)
    app.shutdown()
    tcp.stop_stack(targs, topo, results, check, relay, xcvr, splice)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transceiver-bin")
    ap.add_argument("--relay-bin")
    ap.add_argument("--mode", choices=["direct", "relay"], default="direct")
    ap.add_argument("--scenario", choices=["agents", "multipart", "sideband"], default="agents")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--node", default="node")
    ap.add_argument("--timeout-s", type=float, default=100)
    add_driver_options(ap)
    ap.add_argument("--stub-server", action="store_true",
                    help="developers only: a stub instead of the transceiver (page flow up to the calls POST)")
    ap.add_argument("--mock", action="store_true",
                    help="developers only: mock_realtime.py (aiortc) instead of the transceiver (every check)")
    ap.add_argument("--mock-fault", choices=["ignore-clear", "mute"],
                    help="with --mock: a broken server the checks must fail on (negative control)")
    ap.add_argument("--block-udp", action="store_true",
                    help="the agents scenario over ICE-TCP in namespaces, the client's UDP dropped (root)")
    ap.add_argument("--relay-mode", choices=["userspace", "xdp"], default="userspace",
                    help="with --block-udp: the relay's data path")
    ap.add_argument("--xdp-pass-obj", help="with --block-udp --relay-mode xdp; default: next to the relay's bin/")
    ap.add_argument("--keep-workdir", action="store_true", help="keep logs, pages, bundle, tone.wav")
    args = ap.parse_args()
    if args.block_udp:
        if args.relay_bin:
            harness.default_xdp_pass_obj(args)

        def block_udp_prerequisites():
            require_tools(args)
            tcp.prerequisites(tcp_args(args))
        results = {"checks": [], "scenario": "agents", "block_udp": True, "relay_mode": args.relay_mode}
        return harness.netns_main(args, results, run_block_udp, block_udp_prerequisites, log, "rtcedge-rt-e2e-tcp-")

    if args.scenario == "sideband" and (args.mock or args.stub_server):
        ap.error("--scenario sideband needs the transceiver (neither --mock nor --stub-server has a sideband)")
    code = outcome.unmet(lambda: prerequisites(args))
    if code is not None:
        return code

    workdir = tempfile.mkdtemp(prefix="rtcedge-rt-e2e-")
    stack = stub = app = None
    results = {"mode": args.mode, "scenario": args.scenario, "stub_server": args.stub_server, "mock": args.mock}
    ok = False
    try:
        tone_wav = make_tone_wav(workdir)
        www = build_www(workdir, args.node)
        expect_candidate = None
        if args.stub_server:
            stub, transceiver_url = serve(StubHandler)
        elif args.mock:
            stack = Stack(workdir)
            stack.spawn("mock-realtime", [SYSTEM_PYTHON, os.path.join(HERE, "mock_realtime.py"),
                                          "--server-key", SERVER_KEY, "--verbose"]
                        + (["--fault", args.mock_fault] if args.mock_fault else []))
            transceiver_url = wait_listening(stack, os.path.join(workdir, "mock-realtime.log"))
        else:
            stack_args = types.SimpleNamespace(mock=False, transceiver_bin=args.transceiver_bin,
                                               relay_bin=args.relay_bin, passthrough=False, backend="echo",
                                               echo_mode="parrot", extra_transceiver_args=transceiver_args())
            stack = start_stack(args.mode, stack_args, workdir)
            transceiver_url = stack.url
            if args.mode == "relay":
                relay_argv = stack.argv["relay"]
                expect_candidate = relay_argv[relay_argv.index("--listen") + 1]
        app, app_url = serve_app(www, transceiver_url)
        log(f"transceiver {transceiver_url}, app origin {app_url}")
        argv = driver_argv(args, args.scenario, app_url, transceiver_url, tone_wav, workdir, expect_candidate)
        env = None
        if args.scenario == "sideband":
            extra, env = sideband_argv(workdir)
            argv += extra
        log(f"run {' '.join(argv)}")
        try:
            proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=sys.stderr, timeout=args.timeout_s + 45, env=env)
            results["browser"] = json_summary(proc.stdout)
            ok = proc.returncode == 0
        except subprocess.TimeoutExpired:
            results["error"] = f"realtime_e2e.mjs did not finish within {args.timeout_s + 45} s"
        if stack is not None:
            stack.check_alive()
    except Exception as e:
        results["error"] = f"{type(e).__name__}: {e}"
        ok = False
    finally:
        for server in (app, stub):
            if server is not None:
                server.shutdown()
        if stack is not None:
            if not ok:
                stack.dump_logs()
            stack.stop()
        if args.keep_workdir or not ok:
            log(f"workdir kept (logs, screenshot, events): {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    results["figures"] = figures(results.get("browser"))
    results["passed"] = ok
    print(json.dumps(results, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
