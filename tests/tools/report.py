"""Shared by the tests of this folder: running a tool with its output captured, and the end of a
tool test (each failure on its own line, their count, and the exit status: 1 when there are
failures)."""
import subprocess


def run(cmd):
    """(exit status, stdout and stderr together) of the command `cmd` (a list)."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def report(failures):
    for f in failures:
        print("FAILED:", f)
    print(f"{len(failures)} failures")
    return 1 if failures else 0
