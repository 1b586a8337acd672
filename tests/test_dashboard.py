"""The web dashboard in a real headless browser (Debian's chromium through Selenium), clicked through.

One screenshot per page is kept in ``test-artifacts/dashboard/`` (or ``MNEMO_SCREENSHOT_DIR``)
for a person to look at. Skipped where chromium or chromedriver is missing, except under CI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as seen
from selenium.webdriver.support.ui import Select, WebDriverWait

from http_server import HttpServer, member_keys, serving

SHOTS = Path(
    os.environ.get("MNEMO_SCREENSHOT_DIR") or Path(__file__).resolve().parents[1] / "test-artifacts" / "dashboard"
)


@contextmanager
def chromium() -> Iterator[WebDriver]:
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if binary is None or driver is None:
        if os.environ.get("CI"):
            pytest.fail(
                "chromium and chromedriver must be installed under CI (apt-get install chromium chromium-driver)"
            )
        pytest.skip("chromium or chromedriver is not installed")
    options = Options()
    options.binary_location = binary
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # what failed to load, in the console
    made = webdriver.Chrome(options=options, service=Service(driver))
    try:
        yield made
    finally:
        made.quit()


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with chromium() as made:
        yield made


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HttpServer, dict[str, str]]]:
    home = tmp_path_factory.mktemp("dashboard") / "home"
    keys = member_keys(home, "alice", "bob")
    with serving(home, MNEMO_EMBEDDER="none", MNEMO_RATE_LIMITS="off") as server:
        for content, tags in (("The spare key is under the blue pot", ["house"]),
                              ("Alice prefers window seats on trains", ["travel"]),
                              ("The boiler is serviced every March", ["house"])):  # fmt: skip
            made = httpx2.post(f"{server.base}/api/v1/memories", headers={"X-API-Key": keys["alice"]},
                               json={"content": content, "metadata": {"tags": tags}})  # fmt: skip
            assert made.status_code == 201, made.text
        yield server, keys


def patient(browser: WebDriver) -> WebDriverWait[WebDriver]:
    """A wait that looks again when the page re-rendered under it (the views replace their elements)."""
    return WebDriverWait(browser, 20, ignored_exceptions=(StaleElementReferenceException,))


def wait(browser: WebDriver, css: str, text: str | None = None) -> None:
    condition = (seen.text_to_be_present_in_element((By.CSS_SELECTOR, css), text) if text is not None
                 else seen.presence_of_element_located((By.CSS_SELECTOR, css)))  # fmt: skip
    patient(browser).until(condition)


def shot(browser: WebDriver, page: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(SHOTS / f"{page}.png"))


def sign_in(browser: WebDriver, server: HttpServer, key: str) -> None:
    browser.get(f"{server.base}/dashboard/#/signin")
    wait(browser, "#key")
    browser.find_element(By.ID, "key").clear()
    browser.find_element(By.ID, "key").send_keys(key)
    browser.find_element(By.ID, "signin").click()


def rows(browser: WebDriver) -> list[str]:
    return [
        row.find_element(By.CSS_SELECTOR, "td a").text for row in browser.find_elements(By.CSS_SELECTOR, "tr.memory")
    ]


def test_a_user_signs_in_browses_searches_edits_archives_restores_forgets_and_sees_stats(browser, site):
    server, keys = site
    sign_in(browser, server, "mnemo_wrong_key")
    wait(browser, "#status", "not accepted")
    shot(browser, "signin")

    sign_in(browser, server, keys["alice"])
    wait(browser, "#memories")
    assert len(rows(browser)) == 3
    shot(browser, "memories")
    browser.find_element(By.ID, "filter-tag").send_keys("house")
    browser.find_element(By.ID, "apply-filters").click()
    patient(browser).until(lambda b: len(rows(b)) == 2)

    browser.find_element(By.ID, "nav-search").click()
    wait(browser, "#query")
    browser.find_element(By.ID, "query").send_keys("spare key")
    browser.find_element(By.ID, "run-search").click()
    wait(browser, "#memories td.score")
    assert rows(browser)[0] == "The spare key is under the blue pot"
    assert 0 < float(browser.find_element(By.CSS_SELECTOR, "td.score").text) <= 1
    shot(browser, "search")

    browser.find_element(By.CSS_SELECTOR, "#memories td a").click()
    wait(browser, "#versions")
    content = browser.find_element(By.ID, "content")
    content.clear()
    content.send_keys("The spare key is under the green pot")
    browser.find_element(By.ID, "save").click()
    patient(browser).until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#versions tbody tr")) == 2)
    shot(browser, "memory")
    browser.find_element(By.ID, "archive").click()
    wait(browser, "#restore")
    assert "archived" in browser.find_element(By.ID, "facts").text
    browser.find_element(By.ID, "restore").click()
    wait(browser, "#forget")
    browser.find_element(By.ID, "forget").click()
    wait(browser, "#facts", "deleted")

    browser.find_element(By.ID, "nav-memories").click()
    wait(browser, "#filter-status")
    Select(browser.find_element(By.ID, "filter-status")).select_by_value("deleted")
    browser.find_element(By.ID, "apply-filters").click()
    patient(browser).until(lambda b: rows(b) == ["The spare key is under the green pot"])

    browser.find_element(By.ID, "nav-stats").click()
    wait(browser, "#chart-categories rect")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#chart-importance rect")) == 3
    assert "3" in browser.find_element(By.ID, "totals").text
    shot(browser, "stats")
    for page in ("signin", "memories", "search", "memory", "stats"):
        assert (SHOTS / f"{page}.png").stat().st_size > 1000


def test_another_user_sees_none_of_it(browser, site):
    server, keys = site
    browser.find_element(By.ID, "sign-out").click()
    sign_in(browser, server, keys["bob"])
    wait(browser, "#memories")
    assert rows(browser) == []


def test_stored_text_is_shown_as_text_never_run_as_html(browser, site):
    server, keys = site
    payload = "<img src=x onerror=\"document.title='pwned'\">"
    httpx2.post(f"{server.base}/api/v1/memories", headers={"X-API-Key": keys["bob"]}, json={"content": payload})
    browser.get(f"{server.base}/dashboard/?again#/memories")
    patient(browser).until(lambda b: rows(b) == [payload])
    assert browser.title == "mnemo"


ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")


def signed_out(browser: WebDriver, server: HttpServer) -> None:
    browser.get(f"{server.base}/dashboard/")
    browser.execute_script("sessionStorage.clear()")
    browser.get(f"{server.base}/dashboard/?signed-out")
    wait(browser, "#key")


def test_before_a_key_is_accepted_no_navigation_shows_and_nothing_on_the_page_fails_to_load(site):
    server, keys = site
    with chromium() as fresh:  # a browser that has not asked this server for an icon yet
        fresh.get(f"{server.base}/dashboard/")
        wait(fresh, "#key")
        time.sleep(1)  # the browser asks for an icon after the page has loaded
        failed = [entry["message"] for entry in fresh.get_log("browser") if "Failed to load" in entry["message"]]
        assert failed == []
        assert not fresh.find_element(By.ID, "nav").is_displayed()

        sign_in(fresh, server, "mnemo_wrong_key")
        wait(fresh, "#status", "not accepted")
        assert not fresh.find_element(By.ID, "nav").is_displayed()
        sign_in(fresh, server, keys["alice"])
        wait(fresh, "#memories")
        assert fresh.find_element(By.ID, "nav").is_displayed()


def test_a_search_shows_how_many_were_found_and_sends_only_what_recall_accepts(browser, site):
    server, keys = site
    signed_out(browser, server)
    sign_in(browser, server, keys["alice"])
    wait(browser, "#memories")
    browser.execute_script("""
        window.sent = [];
        const fetched = window.fetch;
        window.fetch = (url, options) => {
            window.sent.push([url, options && options.body]);
            return fetched(url, options);
        };
    """)
    browser.find_element(By.ID, "nav-search").click()
    wait(browser, "#query")
    browser.find_element(By.ID, "query").send_keys("boiler serviced")
    browser.find_element(By.ID, "run-search").click()
    wait(browser, "#memories td.score")

    assert browser.find_element(By.ID, "found").text.startswith(f"{len(rows(browser))} found")
    api = httpx2.get(f"{server.base}/api/v1/openapi.json", headers={"X-API-Key": keys["alice"]}).json()
    accepted = api["paths"]["/api/v1/memories/recall"]["post"]["requestBody"]["content"]["application/json"]
    bodies = [json.loads(body) for url, body in browser.execute_script("return window.sent") if "recall" in url]
    assert bodies and all(set(body) <= set(accepted["schema"]["properties"]) for body in bodies)


def test_dates_are_shown_in_a_readable_local_form_with_the_exact_time_in_their_title(browser, site):
    server, keys = site
    signed_out(browser, server)
    sign_in(browser, server, keys["alice"])
    wait(browser, "#memories tr.memory")
    updated = browser.find_element(By.CSS_SELECTOR, "#memories tr.memory td:last-child time")
    assert ISO.match(updated.get_attribute("title"))
    assert not ISO.search(updated.text) and str(time.gmtime().tm_year) in updated.text

    browser.find_element(By.CSS_SELECTOR, "#memories td a").click()
    wait(browser, "#versions")
    shown = browser.find_element(By.ID, "facts").text + browser.find_element(By.ID, "versions").text
    assert not ISO.search(shown)
    times = browser.find_elements(By.CSS_SELECTOR, "#facts time, #versions time")
    assert times and all(ISO.match(t.get_attribute("title")) for t in times)
