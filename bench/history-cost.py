#!/usr/bin/env python3
"""history-cost.py — what history/HOST adds to a run's end txn.

Starts a private etcd, then sends N end-of-run txns as a node sends them
(puppet/success and validation/success puts with the deletes of the other
states, running_version, alive), alternately without and with the history
put (10 runs: typical successes, or the worst case of 10 failures with
200-byte error lines), and prints the request bytes per txn and etcd's CPU
per txn (utime+stime of the etcd process, /proc) for each.

    bench/history-cost.py [N]    (default 300)
"""
import base64, json, os, shutil, socket, subprocess, sys, tempfile, time, urllib.request

N = int(sys.argv[1]) if len(sys.argv) > 1 else 300
b64 = lambda s: base64.b64encode(s.encode()).decode()

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def put(k, v): return {"requestPut": {"key": b64(k), "value": b64(v)}}
def delete(k): return {"requestDeleteRange": {"key": b64(k)}}

def end_txn(host, version, history):
    now = int(time.time())
    st = json.dumps({"time": now, "version": version, "exit_code": 0})
    ops = [put(f"/status/puppet/success/{host}", st)]
    ops += [delete(f"/status/puppet/{s}/{host}") for s in ("running", "failed", "pending")]
    ops += [put(f"/status/validation/success/{host}", st)]
    ops += [delete(f"/status/validation/{s}/{host}") for s in ("running", "failed")]
    ops += [put(f"/running_version/{host}", json.dumps({"version": version, "time": now})),
            put(f"/alive/{host}", json.dumps({"time": now, "version": version, "pid": 4242}))]
    if history is not None:
        ops.append(put(f"/history/{host}", history))
    return json.dumps({"success": ops}, separators=(",", ":")).encode()

def history(worst):
    runs = []
    for i in range(10):
        r = {"version": "v%d" % (1000 + i), "start": 1764150000 + 60 * i, "duration": 42,
             "result": "failed" if worst else "success", "attempt": i + 1 if worst else 1}
        if worst:
            r["error"] = "Error: " + "x" * 193
        runs.append(r)
    return json.dumps({"runs": runs}, separators=(",", ":"))

def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

def main():
    d = tempfile.mkdtemp(prefix="hist-bench.")
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
                urllib.request.urlopen(url + "/health", timeout=1).read(); break
            except Exception:
                time.sleep(0.1)
        cases = {"without": None, "with (10 successes)": history(False),
                 "with (10 failures, 200-byte errors)": history(True)}
        res = {k: [0, 0.0, 0] for k in cases}
        for rnd in range(2):
            for name, h in cases.items():
                body = end_txn("web1", "v42", h)
                c0 = cpu(etcd.pid)
                for i in range(N // 2):
                    req = urllib.request.Request(url + "/v3/kv/txn", data=body,
                                                 headers={"Content-Type": "application/json"})
                    urllib.request.urlopen(req).read()
                res[name][0] = len(body)
                res[name][1] += cpu(etcd.pid) - c0
                res[name][2] += N // 2
        for name, (size, c, n) in res.items():
            print(f"{name:38s} {size:6d} bytes/txn  {1000 * c / n:6.3f} ms etcd CPU/txn  ({n} txns)")
        print(f"history value: {len(history(False))} bytes typical, {len(history(True))} worst case")
    finally:
        etcd.terminate(); etcd.wait()
        shutil.rmtree(d, ignore_errors=True)

main()
