"""Hidden checks for greenfield-2 (JSON pointer resolver)."""
import os
import sys
import unittest

sys.path.insert(0, os.getcwd())

import jsonptr  # noqa: E402

DOC = {
    "foo": ["bar", "baz"],
    "": 0,
    "a/b": 1,
    "c%d": 2,
    "e^f": 3,
    "g|h": 4,
    "i\\j": 5,
    "k\"l": 6,
    " ": 7,
    "m~n": 8,
    "~1": 9,
    "n": None,
    "deep": {"list": [[10, 11], {"x": {"y": False}}]},
}

MISSING = object()


class HiddenJsonPtrTest(unittest.TestCase):
    def test_pointer_error_is_lookup_error(self):
        self.assertTrue(issubclass(jsonptr.PointerError, LookupError))

    def test_rfc_examples(self):
        cases = {
            "": DOC,
            "/foo": ["bar", "baz"],
            "/foo/0": "bar",
            "/": 0,
            "/a~1b": 1,
            "/c%d": 2,
            "/e^f": 3,
            "/g|h": 4,
            "/i\\j": 5,
            "/k\"l": 6,
            "/ ": 7,
            "/m~0n": 8,
            "/~01": 9,
        }
        for pointer, expected in cases.items():
            self.assertEqual(jsonptr.resolve(DOC, pointer), expected, pointer)

    def test_falsy_values_are_returned(self):
        self.assertIsNone(jsonptr.resolve(DOC, "/n", default="fallback"))
        self.assertIs(jsonptr.resolve(DOC, "/deep/list/1/x/y"), False)
        self.assertEqual(jsonptr.resolve(DOC, "/deep/list/0/1"), 11)

    def test_parse(self):
        self.assertEqual(jsonptr.parse(""), [])
        self.assertEqual(jsonptr.parse("/"), [""])
        self.assertEqual(jsonptr.parse("/a//b"), ["a", "", "b"])
        self.assertEqual(jsonptr.parse("/a~1b/m~0n"), ["a/b", "m~n"])
        self.assertEqual(jsonptr.parse("/~01"), ["~1"])
        self.assertEqual(jsonptr.parse("/~10"), ["/0"])

    def test_malformed_pointers(self):
        for bad in ["foo", "a/b", "/~", "/a~2", "/~a", "/x~"]:
            with self.assertRaises(jsonptr.PointerError, msg=bad):
                jsonptr.parse(bad)
            with self.assertRaises(jsonptr.PointerError, msg=bad):
                jsonptr.resolve(DOC, bad)
            with self.assertRaises(jsonptr.PointerError, msg=bad):
                jsonptr.resolve(DOC, bad, default=None)

    def test_bad_array_indexes(self):
        for bad in ["/foo/2", "/foo/-", "/foo/01", "/foo/-1", "/foo/+1", "/foo/ 1", "/foo/x", "/foo/"]:
            with self.assertRaises(jsonptr.PointerError, msg=bad):
                jsonptr.resolve(DOC, bad)
            self.assertIs(jsonptr.resolve(DOC, bad, default=MISSING), MISSING, bad)

    def test_step_into_scalar(self):
        for bad in ["/foo/0/x", "/a~1b/0", "/n/x", "/deep/list/1/x/y/z"]:
            with self.assertRaises(jsonptr.PointerError, msg=bad):
                jsonptr.resolve(DOC, bad)
            self.assertEqual(jsonptr.resolve(DOC, bad, default="d"), "d", bad)

    def test_default_for_missing_key(self):
        self.assertEqual(jsonptr.resolve(DOC, "/missing/deeper", default=42), 42)
        self.assertIsNone(jsonptr.resolve(DOC, "/missing", default=None))

    def test_to_pointer(self):
        self.assertEqual(jsonptr.to_pointer([]), "")
        self.assertEqual(jsonptr.to_pointer([""]), "/")
        self.assertEqual(jsonptr.to_pointer(["a/b", "m~n"]), "/a~1b/m~0n")
        self.assertEqual(jsonptr.to_pointer(["~1"]), "/~01")
        for tokens in [["a", "", "b"], ["/~", "~/"], ["0", "x"]]:
            self.assertEqual(jsonptr.parse(jsonptr.to_pointer(tokens)), tokens)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
