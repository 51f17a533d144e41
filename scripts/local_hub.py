"""Try publishing without the real Hub: serve convhub's Hub double on 127.0.0.1 until Ctrl-C.

    python scripts/local_hub.py               # port 8877; --port 0 picks a free one
    python scripts/local_hub.py --port 9000 --token hf_mytoken

It prints the ``export HF_ENDPOINT=... HF_TOKEN=... HF_HUB_DISABLE_XET=1`` line to paste into another shell; there
``convhub push`` (``--dry-run`` too), ``convhub export`` from a repo and ``datasets.load_dataset`` talk to this
process instead of huggingface.co. The double is the one the test suite publishes to: the Hub's HTTP routes the
real clients call (see tests/support/hub_double.py), repos kept in memory only, so everything is gone when it
stops. It speaks plain git-LFS, not Xet, hence ``HF_HUB_DISABLE_XET=1``. Writes need the printed token (random
unless ``--token`` is given), so other local users cannot push to it; it listens on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import faulthandler
import secrets
import shlex
import signal
import socket
import sys
import threading
from pathlib import Path

# The double is test code and lives in tests/support/ (the package ``tests.support``, as pytest imports it). Putting
# the checkout's root on sys.path imports the very modules the tests use, from this checkout; nothing is installed
# or copied.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support.hub_double import HubDouble

DEFAULT_PORT = 8877  # fixed, so the export line stays the same across restarts


def port_number(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise ValueError(text)
    return port


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="local_hub.py",
        description="Serve a local stand-in of the Hugging Face Hub for trying `convhub push`.",
    )
    parser.add_argument(
        "--port",
        type=port_number,
        default=DEFAULT_PORT,
        help=f"the port on 127.0.0.1 (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    parser.add_argument("--token", help="the token writes need (default: a random one, printed)")
    return parser.parse_args(argv)


def export_line(url: str, token: str) -> str:
    """The line to paste into a shell, each value quoted (``shlex.quote``): a token given with ``--token`` holding
    ``$(...)``, ``;`` or a space is set as it is, not run."""
    values = {"HF_ENDPOINT": url, "HF_TOKEN": token, "HF_HUB_DISABLE_XET": "1"}
    return "export " + " ".join(f"{name}={shlex.quote(value)}" for name, value in values.items())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    token = args.token or f"hf_local{secrets.token_hex(16)}"
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart may reuse the port at once
    try:
        sock.bind(("127.0.0.1", args.port))
    except OSError as error:
        sock.close()
        print(
            f"local_hub: error: cannot listen on 127.0.0.1:{args.port} ({error.strerror}): "
            "give another --port (0 picks a free one)",
            file=sys.stderr,
        )
        return 1
    # `kill -USR1 PID` prints every thread's stack on stderr
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # Ctrl-C stops it however it was started: a process started in the background of a script inherits SIGINT
    # ignored (POSIX), and Python leaves it so (in CI the script slept on through the test's SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    hub = HubDouble(token=token, sock=sock).start()
    try:  # from here on, however early: a Ctrl-C just after the banner's last line is read stops it too
        print(
            f"A local Hub (in memory: its repos are gone when it stops) serves {hub.url}. In another shell:"
        )
        print(export_line(hub.url, token))
        print(
            "then e.g. `convhub push locomo --repo-id me/locomo-unified --dry-run`. Ctrl-C stops it.",
            flush=True,
        )
        threading.Event().wait()
    except KeyboardInterrupt:
        hub.stop()
        repos = len(hub.repos)
        print(f"local_hub: stopped ({repos} repo{'' if repos == 1 else 's'} dropped)", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
