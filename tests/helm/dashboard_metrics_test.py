#!/usr/bin/env python3
"""dashboard_metrics_test.py — the Grafana dashboard (helm/rtcedge/dashboards/rtcedge.json)
names only metrics that the binaries export, and only labels those metrics carry.

Some families exist only in some configurations (the XDP counters in XDP mode, the flow
store's with a Redis), so the binaries run the way the chart runs them, inside a network
namespace this test creates (addresses from 198.18.0.0/15): redis-server on the namespace's
loopback, rtcedge-relay in XDP mode on a veth with the registry and the flow store, and
rtcedge-transceiver in relay mode registered in the same Redis — each the way the chart runs
it: the relay with only the chart's capabilities, the transceiver as user 10001 with none. Their /metrics are scraped
and every rtcedge_* name in a panel's expression must be a sample name (histograms count as
their _bucket/_sum/_count series), and every label matcher in {...} a label of that metric.
It also fails when a dashboard section (sessions, setup time, drops, XDP vs userspace, flow
store) loses its metric.

With the XDP relay's pins at hand it also runs the bpftool commands docs/kubernetes.md gives
for a relay pod, under exactly the capabilities the chart grants (setpriv): those must work,
and `map dump` must fail for want of SYS_ADMIN as the guide says. Needs root (exit 77 =
skipped without it). Standard library only."""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DASHBOARD = os.path.join(ROOT, "helm", "rtcedge", "dashboards", "rtcedge.json")
NS = "rtce-helm-%d" % os.getpid()
PIN = "/sys/fs/bpf/rtce-helm-%d" % os.getpid()
ADDR, PEER = "198.18.200.1", "198.18.200.2"
SKIP = 77

# What each section of the issue needs on the dashboard.
REQUIRED = {
    "sessions": "rtcedge_transceiver_sessions_active_total",
    "setup time": "rtcedge_transceiver_session_setup_seconds_bucket",
    "drops by reason": "rtcedge_relay_dropped_packets_total",
    "XDP packets": "rtcedge_relay_xdp_packets_total",
    "userspace packets": "rtcedge_relay_forwarded_packets_total",
    "flow-store health": "rtcedge_relay_flow_store_up",
}

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+\S+')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"')


def run(cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    if check and r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr.strip()))
    return r


def in_ns(*cmd):
    # nsenter enters only the network namespace: `ip netns exec` would also remount /sys,
    # and the relay would not find the host's bpffs under it.
    return ["nsenter", "--net=/run/netns/" + NS, "--"] + list(cmd)


def scrape(port):
    r = run(in_ns("/usr/bin/python3", "-c", "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen("
                  "'http://127.0.0.1:%d/metrics', timeout=2).read().decode())" % port), check=False)
    return r.stdout if r.returncode == 0 else None


