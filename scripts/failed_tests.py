#!/usr/bin/env python3
"""Prints what each failed test wrote, from CTest's Testing/Temporary/LastTest.log.

scripts/test.sh runs it after a failed CTest so that the failures' own
output comes last, where a reader of only the log's tail sees it (CTest
prints it in the middle, when the test ends). Per failed test: its name and
the last LINES lines of its output (default 150), bytes shown as text with
invalid UTF-8 replaced.

  failed_tests.py BUILD_DIR [LINES]
"""
import os
import re
import sys


def main(argv):
    if not argv:
        sys.stderr.write(__doc__)
        return 2
    lines_kept = int(argv[1]) if len(argv) > 1 else 150
    path = os.path.join(argv[0], "Testing", "Temporary", "LastTest.log")
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError as e:
        print("failed_tests.py: cannot read %s: %s" % (path, e))
        return 1
    # One block per test: "N/M Testing: NAME" ... "Test Passed." | "Test Failed." | other verdicts.
    blocks = re.split(r"\n(?=\d+/\d+ Testing: )", text)
    shown = 0
    for b in blocks:
        m = re.match(r"(\d+/\d+) Testing: (.*)", b)
        if not m:
            continue
        verdict = re.search(r"\n-{20,}\n(Test [^\n]*)", b)
        if verdict and verdict.group(1).startswith("Test Passed"):
            continue
        out = b.split("\nOutput:\n", 1)[1] if "\nOutput:\n" in b else b
        out = out.split("<end of output>", 1)[0]
        tail = out.rstrip("\n").split("\n")[-lines_kept:]
        print("=" * 78)
        print("FAILED: %s (%s)" % (m.group(2).strip(), verdict.group(1) if verdict else "no verdict"))
        print("\n".join(tail))
        shown += 1
    print("=" * 78)
    print("failed_tests.py: %d test(s) not passed in %s" % (shown, path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
