"""The REST catalog server's API through starlette's TestClient: each endpoint's status codes, its
JSON in Paimon's shapes (every key present), its errors, and what it writes, as the filesystem
catalog reads it back."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from lakehouse import Catalog
from lakehouse.rest.grants import Grants
from lakehouse.rest.server import create_app
from tests.rest.live_server import Client, LiveServer

ADMIN, READER, ODS = "admin-token", "reader-token", "ods-token"
GRANTS = Grants.from_json(
    {"tokens": {ADMIN: {"*": "write"}, READER: {"*": "read"}, ODS: {"ods": "write", "*": "read"}}}
)
P = "/v1/wh"
T = f"{P}/databases/db/tables/t"
FIELDS = [
    {"id": 0, "name": "id", "type": "BIGINT NOT NULL"},
    {"id": 5, "name": "dt", "type": "STRING"},
    {"id": 7, "name": "v", "type": "DOUBLE", "description": "a value"},
]
SCHEMA = {"fields": FIELDS, "partitionKeys": ["dt"], "primaryKeys": [], "options": {}, "comment": "orders"}
AUDIT = {"owner", "createdAt", "createdBy", "updatedAt", "updatedBy"}


@pytest.fixture
def client(warehouse):
    with LiveServer(create_app(warehouse, GRANTS, name="wh")) as server:
        yield Client(server.port, auth(ADMIN))


@pytest.fixture
def table(client, warehouse):
    """``db.t`` created through the server, as the filesystem catalog opens it."""
    assert client.post(f"{P}/databases", json={"name": "db", "options": None}).status_code == 200
    assert create(client, "t").status_code == 200
    return Catalog(warehouse).load_table("db.t")


def auth(token):
    return {"Authorization": f"Bearer {token}"}


def create(client, name, schema=SCHEMA, database="db"):
    body = {"identifier": {"database": database, "object": name}, "schema": schema}
    return client.post(f"{P}/databases/{database}/tables", json=body)


def rows(ids, dt="2024-01-01"):
    return pa.table({"id": pa.array(ids, pa.int64()), "dt": [dt] * len(ids), "v": [1.0] * len(ids)})


def error(response, code, resource_type=None, resource_name=None):
    """The response is Paimon's ErrorResponse of ``code``; its message."""
    body = response.json()
    assert response.status_code == code, body
    assert body["code"] == code and body["resourceType"] == resource_type, body
    assert body["resourceName"] == resource_name and body["message"], body
    return body["message"]


def pop_latest(table):
    """Remove the latest snapshot file and hint of ``table``: its JSON, for a client to commit."""
    latest = table.latest_snapshot_id()
    snapshot = json.loads(table.io.read_bytes(table.paths.snapshot(latest)))
    table.snapshots.delete(latest)
    table.io.delete(f"{table.paths.snapshot_dir}/LATEST")
    return snapshot


def test_config_answers_the_prefix_for_the_catalogs_name_or_location(client, warehouse):
    assert client.get("/v1/config").json() == {"defaults": {"prefix": "wh"}, "overrides": {}}
    assert client.get("/v1/config", params={"warehouse": "wh"}).status_code == 200
    twice = client.get(f"/v1/config?warehouse=file%253A%252F%252F{warehouse.replace('/', '%252F')}")
    assert twice.status_code == 200, twice.json()  # pypaimon encodes the value twice
    assert "'wh'" in error(client.get("/v1/config", params={"warehouse": "other"}), 404)
    assert "/v1/wh/" in error(client.get("/v1/other/databases"), 404)
    assert "not implemented" in error(client.get(f"{P}/databases/db/functions"), 501)


def test_databases(client, warehouse):
    for name in ("ods", "dwd", "db"):
        assert client.post(f"{P}/databases", json={"name": name}).status_code == 200
    error(client.post(f"{P}/databases", json={"name": "db"}), 409, "DATABASE")
    assert client.get(f"{P}/databases").json() == {"databases": ["db", "dwd", "ods"], "nextPageToken": None}
    first = client.get(f"{P}/databases", params={"maxResults": 2}).json()
    assert first == {"databases": ["db", "dwd"], "nextPageToken": "dwd"}
    rest = client.get(f"{P}/databases", params={"maxResults": 2, "pageToken": "dwd"}).json()
    assert rest == {"databases": ["ods"], "nextPageToken": None}
    assert client.get(f"{P}/databases", params={"databaseNamePattern": "d%"}).json()["databases"] == [
        "db",
        "dwd",
    ]
    error(client.get(f"{P}/databases", params={"databaseNamePattern": "%b"}), 400)
    got = client.get(f"{P}/databases/ods").json()
    assert got.keys() == {"id", "name", "location", "options"} | AUDIT
    assert got["name"] == "ods" and got["location"] == f"file://{warehouse}/ods.db" and got["options"] == {}
    assert client.delete(f"{P}/databases/ods").status_code == 200
    error(client.get(f"{P}/databases/ods"), 404, "DATABASE", "ods")
    error(client.delete(f"{P}/databases/ods"), 404, "DATABASE", "ods")
    error(client.post(f"{P}/databases", json={"name": "x", "options": {"k": "v"}}), 501)
    error(client.post(f"{P}/databases/db", json={"removals": [], "updates": {}}), 501)  # alter


