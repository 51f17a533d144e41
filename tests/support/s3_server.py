"""A real S3 API on 127.0.0.1 for the object-store tests: moto's server mode (``ThreadedMotoServer``), reached
through s3fs and botocore as a real bucket would be, by an endpoint URL.

What s3fs is told, and how: botocore (under s3fs's aiobotocore) takes its endpoint from ``AWS_ENDPOINT_URL`` and
its keys from ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``, read when a client is made, so setting them once
the server listens reaches this process and any subprocess. The shared config and credentials files are pointed
at nothing and the instance metadata service is turned off, so no key or region of the machine's is read.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

#: The environment every S3 client of the tests gets (the endpoint is added once the server listens).
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",  # moto takes any key; these are no one's
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}


@contextmanager
def s3_server() -> Iterator[str]:
    """Start moto's S3 server on a free port of 127.0.0.1, point this process's S3 clients at it (the
    environment above), yield its endpoint URL; then stop it and put the environment back."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {**S3_ENV, "AWS_ENDPOINT_URL": endpoint}
    before = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield endpoint
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.stop()


def new_bucket(name: str) -> str:
    """Create the bucket ``name`` on the server the environment names; its URL (``s3://name``)."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()  # a client made before the endpoint was set would not reach it
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    fs.mkdir(name)
    return f"s3://{name}"
