"""hcbench's controlled unittest runner (shipped inside hcbench, written outside the workspace).

hcbench runs it as `python3 -s -B <this file> --start-dir tests --results <file> --nonce-file <file>`
with the workspace as working directory. It discovers the tests like `python3 -m unittest
discover -s tests`, runs them with a result object of its own, prints unittest's usual output,
and at the very end writes one JSON file naming every test and its outcome. hcbench judges that
file, not the exit code alone: code under test that exits early (`os._exit(0)` at import)
leaves no file, and a runner monkeypatched from inside the test process is reported as
`tampered`.

Why it is shaped this way:
- Everything the verdict depends on (unittest's execution machinery, this file's own
  functions, os._exit, json, file writing) is captured BEFORE any test module is imported, and
  compared by identity after the run.
- The nonce hcbench wrote is read and its file removed before any test module is imported, so
  a results file forged by code under test does not carry it (without digging in this
  process's memory: see docs/security.md for that limit).
- The results are written to a temporary file and renamed, with `complete: true`, and then the
  process ends with os._exit, so no atexit handler or thread of the code under test runs after.
  They are not synced: hcbench reads them once, right after the run, from the page cache, and
  a crash of the machine loses the cell whatever was on disk.
"""

import builtins
import io
import json
import os
import sys
import time
import unittest
import unittest.case
import unittest.loader
import unittest.result
import unittest.runner
import unittest.suite

SCHEMA = 1

# Captured before any test module runs; see the module docstring.
_exit = os._exit
_open = os.open
_write = os.write
_close = os.close
_replace = os.replace
_unlink = os.unlink
_dumps = json.dumps
_isinstance = builtins.isinstance
_TestCase = unittest.case.TestCase
_TestSuite = unittest.suite.TestSuite
_BaseTestSuite = unittest.suite.BaseTestSuite
_TextTestResult = unittest.runner.TextTestResult


def _snapshot():
    """Identity of every attribute the verdict relies on, by a stable name.

    Modules are compared on the names they had before the run (a module may gain attributes
    lazily, as unittest does for IsolatedAsyncioTestCase); classes on every name, since a new
    method on a class can shadow an inherited one.
    """
    modules = {
        "unittest": unittest,
        "unittest.case": unittest.case,
        "unittest.suite": unittest.suite,
        "unittest.result": unittest.result,
        "unittest.loader": unittest.loader,
        "unittest.runner": unittest.runner,
        "builtins": builtins,
        "os": os,
        "json": json,
        "runner": sys.modules[__name__],
    }
    classes = {
        "TestCase": _TestCase,
        "TestSuite": _TestSuite,
        "BaseTestSuite": _BaseTestSuite,
        "TestResult": unittest.result.TestResult,
        "TextTestResult": _TextTestResult,
        "TestLoader": unittest.loader.TestLoader,
        "_Outcome": unittest.case._Outcome,
        "Recorder": Recorder,
    }
    snap = {}
    for prefix, obj in list(modules.items()) + list(classes.items()):
        for name, value in list(vars(obj).items()):
            snap[prefix + "." + name] = (id(value), prefix in classes)
    return snap


def _changed(before, after):
    """Names whose object changed or vanished; names new to a class."""
    out = [n for n, (ident, _) in before.items() if after.get(n, (None,))[0] != ident]
    out += [n for n, (_, in_class) in after.items() if in_class and n not in before]
    return sorted(out)


