"""rtcetest — what the Python test and benchmark harnesses share (standard library only at import).

    core      free_port, free_port_run, wait_for, poll_until, tail, http_request, raw_exchange, json_summary,
              machine, percentile, write_report, test_flags, unittest_main
    outcome   how a harness ends: pass 0, fail 1, skip 77 — only a missing kernel feature or
              privilege skips (Unavailable); a missing tool, package or build product fails
              (SetupError). The require_* probes decide which.
    netns     the namespace harness: Service (a process in a namespace and its log),
              wait_http, run_json_client, checker, netns_main (the main() of every netns harness)
    aio       aiortc helpers (aiortc is imported by the caller, not here)
    transceiver  TransceiverProcess (a transceiver on loopback for the service tests), answer_lines

Scripts find this folder with one line, relative to themselves (no PYTHONPATH needed, so a
clean clone runs them as CTest does):

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "<..>", "support", "py"))

The same folder holds netns_topology.py (namespaces, veths, the cleanup registry) and
prom_metrics.py (Prometheus text), which the harnesses import by name.
"""