def test_create_and_get_a_table_keeping_the_clients_field_ids(client, table, warehouse):
    got = client.get(T).json()
    assert got.keys() == {"id", "database", "name", "path", "isExternal", "schemaId", "schema"} | AUDIT
    assert got["id"] == table.identity and got["path"] == f"file://{warehouse}/db.db/t"
    assert (got["name"], got["isExternal"], got["schemaId"]) == ("t", False, 0)
    assert got["schema"] == SCHEMA
    assert [f.id for f in table.schema.fields] == [0, 5, 7] and table.schema.highest_field_id == 7
    assert table.schema.comment == "orders" and table.schema.fields[2].description == "a value"
    error(create(client, "t"), 409, "TABLE")
    error(create(client, "t", database="nowhere"), 404, "DATABASE", "nowhere")
    error(client.get(f"{P}/databases/db/tables/nothing"), 404, "TABLE", "nothing")
    assert client.get(f"{P}/databases/db/tables").json() == {"tables": ["t"], "nextPageToken": None}


@pytest.mark.parametrize(
    "schema, message",
    [
        ({**SCHEMA, "primaryKeys": ["nope"]}, "primary key"),  # validated as create_table validates
        ({**SCHEMA, "options": {"bucket": "0"}}, "bucket"),
        ({**SCHEMA, "options": {"path": "/elsewhere"}}, "outside the warehouse"),
        ({**SCHEMA, "options": {"data-file.external-paths": "s3://b/x"}}, "outside the warehouse"),
        ({**SCHEMA, "extra": 1}, "extra"),  # unknown fields
        ({**SCHEMA, "fields": [FIELDS[1], {**FIELDS[0], "type": 5}]}, "type"),
        ({**SCHEMA, "fields": [FIELDS[1], {**FIELDS[0], "type": {"type": "ARRAY"}}]}, "type"),
        ({**SCHEMA, "fields": [FIELDS[1], {**FIELDS[0], "id": "0"}]}, "id"),
        ({**SCHEMA, "fields": FIELDS + [{**FIELDS[1], "name": "w"}]}, "field ids"),
        ({**SCHEMA, "options": {"bucket": 4}}, "options"),  # wrong types
        ({**SCHEMA, "partitionKeys": "dt"}, "partitionKeys"),
    ],
)
def test_a_table_definition_is_refused_with_a_message(client, table, schema, message):
    assert message in error(create(client, "u", schema), 400)
    assert client.get(f"{P}/databases/db/tables").json()["tables"] == ["t"]


def test_malformed_requests_are_400s(client, table):
    assert "not JSON" in error(client.post(f"{P}/databases", content=b"{nope"), 400)
    assert "JSON object" in error(client.post(f"{P}/databases", content=b"[1]"), 400)
    assert "'name'" in error(client.post(f"{P}/databases", content=b"{}"), 400)
    assert "string" in error(client.post(f"{P}/databases", json={"name": 3}), 400)
    assert "maxResults" in error(client.get(f"{P}/databases", params={"maxResults": "x"}), 400)


