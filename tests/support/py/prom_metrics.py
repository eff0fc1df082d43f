"""Prometheus text-format scraper for the relay's admin server (standard library only).

`parse()` turns exposition text into a Metrics snapshot; `Metrics.get(name, **labels)`
reads one sample and `delta(before, after, ...)` the change of a counter between two
snapshots; `metric(text, name, labels)` sums the samples of one name straight from the text
(lenient: lines it does not parse are passed over). `fetch()` does an HTTP GET over an already-connected socket, so the caller can
create that socket inside another network namespace."""

import http.client
import re

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?\s*$')
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')


class Metrics:
    def __init__(self, samples):
        self.samples = samples  # {(name, frozenset of (label, value)): float}

    def get(self, name, default=0.0, **labels):
        return self.samples.get((name, frozenset(labels.items())), default)

    def has(self, name, **labels):
        return (name, frozenset(labels.items())) in self.samples

    def dropped(self, reason):
        return self.get("rtcedge_relay_dropped_packets_total", reason=reason)

    def hint_failures(self, reason):
        return self.get("rtcedge_relay_hint_failures_total", reason=reason)

    def by_label(self, name, label):
        return {dict(k[1]).get(label): v for k, v in self.samples.items() if k[0] == name}

    def __repr__(self):
        lines = []
        for (name, labels), v in sorted(self.samples.items(), key=lambda kv: (kv[0][0], sorted(kv[0][1]))):
            lab = ",".join('%s="%s"' % kv for kv in sorted(labels))
            lines.append("%s{%s} %g" % (name, lab, v))
        return "\n".join(lines)


def parse(text):
    samples = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise ValueError("not a Prometheus sample line: %r" % line)
        name, label_text, value = m.groups()
        labels = frozenset((k, v) for k, v in _LABEL.findall(label_text or ""))
        samples[(name, labels)] = float(value)
    return Metrics(samples)


def metric(text, name, labels=None):
    """The sum of the `name` samples whose labels include `labels` ({label: value}), or None
    when there is none."""
    total = None
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$", line)
        if not m or m.group(1) != name:
            continue
        if labels and not all(f'{k}="{v}"' in (m.group(2) or "") for k, v in labels.items()):
            continue
        total = (total or 0) + float(m.group(3))
    return total


def delta(before, after, name, **labels):
    return after.get(name, **labels) - before.get(name, **labels)


def fetch(sock, host, path, timeout=2.0, headers=None):
    """GET path over `sock` (already connected), with `headers`. Returns (status, body text)."""
    conn = http.client.HTTPConnection(host, timeout=timeout)
    sock.settimeout(timeout)
    conn.sock = sock
    try:
        conn.request("GET", path, headers={"Connection": "close", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()
