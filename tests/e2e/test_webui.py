"""The Dagster UI in a real browser: headless Chromium (Debian's, driven by Playwright) opens the
pages the README shows (the global asset lineage, an asset's schema, row counts and checks, a
table's column lineage) served by the webserver and saves their screenshots (``make e2e``)."""

from __future__ import annotations

import pytest

from assets.orders import TABLES
from tests.e2e.server import ROOT, DagsterServer

pytestmark = pytest.mark.e2e

CHROMIUM = "/usr/bin/chromium"  # Debian's package; Playwright downloads no browser here
# Headless on a machine without a network: no GPU, no background connections to Google's hosts.
FLAGS = ["--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]  # fmt: skip
SCREENSHOT = ROOT / "docs" / "asset-graph.png"
UI_TIMEOUT_MS = 120_000


def test_the_asset_graph_shows_every_table(dagster: DagsterServer):
    from playwright.sync_api import expect, sync_playwright  # the e2e extra, installed by make e2e

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 900})
            page.set_default_timeout(UI_TIMEOUT_MS)
            page.goto(f"{dagster.url}/asset-groups")
            page.get_by_role("button", name="settings", exact=True).click()  # the graph's settings
            page.get_by_role("menuitem", name="Expand all groups").click()
            page.keyboard.press("Escape")
            expect(page.get_by_role("menu")).to_be_hidden()
            for spec in TABLES:  # each asset node links its rows to the asset's page
                node = page.locator(f'a[href^="/assets/{spec.key.to_user_string()}?"]').first
                expect(node).to_be_visible(timeout=UI_TIMEOUT_MS)
            page.mouse.move(0, 0)  # no node highlighted under the pointer in the picture
            SCREENSHOT.parent.mkdir(exist_ok=True)
            page.screenshot(path=SCREENSHOT)
        finally:
            browser.close()


def test_the_asset_page_shows_schema_row_counts_and_checks(dagster: DagsterServer):
    """``dwd.orders``'s page: its column schema (keys, comments), row counts, and its checks passed
    for the day (screenshots the README shows)."""
    from playwright.sync_api import expect, sync_playwright

    from assets.definitions import PIPELINE
    from tests.e2e.test_webserver import DAY, MATERIALIZED, finished, launch

    day = dagster.graphql(MATERIALIZED, {"path": ["dwd", "orders"], "day": DAY})["assetOrError"]
    if not day["assetMaterializations"]:  # the webserver test materialized it, unless run alone
        finished(dagster, launch(dagster, PIPELINE, DAY))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1100})
            page.set_default_timeout(UI_TIMEOUT_MS)
            page.goto(f"{dagster.url}/assets/dwd/orders?view=overview")
            expect(page.get_by_text("the time of its last event").first).to_be_visible()  # a column comment
            page.screenshot(path=ROOT / "docs" / "asset-page.png", full_page=True)
            page.goto(f"{dagster.url}/assets/dwd/orders?view=checks")
            expect(page.get_by_text("indexes_match_data").first).to_be_visible()
            page.screenshot(path=ROOT / "docs" / "asset-checks.png", full_page=True)
        finally:
            browser.close()


LINEAGE = """
query($path: [String!]!, $day: String!) {
  assetOrError(assetKey: {path: $path}) {
    ... on Asset { assetMaterializations(partitions: [$day]) {
      runId stepKey
      metadataEntries { label ... on TableColumnLineageMetadataEntry {
        lineage { columnName columnDeps { assetKey { path } columnName } }
      } }
    } }
  }
}"""


def test_a_sql_tables_column_lineage_reaches_the_ui(dagster: DagsterServer):
    """``dws.user_daily``'s materialization carries ``dagster/column_lineage`` traced from its SQL:
    each column from the ``dwd.orders`` columns that feed it. The open-source webserver draws no
    column graph (Dagster+ does, from this entry) and hides the entry on the asset page; the run's
    event log shows it, which is the screenshot the README shows."""
    from playwright.sync_api import expect, sync_playwright

    from assets.definitions import PIPELINE
    from tests.e2e.test_webserver import DAY, finished, launch

    variables = {"path": ["dws", "user_daily"], "day": DAY}
    events = dagster.graphql(LINEAGE, variables)["assetOrError"]["assetMaterializations"]
    if not events:  # the webserver test materialized it, unless run alone
        finished(dagster, launch(dagster, PIPELINE, DAY))
        events = dagster.graphql(LINEAGE, variables)["assetOrError"]["assetMaterializations"]
    (event,) = events
    (entry,) = [e for e in event["metadataEntries"] if e["label"] == "dagster/column_lineage"]
    lineage = {
        c["columnName"]: {("/".join(d["assetKey"]["path"]), d["columnName"]) for d in c["columnDeps"]}
        for c in entry["lineage"]
    }
    assert lineage["user_id"] == {("dwd/orders", "user_id")}
    assert lineage["dt"] == {("dwd/orders", "dt")}
    assert ("dwd/orders", "price") in lineage["total_amount"]
    assert "_row_kind" not in lineage  # the change kind is how a row is written, not a column

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1700})
            page.set_default_timeout(UI_TIMEOUT_MS)
            # the run's log, filtered to the table's step and the event carrying the lineage
            page.goto(
                f"{dagster.url}/runs/{event['runId']}?logs=step:{event['stepKey']}|dagster/column_lineage"
            )
            page.get_by_role("button", name="View full message").first.click()  # the event's whole metadata
            label = page.get_by_role("dialog").get_by_role("cell", name="dagster/column_lineage", exact=True)
            label.locator("xpath=following-sibling::td[1]").get_by_text("[Show JSON]").click()
            dialog = page.get_by_role("dialog").last
            expect(dialog.get_by_text("dagster/column_lineage").first).to_be_visible()
            expect(dialog.get_by_text('"total_amount"').first).to_be_visible()
            page.screenshot(path=ROOT / "docs" / "column-lineage.png", animations="disabled")
        finally:
            browser.close()
