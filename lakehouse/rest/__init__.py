"""Paimon's REST catalog: a server that owns a warehouse's metadata and serializes its commits
(:mod:`lakehouse.rest.server`), and this engine as its client (``Catalog("http://...")``).

Clients read and write data and manifest files in place, at the path the server gives each table;
databases, table definitions, schema changes and snapshot commits go through the server, which
checks each request's bearer token against its grants.
"""
