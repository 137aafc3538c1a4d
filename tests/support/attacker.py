"""What an unprivileged local user does to a root headroom daemon, for
tests/attacks.rs: one subcommand per attack, run as that user (through
setpriv). Each prints one line per event on stdout, flushed at once, and
holds its sockets and children until it is killed (the test kills its whole
process group).

    hold PORT N                 open N idle TCP connections and keep them
    slowloris PORT N BYTES      N connections, each sending BYTES of headers
                                that never end
    argv N BYTES                N sleeping processes with BYTES of argv each
    noread PORT N PATH          N `GET PATH` requests whose answers are never read
    streams PORT N              N event streams (`GET /api/v1/stream`), each read
                                up to its status line, then held open unread:
                                `streams ok=K refused=R`
    listen                      a loopback listener that reports every byte it gets
    get URL                     one GET: the status, then the body
    squat MARKER                a loopback listener on a free port (`port N`)
                                answering every request 200 with a doctored
                                JSON snapshot holding MARKER, reporting each
                                request (`request LINE`)

    maps DIR N COUNT PATHLEN    N processes named python3, each with COUNT
                                mappings of one file in DIR whose path is
                                about PATHLEN bytes long: `mapped K pids=…`
    jupyter-server DIR KERNEL NOTEBOOK
                                a fake Jupyter server whose runtime file in DIR
                                names it, listing KERNEL as running NOTEBOOK;
                                `port P`, then `asked` for each request
    jupyter-slow DIR N          N fake Jupyter servers with runtime files in
                                DIR that accept and never answer: `ports …`,
                                then `accepted I` for each connection

    churn PROGRAM DIR RATE LIFE start `PROGRAM -f FILE` (FILE each Jupyter
                                connection file DIR holds in turn) RATE times
                                a second, each killed LIFE seconds later:
                                short-lived kernel-like processes;
                                `status spawned=S live=L` every second

Status lines while holding connections: `status open=O cut=C`, where cut
counts connections the daemon closed or reset.
"""

import collections
import errno
import os
import resource
import selectors
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def raise_nofile():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def connect_many(port, n, rcvbuf=None, within=20.0, in_flight=64):
    """Open N connections, at most `in_flight` at a time (a burst beyond the
    daemon's listen queue leaves connections the client thinks open and the
    server never accepted); wait up to `within` seconds in all.
    Returns (established, still connecting, refused)."""
    sel = selectors.DefaultSelector()
    refused = 0
    pending = set()
    established = []
    started = 0
    deadline = time.monotonic() + within
    while (started < n or pending) and time.monotonic() < deadline:
        while started < n and len(pending) < in_flight:
            started += 1
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if rcvbuf:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            s.setblocking(False)
            err = s.connect_ex(("127.0.0.1", port))
            if err not in (0, errno.EINPROGRESS):
                refused += 1
                s.close()
                continue
            pending.add(s)
            sel.register(s, selectors.EVENT_WRITE)
        for key, _ in sel.select(timeout=0.2):
            s = key.fileobj
            sel.unregister(s)
            pending.discard(s)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                refused += 1
                s.close()
            else:
                established.append(s)
        # Give the daemon a moment to accept the ones in its queue.
        time.sleep(0.005)
    sel.close()
    return established, list(pending), refused


def is_cut(s):
    """True once the peer closed or reset `s` (s is non-blocking)."""
    try:
        data = s.recv(65536, socket.MSG_PEEK)
    except BlockingIOError:
        return False
    except OSError:
        return True
    if data == b"":
        return True
    # An answer (e.g. 503 or 431) without a close yet: drain it, still open.
    try:
        s.recv(65536)
    except OSError:
        return True
    return False


def report_forever(socks, already_cut=0):
    cut = set()
    while True:
        for s in socks:
            if s not in cut and is_cut(s):
                cut.add(s)
        say(f"status open={len(socks) - len(cut)} cut={len(cut) + already_cut}")
        time.sleep(1)


def hold(port, n):
    raise_nofile()
    est, pending, refused = connect_many(port, n)
    say(f"connected {len(est)} connecting={len(pending)} refused={refused}")
    report_forever(est, refused)


