"""The end of a tool test: each failure on its own line, their count, and the exit status (1 when
there are failures). Shared by the tests of this folder."""


def report(failures):
    for f in failures:
        print("FAILED:", f)
    print(f"{len(failures)} failures")
    return 1 if failures else 0
