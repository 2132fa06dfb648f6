"""The benchmark suite (``outre bench``) as a script: the same arguments, e.g.

    python benchmarks/bench_suite.py --quick
    python benchmarks/bench_suite.py --preset igb-like --repeats 3 --out results

The harness lives in the installed package (``outre_async.bench``) so that ``outre bench`` works from
a fresh install; this file only forwards to it.  Nothing here is asserted in CI.
"""

from __future__ import annotations

import sys

from outre_async.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
