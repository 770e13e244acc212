"""End to end, the chat page and the dashboard in headless Chromium (selenium) against the real
server on its default model, with an API key: the page asks for the key, streams an answer,
regenerates it (greedy at temperature 0: the same answer, on a second branch), stops a long one
(the server's running count returns to 0), renders a hostile answer inert, shows the server's
400 in the bubble, has a forced tool call answered, finds its conversations after a reload,
branches on an edit, imports its own export, shapes an answer by a pasted JSON schema and folds
reasoning above the answer; the dashboard counts the requests and changes a hot leaf (the new
config hash shown, a refused value's message shown).

The browser is Debian's chromium and chromium-driver (.ci/run installs them where it can) or a
Chrome and chromedriver already on the machine; without one the module is skipped, saying so.
With WEB_UI_SCREENSHOTS=DIR set, the pages are saved there at desktop and phone widths
(docs/web-ui/ holds the ones committed); CI leaves it unset, so it never rewrites docs. (Not
SERVE_...: the server refuses an environment variable of that prefix that names no flag.)"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal, TypeVar

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.wait import WebDriverWait

from serve_testing.polling import first_satisfying
from serve_testing.prometheus import metric_value
from serve_testing.server import ServerProcess

pytestmark = pytest.mark.timeout(900)

KEY = "web-ui-test-key"
DESKTOP = (1280, 900)
PHONE = (390, 844)
WEATHER_TOOL = [
    {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]
# Flags that keep Chromium from reaching anything but the server under test.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
T = TypeVar("T")


def _browser_and_driver() -> tuple[str, str] | None:
    """Debian's chromium and its driver, or a Chrome and chromedriver (CI's runners have these)."""
    browser = next((found for name in ("chromium", "google-chrome") if (found := shutil.which(name))), None)
    driver_dir = os.environ.get("CHROMEWEBDRIVER", "")
    driver = shutil.which("chromedriver") or shutil.which("chromedriver", path=driver_dir)
    return (browser, driver) if browser and driver else None


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    running = ServerProcess(None, "--max-total-tokens", "8192", "--api-key", KEY)
    try:
        running.wait_ready(timeout_s=420)
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=60, headers={"Authorization": f"Bearer {KEY}"}) as client:
        yield client


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    found = _browser_and_driver()
    if found is None:
        pytest.skip("no chromium and chromedriver here (Debian: apt-get install chromium chromium-driver)")
    binary, driver_path = found
    options = Options()
    options.binary_location = binary
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="web-ui-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={DESKTOP[0]},{DESKTOP[1]}")
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(
    browser: WebDriver, condition: Callable[[WebDriver], T | None | Literal[False]], timeout_s: float = 180
) -> T:
    """What `condition` answers once it is truthy (a TimeoutException after `timeout_s`)."""
    # The page re-renders its messages as an answer streams: an element read mid-render is stale.
    waiting = WebDriverWait(
        browser, timeout_s, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)
    )
    value = waiting.until(condition)
    assert value is not None  # until() answers only a truthy value
    return value


def metric(http: httpx.Client, name: str) -> float:
    return metric_value(http.get("/metrics").text, name)


def assistant_messages(browser: WebDriver) -> list[WebElement]:
    found: list[WebElement] = browser.find_elements(By.CSS_SELECTOR, "#messages .role-assistant")
    return found


def finished_answer(browser: WebDriver, count: int) -> str:
    """The text of the last answer once there are `count` answers and the last one is done (Send
    enabled again); read the answer's parts afterwards through `answer_part`."""

    def done(driver: WebDriver) -> str | None:
        answers = assistant_messages(driver)
        ready = len(answers) >= count and driver.find_element(By.ID, "send").is_enabled()
        return str(answers[-1].text) if ready else None

    return wait_for(browser, done)


def answer_part(browser: WebDriver, selector: str, index: int = -1) -> str | None:
    """The text of the first element matching `selector` in answer `index` (the last by default),
    None when it has none; read in one script, so a re-render of the page cannot interleave."""
    text: str | None = browser.execute_script(
        "const answer = [...document.querySelectorAll('#messages .role-assistant')].at(arguments[1]);"
        "const part = answer && answer.querySelector(arguments[0]); return part ? part.innerText : null;",
        selector,
        index,
    )
    return text


def in_last_answer(browser: WebDriver, selector: str) -> WebElement:
    found: WebElement = assistant_messages(browser)[-1].find_element(By.CSS_SELECTOR, selector)
    return found


def send(browser: WebDriver, text: str) -> None:
    box = browser.find_element(By.ID, "composer-input")
    box.send_keys(text)
    browser.find_element(By.ID, "send").click()


