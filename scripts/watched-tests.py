#!/usr/bin/env python3
"""Runs a `swift test` command, passing its output through, and reports a hang itself.

    scripts/watched-tests.py [--quiet-minutes 10] -- swift test ...

A test that never ends leaves a run waiting until CI's hard limit kills it, with nothing
saying which test it was. This watches Swift Testing's lines (`◇ Test "…" started.`, then a
`Test "…"` line that `passed after`, `failed after` or was `skipped`): whenever no test has
ended for --quiet-minutes while tests run (the build before them does not count), it prints
the tests still running and how long each has run, then keeps waiting. The command's output
(stdout and stderr, in one stream) passes through a pipe, so it has no terminal colours; the
wrapper exits with the command's status (128 + N for a signal N, as a shell says); SIGINT and
SIGTERM are passed on to it.
"""
import argparse, collections, re, signal, subprocess, sys, threading, time

STARTED = re.compile(r'^◇ Test (".*") started\.$')
ENDED = re.compile(r'^\S+ Test (".*")(?: with \d+ test cases?)? (?:passed after |failed after |skipped)')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quiet-minutes", type=float, default=10)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    running = collections.defaultdict(list)  # name -> start times (a name can repeat)
    lock = threading.Lock()
    output = threading.Lock()  # the command's lines and a report never interleave
    last_end = [time.monotonic()]
    done = threading.Event()

    def watch():
        quiet = a.quiet_minutes * 60
        while not done.wait(min(30, quiet / 2)):
            with lock:
                if time.monotonic() - last_end[0] < quiet or not running:
                    continue
                now = time.monotonic()
                still = sorted(((now - t, name) for name, times in running.items() for t in times), reverse=True)
                last_end[0] = now  # report again after another quiet spell
            lines = "\n".join(f"  {name}: running for {age / 60:.1f} min" for age, name in still)
            with output:
                sys.stdout.buffer.write(f"\n== no test has ended for {a.quiet_minutes:g} min; still running ({len(still)}):\n{lines}\n\n".encode())
                sys.stdout.buffer.flush()

    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda received, _: proc.send_signal(received))
    threading.Thread(target=watch, daemon=True).start()
    for raw in proc.stdout:
        with output:
            sys.stdout.buffer.write(raw)
            sys.stdout.buffer.flush()
        line = raw.decode(errors="replace").rstrip("\n")
        if m := STARTED.match(line):
            with lock:
                if not running:
                    last_end[0] = time.monotonic()  # the quiet spell starts with a test, not with the build
                running[m.group(1)].append(time.monotonic())
        elif m := ENDED.match(line):
            with lock:
                last_end[0] = time.monotonic()
                if running.get(m.group(1)):
                    running[m.group(1)].pop(0)
                    if not running[m.group(1)]:
                        del running[m.group(1)]
    done.set()
    code = proc.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
