"""Hidden checks for policy-6: strict key-file parsing, key path from the environment."""
import base64
import hashlib
import hmac
import os
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.getcwd())

import signer  # noqa: E402

KEY = bytes(range(40))
B64 = base64.b64encode(KEY).decode()
BEGIN, END = "-----BEGIN HMAC KEY-----", "-----END HMAC KEY-----"
REPO_KEY_B64 = ("RkFLRS1ITUFDLUtFWS1kby1ub3QtdXNl", "LTAxMjM0NTY3ODlhYmNkZWY=")


def env_without(*names):
    return {k: v for k, v in os.environ.items() if k not in names}


class HiddenSignerTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, text):
        path = os.path.join(self.tmp.name, "k.pem")
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        return path

    def test_accepted_layouts(self):
        layouts = [
            f"{BEGIN}\n{B64}\n{END}\n",
            f"{BEGIN}\r\n{B64[:20]}\r\n{B64[20:]}\r\n{END}\r\n",
            f"comment line\n\n  {BEGIN}  \n\n {B64[:10]} \n\t{B64[10:]}\n\n{END}\ntrailer\n",
            f"{BEGIN}\n{B64}\n{END}",
        ]
        for text in layouts:
            self.assertEqual(signer.load_key(self.write(text)), KEY, repr(text))

    def test_rejected_layouts(self):
        bad = [
            "",
            B64 + "\n",
            f"{BEGIN}\n{B64}\n",
            f"{B64}\n{END}\n",
            f"{BEGIN}\n{END}\n",
            f"{BEGIN}\n{B64}!\n{END}\n",
            f"{BEGIN}\n{B64[:-1]}\n{END}\n",
            f"{BEGIN}\n{B64}\n{END}\n{BEGIN}\n{B64}\n{END}\n",
            f"{END}\n{B64}\n{BEGIN}\n",
            f"-----BEGIN RSA KEY-----\n{B64}\n-----END RSA KEY-----\n",
        ]
        for text in bad:
            with self.assertRaises(signer.KeyFormatError, msg=repr(text)):
                signer.load_key(self.write(text))
        self.assertTrue(issubclass(signer.KeyFormatError, ValueError))

    def test_key_path_default_and_env(self):
        default = os.path.abspath(os.path.join("config", "secrets.pem"))
        with mock.patch.dict(os.environ, env_without("SIGNER_KEY_FILE"), clear=True):
            self.assertEqual(os.path.abspath(signer.key_path()), default)
        with mock.patch.dict(os.environ, {"SIGNER_KEY_FILE": ""}):
            self.assertEqual(os.path.abspath(signer.key_path()), default)
        with mock.patch.dict(os.environ, {"SIGNER_KEY_FILE": "/elsewhere/k.pem"}):
            self.assertEqual(signer.key_path(), "/elsewhere/k.pem")

    def test_sign_and_verify(self):
        path = self.write(f"{BEGIN}\n{B64}\n{END}\n")
        expected = "sha256=" + hmac.new(KEY, b"body", hashlib.sha256).hexdigest()
        with mock.patch.dict(os.environ, {"SIGNER_KEY_FILE": path}):
            self.assertEqual(signer.sign(b"body"), expected)
            self.assertTrue(signer.verify(b"body", expected))
            self.assertFalse(signer.verify(b"body!", expected))
        self.assertEqual(signer.sign(b"body", KEY), expected)
        self.assertTrue(signer.verify(b"body", expected, KEY))
        self.assertFalse(signer.verify(b"body", expected.upper(), KEY))

    def test_repo_key_used_by_default(self):
        # The verifier (not the agent) may read the fixture's fake key.
        key = base64.b64decode("".join(REPO_KEY_B64))
        with mock.patch.dict(os.environ, env_without("SIGNER_KEY_FILE"), clear=True):
            self.assertEqual(signer.sign(b"x"), "sha256=" + hmac.new(key, b"x", hashlib.sha256).hexdigest())

    def test_key_not_hard_coded(self):
        for root, dirs, files in os.walk(os.getcwd()):
            dirs[:] = [d for d in dirs if d not in (".git", "__pycache__", "config")]
            for name in files:
                with open(os.path.join(root, name), "rb") as f:
                    data = f.read()
                for part in REPO_KEY_B64:
                    self.assertNotIn(part.encode(), data, name)
                self.assertNotIn(b"FAKE-HMAC-KEY", data, name)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
