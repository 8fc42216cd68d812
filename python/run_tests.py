"""Runs the Python package's tests (standard library unittest) and prints one closing line,
`python: N passed, N failed, N skipped`. Exits 1 when a test fails or when no test ran (the
suite has tests, so none running means it was not found). With `--no-skips` (CI) a skipped test
is a failure too: every test must run there, so a missing dependency is installed, not skipped.
With `--installed` the package is the one installed in this Python (a wheel), not the checkout's
`python/tvmrt`: the run fails unless `tvmrt` and its library come from site-packages."""

import os
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent


def check_installed() -> None:
    """The package comes from the environment's site-packages (a wheel's install, not this
    checkout) and the library loaded is the one bundled with it."""
    import sysconfig

    import tvmrt

    paths = sysconfig.get_paths()
    sites = {Path(paths[key]).resolve() for key in ("purelib", "platlib")}
    package = Path(tvmrt.__file__).resolve()
    if not any(site in package.parents for site in sites):
        raise SystemExit(f"python: the package is {package}, not under {sorted(map(str, sites))}")
    library = Path(tvmrt.library_path()).resolve()
    bundled = package.parent / "lib" / "libtvmrt.so"
    if library != bundled:
        raise SystemExit(f"python: the library loaded is {library}, not the bundled {bundled}")
    core = tvmrt._ffi._core
    if os.environ.get("TVMRT_PYTHON_EXTENSION", "1") != "0" and (
        core is None or Path(core.__file__).resolve().parent != package.parent
    ):
        raise SystemExit(f"python: the wheel's C extension is not the one in use ({core})")
    print(f"python: testing the installed package {package.parent} (its bundled {library.name})")


def main() -> int:
    if "--installed" in sys.argv[1:]:
        # Python put this script's directory (the checkout's package root) first on the path.
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
        check_installed()
    else:
        sys.path.insert(0, str(HERE))
    suite = unittest.defaultTestLoader.discover(str(HERE / "tests"))
    verbosity = 2 if os.environ.get("VERBOSE") else 1
    result = unittest.TextTestRunner(verbosity=verbosity).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    sys.stderr.flush()
    print(f"python: {passed} passed, {failed} failed, {skipped} skipped", flush=True)
    if result.testsRun == 0:
        print("python: no tests ran (is python/tests missing?)", file=sys.stderr)
        return 1
    if skipped and "--no-skips" in sys.argv[1:]:
        for test, reason in result.skipped:
            print(f"python: skipped under --no-skips: {test.id()}: {reason}", file=sys.stderr)
        return 1
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
