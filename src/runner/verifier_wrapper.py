"""hcbench's verifier wrapper: runs a Python verifier script and records that it finished.

A verifier usually imports the module under test, so code in that module runs inside the
verifier's process, and `import os; os._exit(0)` at its top would end the verifier with exit 0
before any check ran. hcbench therefore runs a Python verifier (`[python3, SCRIPT.py, ...]`)
through this wrapper: it reads the nonce hcbench gave it and deletes the file before the
script (and so the code under test) runs, runs the script as `python3 SCRIPT.py` would, and
only when the script ended with status 0 writes the nonce to the done file. A verifier passes
when it exited 0 and the done file holds this run's nonce.

Usage: python3 -s -B verifier_wrapper.py --done FILE --nonce-file FILE -- SCRIPT.py [ARGS...]
"""

import os
import runpy
import sys
import traceback


def main():
    args = sys.argv[1:]
    done = args[args.index("--done") + 1]
    nonce_file = args[args.index("--nonce-file") + 1]
    script_argv = args[args.index("--") + 1:]
    with open(nonce_file) as f:
        nonce = f.read().strip()
    os.remove(nonce_file)
    # What the script sees is what `python3 SCRIPT.py ARGS` would give it.
    script = script_argv[0]
    sys.argv = script_argv
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    # Taken before the script runs, so the code under test cannot swap them.
    write, open_, close, replace, exit_ = os.write, os.open, os.close, os.replace, os._exit
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    status = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            status = 0
        elif isinstance(e.code, int):
            status = e.code
        else:
            print(e.code, file=sys.stderr)
            status = 1
    except BaseException:
        traceback.print_exc()
        status = 1
    if status == 0:
        tmp = done + ".tmp"
        fd = open_(tmp, flags, 0o644)
        write(fd, nonce.encode())
        close(fd)
        replace(tmp, done)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        exit_(status)


main()
