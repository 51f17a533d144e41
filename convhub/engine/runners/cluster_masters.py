"""Where a Spark cluster master's first contact goes, and which setting named it, so that it can be tried before
Spark is (``check_reachable``, before a build and when its Spark session starts): Spark does not give up on a
cluster that does not answer (a ``spark://`` master is retried for over a minute, a ``k8s://`` API server too,
and YARN's client retried a ResourceManager that was down for many minutes). docs/scale-out.md, "How to run",
says what a user sees.
"""

from __future__ import annotations

import os
import re
import socket
import ssl
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from convhub.errors import EngineError

#: The folders Spark reads a cluster's Hadoop configuration from, in the order it puts them on its class path.
CONF_VARIABLES = ("HADOOP_CONF_DIR", "YARN_CONF_DIR")
YARN_SITE = "yarn-site.xml"
#: Hadoop's defaults for the ResourceManager's client address.
RM_HOST, RM_PORT = "0.0.0.0", 8032
SPARK_PORT = 7077
_VARIABLE = re.compile(r"\$\{([^}$]+)\}")


@dataclass(frozen=True)
class Contact:
    """The places a master's first contact goes (``(host, port)``, any one answering will do), what they are for
    the error's line, the setting that named them (None: ``--spark-master`` itself); ``tls``: a handshake too."""

    places: list[tuple[str, int]]
    what: str
    named_by: str | None = None
    tls: bool = False


def contact(master: str) -> Contact | None:
    """Where ``master``'s first contact goes: each master of ``spark://HOST[:PORT][,HOST[:PORT]...]``; the API
    server of ``k8s://[SCHEME://]HOST[:PORT]``, over https unless it says http, with a TLS handshake (a server
    that accepts connections and never answers would stall Spark's Kubernetes client); ``yarn``'s ResourceManagers
    (``_yarn_contact``). None for a master on this machine (``local``...)."""
    if master.startswith("spark://"):
        places = [_host_port(place, SPARK_PORT) for place in master[len("spark://") :].split(",")]
        return Contact(places, "no Spark master answers")
    if master.startswith("k8s://"):
        scheme, _, address = master[len("k8s://") :].rpartition("://")
        place = _host_port(address, 80 if scheme == "http" else 443)  # Spark's default: https
        return Contact([place], "the Kubernetes API server does not answer", tls=scheme != "http")
    if master == "yarn":
        return _yarn_contact()
    return None


def _host_port(place: str, default_port: int) -> tuple[str, int]:
    """``HOST[:PORT][/PATH]`` (an IPv6 address in brackets) as ``urllib`` reads a URL's address."""
    address = urlsplit(f"//{place}")
    try:
        return address.hostname or "", address.port or default_port
    except ValueError as error:
        raise EngineError(f"{place!r} is no HOST:PORT ({error})") from None


def _yarn_contact() -> Contact:
    """The ResourceManager of the ``yarn-site.xml`` Spark puts on its class path (``CONF_VARIABLES``), by its
    ``yarn.resourcemanager.address``, else its ``hostname`` and ``RM_PORT``; with ``ha.enabled``, each of its
    ``ha.rm-ids`` by its ``.ID`` settings. An ``EngineError`` without the configuration that names the cluster."""
    folders = [(name, os.environ[name]) for name in CONF_VARIABLES if os.environ.get(name)]
    if not folders:
        raise EngineError(
            "--spark-master yarn: set HADOOP_CONF_DIR or YARN_CONF_DIR to the folder of the cluster's "
            "configuration (Spark finds the YARN cluster there)"
        )
    for variable, folder in folders:
        site = Path(folder) / YARN_SITE
        if site.is_file():
            settings, where = _hadoop_settings(site), f"{site} (${variable})"
            break
    else:
        settings, where = {}, f"Hadoop's default (no {YARN_SITE} in ${folders[0][0]}, {folders[0][1]})"
    ids = [""]
    if settings.get("yarn.resourcemanager.ha.enabled", "").strip().lower() == "true":
        named = (rm.strip() for rm in settings.get("yarn.resourcemanager.ha.rm-ids", "").split(","))
        ids = [f".{rm}" for rm in named if rm] or ids
    places, names = [], []
    for rm in ids:
        address = settings.get(f"yarn.resourcemanager.address{rm}")
        name = f"yarn.resourcemanager.address{rm}"
        if address is None:
            address = f"{settings.get(f'yarn.resourcemanager.hostname{rm}', RM_HOST)}:{RM_PORT}"
            name = f"yarn.resourcemanager.hostname{rm}"
        places.append(_host_port(_expanded(address, settings), RM_PORT))
        names.append(name)
    return Contact(places, "no YARN ResourceManager answers", f"{', '.join(names)} in {where}")


def _hadoop_settings(site: Path) -> dict[str, str]:
    """The ``name``/``value`` pairs of a Hadoop configuration file."""
    try:
        root = ElementTree.parse(site).getroot()
    except (OSError, ElementTree.ParseError) as error:
        raise EngineError(f"--spark-master yarn: cannot read {site}: {error}") from None
    settings = {}
    for prop in root.iter("property"):
        name, value = prop.findtext("name"), prop.findtext("value")
        if name and value is not None:
            settings[name.strip()] = value.strip()
    return settings


def _expanded(value: str, settings: dict[str, str]) -> str:
    """``value`` with each ``${name}`` replaced by that setting (Hadoop's defaults for the ResourceManager's host),
    a few levels deep as Hadoop does."""
    defaults = {"yarn.resourcemanager.hostname": RM_HOST, **settings}
    for _level in range(20):
        expanded = _VARIABLE.sub(lambda found: defaults.get(found.group(1), found.group(0)), value)
        if expanded == value:
            break
        value = expanded
    return value


#: How long ``check_reachable`` waits for a Spark master to accept a connection.
CONNECT_SECONDS = 5.0


def check_reachable(master: str) -> None:
    """At least one of the places a cluster master's first contact goes (``contact``) accepts a TCP connection
    (and its TLS handshake) within ``CONNECT_SECONDS``, else an ``EngineError`` naming the setting that named it."""
    found = contact(master)
    if found is None:
        return
    reasons = []
    for host, port in found.places:
        place = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            with socket.create_connection((host, port), timeout=CONNECT_SECONDS) as connection:
                if found.tls:  # only that it answers TLS: Spark's client checks the certificate
                    handshake = ssl.create_default_context()
                    handshake.check_hostname, handshake.verify_mode = False, ssl.CERT_NONE
                    handshake.wrap_socket(connection, server_hostname=host).close()
                return
        except TimeoutError:
            reasons.append(f"{place}: no answer within {CONNECT_SECONDS:g} s")
        except OSError as error:
            reasons.append(f"{place}: {getattr(error, 'strerror', None) or error}")
    named = f"; named by {found.named_by}" if found.named_by else ""
    raise EngineError(
        f"--spark-master {master}: the cluster could not be reached: {found.what} ({'; '.join(reasons)}){named}"
    )
