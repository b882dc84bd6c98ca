"""Who may do what on a REST catalog server: bearer tokens and their rights per database.

A grants file maps each token to its rights, ``"*"`` standing for every database that has no
entry of its own::

    {"tokens": {"<secret>": {"*": "write"}, "<other>": {"ods": "read", "dwd": "write"}}}

``write`` includes ``read``. Tokens are compared in constant time (``hmac.compare_digest``), so
response times do not tell how much of a guess was right.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from lakehouse.errors import ForbiddenError, InvalidArgumentError, NotAuthorizedError
from lakehouse.rest.protocol import Access

EVERY_DATABASE = "*"


@dataclass(frozen=True)
class Rights:
    """One token's rights: database (or ``*``) -> access."""

    databases: Mapping[str, Access]

    def access(self, database: str) -> Access | None:
        """The right on ``database``: its own entry, else ``*``'s, else none."""
        return self.databases.get(database, self.databases.get(EVERY_DATABASE))

    def allows(self, database: str, access: Access) -> bool:
        granted = self.access(database)
        return granted is not None and (granted is Access.WRITE or access is Access.READ)

    def check(self, database: str | None, access: Access) -> None:
        """``ForbiddenError`` unless these rights allow ``access`` on ``database`` (None: the
        catalog itself, which any token may read and only a ``*`` writer may change)."""
        allowed = (
            access is Access.READ or self.databases.get(EVERY_DATABASE) is Access.WRITE
            if database is None
            else self.allows(database, access)
        )
        if not allowed:
            where = "the catalog" if database is None else f"database {database!r}"
            raise ForbiddenError(f"this token may not {access.value} {where}; ask for a grant")

    def readable(self, databases: Iterable[str]) -> list[str]:
        """The databases among ``databases`` these rights may read."""
        return [d for d in databases if self.allows(d, Access.READ)]


@dataclass(frozen=True)
class Grants:
    """Every token a server accepts, with its rights."""

    tokens: Mapping[str, Rights]

    @classmethod
    def single(cls, token: str) -> Grants:
        """One token that may write everything."""
        return cls({token: Rights({EVERY_DATABASE: Access.WRITE})})

    @classmethod
    def load(cls, path: str | Path) -> Grants:
        """The grants of a JSON file (see the module's docstring); ``InvalidArgumentError`` saying
        what is wrong with it."""
        try:
            return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError) as e:
            raise InvalidArgumentError(f"grants file {path}: {e}") from None

    @classmethod
    def from_json(cls, obj: object) -> Grants:
        if not isinstance(obj, dict) or set(obj) != {"tokens"} or not isinstance(obj["tokens"], dict):
            raise ValueError('expected {"tokens": {"<token>": {"<database> or *": "read" or "write"}}}')
        tokens = {}
        for token, rights in obj["tokens"].items():
            if not token.strip() or not isinstance(rights, dict):
                raise ValueError("each token must be a non-blank string mapped to an object of rights")
            bad = {d: r for d, r in rights.items() if r not in [a.value for a in Access]}
            if bad:
                raise ValueError(f"rights must be 'read' or 'write', not {bad}")
            tokens[token] = Rights({d: Access(r) for d, r in rights.items()})
        if not tokens:
            raise ValueError("it grants no token")
        return cls(tokens)

    def rights(self, token: str | None) -> Rights:
        """The rights of ``token``; ``NotAuthorizedError`` for none or one not granted."""
        found = None
        for known, rights in self.tokens.items():  # every token compared: no early exit to time
            if token is not None and hmac.compare_digest(known.encode(), token.encode()):
                found = rights
        if found is None:
            what = "no bearer token" if token is None else "an unknown bearer token"
            raise NotAuthorizedError(
                f"the request carries {what}; send 'Authorization: Bearer <token>' with a token of this "
                f"server"
            )
        return found

    def check(self, token: str | None, database: str | None, access: Access) -> Rights:
        """The rights of ``token`` if they allow ``access`` on ``database`` (None: the catalog);
        ``NotAuthorizedError`` or ``ForbiddenError`` otherwise."""
        rights = self.rights(token)
        rights.check(database, access)
        return rights
