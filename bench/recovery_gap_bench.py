#!/usr/bin/python3
"""Recovery gap after a relay kill (issue redis-sync), p50/p99 over repeated runs.

Each run, in the namespace topology of tests/integration/test_relay_netns.py, with a
private redis-server in the relay namespace as the flow store:
  1. a relay creates a flow from a STUN Binding request (hint -> endpoint 1) and the flow
     reaches Redis;
  2. the client streams numbered RTP-like datagrams at --rate; the fake transceiver echoes
     each one;
  3. the relay is SIGKILLed and a fresh instance started on the same ports (XDP mode: the
     pins are removed too, as on a replaced node); the client sends no STUN;
  4. the stream goes on until --tail datagrams after the new relay is ready.
Reported per run: the echo gap (last echo before the kill -> first echo after), the
restart time (kill -> new relay ready), and the recovery proper (ready -> first echo).

--scenario redis-then-relay (issue 16 §2, docs/security.md (Chaos)): each run first SIGKILLs
redis-server during the stream and starts it again empty (datagrams lost across the Redis
restart: Redis is not on the media path; time until the relay has written the flow back),
then SIGKILLs the relay and starts a new one, which must recover the flow from the store
that restarted: a flow written only after the Redis restart is not lost for good. Per
restart: loss and gap, p50/p99/max, and a run fails if the stream did not resume.

Needs root (namespaces). Usage:
  sudo bench/recovery_gap_bench.py --relay build/bin/rtcedge-relay [--runs 20] [--mode userspace|xdp]
                                   [--scenario relay|redis-then-relay]
"""

import argparse
import os
import signal
import statistics
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support", "py"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import test_relay_netns as t  # noqa: E402
from rtcetest.core import machine  # noqa: E402

ARGS = None


def percentile(values, p):
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, int(round(p / 100.0 * (len(ordered) - 1)))))
    return ordered[k]


class RecoveryGapBench(t.FlowRecoveryTest_userspace):  # MODE set from --mode
    MODE = "userspace"

    def stored_flow(self, name):
        """A relay with the flow store, one client's flow on it, stored: (relay, client, vip)."""
        relay = self.new_relay(name, workers=1, extra=self.store_args())
        client, vip = self.establish(4, 1, relay=relay)
        self.wait_stored(client)
        return relay, client, vip

    def across_relay_restart(self, run, first, client, vip, name, n):
        """Streams n datagrams from client to vip, SIGKILLing relay `first` at the 50th and
        starting a new one, `name`, on its ports with the store: (got, count, kill, first echo
        after the restart), kill = {down, relay, ready}. There must be echoes before the kill
        and after the restart."""
        kill = {}

        def during():
            kill["down"] = time.monotonic()
            first.stop(signal.SIGKILL, detach=True)
            kill["relay"] = self.new_relay(name, workers=1, ports_of=first, extra=self.store_args())
            kill["ready"] = time.monotonic()

        got, arrivals, count, _ = self.flow_echo_stream(client, vip, n, ARGS.rate, during=during, at=50,
                                                        tail=ARGS.tail)
        before = [a for a in arrivals if a < kill["down"]]
        after = [a for a in arrivals if a >= kill["ready"]]
        self.assertTrue(before and after, "run %d: no echo before the relay kill or after the restart" % run)
        kill["gap"] = (after[0] - before[-1]) * 1e3
        return got, count, kill, after[0]

    def test_recovery_gap(self):
        rows = []
        for run in range(ARGS.runs):
            first, client, vip = self.stored_flow("gap-%d-a" % run)
            got, count, box, first_echo = self.across_relay_restart(run, first, client, vip, "gap-%d-b" % run, 5000)
            m = box["relay"].metrics()
            self.assertEqual(m.get("rtcedge_relay_flows_created_total"), 0, "run %d: a STUN reached the relay" % run)
            self.assertEqual(m.get("rtcedge_relay_flows_recovered_total"), 1, "run %d: flow not recovered" % run)
            rows.append({
                "gap": box["gap"],
                "restart": (box["ready"] - box["down"]) * 1e3,
                "recovery": (first_echo - box["ready"]) * 1e3,
                "lost": count - len(got),
            })
            box["relay"].stop(signal.SIGTERM)
            client.close()
            self.redis.cli("FLUSHALL")
        print_table(rows)

    def test_redis_then_relay(self):
        rows = []
        for run in range(ARGS.runs):
            first, client, vip = self.stored_flow("rr-%d-a" % run)
            box = {}

            def redis_restart():
                box["down"] = time.monotonic()
                self.redis.stop(signal.SIGKILL)
                self.redis.start()  # empty: nothing persists
                box["up"] = time.monotonic()
                # The relay reconnects and its refresh writes the live flow back (bounded wait).
                t.poll_until(lambda: self.redis.has_flow_of(client.addr), 15.0)
                box["stored"] = time.monotonic() if self.redis.has_flow_of(client.addr) else None
                box["ready"] = time.monotonic()

            got, arrivals, count, _ = self.flow_echo_stream(client, vip, 8000, ARGS.rate, during=redis_restart,
                                                            at=50, tail=ARGS.tail)
            self.assertIsNotNone(box["stored"], "run %d: the flow never reached the restarted Redis" % run)
            redis_lost = count - len(got)
            redis_gap = max((b - a for a, b in zip(arrivals, arrivals[1:])), default=0) * 1e3
            stored_ms = (box["stored"] - box["up"]) * 1e3
            self.assertEqual(sorted(set(range(count - ARGS.tail, count)) - got), [],
                             "run %d: the stream did not resume after the Redis restart" % run)

            got, count, kill, _ = self.across_relay_restart(run, first, client, vip, "rr-%d-b" % run, 8000)
            self.assertEqual(sorted(set(range(count - ARGS.tail, count)) - got), [],
                             "run %d: the stream did not resume after the relay restart" % run)
            m = kill["relay"].metrics()
            self.assertEqual(m.get("rtcedge_relay_flows_created_total"), 0, "run %d: a STUN reached the relay" % run)
            self.assertEqual(m.get("rtcedge_relay_flows_recovered_total"), 1,
                             "run %d: the flow written after the Redis restart was not recovered" % run)
            rows.append({"redis_lost": redis_lost, "redis_gap": redis_gap, "stored": stored_ms,
                         "redis_restart": (box["up"] - box["down"]) * 1e3,
                         "relay_lost": count - len(got), "relay_gap": kill["gap"],
                         "relay_restart": (kill["ready"] - kill["down"]) * 1e3})
            kill["relay"].stop(signal.SIGTERM)
            client.close()
            self.redis.cli("FLUSHALL")
            nt_log("run %d/%d: %s" % (run + 1, ARGS.runs, rows[-1]))
        print_restart_table(rows)