def set_field(browser: WebDriver, field_id: str, text: str) -> None:
    field = browser.find_element(By.ID, field_id)
    field.clear()
    field.send_keys(text)


def open_settings(browser: WebDriver) -> None:
    if not browser.find_element(By.ID, "settings").is_displayed():
        browser.find_element(By.ID, "open-settings").click()


def close_settings(browser: WebDriver) -> None:
    if browser.find_element(By.ID, "settings").is_displayed():
        browser.find_element(By.ID, "close-settings").click()


def window_at_most(width: int) -> Callable[[WebDriver], bool]:
    return lambda d: bool(d.execute_script("return window.innerWidth <= arguments[0]", width))


def screenshot(browser: WebDriver, name: str) -> None:
    """Save the page as DIR/name-desktop.png and DIR/name-phone.png when WEB_UI_SCREENSHOTS=DIR;
    at phone width the page must not scroll sideways either way."""
    folder = os.environ.get("WEB_UI_SCREENSHOTS")
    for width_name, (width, height) in (("phone", PHONE), ("desktop", DESKTOP)):
        browser.set_window_size(width, height)
        wait_for(browser, window_at_most(width), 10)
        overflow = browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{name} scrolls sideways by {overflow} px at {width} px wide"
        if folder:
            browser.execute_script("window.scrollTo(0, 0)")
            Path(folder).mkdir(parents=True, exist_ok=True)
            browser.save_screenshot(str(Path(folder) / f"{name}-{width_name}.png"))


def test_the_page_asks_for_the_key_and_streams_an_answer(browser: WebDriver, server: ServerProcess) -> None:
    browser.get(server.base_url + "/")
    dialog = wait_for(browser, lambda d: d.find_element(By.ID, "key-dialog").get_attribute("open") is not None and d)
    assert "API key" in dialog.find_element(By.ID, "key-reason").text
    browser.find_element(By.ID, "key-input").send_keys(KEY)
    browser.find_element(By.CSS_SELECTOR, "#key-dialog button[value=save]").click()
    wait_for(browser, lambda d: d.find_element(By.ID, "model-name").text == "SmolLM2-135M-Instruct")

    open_settings(browser)
    set_field(browser, "setting-temperature", "0")
    set_field(browser, "setting-max-tokens", "40")
    close_settings(browser)
    send(browser, "What is the capital of France?")
    finished_answer(browser, 1)
    first_text = answer_part(browser, ".markdown")
    assert first_text is not None and "Paris" in first_text
    stats = answer_part(browser, ".stats") or ""
    assert "tokens/s" in stats and "TTFT" in stats and "prompt tokens cached" in stats

    in_last_answer(browser, "button.regenerate").click()
    finished_answer(browser, 1)
    assert answer_part(browser, ".branch-index") == "2/2"
    assert answer_part(browser, ".markdown") == first_text  # temperature 0: greedy
    # The second answer's prompt was the first's: the prefix cache holds it.
    assert " 0 of " not in (answer_part(browser, ".stats") or "")
    stored = browser.execute_script("return JSON.parse(localStorage.getItem('serve.conversations'))")
    assert stored[0]["settings"]["temperature"] == "0"


HOSTILE_ANSWER = (
    "<script>window.ran = 1</script><img src=x onerror='window.ran = 2'>"
    "\n\n[link](javascript:window.ran=3)\n\n```python\nprint('<b>not bold</b>')\n```"
)


def test_a_hostile_answer_is_rendered_inert(browser: WebDriver) -> None:
    """What the page renders of a model's text (the page's own markdown module, as an answer uses
    it) keeps no script, no event handler and no javascript: link, and code stays text.

    Reverse-verified: with the DOMPurify pass left out of renderMarkdown, the script, the onerror
    handler and the javascript: link came through."""
    html: str = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "import('/web/js/markdown.js').then((m) => done(m.renderMarkdown(arguments[0])));",
        HOSTILE_ANSWER,
    )
    assert "<script" not in html and "onerror" not in html and "javascript:" not in html
    assert ">link</a>" in html  # the link stays, without its target
    assert '<code class="hljs" data-language="python">' in html and "&lt;b&gt;not bold&lt;/b&gt;" in html


