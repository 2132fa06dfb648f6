"""Run many ``outre`` invocations in one process and report each one's exit code and stderr as JSON.

    python cli_driver.py CASES.json OUT.json

``CASES.json`` is a list of argv lists.  Each case runs ``outre_async.cli.main(argv)`` with stderr
captured; an exception escaping ``main`` (what a user would see as a traceback) is recorded with its
traceback.  The address space is capped (``RLIMIT_AS``) so that a size the CLI fails to refuse ends
in ``MemoryError`` here, a recorded failure, and not in the OOM killer on a shared machine.  Results
are written after every case, so a crash (SIGBUS, SIGSEGV) still leaves the cases before it.
"""

from __future__ import annotations

import contextlib
import io
import json
import resource
import sys
import time
import traceback


def run_case(argv: list[str]) -> dict[str, object]:
    from outre_async.cli import main

    err, out = io.StringIO(), io.StringIO()
    code: object
    tb = None
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own exit, as the console script would see it
            code = exc.code
        except BaseException:  # noqa: BLE001 - a traceback the user would see is the finding
            code = None
            tb = traceback.format_exc()
    return {"argv": argv, "code": code, "stderr": err.getvalue(), "traceback": tb}


def main() -> int:
    cases_path, out_path = sys.argv[1], sys.argv[2]
    limit = 6 << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    with open(cases_path) as f:
        cases = json.load(f)
    results = []
    for argv in cases:
        start = time.perf_counter()
        results.append(run_case(argv))
        print(f"{time.perf_counter() - start:6.2f} s  {results[-1]['code']}  {' '.join(argv)}", file=sys.__stderr__,
              flush=True)
        with open(out_path, "w") as f:
            json.dump(results, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
