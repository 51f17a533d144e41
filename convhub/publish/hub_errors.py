"""The one place that turns a Hub (or any) error into what a user sees: one line, never the token.

A server or a proxy may echo the request's headers (the ``Authorization: Bearer …`` line) into an error's
body, and the client copies that body into the exception's message; every command that talks to the Hub
(``push``, ``export`` from a repo, ``mix`` reading repos or ``--push``) prints its errors through
:func:`report`, so no command can print the token, whichever way it was given.
"""

from __future__ import annotations

import re
import sys

# A bearer header in any case; a Hugging Face token (always a lowercase ``hf_``: the variables a message names, such
# as HF_ENDPOINT, are not tokens).
TOKEN_LIKE = re.compile(r"((?i:bearer)\s+)[^\s;,'\"]+|\bhf_[A-Za-z0-9]{8,}")
MAX_CHARS = 500


def redact(text: str, token=None) -> str:
    """``text`` on one line, without the token or anything shaped like one (a bearer header, an hf_ token)."""
    for secret in {token, _stored_token()}:
        if isinstance(secret, str) and secret:
            text = text.replace(secret, "***")
    return " ".join(TOKEN_LIKE.sub(lambda match: (match.group(1) or "") + "***", text).split())[:MAX_CHARS]


def _stored_token() -> str | None:
    """The token the client finds by itself (``HF_TOKEN``, the stored login): a command may not name one."""
    try:
        from huggingface_hub import get_token

        return get_token()
    except Exception:  # no client, or an unreadable token file: nothing more to hide
        return None


def report(command: str, error: BaseException | str, token=None) -> int:
    """Print ``convhub COMMAND: error: …`` on one redacted line to stderr; the command's exit status (1)."""
    print(f"convhub {command}: error: {redact(str(error), token)}", file=sys.stderr)
    return 1
