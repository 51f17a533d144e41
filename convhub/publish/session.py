"""The Hub side of a push: one session (client, target, retry policy) and what a failed call was.

``HubSession.call`` retries what ``huggingface_hub`` sends only once, on transient faults; ``HubSession.once`` leaves
what the client retries by itself alone; either turns a fault into a one-line ``PushError``. The policy is in the
docstring of ``convhub.publish.push``.

Three transport faults are told apart: no connection made (``unreachable``: a connection refused, nothing listens
at the endpoint, or a host name that does not resolve: a wrong ``HF_ENDPOINT`` or a Hub that is down; retried
once, quickly, and the message names the endpoint and which of the two it was), a request
that got no answer within ``convhub.publish.hub_client``'s limit (``timeout``) and a connection dropped mid-request
(``dropped``); the last two are retried like a 5xx.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

import httpx2
from huggingface_hub import HfApi, constants
from huggingface_hub.errors import HfHubHTTPError

from convhub.errors import unconnectable
from convhub.publish.hub_client import TIMEOUT_ENV, timeout_seconds
from convhub.publish.hub_errors import redact

P = ParamSpec("P")
T = TypeVar("T")

logger = logging.getLogger("convhub.publish.push")  # the push's one logger, whichever module logs

TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})  # the statuses huggingface_hub retries too


class PushError(Exception):
    """The push could not be made or did not verify (the one-line message says what to do).

    ``kind`` names the fault (``auth``, ``conflict``, ``server``, ``dropped``, ``refused``, ``unknown-landing``,
    ``license``, ``verify`` …) and ``status`` the HTTP status when there was one, for callers that branch on it.
    """

    def __init__(self, message: str, kind: str = "error", status: int | None = None):
        super().__init__(message)
        self.kind, self.status = kind, status


@dataclass
class RetryPolicy:
    """How often and how patiently convhub retries the calls the client sends only once.

    ``attempts`` counts the first try; the waits double from ``first_delay`` up to ``max_delay``. A refused
    connection gets ``refused_attempts`` tries, ``refused_delay`` apart: nothing listens there, waiting longer
    rarely helps. ``sleep`` is injectable so tests do not wait.
    """

    attempts: int = 4
    first_delay: float = 1.0
    max_delay: float = 8.0
    sleep: Callable[[float], None] = time.sleep
    refused_attempts: int = 2
    refused_delay: float = 0.5

    def delay(self, attempt: int, fault: HubFault | None = None) -> float:
        """The wait after failed attempt number ``attempt`` (1-based) that failed with ``fault``."""
        if fault is not None and fault.kind == "unreachable":
            return self.refused_delay
        return min(self.max_delay, self.first_delay * 2 ** (attempt - 1))

    def last(self, attempt: int, fault: HubFault) -> bool:
        """Whether ``attempt`` was the last one this fault gets."""
        return attempt >= (self.refused_attempts if fault.kind == "unreachable" else self.attempts)


@dataclass
class HubFault:
    """A failed Hub call, reduced to what the policy and the message need (never the request's headers)."""

    kind: str  # auth | conflict | server | dropped | timeout | unreachable | refused
    status: int | None
    reason: str  # "503 Service Unavailable", or the transport error's own words
    detail: str  # the Hub's message, redacted and on one line

    @property
    def transient(self) -> bool:
        return self.kind in ("dropped", "timeout", "unreachable") or (
            self.kind == "server" and self.status in TRANSIENT_STATUSES
        )

    @classmethod
    def of(cls, error: BaseException | None, token) -> HubFault | None:
        """The Hub or transport error behind ``error`` (the client wraps LFS failures in a RuntimeError)."""
        while error is not None and not isinstance(error, (HfHubHTTPError, httpx2.TransportError)):
            error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
        if isinstance(error, httpx2.TransportError):
            words = redact(str(error), token) or type(error).__name__
            if isinstance(error, httpx2.TimeoutException):
                return cls("timeout", None, words, words)
            if isinstance(error, httpx2.ConnectError) and (why := unconnectable(error)):
                return cls("unreachable", None, why, words)
            return cls("dropped", None, words, words)
        if error is None or error.response is None:
            return None
        status = error.response.status_code
        reason = f"{status} {error.response.reason_phrase}".strip()
        detail = redact(error.server_message or "", token)
        if status in (401, 403):
            kind = "auth"
        elif status in (409, 412):
            kind = "conflict"
        elif status in TRANSIENT_STATUSES:
            kind = "server"
        else:
            kind = "refused"
        return cls(kind, status, reason, detail)


@dataclass
class HubSession:
    """One push's client, target and retry policy; turns every Hub fault into a one-line ``PushError``."""

    api: HfApi
    repo_id: str
    revision: str
    policy: RetryPolicy = field(default_factory=RetryPolicy)

    @property
    def target(self) -> str:
        return f"{self.repo_id}@{self.revision}"

    def call(self, step: str, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A call the client sends only once and that is safe to repeat: retried on transient faults, as many
        times as the policy gives the fault (``RetryPolicy.last``: a refused connection has its own count)."""
        attempt = 1
        while True:
            try:
                return function(*args, **kwargs)
            except Exception as error:
                fault = HubFault.of(error, self.api.token)
                if fault is None:
                    raise
                if not fault.transient or self.policy.last(attempt, fault):
                    raise self.failure(step, fault, attempt) from None
                self.wait(step, fault, attempt)
                attempt += 1

    def once(self, step: str, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A call the client already retries by itself (``http_backoff``): not retried again here."""
        try:
            return function(*args, **kwargs)
        except Exception as error:
            fault = HubFault.of(error, self.api.token)
            if fault is None:
                raise
            raise self.failure(step, fault, attempts=None) from None

    def wait(self, step: str, fault: HubFault, attempt: int) -> None:
        delay = self.policy.delay(attempt, fault)
        retries = (self.policy.refused_attempts if fault.kind == "unreachable" else self.policy.attempts) - 1
        logger.warning(
            "%s: %s failed (%s), retry %d/%d in %gs", self.target, step, fault.reason, attempt, retries, delay
        )
        self.policy.sleep(delay)

    @property
    def endpoint(self) -> str:
        """The Hub's address, and where it came from when that is ``HF_ENDPOINT``."""
        endpoint = self.api.endpoint.rstrip("/")
        from_env = os.environ.get("HF_ENDPOINT") and endpoint == constants.ENDPOINT.rstrip("/")
        return f"{endpoint} (HF_ENDPOINT)" if from_env else endpoint

    def failure(self, step: str, fault: HubFault, attempts: int | None, head: str | None = None) -> PushError:
        """The one-line message for a fault that ends the push (nothing of it was committed)."""
        nothing = "nothing of this push was committed" + (
            f" ({self.target} is still at {head[:12]})" if head else ""
        )
        detail = f": {fault.detail}" if fault.detail and fault.detail != fault.reason else ""
        tries = "after the client's own retries" if attempts is None else f"after {attempts} attempts"
        if fault.kind == "auth":
            message = (
                f"the Hub refused the token on {step} ({fault.reason}{detail}): it is expired, revoked or has no "
                f"write access to {self.repo_id}; {nothing}. Make a new write token (`hf auth login`, HF_TOKEN or "
                "--token) and re-run"
            )
        elif fault.kind == "conflict":
            message = (
                f"someone else is committing to {self.target} ({fault.reason}{detail}); {nothing}. Check what "
                "changed on the Hub, then re-run `convhub push` (it plans against the new head)"
            )
        elif fault.kind == "server":
            message = (
                f"the Hub kept failing on {step} ({fault.reason}{detail}) {tries}; {nothing}. Re-run later "
                "(files already uploaded are not sent again)"
            )
        elif fault.kind == "unreachable":
            message = (
                f"could not connect to the Hub at {self.endpoint}: {fault.reason} on {step} {tries}; {nothing}. "
                "Check that the Hub is up and that HF_ENDPOINT names it"
            )
        elif fault.kind == "timeout":
            message = (
                f"the Hub at {self.endpoint} did not answer {step} within {timeout_seconds():g} s {tries}; {nothing}."
                f" Re-run later (files already uploaded are not sent again; {TIMEOUT_ENV} sets the limit)"
            )
        elif fault.kind == "dropped":
            message = (
                f"the connection to the Hub dropped on {step} ({fault.reason}) {tries}; {nothing}. Re-run later "
                "(files already uploaded are not sent again)"
            )
        else:
            message = f"the Hub refused {step} ({fault.reason}{detail}); {nothing}"
        return PushError(f"{self.target}: {message}", kind=fault.kind, status=fault.status)
