"""A stand-in for Nsight Systems' `nsys`, for tests on machines without it (run through an executable `nsys`
script that the tests write). It does what nsysql needs nsys to do, with a real export:

- `nsys profile [--switch=value ...] --output=BASE [--export=sqlite] COMMAND ...`: runs COMMAND (a SIGINT it gets
  is passed on to COMMAND, as nsys stops a collection), then writes BASE.nsys-rep (and with --export=sqlite
  BASE.sqlite, a copy of $FAKE_NSYS_EXPORT, default fixtures/train_small) and exits with COMMAND's status;
  $FAKE_NSYS_NO_EXPORT=1: writes neither.
- `nsys profile --help`: lists the switches nsysql sets, less those named in $FAKE_NSYS_LACKS (comma-separated),
  and what --trace traces (`osrt` among them unless $FAKE_NSYS_LACKS names `osrt`).
- `nsys export --type sqlite [--include-blobs=true] --output OUT --force-overwrite true REPORT`: copies
  $FAKE_NSYS_EXPORT to OUT (refusing --include-blobs, by name, when $FAKE_NSYS_LACKS names it);
  $FAKE_NSYS_FAIL=1: fails with a message; $FAKE_NSYS_HANG=1: never finishes (sleeps); $FAKE_NSYS_FLOOD=N:
  prints N MiB on stdout first, then a last line on stderr, and fails. $FAKE_NSYS_TRUNCATE=N: writes only its first N
  bytes, and exits 0.

Every call is logged, one JSON list of its arguments a line, to $FAKE_NSYS_LOG when set.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXPORT = os.environ.get("FAKE_NSYS_EXPORT") or str(ROOT / "fixtures" / "train_small" / "train_small.sqlite")


HELP = (
    "--trace",
    "--sample",
    "--cpuctxsw",
    "--osrt-threshold",
    "--osrt-backtrace-threshold",
    "--cuda-graph-trace",
    "--gpu-metrics-devices",
    "--trace-fork-before-exec",
    "--python-sampling",
    "--force-overwrite",
    "--output",
    "--export",
)


def main(args):
    if os.environ.get("FAKE_NSYS_LOG"):
        with open(os.environ["FAKE_NSYS_LOG"], "a") as f:
            f.write(json.dumps(args) + "\n")
    if args[:1] == ["export"]:
        if os.environ.get("FAKE_NSYS_HANG"):
            time.sleep(3600)
        if os.environ.get("FAKE_NSYS_FLOOD"):
            line = b"Processing events... " * 50 + b"\n"
            block = line * (2**20 // len(line) + 1)
            for _ in range(int(os.environ["FAKE_NSYS_FLOOD"])):
                sys.stdout.buffer.write(block[: 2**20])
            sys.stdout.buffer.write(b"\n")
            sys.stdout.flush()
            print("ERROR: out of patience (fake)", file=sys.stderr)
            return 1
        if os.environ.get("FAKE_NSYS_FAIL"):
            print("ERROR: cannot import the report (fake)", file=sys.stderr)
            return 1
        lacks = os.environ.get("FAKE_NSYS_LACKS", "").split(",")
        if "--include-blobs" in lacks and any(a.startswith("--include-blobs") for a in args):
            print("unrecognised option '--include-blobs=true' (fake)", file=sys.stderr)
            return 1
        out = args[args.index("--output") + 1]
        shutil.copyfile(EXPORT, out)
        if os.environ.get("FAKE_NSYS_TRUNCATE"):
            os.truncate(out, int(os.environ["FAKE_NSYS_TRUNCATE"]))
        return 0
    if args[:1] != ["profile"]:
        print(f"fake nsys: unsupported {args[:1]}", file=sys.stderr)
        return 1
    rest = args[1:]
    if rest == ["--help"]:  # the switches of nsys 2025.3 that nsysql sets, less those in $FAKE_NSYS_LACKS
        lacks = os.environ.get("FAKE_NSYS_LACKS", "").split(",")
        for s in HELP:
            if s not in lacks:
                print(f"    {s}=<value>\n        what it does")
        traced = ["cuda", "nvtx", *([] if "osrt" in lacks else ["osrt"]), "none"]
        print(f"    -t, --trace=\n        Possible values are {', '.join(traced)}")
        return 0
    base = None
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        if rest[i].startswith("--output="):
            base = rest[i].split("=", 1)[1]
        i += 1
    child = subprocess.Popen(rest[i:])
    signal.signal(signal.SIGINT, lambda *_: child.send_signal(signal.SIGINT))
    code = child.wait()
    if not os.environ.get("FAKE_NSYS_NO_EXPORT"):
        Path(base + ".nsys-rep").write_bytes(b"PK\x03\x04 fake report")
        if "--export=sqlite" in rest[:i]:
            shutil.copyfile(EXPORT, base + ".sqlite")
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
