"""The Hub's HTTP client as convhub uses it: every request has a timeout.

``huggingface_hub`` shares one ``httpx2.Client`` between all its calls (``get_session``), made by a factory that
``set_client_factory`` replaces. Its default client has no timeout, and most calls (``repo_info``, the tree listing,
the commit) pass ``timeout=None``, which means "wait forever": a server that accepts the connection and never
answers hangs ``convhub push`` and ``convhub export`` for good. :func:`use_timeouts` installs a factory that makes
the library's own default client (its offline switch and request ids kept) and adds a request hook that gives
every phase of every request (connect, read, write, pool) a limit: the call's own when it set a shorter one (the
10 s a download's HEAD uses), else convhub's. A request that times out raises ``httpx2.TimeoutException``, a transport
error: ``huggingface_hub`` retries it where it retries a dropped connection (``http_backoff``), and so does
convhub's push (``HubSession``).

The limit is :data:`TIMEOUT_ENV` (seconds) when set, else :data:`DEFAULT_TIMEOUT`; it is read at each request, so
tests and users can change it without a new client. The limit is per phase, not per request: an upload of a large
file is only cut when no byte moves for that long.

A stream (``convhub mix --streaming``, ``convhub export --streaming``) reads the Hub's files as it goes, through
``datasets``, which tries a read or an open that lost its connection 20 times, each try with ``huggingface_hub``'s
own five retries (about 23 s): a Hub gone after a stream's first file held ``convhub mix`` for 9.5 minutes before
its error. :func:`use_timeouts` gives ``datasets`` :data:`STREAMING_TRIES` tries (its documented settings in
``datasets.config``), about a minute.
"""

from __future__ import annotations

import threading

from convhub.engine.inputs.downloads import positive_seconds
from convhub.errors import unconnectable

#: The environment variable that sets the limit, in seconds (a positive number).
TIMEOUT_ENV = "CONVHUB_HUB_TIMEOUT"
#: The limit when the variable is not set: long enough for the Hub to answer a large commit.
DEFAULT_TIMEOUT = 60.0

#: Tries of a streamed read or open that lost its connection (``datasets.config``'s ``STREAMING_*_MAX_RETRIES``).
STREAMING_TRIES = 2

_PHASES = ("connect", "read", "write", "pool")
_lock = threading.Lock()
_installed = False


def timeout_seconds() -> float:
    """The limit in seconds: ``CONVHUB_HUB_TIMEOUT`` when it is a positive number, else ``DEFAULT_TIMEOUT``."""
    return positive_seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT)


def use_timeouts() -> None:
    """Make every later Hub request of this process time out, and a stream's read or open that lost its connection
    end after ``STREAMING_TRIES`` tries (see the module docstring). Idempotent."""
    global _installed
    with _lock:
        if _installed:
            return
        from huggingface_hub import set_client_factory

        set_client_factory(
            _client_with_timeouts
        )  # closes the shared client: the next call makes one with the hook
        _bound_streaming_tries()
        _installed = True


def _bound_streaming_tries() -> None:
    """At most ``STREAMING_TRIES`` tries of a streamed read or open (``datasets``' default: 20)."""
    from datasets import config

    config.STREAMING_READ_MAX_RETRIES = min(config.STREAMING_READ_MAX_RETRIES, STREAMING_TRIES)
    config.STREAMING_OPEN_MAX_RETRIES = min(config.STREAMING_OPEN_MAX_RETRIES, STREAMING_TRIES)


def _client_with_timeouts():
    # The library's own default client: ``huggingface_hub.utils`` does not re-export its factory, so it is taken
    # from the module that defines it (called, not replaced).
    from huggingface_hub.utils._http import default_client_factory

    client = default_client_factory()
    hooks = client.event_hooks
    client.event_hooks = {"request": [*hooks["request"], _bound_timeouts], "response": hooks["response"]}
    return client


def _bound_timeouts(request) -> None:
    """Request hook: each phase waits at most ``timeout_seconds()``, or less when the call asked for less."""
    limit = timeout_seconds()
    current = request.extensions.get("timeout") or {}
    request.extensions["timeout"] = {
        phase: limit if current.get(phase) is None else min(current[phase], limit) for phase in _PHASES
    }


class HubUnreachable(ConnectionError):
    """The Hub did not answer, or refused the connection: one line naming the endpoint and the limit."""


def reach_repo(repo_id: str, revision: str | None = None, token: str | None = None) -> None:
    """Ask the Hub once for a dataset repo, before a reader that retries for minutes does (``datasets``' loaders
    retry a silent or refused Hub many times, then end in a traceback of their own).

    Raises :class:`HubUnreachable` when no answer comes, and the Hub's own ``HfHubHTTPError`` (a missing repo or
    revision, a refused token) when it answers no. Offline (``HF_HUB_OFFLINE``) nothing is asked: the cache answers.
    """
    import httpx2
    from huggingface_hub import HfApi, constants

    if constants.HF_HUB_OFFLINE:
        return
    use_timeouts()
    api = HfApi(token=token)
    try:
        api.dataset_info(repo_id, revision=revision)
    except httpx2.TimeoutException as error:
        raise HubUnreachable(
            f"the Hub at {api.endpoint} (HF_ENDPOINT) did not answer within {timeout_seconds():g} s "
            f"({TIMEOUT_ENV} sets the limit)"
        ) from error
    except (httpx2.TransportError, ConnectionError) as error:
        reason = unconnectable(error) or f"{type(error).__name__}: {error}"
        raise HubUnreachable(
            f"could not connect to the Hub at {api.endpoint} (HF_ENDPOINT): {reason}"
        ) from error
