"""A transceiver started on loopback for the black-box service tests (test_signaling.py,
test_realtime_signaling.py, test_signaling_abuse.py): its process and log, /healthz readiness,
HTTP requests to it, a stop that leaves nothing behind, and the first checks of an SDP answer."""

import os
import subprocess
import tempfile

from .core import free_port, http_request, wait_for


class TransceiverProcess:
    """rtcedge-transceiver --http-listen 127.0.0.1:<free port> --workers N plus `argv`, its
    output in a temporary log; ready once GET /healthz answers 200 (AssertionError with the log
    if it exits first)."""

    def __init__(self, binary, argv, workers=1, log_prefix="rtce-tx-", **popen_kwargs):
        self.http_port = free_port()
        self.log = tempfile.NamedTemporaryFile(prefix=log_prefix, suffix=".log", delete=False)
        cmd = [binary, "--http-listen", "127.0.0.1:%d" % self.http_port, "--workers", str(workers), *argv]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, **popen_kwargs)
        wait_for(self.ready, 15, "transceiver /healthz")

    def ready(self):
        if self.proc.poll() is not None:
            raise AssertionError("transceiver exited with %d: %s" % (self.proc.returncode, self.output()))
        try:
            return self.request("GET", "/healthz")[0] == 200
        except OSError:
            return False

    def alive(self):
        return self.proc.poll() is None

    def output(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def request(self, method, path, body=None, headers=None, timeout=10):
        """(status, {lower-case header: value}, body text)."""
        return http_request(self.http_port, method, path, body, headers, timeout=timeout)

    def post(self, path, body, key, content_type, extra=None, timeout=10):
        """POST with Content-Type and, when key is set, Authorization: Bearer key."""
        headers = {"Content-Type": content_type}
        if key:
            headers["Authorization"] = "Bearer " + key
        headers.update(extra or {})
        return self.request("POST", path, body, headers, timeout=timeout)

    def metrics_text(self):
        return self.request("GET", "/metrics")[2]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        os.unlink(self.log.name)


def answer_lines(test, status, headers, answer, location):
    """Asserts (on the unittest.TestCase `test`) a 201 with an application/sdp answer and a
    Location matching the regex `location`; the answer's lines."""
    test.assertEqual(status, 201, answer)
    test.assertEqual(headers["content-type"], "application/sdp")
    test.assertRegex(headers["location"], location)
    return answer.split("\r\n")