def test_stopping_a_long_answer_aborts_it_on_the_server(browser: WebDriver, http: httpx.Client) -> None:
    """Reverse-verified: with Stop not aborting the page's fetch, the answer ran on to its 2000
    tokens and was not marked stopped."""
    aborted_before = metric(http, "serve_requests_aborted_total")
    browser.find_element(By.ID, "new-conversation").click()
    open_settings(browser)
    set_field(browser, "setting-max-tokens", "2000")
    close_settings(browser)
    send(browser, "Write a very long story about a dragon who learns to cook, in many chapters.")
    wait_for(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#messages .role-assistant .markdown")) == 1)
    assert first_satisfying(lambda: metric(http, "serve_num_running_requests"), lambda running: running == 1) == 1
    browser.find_element(By.ID, "stop").click()
    finished_answer(browser, 1)
    assert "stopped" in (answer_part(browser, ".stats") or "")
    settled = first_satisfying(
        lambda: (metric(http, "serve_num_running_requests"), metric(http, "serve_requests_aborted_total")),
        lambda values: values == (0, aborted_before + 1),
    )
    assert settled == (0, aborted_before + 1)


def test_a_refused_request_shows_the_servers_message(browser: WebDriver) -> None:
    browser.find_element(By.ID, "new-conversation").click()
    open_settings(browser)
    set_field(browser, "setting-max-tokens", "100000")
    close_settings(browser)
    send(browser, "Hello")
    finished_answer(browser, 1)
    error = answer_part(browser, ".error") or ""
    assert error.startswith("The server refused:") and "context" in error


def test_a_forced_tool_call_is_a_card_the_user_answers(browser: WebDriver) -> None:
    browser.find_element(By.ID, "new-conversation").click()
    open_settings(browser)
    set_field(browser, "setting-max-tokens", "60")
    set_field(browser, "setting-tools", json.dumps(WEATHER_TOOL))
    Select(browser.find_element(By.ID, "setting-tool-choice")).select_by_value("get_weather")
    browser.find_element(By.ID, "setting-one-call").click()
    stored = browser.execute_script("return JSON.parse(localStorage.getItem('serve.conversations'))")
    assert stored[0]["settings"]["tool_choice"] == "get_weather", stored[0]["settings"]
    close_settings(browser)
    send(browser, "What is the weather in Paris?")
    answer = finished_answer(browser, 1)
    assert answer_part(browser, ".tool-card h3") == "Calls get_weather", answer
    assert "city" in json.loads(answer_part(browser, ".tool-arguments") or "")

    # A named tool choice would force the same call again: answer in text this time.
    open_settings(browser)
    Select(browser.find_element(By.ID, "setting-tool-choice")).select_by_value("auto")
    close_settings(browser)
    in_last_answer(browser, ".tool-card textarea").send_keys("Sunny, 21 degrees")
    in_last_answer(browser, ".send-tool-results").click()
    finished_answer(browser, 2)
    assert answer_part(browser, ".error") is None
    assert "Sunny, 21 degrees" in (answer_part(browser, ".tool-result", 0) or "")


def test_the_conversations_are_there_after_a_reload(browser: WebDriver) -> None:
    browser.refresh()
    titles = wait_for(browser, lambda d: [item.text for item in d.find_elements(By.CSS_SELECTOR, ".conversation")])
    assert len(titles) == 4 and "What is the capital of France?" in titles
    browser.find_element(By.XPATH, "//button[@class='conversation'][text()='What is the capital of France?']").click()
    assert "Paris" in wait_for(browser, lambda d: answer_part(d, ".markdown"))
    screenshot(browser, "chat")


def user_part(browser: WebDriver, selector: str) -> str | None:
    text: str | None = browser.execute_script(
        "const part = document.querySelector('#messages .role-user ' + arguments[0]);"
        "return part ? part.innerText : null;",
        selector,
    )
    return text


def test_an_edit_is_a_new_branch_beside_the_first(browser: WebDriver) -> None:
    """On the reloaded conversation: the edited question is asked on a branch of its own, and the
    first question and its answer are still there one branch back."""
    browser.find_element(By.XPATH, "//li[contains(@class, 'role-user')]//button[text()='Edit']").click()
    editor = browser.find_element(By.CSS_SELECTOR, "#messages .editor textarea")
    set_field(browser, str(editor.get_attribute("id")), "Hi!")
    browser.find_element(By.CSS_SELECTOR, "#messages .editor button[type=submit]").click()
    finished_answer(browser, 1)
    assert user_part(browser, ".plain") == "Hi!" and user_part(browser, ".branch-index") == "2/2"
    browser.find_element(By.CSS_SELECTOR, "#messages .role-user button[aria-label='Previous branch']").click()
    assert user_part(browser, ".plain") == "What is the capital of France?"
    assert "Paris" in (answer_part(browser, ".markdown") or "")


def test_an_exported_conversation_imports(browser: WebDriver, tmp_path: Path) -> None:
    """The page's export, given a new id and title, comes back through the Import file field."""
    exported = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "import('/web/js/conversations.js').then((m) => done(m.exported(m.loadAll())));"
    )
    file = json.loads(exported)
    copy = {**file["conversations"][0], "id": "imported-conversation", "title": "Imported chat"}
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps({**file, "conversations": [copy]}))
    browser.find_element(By.ID, "import-conversations").send_keys(str(path))
    titles = wait_for(
        browser,
        lambda d: "Imported chat" in (t := [b.text for b in d.find_elements(By.CSS_SELECTOR, ".conversation")]) and t,
    )
    assert len(titles) == len(file["conversations"]) + 1


