#!/usr/bin/env python3
"""One end of a TCP throughput measurement between hosts of scripts/cluster.sh.

  bridge_rate.py receive PORT SECONDS   accepts one connection, reads for SECONDS after the
                                        first byte, prints the bytes and seconds it got
  bridge_rate.py send HOST PORT SECONDS connects (retrying for 10 s) and writes for SECONDS
"""
import socket
import sys
import time

CHUNK = 1 << 20


def receive(port, seconds):
    with socket.create_server(("0.0.0.0", port)) as server:
        conn, _ = server.accept()
        with conn:
            got = len(conn.recv(CHUNK))
            start = time.monotonic()
            while time.monotonic() - start < seconds:
                data = conn.recv(CHUNK)
                if not data:
                    break
                got += len(data)
            print(got, time.monotonic() - start)


def send(host, port, seconds):
    deadline = time.monotonic() + 10
    while True:
        try:
            conn = socket.create_connection((host, port))
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    payload = bytes(CHUNK)
    with conn:
        end = time.monotonic() + seconds + 1
        try:
            while time.monotonic() < end:
                conn.sendall(payload)
        except OSError:
            pass  # the receiver is done


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "receive":
        receive(int(sys.argv[2]), float(sys.argv[3]))
    elif len(sys.argv) == 5 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(__doc__)