def nt_log(msg):
    sys.stderr.write("[recovery_gap_bench] %s\n" % msg)
    sys.stderr.flush()


def print_restart_table(rows):
    print("\nRedis SIGKILL + empty restart, then relay SIGKILL + restart, during a %.0f pps stream (%s data path), "
          "%d runs: every run resumed the stream and recovered the flow from the restarted store" % (
              ARGS.rate, ARGS.mode, len(rows)))
    print("machine: %s" % machine())
    print_distributions(rows, "| per restart | p50 | p99 | max | mean |", (
        ("redis_lost", "Redis restart: datagrams lost"),
        ("redis_gap", "Redis restart: longest echo gap (ms)"),
        ("redis_restart", "Redis SIGKILL -> answering PING again (ms)"),
        ("stored", "Redis up -> the flow written back by the relay (ms)"),
        ("relay_lost", "relay restart: datagrams lost"),
        ("relay_gap", "relay restart: echo gap, last before kill -> first after (ms)"),
        ("relay_restart", "relay SIGKILL -> new relay ready (ms)")))


def print_distributions(rows, header, keys):
    """A Markdown table: header, then p50, p99, max and mean over the runs of each (key, label)."""
    print("\n" + header)
    print("|---|---|---|---|---|")
    for key, label in keys:
        values = [r[key] for r in rows]
        print("| %s | %.1f | %.1f | %.1f | %.1f |" % (label, percentile(values, 50), percentile(values, 99),
                                                      max(values), statistics.mean(values)))


def print_table(rows):
    print("\nRecovery gap after a relay SIGKILL (%s data path), %d runs, stream %.0f pps" % (
        ARGS.mode, len(rows), ARGS.rate))
    print("machine: %s" % machine())
    print_distributions(rows, "| measure | p50 (ms) | p99 (ms) | max (ms) | mean (ms) |", (
        ("gap", "echo gap (last echo before kill -> first after)"),
        ("restart", "kill -> new relay ready"),
        ("recovery", "new relay ready -> first echo (lookup + forward)")))
    lost = [r["lost"] for r in rows]
    print("\ndatagrams lost per run (in flight at the kill, or sent while no relay listened): "
          "median %d, max %d" % (statistics.median(lost), max(lost)))
    p99 = percentile([r["gap"] for r in rows], 99)
    print("target p99 echo gap < 500 ms: %s (%.0f ms)" % ("met" if p99 < 500 else "NOT met", p99))


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--relay", required=True)
    ap.add_argument("--xdp-pass-obj")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--tail", type=int, default=100)
    ap.add_argument("--mode", choices=("userspace", "xdp"), default="userspace")
    ap.add_argument("--scenario", choices=("relay", "redis-then-relay"), default="relay")
    ARGS = ap.parse_args()
    if not (1 <= ARGS.runs <= 500 and 10 <= ARGS.rate <= 2000 and 10 <= ARGS.tail <= 2000):
        ap.error("--runs 1..500, --rate 10..2000, --tail 10..2000")
    t.RELAY_BIN = os.path.abspath(ARGS.relay)
    if ARGS.xdp_pass_obj:
        t.XDP_PASS_OBJ = os.path.abspath(ARGS.xdp_pass_obj)
    RecoveryGapBench.MODE = ARGS.mode
    t.nt.install_signal_cleanup()
    suite = unittest.TestSuite()
    suite.addTest(RecoveryGapBench("test_recovery_gap" if ARGS.scenario == "relay" else "test_redis_then_relay"))
    try:
        t.setUpModule()
        result = unittest.TextTestRunner(verbosity=1).run(suite)
    finally:
        t.nt.cleanup_all()
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