CITY = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}, "country": {"type": "string", "maxLength": 20}},
    "required": ["name", "country"],
}


def new_chat_without_tools(browser: WebDriver) -> None:
    """A new chat (it starts from the current one's settings) with the tools of earlier tests removed."""
    browser.find_element(By.ID, "new-conversation").click()
    open_settings(browser)
    set_field(browser, "setting-tools", " ")


def test_a_pasted_json_schema_shapes_the_answer(browser: WebDriver) -> None:
    new_chat_without_tools(browser)
    set_field(browser, "setting-schema", json.dumps(CITY))
    close_settings(browser)
    send(browser, "Describe Paris as JSON.")
    finished_answer(browser, 1)
    city = json.loads(answer_part(browser, ".markdown") or "")
    assert set(city) == {"name", "country"}


def test_reasoning_is_folded_above_the_answer(browser: WebDriver, http: httpx.Client) -> None:
    """The default model writes no think block; the deepseek-r1 parser (the prompt opens the block)
    reads all it writes as reasoning, which the page folds."""
    assert http.patch("/v1/runtime_config", json={"reasoning_parser": "deepseek-r1"}).status_code == 200
    try:
        new_chat_without_tools(browser)
        set_field(browser, "setting-schema", " ")
        close_settings(browser)
        send(browser, "Hello")
        finished_answer(browser, 1)
    finally:
        http.patch("/v1/runtime_config", json={"reasoning_parser": None})
    folded = browser.execute_script(
        "const details = document.querySelector('#messages .role-assistant details.reasoning');"
        "return details && [details.open, details.querySelector('summary').innerText, details.textContent.length];"
    )
    assert folded is not None and folded[:2] == [False, "Reasoning"] and folded[2] > len("Reasoning")


def test_the_dashboard_counts_requests_and_changes_a_hot_leaf(
    browser: WebDriver, server: ServerProcess, http: httpx.Client
) -> None:
    browser.get(server.base_url + "/dashboard")
    finished = int(metric(http, "serve_requests_finished_total"))
    assert finished >= 4

    def counted(driver: WebDriver) -> str | None:
        terms = [term.text for term in driver.find_elements(By.CSS_SELECTOR, "#figures dt")]
        values = [value.text for value in driver.find_elements(By.CSS_SELECTOR, "#figures dd")]
        shown = dict(zip(terms, values, strict=True)).get("Requests finished")
        return shown if shown not in (None, "–") else None

    assert int(wait_for(browser, counted, 30)) >= finished
    launch_hash = http.get("/server_info").json()["config_hashes"]["main"]
    wait_for(browser, lambda d: d.find_element(By.ID, "config-hash").text == launch_hash, 30)

    Select(browser.find_element(By.ID, "hot-leaf")).select_by_value("max_running_requests")
    set_field(browser, "hot-value", "0")
    browser.find_element(By.CSS_SELECTOR, "#hot-form button[type=submit]").click()
    refused = wait_for(browser, lambda d: "refused" in (text := d.find_element(By.ID, "hot-result").text) and text, 30)
    assert "max_running_requests" in refused

    set_field(browser, "hot-value", "8")
    browser.find_element(By.CSS_SELECTOR, "#hot-form button[type=submit]").click()
    applied = wait_for(
        browser, lambda d: "New config hash" in (text := d.find_element(By.ID, "hot-result").text) and text
    )
    new_hash = http.get("/server_info").json()["config_hashes"]["main"]
    assert new_hash != launch_hash and new_hash in applied
    assert browser.find_element(By.ID, "config-hash").text == new_hash
    row = (
        "return [...document.querySelectorAll('#config tr')]"
        ".find((r) => r.innerText.startsWith('max_running_requests'))?.innerText"
    )
    changed = "max_running_requests\tschedule\t8\toverride:http:PATCH /v1/runtime_config"
    assert first_satisfying(lambda: browser.execute_script(row), lambda shown: shown == changed) == changed
    screenshot(browser, "dashboard")
