"""A redis-server for one test: on a free loopback port, in a temporary directory, with no
persistence; ready (PING answered) when the constructor returns. stop() kills it (also when a
test killed it already) and removes the directory."""

import shutil
import subprocess
import tempfile

from rtcetest.core import free_port, wait_for

REDIS_SERVER = "/usr/bin/redis-server"
REDIS_CLI = "/usr/bin/redis-cli"


class RedisServer:
    def __init__(self):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}"
        self.dir = tempfile.mkdtemp(prefix="rtce-redis-")
        self.proc = subprocess.Popen([REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", self.dir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: self.cli("PING") == "PONG", 10, "redis-server PING")

    def cli(self, *args):
        """redis-cli's stripped output, or None when it failed."""
        r = subprocess.run([REDIS_CLI, "-p", str(self.port), *args], capture_output=True, text=True, timeout=10)
        return r.stdout.strip() if r.returncode == 0 else None

    def hash(self, key):
        out = self.cli("HGETALL", key)
        if not out:
            return {}
        items = out.split("\n")
        return dict(zip(items[0::2], items[1::2]))

    def stop(self):
        self.proc.kill()
        self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)
