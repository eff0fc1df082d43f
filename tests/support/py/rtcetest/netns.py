"""The namespace harness shared by the netns tests and benchmarks (run_browser_e2e_xdp.py,
run_global_sim.py, run_handover_netns.py, run_chaos_netns.py, global_sim_topology.py and the
benchmarks built on them): a process in a namespace with its log (Service), an HTTP readiness
wait from inside a namespace, a client that prints a JSON summary run inside a namespace
(run_json_client), the check recorder, and netns_main — prerequisites, cleanup on every path,
the leftover check and the JSON summary, written once."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import netns_topology as nt

from . import outcome
from .core import json_summary, poll_until, tail


class Service:
    """One process started inside a namespace, its log file, and how to stop it."""

    def __init__(self, name, ns, argv, workdir, keep_mounts=False, log=None):
        self.name, self.ns = name, ns
        self.log_path = os.path.join(workdir, "%s.log" % name)
        (log or nt._log)("start %s in %s: %s" % (name, ns, " ".join(argv)))
        with open(self.log_path, "wb") as out:
            self.proc = nt.start_in_netns(ns, argv, keep_mounts=keep_mounts, stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL)

    def check_alive(self):
        if self.proc.poll() is not None:
            raise RuntimeError("%s exited early with status %s; log %s:\n%s"
                               % (self.name, self.proc.returncode, self.log_path, tail(self.log_path)))

    def wait_http(self, host, port, path, timeout=15.0):
        wait_http(self, self.ns, host, port, path, timeout)

    def stop(self):
        rc = nt.stop_process(self.proc, signal.SIGTERM, timeout=5.0)
        nt.forget_process(self.proc)
        return rc


def wait_http(service, ns, host, port, path, timeout=15.0):
    """Until GET http://host:port/path from inside ns answers 200 (service must stay alive)."""
    last = [None]

    def ready():
        service.check_alive()
        try:
            status, _ = nt.http_get_in(ns, host, port, path, timeout=0.5)
            last[0] = status
            return status == 200
        except OSError as e:
            last[0] = e
            return False

    if not poll_until(ready, timeout):
        raise RuntimeError("%s: GET %s not 200 within %.0f s (last: %s):\n%s"
                           % (service.name, path, timeout, last[0], tail(service.log_path)))


def run_json_client(ns, argv, timeout, name, log):
    """Runs a client that prints a JSON summary (a browser driver) inside ns, its stderr
    passed through, for at most `timeout` seconds (then stopped, and logged as `name`);
    (exit code, summary), the summary as json_summary() reads it."""
    proc = nt.start_in_netns(ns, argv, stdout=subprocess.PIPE, stderr=None, stdin=subprocess.DEVNULL)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        nt.stop_process(proc)
        out = b""
        log("%s did not finish within %.0f s" % (name, timeout))
    nt.forget_process(proc)
    return proc.returncode, json_summary(out)


def checker(results, log):
    """check(name, ok, detail=None): records one check in results["checks"], logs PASS/FAIL,
    returns ok."""
    checks = results.setdefault("checks", [])

    def check(name, ok, detail=None):
        checks.append({"name": name, "ok": bool(ok), "detail": detail})
        log("%s %s%s" % ("PASS" if ok else "FAIL", name, "" if detail is None else ": %s" % (detail,)))
        return ok
    return check


def netns_main(args, results, run_test, prerequisites, log, workdir_prefix):
    """The main() of a netns harness. prerequisites() raises outcome.Unavailable (skip: a
    missing kernel feature or privilege) or outcome.SetupError (fail); then
    run_test(args, workdir, results) runs with the cleanup registry installed. Pass = at least
    one check and every check ok, no exception, and nothing of this process left behind
    (namespaces, bpffs pins). Prints the JSON summary (not on a skip); returns the exit code."""
    try:
        prerequisites()
    except outcome.Unavailable as e:
        return outcome.skip(e)
    except outcome.SetupError as e:
        return outcome.setup_failed(e)
    nt.sweep_stale()
    nt.install_signal_cleanup()  # SIGTERM/SIGHUP and atexit: processes, namespaces, pins
    workdir = tempfile.mkdtemp(prefix=workdir_prefix) if args.keep_workdir else nt.make_scratch_dir()
    results.setdefault("checks", [])
    t0 = time.monotonic()
    code = 1
    try:
        run_test(args, workdir, results)
        code = 0 if results["checks"] and all(c["ok"] for c in results["checks"]) else 1
    except outcome.Unavailable as e:  # a kernel feature only the topology could probe
        code = outcome.skip(e)
    except Exception as e:  # reported in the summary; cleanup below in any case
        results["error"] = "%s: %s" % (type(e).__name__, e)
        log("error: %s" % results["error"])
    finally:
        if code == 1:
            for name, path in (results.get("logs") or {}).items():
                sys.stderr.write("----- %s log (tail) -----\n%s\n" % (name, tail(path, 60)))
        nt.cleanup_all()
        if args.keep_workdir:
            log("workdir kept: %s" % workdir)
    mine = "%s%d-" % (nt.NS_PREFIX, os.getpid())
    leftovers = [n for n in nt.list_namespaces() if n.startswith(mine)]
    pins = [p for p in os.listdir(nt.BPFFS) if p.startswith(mine)] if os.path.isdir(nt.BPFFS) else []
    if leftovers or pins:
        results.setdefault("error", "left behind: namespaces %s, pins %s" % (leftovers, pins))
        code = 1
    results["total_s"] = round(time.monotonic() - t0, 2)
    results["passed"] = code == 0
    if code != outcome.SKIP:
        print(json.dumps(results, indent=2))
    return code


def require_executables(args):
    """--transceiver-bin and --relay-bin, each built and executable (SetupError otherwise)."""
    outcome.require_executables(transceiver_bin=args.transceiver_bin, relay_bin=args.relay_bin)


def default_xdp_pass_obj(args):
    """--xdp-pass-obj defaults to ../bpf/xdp_pass.bpf.o next to the relay's bin/."""
    if not args.xdp_pass_obj:
        args.xdp_pass_obj = os.path.normpath(os.path.join(os.path.dirname(args.relay_bin), "../bpf/xdp_pass.bpf.o"))
