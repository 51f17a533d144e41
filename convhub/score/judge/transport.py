"""One judge request, bounded in every way a hostile or broken endpoint could stretch it.

- **Time**: ``timeout`` is a deadline for the whole request (connect, send, every byte of the reply), not for
  each read: an endpoint sending a byte a second is cut at the deadline. Retries are bounded (``retries``), and
  so is each wait between them (a ``Retry-After`` is honoured up to :data:`MAX_WAIT` seconds).
- **Size**: a reply body larger than :data:`MAX_BODY` bytes is not read further.
- **Shape**: a reply that is not JSON (or nested too deep to parse), has no ``choices[0].message.content``
  (an empty choice list) or whose content is not text is a failed try, like a timeout or a 5xx.
- **Secrets**: the API key (sent as a bearer token), and a ``user:password@`` given in the URL (sent as
  HTTP Basic auth when there is no key, never in the request line), reach no message: an error body is
  redacted *then* cut, the URL is shown without its credentials (:func:`shown_url`), and the reply's content,
  which may be cached on disk, has the secrets replaced too (an endpoint may echo the request's headers).

:class:`JudgeError` ends the run whatever the benchmark (a wrong key, a wrong URL); :class:`VerdictFailed` is
one verdict that could not be obtained after the retries, which GigaMemory's policy counts as negative.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email.utils
import ipaddress
import json
import math
import re
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

import httpx2

from convhub.publish.hub_errors import TOKEN_LIKE
from convhub.score.inputs import ScoreError

#: The largest reply body read, in bytes (a verdict is a few hundred).
MAX_BODY = 1 << 20
#: The longest wait before a retry, in seconds, whatever ``Retry-After`` asks.
MAX_WAIT = 60.0
#: The longest ``--judge-timeout`` accepted, in seconds (a day).
MAX_TIMEOUT = 86_400.0
#: How much of an error body a message shows, after redaction.
ERROR_CHARS = 200
#: Statuses worth another try: the endpoint is busy or broken for now.
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
#: Statuses that say the run itself is wrong (key, URL, model route): no question can succeed, so it stops.
FATAL_STATUS = frozenset({401, 403, 404, 405, 407})
#: Query parameters of ``--judge-url`` that carry a credential (Azure's ``api-key``, a signed URL's ``sig``).
SECRET_QUERY = re.compile(r"key|token|secret|sig|passw|auth|credential", re.IGNORECASE)


class JudgeError(ScoreError):
    """The judge cannot be asked at all (a wrong key or URL), or a verdict failed where failures end the run."""


class VerdictFailed(JudgeError):
    """One verdict could not be obtained: every try timed out, was refused for now or replied garbage."""


@dataclass(frozen=True)
class Reply:
    """What the judge answered one request: the message content and the tokens its ``usage`` counts."""

    content: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a judge base URL (one line, without its credentials), or None."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018  (raises on a port that is not a number)
        httpx2.URL(url)
    except (ValueError, httpx2.InvalidURL) as error:
        return f"--judge-url is not a URL: {error}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"--judge-url must be an http:// or https:// URL with a host, not {shown_url(url)!r}"
    return None


def clear_text_warning(url: str, api_key: str | None) -> str | None:
    """The warning line for a judge asked over plain ``http://`` on another machine with a credential (the API
    key, else a ``user:password@`` in the URL), which then crosses the network unencrypted; None over https, to
    a loopback address (127.0.0.0/8, ``::1``, ``localhost``) or with no credential."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not (api_key or parts.username is not None):
        return None
    host = (parts.hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return None
    with contextlib.suppress(ValueError):  # a name, not an address
        if ipaddress.ip_address(host).is_loopback:
            return None
    secret = "the API key" if api_key else "the URL's user:password"
    return (
        f"warning: --judge-url {shown_url(url)} is plain http to another machine: {secret} crosses the network "
        "unencrypted (give an https:// URL)"
    )


def _secret_query(name: str) -> bool:
    """Whether a query parameter of the URL holds a credential (Azure's ``api-key``, a ``token``, a ``sig``)."""
    return bool(SECRET_QUERY.search(name))


def shown_url(url: str) -> str:
    """``url`` without a ``user:password@`` and with the values of credential-like query parameters
    (``api-key``, ``token``, ``sig``...) as ``***``: how it appears in messages, reports and cache keys."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url.rpartition("@")[2] if "@" in url else url
    netloc = parts.netloc.rpartition("@")[2]
    query = "&".join(
        f"{name}=***" if _secret_query(urllib.parse.unquote(name)) else f"{name}={value}" if sep else name
        for name, sep, value in (field.partition("=") for field in parts.query.split("&") if field)
    )
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query, fragment=""))


def completions_url(url: str) -> str:
    """``BASE/chat/completions`` for a base URL, its query kept (Azure's ``?api-version=``), no fragment."""
    parts = urllib.parse.urlsplit(url)
    path = parts.path.rstrip("/") + "/chat/completions"
    return urllib.parse.urlunsplit(parts._replace(path=path, fragment=""))


def url_secrets(url: str) -> list[str]:
    """The credentials written into ``url`` (``user:password``, the password, the values of credential-like
    query parameters), to be kept out of messages."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return []
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    found = [userinfo, urllib.parse.unquote(userinfo)]
    if parts.password:
        found += [parts.password, urllib.parse.unquote(parts.password)]
    for field in parts.query.split("&"):
        name, _, value = field.partition("=")
        if _secret_query(urllib.parse.unquote(name)):
            found += [value, urllib.parse.unquote_plus(value)]
    return [secret for secret in found if secret]


def _spellings(secret: str, depth: int = 2) -> set[str]:
    """``secret`` as it may appear in a reply: as is, and escaped inside a JSON string (``\\"``, ``\\/``,
    ``\\uXXXX``), once or twice (a JSON verdict inside the reply's JSON, echoing the request's headers)."""
    if depth == 0:
        return {secret}
    escaped = json.dumps(secret)[1:-1]
    forms = {secret, escaped, escaped.replace("/", "\\/"), json.dumps(secret, ensure_ascii=False)[1:-1]}
    return {deeper for form in forms for deeper in _spellings(form, depth - 1)}


def hide(text: str, secrets: list[str]) -> str:
    """``text`` with every secret, in every spelling a reply may give it (:func:`_spellings`), as ``***``."""
    forms = {form for secret in secrets for form in _spellings(secret)}
    for form in sorted(forms, key=len, reverse=True):
        text = text.replace(form, "***")
    return text


def redact(text: str, secrets: list[str]) -> str:
    """``text`` on one line with every secret (and anything shaped like a bearer token) replaced, then cut."""
    text = hide(text, secrets)
    text = TOKEN_LIKE.sub(lambda match: (match.group(1) or "") + "***", text)
    return " ".join(text.split())[:ERROR_CHARS]


def retry_after(value: str | None) -> float | None:
    """The seconds a ``Retry-After`` header asks for (a number or an HTTP date), or None."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds) if math.isfinite(seconds) else None


class _TooLarge(Exception):
    pass


class Endpoint:
    """``BASE/chat/completions`` of an OpenAI-compatible server, asked with the limits above."""

    def __init__(self, url: str, api_key: str | None, timeout: float, retries: int) -> None:
        #: the base URL and the endpoint as messages, reports and cache keys show them (no credentials)
        self.shown_base = shown_url(url).rstrip("/")
        self.shown = shown_url(completions_url(url))
        # a user:password goes in a header, never in the request line; a query (api-version) is kept
        parts = urllib.parse.urlsplit(url)
        self.url = completions_url(
            urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
        )
        self.secrets = [secret for secret in [api_key, *url_secrets(url)] if secret]
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.auth: httpx2.BasicAuth | None = None
        if not api_key and parts.username is not None:  # no key: the URL's user:password as Basic auth
            user, password = urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or "")
            self.auth = httpx2.BasicAuth(user, password)
            self.secrets.append(base64.b64encode(f"{user}:{password}".encode()).decode())
        self.timeout = timeout
        self.retries = retries
        #: the warning to print before the first request, where a credential would go out in clear text
        self.clear_text = clear_text_warning(url, api_key)

    def client(self) -> httpx2.AsyncClient:
        """A client for one batch of requests (it belongs to the event loop that runs them)."""
        return httpx2.AsyncClient(timeout=self.timeout, headers=self.headers, auth=self.auth)

    async def complete(self, client: httpx2.AsyncClient, body: dict[str, Any]) -> Reply:
        """The judge's reply to ``body``, tried ``retries + 1`` times at most; raises a one-line error."""
        problem, tried = "", 0
        for attempt in range(self.retries + 1):
            tried += 1
            wait = min(MAX_WAIT, 0.5 * 2**attempt)
            try:
                exchange = self._exchange(client, body)
                status, headers, payload = await asyncio.wait_for(exchange, self.timeout)
            except asyncio.TimeoutError:
                problem = f"no whole reply within {self.timeout:g} s"
            except _TooLarge:
                problem = f"the reply is larger than {MAX_BODY:,} bytes"
            except httpx2.HTTPError as error:
                problem = redact(f"{type(error).__name__}: {error}", self.secrets)
            else:
                if status < 400:
                    reply = self._reply(payload)
                    if isinstance(reply, Reply):
                        return reply
                    problem = reply
                else:
                    text = redact(payload.decode("utf-8", "replace"), self.secrets)
                    problem = f"HTTP {status}: {text}" if text else f"HTTP {status}"
                    if status in FATAL_STATUS:
                        raise JudgeError(f"judge {self.shown}: {problem}")
                    if status not in RETRY_STATUS:
                        break
                    asked = retry_after(headers.get("retry-after"))
                    wait = min(MAX_WAIT, asked) if asked is not None else wait
            if attempt < self.retries:
                await asyncio.sleep(wait)
        tries = "1 try" if tried == 1 else f"{tried} tries"
        raise VerdictFailed(f"judge {self.shown}: {problem} ({tries})")

    async def _exchange(self, client: httpx2.AsyncClient, body: dict[str, Any]) -> tuple[int, Any, bytes]:
        async with client.stream("POST", self.url, json=body) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_BODY:
                raise _TooLarge
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > MAX_BODY:
                    raise _TooLarge
                chunks.append(chunk)
            return response.status_code, response.headers, b"".join(chunks)

    def _reply(self, payload: bytes) -> Reply | str:
        """The reply as a :class:`Reply`, or what is wrong with it."""
        try:
            data = json.loads(payload)
        except (ValueError, RecursionError):
            return "the reply is not JSON (or is nested too deep to read)"
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            return "the reply is not a chat completion (no choices[0].message.content)"
        if not isinstance(content, str):
            return "the reply's message content is not text"
        content = hide(content, self.secrets)  # it may be cached: a JSON verdict may hold the key escaped
        usage = data.get("usage") if isinstance(data, dict) else None
        return Reply(content, _count(usage, "prompt_tokens"), _count(usage, "completion_tokens"))


def _count(usage: Any, name: str) -> int:
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