def slowloris(port, n, size):
    raise_nofile()
    head = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    line = b"X-Pad: " + b"a" * 1000 + b"\r\n"
    payload = head + line * ((size - len(head)) // len(line))
    view = memoryview(payload)
    est, pending, refused = connect_many(port, n)
    say(f"connected {len(est)} connecting={len(pending)} refused={refused}")
    sel = selectors.DefaultSelector()
    offset = {}
    for s in est:
        offset[s] = 0
        sel.register(s, selectors.EVENT_WRITE)
    cut = refused
    complete = 0
    sent = 0
    last_progress = time.monotonic()
    deadline = time.monotonic() + 30
    while offset and time.monotonic() < deadline and time.monotonic() - last_progress < 5:
        for key, _ in sel.select(timeout=0.2):
            s = key.fileobj
            try:
                k = s.send(view[offset[s]:offset[s] + 65536])
            except BlockingIOError:
                continue
            except OSError:
                cut += 1
                sel.unregister(s)
                del offset[s]
                continue
            sent += k
            offset[s] += k
            last_progress = time.monotonic()
            if offset[s] >= len(payload):
                complete += 1
                sel.unregister(s)
                del offset[s]
    sel.close()
    say(f"sent bytes={sent} complete={complete} stalled={len(offset)} cut={cut}")
    report_forever(est, refused)


def argv(n, size):
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    # The kernel takes argv up to a quarter of the stack limit (at most 6 MiB).
    want = 64 << 20
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    resource.setrlimit(resource.RLIMIT_STACK, (want, hard))
    chunk = 100_000
    args = ["A" * chunk] * max(1, size // chunk)
    children = []
    for _ in range(n):
        children.append(
            subprocess.Popen(
                ["/bin/sh", "-c", "sleep 100000; :", "sh"] + args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    say(f"spawned {len(children)} pids={','.join(str(c.pid) for c in children)}")
    while True:
        time.sleep(3600)


def noread(port, n, path):
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # A small window: the answer stays in the daemon, not in our buffers.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(10)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(request)
            socks.append(s)
        except OSError as e:
            say(f"failed {e}")
    say(f"sent {len(socks)}")
    while True:
        time.sleep(3600)


def streams(port, n):
    request = b"GET /api/v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    held, ok, refused = [], 0, 0
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(10)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(request)
            line = s.recv(64).split(b"\r\n", 1)[0]
        except OSError as e:
            say(f"failed {e}")
            continue
        if line.startswith(b"HTTP/1.1 200"):
            ok += 1
        else:
            refused += 1
        held.append(s)
    say(f"streams ok={ok} refused={refused}")
    while True:
        time.sleep(3600)


def listen():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    say(f"port {srv.getsockname()[1]}")

    def serve(conn):
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return
            say(f"received {len(data)} {data[:300]!r}")

    while True:
        conn, _ = srv.accept()
        say("accepted")
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def squat(marker):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    say(f"port {srv.getsockname()[1]}")
    body = (
        '{"taken_at":0,"doctored_by":"%s","system":{"total":1,"available":1},'
        '"processes":[]}' % marker
    ).encode()
    answer = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body)
    ) + body

    def serve(conn):
        conn.settimeout(10)
        try:
            head = conn.recv(65536)
            line = head.split(b"\r\n", 1)[0]
            say(f"request {line.decode('latin-1')}")
            conn.sendall(answer)
        except OSError:
            pass
        finally:
            conn.close()

    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            status, body = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read()
    say(str(status))
    sys.stdout.write(body.decode("utf-8", "replace"))
    sys.stdout.flush()


# --- Huge /proc/PID/maps, and Jupyter servers that lie or stall -----------


def maps(directory, n, count, pathlen):
    """Map one page of a file with a long path COUNT times (up to the
    kernel's vm.max_map_count), then fork into N processes that keep the
    mappings: every one is named python3 and its maps is COUNT lines of
    PATHLEN bytes."""
    import ctypes

    path = directory
    while len(path) + 2 * 201 < pathlen:
        path = os.path.join(path, "d" * 200)
        os.mkdir(path)
    name = "m" * max(1, min(250, pathlen - len(path) - 1 - 3)) + ".so"
    target = os.path.join(path, name)
    with open(target, "wb") as out:
        out.write(b"\0" * 4096)
    fd = os.open(target, os.O_RDONLY)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                          ctypes.c_int, ctypes.c_int, ctypes.c_long]
    prot_read, map_private = 1, 2
    mapped = 0
    for _ in range(count):
        addr = libc.mmap(None, 4096, prot_read, map_private, fd, 0)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            break
        mapped += 1
    pids = [os.getpid()]
    for _ in range(n - 1):
        pid = os.fork()
        if pid == 0:
            while True:
                time.sleep(3600)
        pids.append(pid)
    say(f"mapped {mapped} path_bytes={len(target)} pids={','.join(map(str, pids))}")
    while True:
        time.sleep(3600)


def runtime_file(directory, name, port, token):
    """Write a jupyter_server runtime file naming this process and PORT."""
    info = {
        "base_url": "/", "hostname": "127.0.0.1", "password": False,
        "pid": os.getpid(), "port": port, "root_dir": directory,
        "secure": False, "sock": "", "token": token,
        "url": f"http://127.0.0.1:{port}/", "version": "2.21.1",
    }
    import json
    final = os.path.join(directory, name)
    fd = os.open(final + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(info, out)
    os.rename(final + ".tmp", final)


def jupyter_server(directory, kernel, notebook):
    import json
    token = f"token-{os.getpid()}"
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    port = srv.getsockname()[1]
    body = json.dumps([{
        "id": "s1", "path": notebook, "name": os.path.basename(notebook),
        "type": "notebook", "kernel": {"id": kernel, "name": "python3"},
    }]).encode()
    runtime_file(directory, f"jpserver-{os.getpid()}.json", port, token)
    say(f"port {port}")
    while True:
        conn, _ = srv.accept()
        conn.settimeout(5)
        head = b""
        try:
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                head += chunk
            say(f"asked {head.split(b' ', 2)[1].decode('latin-1') if b' ' in head else '?'}")
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                         + body)
        except OSError:
            pass
        conn.close()


def jupyter_slow(directory, n):
    listeners = []
    for i in range(n):
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.bind(("127.0.0.1", 0))
        srv.listen(16)
        listeners.append(srv)
        port = srv.getsockname()[1]
        runtime_file(directory, f"jpserver-{os.getpid() * 100 + i}.json", port, f"slow-{i}")
    say("ports " + " ".join(str(s.getsockname()[1]) for s in listeners))
    sel = selectors.DefaultSelector()
    for i, srv in enumerate(listeners):
        sel.register(srv, selectors.EVENT_READ, i)
    held = []
    while True:
        for key, _ in sel.select():
            conn, _ = key.fileobj.accept()
            held.append(conn)
            say(f"accepted {key.data}")

def churn(program, directory, rate, life):
    files = sorted(
        os.path.join(directory, f)
        for f in os.listdir(directory)
        if f.startswith("kernel-") and f.endswith(".json")
    )
    name = os.path.basename(program)
    live = collections.deque()
    spawned = 0
    started = time.monotonic()
    last_status = started
    while True:
        now = time.monotonic()
        # Behind schedule (a busy machine): at most a tenth of a second's
        # worth at once, the rest given up.
        due = int((now - started) * rate)
        spawned = max(spawned, due - max(1, rate // 10))
        while spawned < due:
            path = files[spawned % len(files)]
            try:
                pid = os.posix_spawn(program, [name, "-f", path], {})
            except OSError as e:
                say(f"failed {e}")
                break
            live.append((now + life, pid))
            spawned += 1
        while live and live[0][0] <= now:
            _, pid = live.popleft()
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if now - last_status >= 1:
            last_status = now
            say(f"status spawned={spawned} live={len(live)}")
        time.sleep(0.002)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "hold":
        hold(int(args[0]), int(args[1]))
    elif cmd == "slowloris":
        slowloris(int(args[0]), int(args[1]), int(args[2]))
    elif cmd == "argv":
        argv(int(args[0]), int(args[1]))
    elif cmd == "noread":
        noread(int(args[0]), int(args[1]), args[2])
    elif cmd == "streams":
        streams(int(args[0]), int(args[1]))
    elif cmd == "listen":
        listen()
    elif cmd == "get":
        get(args[0])
    elif cmd == "squat":
        squat(args[0])
    elif cmd == "maps":
        maps(args[0], int(args[1]), int(args[2]), int(args[3]))
    elif cmd == "jupyter-server":
        jupyter_server(args[0], args[1], args[2])
    elif cmd == "jupyter-slow":
        jupyter_slow(args[0], int(args[1]))
    elif cmd == "churn":
        churn(args[0], args[1], int(args[2]), float(args[3]))
    else:
        sys.exit(f"unknown attack {cmd!r}; see the docstring")


if __name__ == "__main__":
    main()
