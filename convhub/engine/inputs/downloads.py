"""A source's default download (a build or check without ``--data-dir``), which ``datasets``' download manager
makes through fsspec's HTTP file system (aiohttp): its mirror, its time limit, and why it failed, in words (what
the user sees of them: docs/sources.md, "Where a build reads a source")."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from convhub.errors import in_chain, kind_in_chain, unconnectable

#: The environment variable naming a mirror of the sources' hosts, which keeps each URL's host and path under it.
MIRROR_ENV = "CONVHUB_SOURCE_MIRROR"
#: The environment variable that sets how long a download waits to connect, and for each read, in seconds
#: (aiohttp's own default waits five minutes for a server that accepts a connection and sends nothing).
TIMEOUT_ENV = "CONVHUB_DOWNLOAD_TIMEOUT"
DEFAULT_TIMEOUT = 60.0

#: What each of ``convhub.errors.unconnectable``'s reasons means for a download.
_UNCONNECTABLE_HINTS = {
    "its host name does not resolve": "no network, or an unknown host",
    "connection refused": "nothing listens there",
}


def source_url(url: str) -> str:
    """``url`` (a source's default download), or its copy under the mirror when :data:`MIRROR_ENV` is set."""
    mirror = os.environ.get(MIRROR_ENV, "").strip().rstrip("/")
    if not mirror:
        return url
    parts = urlsplit(url)
    return f"{mirror}/{parts.netloc}{parts.path}" + (f"?{parts.query}" if parts.query else "")


def timeout_seconds() -> float:
    """The limit: :data:`TIMEOUT_ENV` when it is a positive number, else :data:`DEFAULT_TIMEOUT`."""
    return positive_seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT)


def positive_seconds(variable: str, default: float) -> float:
    """The environment ``variable`` as seconds when it is a positive number, else ``default``."""
    try:
        value = float(os.environ.get(variable, ""))
    except ValueError:
        return default
    return value if value > 0 else default


async def _client_with_timeouts(**client_kwargs):
    """fsspec's HTTP client factory (its documented ``get_client`` option): aiohttp's session, whose connect and
    each read wait at most ``timeout_seconds()`` unless the caller chose a timeout."""
    import aiohttp

    limit = timeout_seconds()
    client_kwargs.setdefault(
        "timeout", aiohttp.ClientTimeout(total=None, sock_connect=limit, sock_read=limit)
    )
    return aiohttp.ClientSession(**client_kwargs)


def use_timeouts() -> None:
    """Every later HTTP(S) file system fsspec makes in this process (and in the processes it forks) uses
    :func:`_client_with_timeouts`, through fsspec's configuration (a call's own ``get_client`` wins, and so does
    one already configured: calling it again changes nothing)."""
    import fsspec.config

    for protocol in ("http", "https"):
        fsspec.config.conf.setdefault(protocol, {}).setdefault("get_client", _client_with_timeouts)


def reason(error: BaseException) -> str | None:
    """Why an HTTP transfer failed, in words, from ``error``'s chain; None when it holds no known cause."""
    import aiohttp
    from fsspec.exceptions import FSTimeoutError

    answered = kind_in_chain(error, aiohttp.ClientResponseError)
    if answered is not None:
        return f"the server answered {answered.status} {answered.message}".rstrip()
    unreached = unconnectable(error)  # the Hub's client tells these two apart the same way
    if unreached is not None:
        return f"{unreached} ({_UNCONNECTABLE_HINTS[unreached]})"
    if in_chain(
        error, lambda each: isinstance(each, (TimeoutError, FSTimeoutError, aiohttp.ServerTimeoutError))
    ):
        return f"the server stalled: no answer within {timeout_seconds():g} s (timed out; {TIMEOUT_ENV} sets the limit)"
    unreachable = kind_in_chain(error, aiohttp.ClientConnectionError)
    if unreachable is not None:
        cause = in_chain(unreachable, lambda each: isinstance(each, OSError) and each.strerror)
        return f"no connection ({cause.strerror if isinstance(cause, OSError) else unreachable})"
    return None


def failure_line(error: BaseException) -> str | None:
    """The one line for a download that failed: the URL and why; None for another error. fsspec's HTTP file
    system raises ``FileNotFoundError(url)`` for every failure, a 404 as well as an unknown host or no network;
    the cause it chains says which."""

    def http_failure(each: BaseException) -> bool:
        return isinstance(each, FileNotFoundError) and str(each).startswith(("http://", "https://"))

    failed = in_chain(error, http_failure)
    why = reason(failed) if failed is not None else None
    if why is None:
        return None
    mirrored = f" ({MIRROR_ENV} is {os.environ[MIRROR_ENV]})" if os.environ.get(MIRROR_ENV) else ""
    return f"could not download {failed}: {why}{mirrored}"
