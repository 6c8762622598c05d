"""Hidden checks for greenfield-7 (run-length codec)."""
import os
import sys
import unittest

sys.path.insert(0, os.getcwd())

import rle  # noqa: E402


class HiddenTextTest(unittest.TestCase):
    def test_digits_and_backslashes(self):
        self.assertEqual(rle.encode("1112"), "3\\11\\2")
        self.assertEqual(rle.encode("a\\\\b"), "1a2\\\\1b")
        self.assertEqual(rle.decode("3\\11\\2"), "1112")
        self.assertEqual(rle.decode("1a2\\\\1b"), "a\\\\b")
        self.assertEqual(rle.encode("0"), "1\\0")

    def test_long_runs_not_split(self):
        self.assertEqual(rle.encode("z" * 1234), "1234z")
        self.assertEqual(rle.decode("12z"), "z" * 12)
        self.assertEqual(rle.encode("9" * 10), "10\\9")

    def test_unicode_and_whitespace(self):
        self.assertEqual(rle.encode("ééé\n\n"), "3é2\n")
        self.assertEqual(rle.encode("٣٣"), "2٣")
        self.assertEqual(rle.decode("2٣"), "٣٣")
        self.assertEqual(rle.encode("  "), "2 ")

    def test_round_trip_many(self):
        samples = ["", "a", "ab", "1", "\\", "\\\\\\", "0000000000", "a1b2c3", "112233\\\\",
                   "xxxxyyyz", "٣1٣", "\t\t\n", "🙂🙂🙂x"]
        for text in samples:
            self.assertEqual(rle.decode(rle.encode(text)), text, repr(text))

    def test_decode_errors(self):
        bad = ["a", "3", "0a", "01a", "3a2", "\\1", "1\\", "1\\a", "2\\\\1", "-1a", "1a1",
               "٣a"]
        for data in bad:
            with self.assertRaises(ValueError, msg=repr(data)):
                rle.decode(data)

    def test_decode_adjacent_same_symbol(self):
        self.assertEqual(rle.decode("2a3a"), "aaaaa")


class HiddenBytesTest(unittest.TestCase):
    def test_encode_bytes(self):
        self.assertEqual(rle.encode_bytes(b""), b"")
        self.assertEqual(rle.encode_bytes(b"aaab"), bytes([3, 97, 1, 98]))
        self.assertEqual(rle.encode_bytes(b"\x00\x00"), bytes([2, 0]))

    def test_long_runs_split(self):
        self.assertEqual(rle.encode_bytes(b"x" * 255), bytes([255, 120]))
        self.assertEqual(rle.encode_bytes(b"x" * 256), bytes([255, 120, 1, 120]))
        self.assertEqual(rle.encode_bytes(b"x" * 600), bytes([255, 120, 255, 120, 90, 120]))

    def test_types(self):
        for data in (bytearray(b"qqq"), memoryview(b"qqq")):
            out = rle.encode_bytes(data)
            self.assertIsInstance(out, bytes)
            self.assertEqual(out, bytes([3, 113]))
        out = rle.decode_bytes(bytearray([2, 65]))
        self.assertIsInstance(out, bytes)
        self.assertEqual(out, b"AA")
        self.assertEqual(rle.decode_bytes(memoryview(bytes([1, 66]))), b"B")

    def test_decode_bytes(self):
        self.assertEqual(rle.decode_bytes(bytes([255, 120, 1, 120])), b"x" * 256)
        self.assertEqual(rle.decode_bytes(b""), b"")
        self.assertEqual(rle.decode_bytes(bytes([1, 7, 1, 7])), bytes([7, 7]))

    def test_decode_bytes_errors(self):
        for data in (bytes([1]), bytes([0, 65]), bytes([2, 65, 0, 66]), bytes([2, 65, 3])):
            with self.assertRaises(ValueError, msg=data):
                rle.decode_bytes(data)

    def test_round_trip(self):
        data = bytes(i % 7 for i in range(1000)) + b"\xff" * 700 + b"\x00"
        self.assertEqual(rle.decode_bytes(rle.encode_bytes(data)), data)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