def test_rename_alter_and_drop(client, table, warehouse):
    assert create(client, "other").status_code == 200
    rename = {"source": {"database": "db", "object": "t"}, "destination": {"database": "db", "object": "u"}}
    assert client.post(f"{P}/tables/rename", json=rename).status_code == 200
    assert client.get(f"{P}/databases/db/tables").json()["tables"] == ["other", "u"]
    error(client.post(f"{P}/tables/rename", json=rename), 404, "TABLE")
    onto = {**rename, "source": {"database": "db", "object": "other"}}
    error(client.post(f"{P}/tables/rename", json=onto), 409, "TABLE")
    changes = [
        {"action": "setOption", "key": "snapshot.num-retained.min", "value": "3"},
        {"action": "addColumn", "fieldNames": ["note"], "dataType": "STRING", "comment": None, "move": None},
    ]
    assert client.post(f"{P}/databases/db/tables/u", json={"changes": changes}).status_code == 200
    altered = Catalog(warehouse).load_table("db.u").schema
    assert (
        altered.id == 1
        and altered.field("note").id == 8
        and altered.options["snapshot.num-retained.min"] == "3"
    )
    assert client.get(f"{P}/databases/db/tables/u").json()["schemaId"] == 1
    path = [{"action": "setOption", "key": "path", "value": "/elsewhere"}]
    error(client.post(f"{P}/databases/db/tables/u", json={"changes": path}), 400)
    comment = [{"action": "updateComment", "comment": "x"}]
    error(client.post(f"{P}/databases/db/tables/u", json={"changes": comment}), 501)
    assert client.delete(f"{P}/databases/db/tables/u").status_code == 200
    error(client.delete(f"{P}/databases/db/tables/u"), 404, "TABLE", "u")


def test_snapshot_and_commit(client, table):
    error(client.get(f"{T}/snapshot"), 404, "SNAPSHOT")
    table.write(rows([1, 2]))
    first = client.get(f"{T}/snapshot").json()["snapshot"]
    assert first.keys() == {"snapshot", "recordCount", "fileSizeInBytes", "fileCount", "lastFileCreationTime"}
    assert first["recordCount"] == 2 and first["fileCount"] == 1 and first["snapshot"]["id"] == 1
    table.write(rows([3]))
    second = pop_latest(table)

    def commit(snapshot, table_id=table.identity, base=first["snapshot"]["uuid"]):
        body = {"tableId": table_id, "snapshot": snapshot, "statistics": [], "baseSnapshotUuid": base}
        return client.post(f"{T}/commit", json=body)

    assert commit(second, base="another").json() == {"success": False}  # planned on another latest
    assert commit({**second, "id": 3}).json() == {"success": False}  # not the next id
    error(commit(second, table_id="x"), 404, "TABLE", "t")  # a dropped and re-created table
    assert "logOffsets" in error(commit({**second, "logOffsets": {"0": 1}}), 400)
    error(commit({**second, "deltaManifestList": "manifest-list-missing"}), 400)
    error(commit({**second, "deltaManifestList": "../../elsewhere"}), 400)
    error(commit({**second, "schemaId": 9}), 400)
    assert commit(second).json() == {"success": True}
    assert commit(second).json() == {"success": False}
    assert sorted(table.read()["id"].to_pylist()) == [1, 2, 3]
    latest = client.get(f"{T}/snapshot").json()["snapshot"]
    assert latest["snapshot"] == second and latest["recordCount"] == 3 and latest["fileCount"] == 2


def test_rollback(client, table):
    table.write(rows([1]))
    table.write(rows([2]))
    table.create_tag("one", snapshot_id=1)
    body = {"instant": {"type": "snapshot", "snapshotId": 1}, "fromSnapshot": 1}
    error(client.post(f"{T}/rollback", json=body), 409)  # the latest is 2
    error(client.post(f"{T}/rollback", json={"instant": {"type": "tag", "tagName": "two"}}), 404, "TAG")
    missing = {"instant": {"type": "snapshot", "snapshotId": 7}, "fromSnapshot": None}
    error(client.post(f"{T}/rollback", json=missing), 404, "SNAPSHOT")
    assert client.post(f"{T}/rollback", json={**body, "fromSnapshot": 2}).status_code == 200
    assert table.latest_snapshot_id() == 1
    table.write(rows([3]))
    assert (
        client.post(f"{T}/rollback", json={"instant": {"type": "tag", "tagName": "one"}}).status_code == 200
    )
    assert table.read()["id"].to_pylist() == [1]


