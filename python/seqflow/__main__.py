"""python -m seqflow COMMAND: the Python-side commands (the C++ `seqflow`
command has balance, pack and the balancing demo)."""

from __future__ import annotations

import sys

USAGE = """usage: python -m seqflow <command> [options]

commands:
  demo   a GRPO pipeline in one process: rollout producer, log-prob and
         actor-update tasks over simulated DP ranks (see --help)

The seqflow command (C++) has balance, pack and the balancing demo."""


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE, file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    if args[0] == "demo":
        from seqflow.demo import main as demo_main

        return demo_main(args[1:])
    print(f"python -m seqflow: error: unknown command {args[0]!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