def exported(text):
    """{sample name: set of label names}, histograms' _bucket/_sum/_count included."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m:
            labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(2) or ""))
            out.setdefault(m.group(1), set()).update(labels)
    return out


def dashboard_exprs(dash):
    exprs = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                exprs.append((p.get("title", "?"), t["expr"]))
            walk(p.get("panels", []))
    walk(dash["panels"])
    for v in dash.get("templating", {}).get("list", []):
        if isinstance(v.get("query"), str):
            exprs.append(("variable " + v["name"], v["query"]))
    return exprs


def check_dashboard(metrics, dash):
    failures = []
    used = set()
    for title, expr in dashboard_exprs(dash):
        for m in re.finditer(r'\b(rtcedge_[a-zA-Z0-9_]+)(\{[^}]*\})?', expr):
            name, selector = m.group(1), m.group(2) or ""
            used.add(name)
            if name not in metrics:
                failures.append("panel %r: %s is not exported by either binary" % (title, name))
                continue
            for label in _LABEL.findall(selector):
                if label != "job" and label not in metrics[name]:
                    failures.append("panel %r: %s has no label %r (it has %s)" % (title, name, label,
                                                                                 sorted(metrics[name])))
        # Grouping labels (`by (reason)`) must be carried by a metric of the expression.
        names = [n for n in re.findall(r'\b(rtcedge_[a-zA-Z0-9_]+)', expr) if n in metrics]
        for group in re.findall(r'\bby\s*\(([^)]*)\)', expr):
            for label in (x.strip() for x in group.split(",")):
                if label and label not in ("instance", "job") and not any(label in metrics[n] for n in names):
                    failures.append("panel %r: groups by %r, which none of %s has" % (title, label, names))
    for section, name in REQUIRED.items():
        if name not in used:
            failures.append("the dashboard shows no %s (%s)" % (section, name))
    return failures, len(used)


def relay_pod_caps():
    """setpriv limiting a command to the capabilities the chart README documents for an XDP
    relay pod (the rows that apply without relay.capabilities.*)."""
    import chart_test  # the README's capability table, parsed once for both tests
    caps = sorted(c for c, when in chart_test.documented_capabilities() if when in ("always", "xdp, auto"))
    spec = ",".join(["-all"] + ["+" + c.lower() for c in caps])
    return ["setpriv", "--inh-caps=" + spec, "--ambient-caps=" + spec, "--bounding-set=" + spec, "--"]


def check_pod_bpftool(pin):
    """The guide's in-pod bpftool commands, with the relay pod's capabilities only."""
    setpriv = relay_pod_caps()
    caps = setpriv[1]
    failures = []
    key = " ".join(["00"] * 40)
    for cmd, want_ok, pattern in (
            (["link", "show", "pinned", pin + "/links/hd0"], True, r"xdp\s+prog"),
            (["map", "show", "pinned", pin + "/maps/flows"], True, r"name flows"),
            (["map", "getnext", "pinned", pin + "/maps/endpoints"], True, r"next key"),
            (["map", "delete", "pinned", pin + "/maps/flows", "key", "hex"] + key.split(), False,
             r"No such file"),  # permitted; there is no such flow
            (["map", "dump", "pinned", pin + "/maps/flows"], False, r"failed to get btf")):
        r = run(setpriv + ["bpftool"] + cmd, check=False)
        out = r.stdout + r.stderr
        if (r.returncode == 0) != want_ok or not re.search(pattern, out):
            failures.append("bpftool %s under %s: exit %d, want %s matching /%s/: %s" % (
                " ".join(cmd[:3]), caps, r.returncode, "success" if want_ok else "failure", pattern, out.strip()))
    return failures


def wait_for(fn, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.1)
    raise RuntimeError("timed out waiting for " + what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--relay", required=True)
    ap.add_argument("--transceiver", required=True)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIPPED: needs root (network namespace, XDP)")
        return SKIP
    work = tempfile.mkdtemp(prefix="rtce-helm-dash-")
    procs = []
    try:
        run(["ip", "netns", "add", NS])
        run(in_ns("ip", "link", "set", "lo", "up"))
        run(in_ns("ip", "link", "add", "hd0", "type", "veth", "peer", "name", "hd1"))
        run(in_ns("ip", "addr", "add", ADDR + "/24", "dev", "hd0"))
        run(in_ns("ip", "addr", "add", PEER + "/24", "dev", "hd1"))
        run(in_ns("ip", "link", "set", "hd0", "up"))
        run(in_ns("ip", "link", "set", "hd1", "up"))
        keys = os.path.join(work, "keys.yaml")
        with open(keys, "w") as f:
            f.write(run([args.relay, "hint", "keygen", "--id", "1"]).stdout)
        os.chmod(keys, 0o600)

        def start(name, cmd):
            log = open(os.path.join(work, name + ".log"), "w")
            procs.append((name, subprocess.Popen(in_ns(*cmd), stdout=log, stderr=subprocess.STDOUT)))

        start("redis", ["redis-server", "--port", "6390", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        redis = "redis://127.0.0.1:6390"
        wait_for(lambda: run(in_ns("redis-cli", "-p", "6390", "ping"), check=False).stdout.strip() == "PONG", 10,
                 "redis-server")
        # The relay runs with exactly the capabilities the chart gives it in XDP mode.
        start("relay", relay_pod_caps() + [args.relay, "--mode", "xdp", "--xdp-interfaces", "hd0", "--xdp-pin-path", PIN,
                        "--xdp-relay-address4", ADDR, "--listen", ADDR + ":3478", "--return-listen", "[::]:3480",
                        "--workers", "1", "--pin-cpus", "false", "--hint-key-file", keys, "--admin-listen",
                        "127.0.0.1:9478", "--registry-redis-url", redis, "--flow-store-redis-url", redis])
        # The transceiver runs as the chart runs it: user and group 10001, no capabilities,
        # reading the key file the way the Secret volume gives it (root:10001, 0440).
        os.chmod(work, 0o711)
        tx_keys = os.path.join(work, "tx-keys.yaml")
        shutil.copy(keys, tx_keys)
        os.chown(tx_keys, 0, 10001)
        os.chmod(tx_keys, 0o440)
        start("transceiver", ["setpriv", "--reuid", "10001", "--regid", "10001", "--clear-groups", "--inh-caps=-all",
                              "--bounding-set=-all", "--", args.transceiver, "--http-listen", "127.0.0.1:8080", "--workers", "1",
                              "--media-listen", PEER, "--media-base-port", "20000", "--relay-vips", ADDR + ":3478",
                              "--relay-sources", ADDR, "--hint-key-file", tx_keys, "--registry-redis-url", redis])
        relay_text = wait_for(lambda: scrape(9478), 15, "the relay's /metrics (log: %s)" % os.path.join(work, "relay.log"))
        tx_text = wait_for(lambda: scrape(8080), 15, "the transceiver's /metrics")
        for name, p in procs:
            if p.poll() is not None:
                raise RuntimeError("%s exited %d: %s" % (name, p.returncode, open(os.path.join(work, name + ".log"))
                                                          .read()))
        if 'rtcedge_relay_mode{mode="xdp"} 1' not in relay_text:
            raise RuntimeError("the relay is not in XDP mode:\n" + open(os.path.join(work, "relay.log")).read())
        metrics = exported(relay_text)
        for k, v in exported(tx_text).items():
            metrics.setdefault(k, set()).update(v)
        dash = json.load(open(DASHBOARD))
        failures, used = check_dashboard(metrics, dash)
        for f in failures:
            print("FAIL " + f)
        # The checker itself: a panel naming a metric nobody exports, and one with a label the
        # metric does not have, must both be reported.
        dash["panels"].append({"title": "selftest", "targets": [
            {"expr": "rate(rtcedge_relay_no_such_metric_total[5m])"},
            {"expr": 'rate(rtcedge_relay_dropped_packets_total{colour="red"}[5m])'},
            {"expr": 'sum by (colour) (rate(rtcedge_relay_dropped_packets_total[5m]))'}]})
        selftest, _ = check_dashboard(metrics, dash)
        if len(selftest) != len(failures) + 3:
            failures.append("the checker missed a planted bad metric or label: %s" % selftest)
            print("FAIL " + failures[-1])
        pod = check_pod_bpftool(PIN)
        for f in pod:
            print("FAIL " + f)
        failures += pod
        print("%d metric names in the dashboard, %d exported by the running relay (xdp, flow store) and "
              "transceiver; %d problems" % (used, len(metrics), len(failures)))
        return 1 if failures else 0
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for _, p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        run(in_ns(args.relay, "detach", "--pin-path", PIN), check=False)
        run(["ip", "netns", "del", NS], check=False)
        shutil.rmtree(PIN, ignore_errors=True)
        if os.environ.get("RTCE_KEEP_WORK") != "1":
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        print("FAIL " + str(e))
        sys.exit(1)