def test_tags(client, table):
    table.write(rows([1]))
    assert client.post(f"{T}/tags", json={"tagName": "my tag", "snapshotId": None}).status_code == 200
    error(client.post(f"{T}/tags", json={"tagName": "my tag"}), 409, "TAG")
    assert client.post(f"{T}/tags", json={"tagName": "my tag", "ignoreIfExists": True}).status_code == 200
    error(client.post(f"{T}/tags", json={"tagName": "x", "timeRetained": "1d"}), 501)
    error(client.post(f"{T}/tags", json={"tagName": "x", "snapshotId": 5}), 404, "SNAPSHOT")
    assert client.get(f"{T}/tags").json() == {"tags": ["my tag"], "nextPageToken": None}
    assert client.get(f"{T}/tags", params={"tagNamePrefix": "x"}).json()["tags"] == []
    got = client.get(
        f"{T}/tags/my+tag"
    ).json()  # a space is a + in a path segment, as Paimon's clients send it
    assert got.keys() == {"tagName", "snapshot", "tagCreateTime", "tagTimeRetained"}
    assert got["tagName"] == "my tag" and got["snapshot"]["id"] == 1
    assert client.delete(f"{T}/tags/my%20tag").status_code == 200
    error(client.get(f"{T}/tags/my+tag"), 404, "TAG", "my tag")
    error(client.delete(f"{T}/tags/my+tag"), 404, "TAG", "my tag")


def test_branches(client, table, warehouse):
    table.write(rows([1]))
    assert client.post(f"{T}/branches", json={"branch": "dev", "fromTag": None}).status_code == 200
    error(client.post(f"{T}/branches", json={"branch": "dev"}), 409, "BRANCH")
    error(client.post(f"{T}/branches", json={"branch": "x", "fromTag": "nope"}), 404, "TAG")
    assert client.get(f"{T}/branches").json() == {"branches": ["dev"]}
    branch = f"{P}/databases/db/tables/t%24branch_dev"
    loaded = client.get(branch).json()
    assert loaded["path"] == f"file://{warehouse}/db.db/t" and loaded["id"] == table.identity  # the table's
    dev = table.on_branch("dev")
    dev.write(rows([2]))
    commit = {
        "tableId": loaded["id"],
        "snapshot": pop_latest(dev),
        "statistics": None,
        "baseSnapshotUuid": None,
    }
    assert client.post(f"{branch}/commit", json=commit).json() == {"success": True}
    assert client.get(f"{branch}/snapshot").json()["snapshot"]["snapshot"]["id"] == 1
    assert client.post(f"{T}/branches/dev/forward", json={}).status_code == 200
    assert table.read()["id"].to_pylist() == [2]
    error(client.post(f"{T}/branches/dev/rename", json={"toBranch": "x"}), 501)
    assert client.delete(f"{T}/branches/dev").status_code == 200
    error(client.delete(f"{T}/branches/dev"), 404, "BRANCH", "dev")
    error(client.get(branch), 404, "BRANCH")


def test_partitions(client, table):
    assert client.get(f"{T}/partitions").json() == {"partitions": [], "nextPageToken": None}
    table.write(rows([1, 2], "2024-01-02"))
    table.write(rows([3], "2024-01-01"))
    listed = client.get(f"{T}/partitions").json()
    assert [p["spec"] for p in listed["partitions"]] == [{"dt": "2024-01-01"}, {"dt": "2024-01-02"}]
    second = listed["partitions"][1]
    assert second.keys() == {"spec", "recordCount", "fileSizeInBytes", "fileCount", "lastFileCreationTime",
                             "totalBuckets", "done", "options"} | AUDIT  # fmt: skip
    assert (second["recordCount"], second["fileCount"], second["done"]) == (2, 1, False)
    page = client.get(f"{T}/partitions", params={"maxResults": 1}).json()
    assert len(page["partitions"]) == 1 and page["nextPageToken"] == "dt=2024-01-01"
    named = client.get(f"{T}/partitions", params={"partitionNamePattern": "dt=2024-01-02%"}).json()
    assert [p["recordCount"] for p in named["partitions"]] == [2]


def test_an_unexpected_failure_is_a_500_of_one_line(client, table):
    os.mkdir(table.paths.schema(1))  # a schema "file" that is a directory: no error the engine expects
    message = error(client.get(T), 500)
    assert "\n" not in message and "Traceback" not in message and "IsADirectoryError" in message


def test_a_store_without_atomic_creates_needs_no_lock_database(s3_warehouse):
    """Without conditional writes S3 cannot create a file atomically: the server's lock within its
    process makes its creates safe (the engine alone refuses them without a catalog lock)."""
    uri, options = s3_warehouse
    options = {**options, "s3.conditional-writes": "false"}
    with LiveServer(create_app(uri, GRANTS, name="wh", options=options)) as server:
        client = Client(server.port, auth(ADMIN))
        assert client.post(f"{P}/databases", json={"name": "db"}).status_code == 200
        assert create(client, "t").status_code == 200
        changes = [{"action": "setOption", "key": "snapshot.num-retained.min", "value": "3"}]
        assert client.post(T, json={"changes": changes}).status_code == 200
        got = client.get(T).json()
        assert got["schemaId"] == 1 and got["path"] == f"{uri}/db.db/t"
        error(create(client, "t"), 409, "TABLE")


