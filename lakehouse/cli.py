"""The ``lakehouse`` command: ``lakehouse rest-catalog --warehouse W`` serves a warehouse as a Paimon
REST catalog (``python -m lakehouse.cli rest-catalog ...`` too); ``... -- COMMAND`` runs a command
against it (``make dev``: the Dagster UI), pointed at it by ``$LAKEHOUSE_WAREHOUSE`` and
``$LAKEHOUSE_CATALOG_TOKEN``."""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import subprocess
import sys
from collections.abc import Sequence

from lakehouse.errors import LakehouseError
from lakehouse.options import TOKEN_ENV, WAREHOUSE_ENV
from lakehouse.rest.grants import Grants
from lakehouse.rest.protocol import DEFAULT_PORT, LOCALHOST


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lakehouse", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    rest = commands.add_parser(
        "rest-catalog",
        help="serve a warehouse as a Paimon REST catalog",
        description="Serve a warehouse to Paimon's REST clients (pypaimon, Java, this engine) until "
        "interrupted. Clients connect with uri=http://HOST:PORT, warehouse=NAME, token.provider=bear "
        "and a token of the grants.",
    )
    rest.add_argument("--warehouse", required=True, help="a local path or an s3://, hdfs:// URI")
    rest.add_argument("--host", default=LOCALHOST, help=f"address to listen on (default {LOCALHOST})")
    rest.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    rest.add_argument("--name", help="the catalog's name, clients' warehouse option (default lakehouse)")
    rest.add_argument(
        "--grants",
        help='JSON file of tokens and their rights: {"tokens": {"<token>": {"<database> or *": '
        '"read" or "write"}}}; without it, one token that writes everything is made and printed',
    )
    rest.add_argument("--token-file", help="without --grants: also write the new token to this file")
    rest.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        help=f"after --: a command to run while serving, with ${WAREHOUSE_ENV} set to the server's URL and "
        f"(without --grants) ${TOKEN_ENV} to the token; the server stops when it exits",
    )
    rest.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a catalog option (object-store settings such as s3.endpoint, the catalog lock); repeatable",
    )
    args = parser.parse_args(argv)
    try:
        return _rest_catalog(args)
    except LakehouseError as e:
        print(f"lakehouse rest-catalog: {e}", file=sys.stderr)
        return 2


def _rest_catalog(args: argparse.Namespace) -> int:
    from lakehouse.rest.server import DEFAULT_NAME, Serving, create_app, serve

    options = dict(_option(text) for text in args.option)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    token = None
    if args.grants is not None:
        grants = Grants.load(args.grants)
    else:
        token = secrets.token_urlsafe(32)
        grants = Grants.single(token)
        if args.token_file:
            descriptor = os.open(args.token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w") as out:
                out.write(token + "\n")
        if not command:
            print(f"token (writes everything; shown once): {token}", file=sys.stderr)
    name = args.name or DEFAULT_NAME
    app = create_app(args.warehouse, grants, name=name, options=options)
    url = f"http://{args.host}:{args.port}"
    print(
        f"serving {args.warehouse} as catalog {name!r} at {url} "
        f"(clients: uri={url}, warehouse={name}, token.provider=bear, token=...)",
        file=sys.stderr,
    )
    if not command:
        serve(app, host=args.host, port=args.port)
        return 0
    env = {**os.environ, WAREHOUSE_ENV: url, **({TOKEN_ENV: token} if token else {})}
    with (
        Serving(app, host=args.host, port=args.port, log_level="warning"),
        contextlib.suppress(KeyboardInterrupt),
    ):
        return subprocess.call(command, env=env)
    return 130  # interrupted


def _option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise SystemExit(f"lakehouse rest-catalog: --option {text!r} must look like KEY=VALUE")
    return key, value


if __name__ == "__main__":
    sys.exit(main())
