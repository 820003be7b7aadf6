#!/usr/bin/env python3
"""queue-look-cost.py — what a look at the slot queue costs etcd: the scan
(the key just ahead found by its create revision) against the tail's look.

Starts a private etcd on loopback, queues N holder keys (each also naming
itself the tail, as the daemon's queueing txn does), and sends R looks of
each kind from the newest key's place, as the daemon sends them (a txn of
serializable ranges through the JSON gateway, on one kept-alive
connection):

  scan  the keys created before the node's, newest first, limit 1, with the
        count of the queue at the revision before the node's key: etcd 3.4
        reads, filters and sorts every key of the range for it;
  tail  the key of the host the replaced tail named, the node's own key, the
        tail before that host's, and the same count: a few keys.

Prints etcd's CPU per look of each kind (utime + stime of its process, /proc)
and their ratio, for each N.

    bench/queue-look-cost.py [R [N ...]]        (default 200 100 1000 5000)
"""
import base64, http.client, json, os, shutil, socket, subprocess, sys, tempfile, time

R = int(sys.argv[1]) if len(sys.argv) > 1 else 200
SIZES = [int(n) for n in sys.argv[2:]] or [100, 1000, 5000]
GAPS = (1, 4, 16)	# revisions between the host just ahead and the node's
# HISTORY=H: H holder keys queued and deleted before the measure (hosts done
# earlier in the rollout), whose tombstones stay in etcd's index until it is
# compacted.
HISTORY = int(os.environ.get("HISTORY", "0"))
VALUE = '{"version":"v2","group":"g1","holding":true,"place":{"created":1,"ahead":0,"at":1}}'


def b64(s):
    return base64.b64encode(s.encode()).decode()


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def post(conn, path, body):
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    reply = json.loads(conn.getresponse().read())
    if "error" in reply:
        raise SystemExit(f"etcd: {reply['error']}")
    return reply


def rng(key, end=None, **extra):
    r = {"key": b64(key), "serializable": True}
    if end:
        r["range_end"] = b64(end)
    r.update(extra)
    return {"request_range": r}


def measure(n):
    work = tempfile.mkdtemp(prefix="queue-look-cost.")
    port = free_port()
    etcd = subprocess.Popen(
        ["etcd", "--data-dir", f"{work}/data", "--log-level", "error",
         "--listen-client-urls", f"http://127.0.0.1:{port}",
         "--advertise-client-urls", f"http://127.0.0.1:{port}",
         "--listen-peer-urls", f"http://127.0.0.1:{free_port()}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        conn = None
        for _ in range(100):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                post(conn, "/v3/kv/range", {"key": b64("x")})
                break
            except (OSError, http.client.HTTPException):
                conn = None
                time.sleep(0.1)
        if not conn:
            raise SystemExit("etcd did not start")
        for i in range(HISTORY):
            done = f"/rollout/holders/d{i:05d}"
            post(conn, "/v3/kv/txn", {"success": [
                {"request_put": {"key": b64(done), "value": b64(VALUE)}},
                {"request_put": {"key": b64("/rollout_tail"), "value": b64(f"d{i:05d}")}}]})
            post(conn, "/v3/kv/deleterange", {"key": b64(done)})
        created = []
        for i in range(n):
            host = f"h{i:05d}"
            reply = post(conn, "/v3/kv/txn", {"success": [
                {"request_put": {"key": b64(f"/rollout/holders/{host}"), "value": b64(VALUE)}},
                {"request_put": {"key": b64("/rollout_tail"), "value": b64(host)}}]})
            created.append(int(reply["header"]["revision"]))
        me, ahead = f"h{n - 1:05d}", f"h{n - 2:05d}"
        own = f"/rollout/holders/{me}"
        count = rng("/rollout/holders/", "/rollout/holders0", count_only=True,
                    revision=created[-1] - 1)
        scan = {"success": [
            rng("/rollout/holders/", "/rollout/holders0", limit=1, sort_order="DESCEND",
                sort_target="CREATE", max_create_revision=created[-1] - 1),
            rng(own), count]}
        tail = {"success": [
            rng(f"/rollout/holders/{ahead}"), rng(own),
            rng("/rollout_tail", revision=created[-2] - 1), count]}
        # The tail's look with the check that no key was created between
        # the host the tail named and the node's: a count at each revision
        # of that window (here W revisions back from the node's key).
        gap = {w: {"success": tail["success"] + [
            rng("/rollout/holders/", "/rollout/holders0", count_only=True, revision=r)
            for r in range(created[-1] - 1 - w, created[-1] - 1)]} for w in GAPS}
        looks = {}
        for name, body in [("scan", scan), ("tail", tail)] + [(f"gap{w}", gap[w]) for w in GAPS]:
            t0 = cpu_seconds(etcd.pid)
            for _ in range(R):
                post(conn, "/v3/kv/txn", body)
            looks[name] = (cpu_seconds(etcd.pid) - t0) / R * 1000
        return looks
    finally:
        etcd.terminate()
        etcd.wait()
        shutil.rmtree(work, ignore_errors=True)


print(f"etcd CPU per look at the slot queue, {R} looks each, from the newest key's place"
      + (f", {HISTORY} keys queued and deleted before" if HISTORY else ""))
print("(tail+W: the tail's look checking a window of W revisions before the node's key)")
print(f"{'queued':>8} {'scan ms':>9} {'tail ms':>9} {'scan/tail':>10}"
      + "".join(f" {'tail+' + str(w) + ' ms':>11}" for w in GAPS))
for n in SIZES:
    m = measure(n)
    print(f"{n:>8} {m['scan']:>9.2f} {m['tail']:>9.2f} {m['scan'] / max(m['tail'], 1e-9):>9.1f}x"
          + "".join(f" {m['gap' + str(w)]:>11.2f}" for w in GAPS))
