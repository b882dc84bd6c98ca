"""An S3-compatible server on loopback for trying and testing the lakehouse on an object store:
moto in server mode (a development dependency), which honours conditional writes
(``If-None-Match: *``) as S3 does."""

from __future__ import annotations

import subprocess
import sys
import uuid

from lakehouse.spark.loopback import LOOPBACK, accepts, free_port, stop_groups, wait_until

ACCESS_KEY = SECRET_KEY = "lakehouse-local"
REGION = "us-east-1"


class S3Server:
    """``with S3Server() as s3``: a server at :attr:`endpoint`; :meth:`bucket` creates buckets."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def options(self) -> dict[str, str]:
        """The catalog options that reach this server."""
        return {"s3.endpoint": self.endpoint, "s3.access-key": ACCESS_KEY, "s3.secret-key": SECRET_KEY,
                "s3.region": REGION}  # fmt: skip

    @property
    def environment(self) -> dict[str, str]:
        """The same as the standard AWS environment variables."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION}  # fmt: skip

    def start(self, timeout_s: float = 60) -> S3Server:
        command = [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(self.port)]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        try:
            wait_until(lambda: accepts(self.port), [self.process], timeout_s, "the S3 server did not start")
        except BaseException:
            self.stop()
            raise
        return self

    def bucket(self, prefix: str = "lakehouse") -> str:
        """A new empty bucket; its name."""
        import boto3

        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        client = boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                              aws_secret_access_key=SECRET_KEY, region_name=REGION)  # fmt: skip
        client.create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        if self.process is not None:
            stop_groups([self.process])

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
