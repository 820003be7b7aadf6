#!/usr/bin/env python3
"""keepalive-cost.py — what a lease renewal costs etcd, as a request of its own
and on a keepalive stream (the daemon's way since 484c02a).

Starts a private etcd, grants N leases, and renews them through the JSON
gateway's /v3/lease/keepalive in two ways: one HTTP request per renewal (on a
kept-alive connection per lease), and one long chunked request per lease that
carries an object per renewal (Expect: 100-continue, as curl sends it).  Each
way is measured in bursts of B renewals sent together, at RATE renewals a
second in all, for SECONDS: B = 1 is a fleet whose renewals are spread in
time (each wakes etcd alone), B = N every lease renewed at once.  Prints
etcd's CPU per renewal (utime + stime of its process, /proc, less its idle
rate) and the ratio.

    bench/keepalive-cost.py [N [RATE [SECONDS [B ...]]]]
                                  (default 300 100 10 1 10 100 300)
"""
import json, os, shutil, socket, subprocess, sys, tempfile, time, http.client

N = int(sys.argv[1]) if len(sys.argv) > 1 else 300
RATE = float(sys.argv[2]) if len(sys.argv) > 2 else 100.0
SECONDS = float(sys.argv[3]) if len(sys.argv) > 3 else 10.0
BURSTS = [int(b) for b in sys.argv[4:]] or [1, 10, 100, 300]


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def post(conn, path, body):
    conn.request("POST", path, body=json.dumps(body))
    return json.loads(conn.getresponse().read())


class Stream:
    """One lease's keepalive stream: a chunked POST, an object per renewal."""

    def __init__(self, port, lease):
        self.lease = lease
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"POST /v3/lease/keepalive HTTP/1.1\r\nHost: etcd\r\n"
                          b"Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n"
                          b"Expect: 100-continue\r\n\r\n")
        self.file = self.sock.makefile("rb")
        self.headers = False

    def send(self):
        b = json.dumps({"ID": self.lease}).encode()
        self.sock.sendall(b"%x\r\n%s\r\n" % (len(b), b))

    def answer(self):
        if not self.headers:            # 100 Continue, then the 200's headers
            for _ in range(2):
                while self.file.readline() != b"\r\n":
                    pass
            self.headers = True
        n = int(self.file.readline(), 16)
        data = self.file.read(n + 2)
        if b'"result"' not in data:
            sys.exit("keepalive-cost: unexpected answer: %r" % data[:200])


def paced(pid, idle, burst, renew_burst):
    """Renewals in bursts of `burst`, RATE a second, for SECONDS: ms per renewal."""
    t0, c0, k = time.monotonic(), cpu(pid), 0
    while time.monotonic() - t0 < SECONDS:
        renew_burst([(k + i) % N for i in range(burst)])
        k += burst
        delay = t0 + k / RATE - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    wall = time.monotonic() - t0
    return max(0.0, cpu(pid) - c0 - idle * wall) / k * 1000


def main():
    d = tempfile.mkdtemp(prefix="keepalive-bench.")
    cp, pp = free_port(), free_port()
    url = f"http://127.0.0.1:{cp}"
    etcd = subprocess.Popen(["etcd", "--data-dir", d + "/data", "--listen-client-urls", url,
                             "--advertise-client-urls", url, "--listen-peer-urls",
                             f"http://127.0.0.1:{pp}", "--initial-advertise-peer-urls",
                             f"http://127.0.0.1:{pp}", "--initial-cluster",
                             f"default=http://127.0.0.1:{pp}", "--log-level", "error"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                c = http.client.HTTPConnection("127.0.0.1", cp, timeout=5)
                post(c, "/v3/kv/range", {"key": "AA=="})
                break
            except OSError:
                time.sleep(0.1)
        leases = [post(c, "/v3/lease/grant", {"TTL": 600})["ID"] for _ in range(N)]
        conns = [http.client.HTTPConnection("127.0.0.1", cp, timeout=30) for _ in range(N)]
        streams = [Stream(cp, lease) for lease in leases]
        for s in streams:               # open every stream before measuring
            s.send()
        for s in streams:
            s.answer()
        c0 = cpu(etcd.pid); time.sleep(3)
        idle = (cpu(etcd.pid) - c0) / 3

        def unary(ids):
            for i in ids:
                post(conns[i], "/v3/lease/keepalive", {"ID": leases[i]})

        def streamed(ids):
            for i in ids:
                streams[i].send()
            for i in ids:
                streams[i].answer()

        print(f"etcd CPU per lease renewal, {N} leases, {RATE:.0f} renewals/s for {SECONDS:.0f} s "
              f"each way (etcd idle: {idle * 1000:.1f} ms/s, taken off):")
        print("  %-24s %12s %12s %7s" % ("renewals sent together", "request", "stream", "ratio"))
        for b in BURSTS:
            b = min(b, N)
            u = paced(etcd.pid, idle, b, unary)
            s = paced(etcd.pid, idle, b, streamed)
            print("  %-24d %9.3f ms %9.3f ms %6.1fx" % (b, u, s, u / s if s > 0 else float("inf")))
    finally:
        etcd.terminate()
        etcd.wait()
        shutil.rmtree(d, ignore_errors=True)


main()