# ---- authorization -------------------------------------------------------------------------

RENAME = {"source": {"database": "db", "object": "t"}, "destination": {"database": "db", "object": "u"}}
COMMIT = {"tableId": "x", "snapshot": {}, "statistics": [], "baseSnapshotUuid": None}
# (method, path, body, whether it writes)
ENDPOINTS = [
    ("GET", f"{P}/databases/db", None, False),
    ("DELETE", f"{P}/databases/db", None, True),
    ("POST", f"{P}/databases", {"name": "db"}, True),
    ("GET", f"{P}/databases/db/tables", None, False),
    ("POST", f"{P}/databases/db/tables", {"identifier": {"database": "db", "object": "u"}}, True),
    ("POST", f"{P}/tables/rename", RENAME, True),
    ("GET", T, None, False),
    ("POST", T, {"changes": []}, True),
    ("DELETE", T, None, True),
    ("GET", f"{T}/snapshot", None, False),
    ("POST", f"{T}/commit", COMMIT, True),
    ("POST", f"{T}/rollback", {"instant": {"type": "snapshot", "snapshotId": 1}}, True),
    ("GET", f"{T}/partitions", None, False),
    ("GET", f"{T}/tags", None, False),
    ("POST", f"{T}/tags", {"tagName": "x"}, True),
    ("GET", f"{T}/tags/x", None, False),
    ("DELETE", f"{T}/tags/x", None, True),
    ("GET", f"{T}/branches", None, False),
    ("POST", f"{T}/branches", {"branch": "b"}, True),
    ("DELETE", f"{T}/branches/b", None, True),
    ("POST", f"{T}/branches/b/forward", {}, True),
]


@pytest.mark.parametrize("method, path, body, writes", ENDPOINTS)
def test_every_endpoint_needs_a_token_with_the_right(client, table, method, path, body, writes):
    def send(headers):
        return client.request(method, path, json=body, headers=headers)

    error(send({"Authorization": ""}), 401)
    error(send(auth("not-a-token")), 401)
    error(send({"Authorization": f"Basic {ADMIN}"}), 401)
    read = send(auth(READER)).status_code
    assert read == 403 if writes else read not in (401, 403)
    if writes:
        assert "may not write" in error(send(auth(ODS)), 403)  # ods may write ods only
    assert send(auth(ODS)).status_code == send(auth(READER)).status_code


def test_tokens_on_catalog_endpoints(client, table, warehouse):
    client.post(f"{P}/databases", json={"name": "ods"})
    error(client.get("/v1/config", headers=auth("nope")), 401)
    assert client.get("/v1/config", headers=auth(READER)).status_code == 200
    assert client.get(f"{P}/databases", headers=auth(READER)).json()["databases"] == ["db", "ods"]
    only_ods = Grants.from_json({"tokens": {"t": {"ods": "read"}}})
    with LiveServer(create_app(warehouse, only_ods, name="wh")) as server:
        c = Client(server.port, {})
        assert c.get(f"{P}/databases", headers=auth("t")).json()["databases"] == ["ods"]
        error(c.get(T, headers=auth("t")), 403)
    assert client.post(f"{P}/databases", json={"name": "new"}, headers=auth(ODS)).status_code == 403


def test_snapshot_statistics_follow_each_commit_as_a_full_count_does(client, table, warehouse):
    """Statistics carried from each snapshot to the next (appends, an overwrite, a compaction, a
    rollback) are what a server that counts every live file answers."""
    steps = [
        lambda: table.write(rows([1, 2])),
        lambda: table.write(rows([3], dt="2024-01-02")),
        lambda: table.write(rows([4, 5])),
        lambda: table.compact(full=True),
        lambda: table.write(rows([6], dt="2024-01-02"), overwrite={"dt": "2024-01-02"}),
        lambda: table.rollback_to(snapshot_id=2),
        lambda: table.write(rows([7])),
    ]
    for step in steps:
        step()
        carried = client.get(f"{T}/snapshot").json()["snapshot"]
        partitions = client.get(f"{T}/partitions").json()["partitions"]
        with LiveServer(create_app(warehouse, GRANTS, name="wh")) as fresh:
            counted = Client(fresh.port, auth(ADMIN))
            assert carried == counted.get(f"{T}/snapshot").json()["snapshot"]
            assert partitions == counted.get(f"{T}/partitions").json()["partitions"]
