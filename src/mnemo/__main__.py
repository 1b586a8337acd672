"""``mnemo`` and ``python -m mnemo``: the command line, with two fast paths that skip its imports."""

import sys


def main() -> None:
    if sys.argv[1:2] == ["hook"]:  # what coding agents' hooks run, at every tool call: standard library only
        from mnemo.capture.client import main as hook

        sys.exit(hook(sys.argv[2:]))
    if sys.argv[1:3] == ["hooks", "process"]:  # the capture process: exit before the heavy imports if one runs
        from mnemo.capture import spool

        lock = spool.take_lock(spool.mnemo_home())
        if lock is None:
            sys.exit(1)
        from mnemo.capture.daemon import main as serve_hooks

        sys.exit(serve_hooks(lock))
    from mnemo.cli import main as command_line

    command_line()


if __name__ == "__main__":
    main()
