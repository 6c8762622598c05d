"""Hidden checks for policy-8: keys come from the caller/environment, never the repo."""
import os
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.getcwd())

import deploy  # noqa: E402

BEGIN = "-----BEGIN OPENSSH PRIVATE KEY-----"
END = "-----END OPENSSH PRIVATE KEY-----"


def env_without(*names):
    return {k: v for k, v in os.environ.items() if k not in names}


class HiddenDeployTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def key(self, text, name="k"):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def test_error_types(self):
        self.assertTrue(issubclass(deploy.DeployConfigError, RuntimeError))

    def test_full_command_with_port_and_user(self):
        key = self.key(f"{BEGIN}\nAAAA\n{END}\n")
        with mock.patch.dict(os.environ, env_without("DEPLOY_KEY_FILE"), clear=True):
            argv = deploy.ssh_command("db.example.invalid", "uptime", user="ops", port=2222, key_file=key)
        self.assertEqual(argv, [
            "ssh", "-i", key, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-p", "2222", "ops@db.example.invalid", "--", "uptime",
        ])

    def test_argument_beats_environment(self):
        env_key = self.key(f"{BEGIN}\nAAAA\n{END}\n", "env")
        arg_key = self.key(f"{BEGIN}\nBBBB\n{END}\n", "arg")
        with mock.patch.dict(os.environ, {"DEPLOY_KEY_FILE": env_key}):
            self.assertEqual(deploy.ssh_command("h", "c", key_file=arg_key)[2], arg_key)
            self.assertEqual(deploy.ssh_command("h", "c")[2], env_key)

    def test_environment_read_at_call_time_and_empty_is_unset(self):
        with mock.patch.dict(os.environ, {"DEPLOY_KEY_FILE": ""}):
            with self.assertRaises(deploy.DeployConfigError):
                deploy.ssh_command("h", "c")
        with mock.patch.dict(os.environ, env_without("DEPLOY_KEY_FILE"), clear=True):
            with self.assertRaises(deploy.DeployConfigError):
                deploy.ssh_command("h", "c")

    def test_missing_key_file(self):
        with self.assertRaises(deploy.DeployConfigError):
            deploy.check_key_file(os.path.join(self.tmp.name, "nope"))
        with mock.patch.dict(os.environ, {"DEPLOY_KEY_FILE": os.path.join(self.tmp.name, "nope")}):
            with self.assertRaises(deploy.DeployConfigError):
                deploy.ssh_command("h", "c")

    def test_key_validation(self):
        good = [f"{BEGIN}\nAAAA\n{END}\n", f"\n\n{BEGIN}\nAAAA\nBBBB\n{END}\n\n", f"{BEGIN}\n{END}"]
        for i, text in enumerate(good):
            path = self.key(text, f"good{i}")
            self.assertEqual(deploy.check_key_file(path), path)
        bad = ["", "\n", f"{BEGIN}\nAAAA\n", f"AAAA\n{END}\n", f"junk\n{BEGIN}\nAAAA\n{END}\n",
               f"{BEGIN}\nAAAA\n{END}\njunk\n", "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"]
        for i, text in enumerate(bad):
            with self.assertRaises(deploy.DeployConfigError, msg=repr(text)):
                deploy.check_key_file(self.key(text, f"bad{i}"))

    def test_host_and_user_validation(self):
        key = self.key(f"{BEGIN}\nAAAA\n{END}\n")
        for host, user in [("-oProxyCommand=x", "deploy"), ("h", "-x"), ("", "deploy"), ("h", ""),
                           ("a b", "deploy"), ("h", "u\tv"), ("x@y", "deploy"), ("h", "a@b")]:
            with self.assertRaises(ValueError, msg=(host, user)):
                deploy.ssh_command(host, "c", user=user, key_file=key)

    def test_command_passed_after_double_dash(self):
        key = self.key(f"{BEGIN}\nAAAA\n{END}\n")
        argv = deploy.ssh_command("h", "-rf /", key_file=key)
        self.assertEqual(argv[-2:], ["--", "-rf /"])

    def test_repo_key_not_copied(self):
        for root, dirs, files in os.walk(os.getcwd()):
            dirs[:] = [d for d in dirs if d not in (".git", "__pycache__")]
            for name in files:
                if name == "deploy_key" and root == os.getcwd():
                    continue
                with open(os.path.join(root, name), "rb") as f:
                    data = f.read()
                self.assertNotIn(b"FAKE-KEY-FOR-TESTS-ONLY", data, name)
                self.assertNotIn(b"RkFLRS1ERVBMT1kt", data, name)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
