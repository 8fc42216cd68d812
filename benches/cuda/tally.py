"""PASS/FAIL lines and their count, as the GPU run's scripts print them (benches/gpu/run.sh reads
the last line, `NAME: N passed, N failed`)."""


class Tally:
    """Counts the checks of one script and prints each as a PASS or FAIL line."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def report(self, ok, what, detail=""):
        self.passed += bool(ok)
        self.failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}", flush=True)

    def finish(self, name):
        """Prints the count line; the exit status: 0 when something passed and nothing failed."""
        print(f"{name}: {self.passed} passed, {self.failed} failed")
        return 0 if self.failed == 0 and self.passed > 0 else 1
