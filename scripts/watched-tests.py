#!/usr/bin/env python3
"""Runs a `swift test` command, passing its output through, and reports a hang itself.

    scripts/watched-tests.py [--quiet-minutes 10] -- swift test ...

A test that never ends leaves a run waiting until CI's hard limit kills it, with nothing
saying which test it was. This watches Swift Testing's lines (`◇ Test "…" started.`, then
`✔`/`✘ Test "…" … passed`/`failed`, `➖ … skipped`): whenever no test has ended for
--quiet-minutes, it prints the tests still running and how long each has run, then keeps
waiting. It changes nothing else: the command's exit status is its own.
"""
import argparse, collections, re, subprocess, sys, threading, time

STARTED = re.compile(r'^◇ Test (".*") started\.$')
ENDED = re.compile(r'^(?:✔|✘|➖) Test (".*")(?: with \d+ test cases?)? (?:passed|failed|skipped)\b')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quiet-minutes", type=float, default=10)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    running = collections.defaultdict(list)  # name -> start times (a name can repeat)
    lock = threading.Lock()
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
            print(f"\n== no test has ended for {a.quiet_minutes:g} min; still running ({len(still)}):\n{lines}\n", flush=True)

    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    threading.Thread(target=watch, daemon=True).start()
    for raw in proc.stdout:
        sys.stdout.buffer.write(raw)
        sys.stdout.buffer.flush()
        line = raw.decode(errors="replace").rstrip("\n")
        if m := STARTED.match(line):
            with lock:
                running[m.group(1)].append(time.monotonic())
        elif m := ENDED.match(line):
            with lock:
                last_end[0] = time.monotonic()
                if running.get(m.group(1)):
                    running[m.group(1)].pop(0)
                    if not running[m.group(1)]:
                        del running[m.group(1)]
    done.set()
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
