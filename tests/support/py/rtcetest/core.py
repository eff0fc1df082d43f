"""Small things every harness needs once: loopback ports, deadline-bounded waits, log tails,
HTTP to a local service, a client's JSON summary, the machine line of a benchmark, a unittest entry point."""

import argparse
import http.client
import json
import math
import os
import platform
import re
import socket
import sys
import time


def log_to(prefix):
    """A log(msg) that writes `[prefix] msg` to stderr."""
    def log(msg):
        print("[%s] %s" % (prefix, msg), file=sys.stderr, flush=True)
    return log


def free_port(kind=socket.SOCK_STREAM, host="127.0.0.1"):
    """A currently free loopback port. Racy by nature; fine for one test on loopback."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def free_port_run(count, kind=socket.SOCK_DGRAM, host="127.0.0.1", attempts=50):
    """The first of `count` consecutive loopback ports that are all free now: a transceiver's
    workers bind media_base_port + i, so a free base alone may run into another process's
    port (another transceiver of the same test, say)."""
    for _ in range(attempts):
        base = free_port(kind, host)
        if base + count > 65536:
            continue
        held = []
        try:
            for port in range(base, base + count):
                s = socket.socket(socket.AF_INET, kind)
                held.append(s)
                s.bind((host, port))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError(f"no run of {count} free ports after {attempts} attempts")


def poll_until(predicate, timeout, interval=0.05):
    """predicate()'s first true value, or its last value once `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)  # poll interval of a deadline-bounded wait


def wait_for(predicate, timeout, what):
    """predicate()'s first true value; AssertionError naming `what` after `timeout` seconds."""
    value = poll_until(predicate, timeout)
    if not value:
        raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))
    return value


def tail(path, lines=40):
    """The last `lines` lines of a log file, or "(no log)"."""
    try:
        with open(path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-lines:]).decode("utf-8", "replace")
    except OSError:
        return "(no log)"


def http_request(port, method, path, body=None, headers=None, host="127.0.0.1", timeout=10):
    """(status, {lower-case header: value}, body text) of one HTTP request."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode(errors="replace")
    finally:
        conn.close()


def json_summary(out):
    """A client's JSON summary from its stdout (bytes or text), or {"raw_stdout": its last
    2000 characters} when stdout is not JSON."""
    text = out.decode("utf-8", "replace") if isinstance(out, bytes) else out
    try:
        return json.loads(text)
    except ValueError:
        return {"raw_stdout": text[-2000:]}


def raw_exchange(port, data, timeout=10):
    """Sends raw bytes to a loopback server; (status, text) of the first response's head
    (status None when no status line came back)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except OSError:
            pass  # the server may answer and close before it read everything
        out = b""
        try:
            while b"\r\n\r\n" not in out:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except ConnectionResetError:
            pass
    text = out.decode(errors="replace")
    m = re.match(r"HTTP/1\.[01] (\d{3})", text)
    return (int(m.group(1)) if m else None), text


def cpu_model():
    """The CPU's model name from /proc/cpuinfo ("unknown CPU" when it names none)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "unknown CPU")
    except OSError:
        return "unknown CPU"


def machine_info():
    """{nproc, cpu, kernel, loadavg} of this machine, for a benchmark's report."""
    return {"nproc": os.cpu_count(), "cpu": cpu_model(), "kernel": platform.release(),
            "loadavg": " ".join("%.2f" % x for x in os.getloadavg())}


def machine():
    """machine_info() as one line: CPU, CPUs, kernel, load average."""
    return "%(cpu)s, %(nproc)d CPUs, kernel %(kernel)s, load average %(loadavg)s" % machine_info()


def percentile(values, q):
    """Nearest rank: the smallest value with at least q % of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(math.ceil(q / 100.0 * len(ordered))) - 1))]


def stats(values):
    """{n, p50, p99, min, max, mean} of the values that are not None (None when none are)."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"n": len(values), "p50": percentile(values, 50), "p99": percentile(values, 99), "min": min(values),
            "max": max(values), "mean": round(sum(values) / len(values), 1)}


def write_report(table, markdown_out, json_out, data, indent=2):
    """A benchmark's results: prints the table and writes it to markdown_out, and data as JSON
    to json_out, each path when given."""
    print(table)
    if markdown_out:
        with open(markdown_out, "w") as f:
            f.write(table)
    if json_out:
        with open(json_out, "w") as f:
            json.dump(data, f, indent=indent)


def test_flags(*required_flags):
    """For a unittest script: parses `--flag PATH` for each required flag (the binaries under
    test) and returns (flags, argv for unittest.main) — run with
    `unittest.main(argv=argv)`, which is verbose."""
    ap = argparse.ArgumentParser()
    for flag in required_flags:
        ap.add_argument(flag, required=True)
    args, rest = ap.parse_known_args()
    return args, [sys.argv[0], "-v", *rest]


def unittest_main(script_globals, *required_flags):
    """The main() of a unittest script: parses the required flags (test_flags) into the
    script's ARGS (script_globals["ARGS"], where its tests read them) and runs unittest.main,
    verbose, which exits with the result."""
    import unittest
    script_globals["ARGS"], argv = test_flags(*required_flags)
    unittest.main(argv=argv)