class Recorder(_TextTestResult):
    """unittest's text result (same output), recording each test's outcome by id."""

    # Worse outcomes win when one test reports several (a failing subtest, then teardown).
    RANK = {"passed": 0, "skipped": 1, "expected_failure": 1, "unexpected_success": 2, "failed": 3, "error": 4}

    def __init__(self, stream):
        super().__init__(stream, True, 1)
        self.outcomes = {}
        self.machinery = []

    def _note(self, test, outcome):
        # unittest reports module import errors and class fixtures as pseudo-tests; keep their id.
        tid = test.id()
        old = self.outcomes.get(tid)
        if old is None or self.RANK[outcome] > self.RANK[old]:
            self.outcomes[tid] = outcome

    def startTest(self, test):
        # The machinery that runs the test must be unittest's own, not one swapped in by the
        # code under test (on the class or any base it inherits from).
        cls = type(test)
        if _isinstance(test, _TestCase):
            for name in ("run", "__call__", "_callTestMethod", "_callSetUp", "_callTearDown", "doCleanups"):
                if getattr(cls, name, None) is not _ORIGINAL[name]:
                    self.machinery.append(cls.__module__ + "." + cls.__qualname__ + "." + name)
        _TextTestResult.startTest(self, test)

    def addSuccess(self, test):
        _TextTestResult.addSuccess(self, test)
        self._note(test, "passed")

    def addFailure(self, test, err):
        _TextTestResult.addFailure(self, test, err)
        self._note(test, "failed")

    def addError(self, test, err):
        _TextTestResult.addError(self, test, err)
        self._note(test, "error")

    def addSkip(self, test, reason):
        _TextTestResult.addSkip(self, test, reason)
        self._note(test, "skipped")

    def addExpectedFailure(self, test, err):
        _TextTestResult.addExpectedFailure(self, test, err)
        self._note(test, "expected_failure")

    def addUnexpectedSuccess(self, test):
        _TextTestResult.addUnexpectedSuccess(self, test)
        self._note(test, "unexpected_success")

    def addSubTest(self, test, subtest, err):
        _TextTestResult.addSubTest(self, test, subtest, err)
        if err is not None:
            # A failing subtest fails its test; unittest then reports no success for it.
            failed = issubclass(err[0], test.failureException)
            self._note(test, "failed" if failed else "error")


_ORIGINAL = {
    name: getattr(_TestCase, name)
    for name in ("run", "__call__", "_callTestMethod", "_callSetUp", "_callTearDown", "doCleanups")
}


def _flatten(suite, out):
    for item in suite:
        if _isinstance(item, _BaseTestSuite):
            _flatten(item, out)
        else:
            out.append(item)


def _write_results(path, doc):
    tmp = path + ".tmp"
    data = _dumps(doc, indent=1, sort_keys=True).encode("utf-8")
    fd = _open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while data:
            data = data[_write(fd, data):]
    finally:
        _close(fd)
    _replace(tmp, path)


def _args(argv):
    opts = {"--start-dir": "tests", "--results": None, "--nonce-file": None}
    it = iter(argv)
    for a in it:
        if a not in opts:
            sys.stderr.write("hcbench runner: unknown argument %r\n" % a)
            _exit(2)
        opts[a] = next(it, None)
    if not opts["--results"] or not opts["--nonce-file"]:
        sys.stderr.write("hcbench runner: --results and --nonce-file are required\n")
        _exit(2)
    return opts


def main():
    opts = _args(sys.argv[1:])
    results = os.path.abspath(opts["--results"])
    with open(opts["--nonce-file"], encoding="utf-8") as f:
        nonce = f.read().strip()
    _unlink(opts["--nonce-file"])
    before = _snapshot()
    workspace = os.getcwd()
    # The tests import the code under test from the workspace, as with `python3 -m unittest`.
    sys.path.insert(0, workspace)
    stream = unittest.runner._WritelnDecorator(sys.stderr)
    result = Recorder(stream)
    started = time.perf_counter()
    # Discovery imports the test modules, and with them the code under test.
    suite = unittest.loader.TestLoader().discover(opts["--start-dir"], top_level_dir=None)
    tests = []
    _flatten(suite, tests)
    _TestSuite.run(suite, result)
    elapsed = time.perf_counter() - started
    after = _snapshot()
    tampered = _changed(before, after) + sorted(set(result.machinery))
    stream.writeln()
    result.printErrors()
    stream.writeln(result.separator2)
    run = result.testsRun
    stream.writeln("Ran %d test%s in %.3fs" % (run, "" if run == 1 else "s", elapsed))
    stream.writeln()
    counts = {}
    for outcome in result.outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    ok = result.wasSuccessful() and run > 0 and not tampered
    summary = ", ".join("%s=%d" % (k, counts[k]) for k in sorted(counts))
    if tampered:
        stream.writeln("TAMPERED: the test runner was changed during the run: " + ", ".join(tampered[:10]))
    if run == 0:
        stream.writeln("NO TESTS RAN")
    stream.writeln(("OK" if ok else "FAILED") + (" (" + summary + ")" if summary else ""))
    # Tests the loader found but that reported nothing (the run was cut short inside unittest).
    for t in tests:
        result.outcomes.setdefault(t.id(), "not_run")
    doc = {
        "schema": SCHEMA,
        "runner": "hcbench-unittest",
        "nonce": nonce,
        "tests": [{"id": k, "outcome": v} for k, v in sorted(result.outcomes.items())],
        "tests_run": run,
        "tampered": tampered,
        "complete": True,
    }
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    _write_results(results, doc)
    _exit(0 if ok else 1)


if __name__ == "__main__":
    main()
