import base64, json, os, socket, sys, threading
path, mode = sys.argv[1], sys.argv[2]
ls = socket.socket(socket.AF_UNIX); ls.bind(path); ls.listen(16)
def read_req(c):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(65536)
        if not d: return None
        buf += d
    head, body = buf.split(b"\r\n\r\n", 1)
    n = 0
    for l in head.split(b"\r\n"):
        if l.lower().startswith(b"content-length:"): n = int(l.split(b":")[1])
    while len(body) < n:
        d = c.recv(65536)
        if not d: break
        body += d
    return head.decode(), body
def reply(c, status, body, ctype="application/json"):
    c.sendall(("HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (status, ctype, len(body))).encode() + body)
def result(stdout=b"", **kw):
    r = {"exit_code": 0, "stdout": base64.b64encode(stdout).decode(), "stderr": "", "stdout_truncated": False,
         "stderr_truncated": False, "timed_out": False, "killed_by": None, "files_changed": [],
         "files_changed_truncated": False, "duration_ms": 1}
    r.update(kw); return r
def serve(c):
    rq = read_req(c)
    if not rq: c.close(); return
    head, body = rq
    line = head.split("\r\n")[0]
    if line.startswith("GET /v1/health"):
        reply(c, "200 OK", b'{"status":"ok","mechanism":"fake","live":0,"max_sandboxes":64,"shutting_down":false}')
    elif line.startswith("POST /v1/sandboxes "):
        spec = json.loads(body)
        eid = spec.get("environment_id") or "env_" + "0" * 32
        sp = spec["spec"]
        h = {"environment_id": eid, "tenant_id": sp["tenant_id"], "run_id": sp["run_id"], "lease_epoch": sp["lease_epoch"],
             "created_at": "2026-12-01T00:00:00.000Z", "expires_at": "2099-12-01T00:00:00.000Z"}
        open(path + ".eid", "w").write(eid)
        reply(c, "201 Created", json.dumps({"handle": h}).encode())
    elif "/execute" in line:
        eid = open(path + ".eid").read()
        ev = [{"event": "started", "environment_id": eid}]
        if mode == "events-past-cap":
            ev.append({"event": "output", "stream": "stdout", "data": base64.b64encode(b"E" * 1000).decode()})
            ev.append({"event": "result", "result": result(b"")})
        elif mode == "events-not-result":
            ev.append({"event": "output", "stream": "stdout", "data": base64.b64encode(b"EVIL").decode()})
            ev.append({"event": "result", "result": result(b"good")})
        elif mode == "result-past-cap":
            ev.append({"event": "result", "result": result(b"R" * 1000)})
        data = b"".join(json.dumps(e).encode() + b"\n" for e in ev)
        reply(c, "200 OK", data, "application/x-ndjson")
    elif line.startswith("DELETE"):
        c.sendall(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
    else:
        reply(c, "404 Not Found", b'{"error":"ToolValidationError","message":"no"}')
    c.close()
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
