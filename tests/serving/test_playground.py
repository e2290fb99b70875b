"""The playground (``GET /``): the page as served, and the page in a real headless Chromium.

The browser test starts ``bentoml serve`` on the tiny bundle, with the fake LLM answering, opens
``/`` in Chromium (driven over the DevTools protocol, see cdp.py), types a question, clicks
Retrieve, then Answer, then Retrieve with no question, and reads what the page rendered against
what the API answers for the same request; then, with the fake reader writing slowly at l = 1, that
Answer's streamed tokens fill the answer box before the members appear. It skips, saying why,
where no Chromium is installed.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator

import httpx
import pytest
from cdp import BROWSERS, Page, find_chromium, headless_chromium
from conftest import FakeLLM, bentoml_serve, write_config
from tiny_bundle import MEMBERS, questions

from ragfolio.serving.playground import playground_html

QUESTION = questions()[0]


def test_the_page_is_served_with_a_policy_that_allows_nothing_from_elsewhere(client) -> None:
    response = client.get("/")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    assert response.text == playground_html()
    assert client.get("/portfolio").status_code == 200  # the other GET route of the mounted app still answers


def test_the_page_loads_nothing_from_elsewhere_and_writes_no_html() -> None:
    page = playground_html()
    assert not re.search(r"\b(src|href)\s*=", page), "the page is one file: no scripts, styles or images to load"
    assert "http://" not in page and "https://" not in page
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"):
        assert sink not in page, f"{sink}: data must go into the page as text"
    assert not re.search(r"<[^>]+\son\w+\s*=", page), "no inline event handlers"
    for field in ("query", "l", "num_docs"):
        assert f'id="{field}"' in page and "<label" in page


@pytest.fixture(scope="module")
def browser() -> str:
    binary = find_chromium()
    if binary is None:
        pytest.skip(f"no Chromium ({why_no_chromium()}): install Debian's chromium package (apt-get install "
                    f"chromium) or put one of {', '.join(BROWSERS)} on PATH to run the playground in a headless browser")
    return binary


def why_no_chromium() -> str:
    """Why ``make test`` (scripts/ensure-chromium) did not install one, as far as this process can tell."""
    if os.environ.get("RAGFOLIO_INSTALL_CHROMIUM") == "0":
        return "RAGFOLIO_INSTALL_CHROMIUM=0 turned the install off"
    if os.geteuid() != 0:
        return "make test installs it only as root"
    if shutil.which("apt-get") is None:
        return "make test installs it with apt-get, which this machine lacks"
    return "not installed: run make test (scripts/ensure-chromium), or its install failed, see its output"


@pytest.fixture(scope="module")
def server(tiny_bundle, fake_llm_url, tmp_path_factory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("bentoml_home")
    with bentoml_serve(write_config(home / "serving.yml", tiny_bundle, fake_llm_url), home) as url:
        yield url


def rendered(page: Page) -> dict:
    """What the page shows of a result: member names, their passages, candidates, latency rows."""
    return page.evaluate("""(() => {
      const texts = (root, selector) => [...root.querySelectorAll(selector)].map((e) => e.textContent);
      return {
        members: [...document.querySelectorAll("#members .member")].map((card) => ({
          name: card.querySelector(".member-name").textContent,
          facts: card.querySelector(".facts").textContent,
          titles: texts(card, ".passage-title"),
          texts: texts(card, ".passage-text"),
          candidate: card.querySelector(".candidate-text")?.textContent ?? null,
          chosen: card.classList.contains("chosen"),
        })),
        latency: Object.fromEntries([...document.querySelectorAll("#latency tbody tr")].map(
          (row) => [row.querySelector("th").textContent, row.querySelector("td").textContent])),
        selected: document.getElementById("selected").hidden ? null : document.getElementById("answer-text").textContent,
        status: document.getElementById("status").textContent,
      };
    })()""")


def click_and_wait(page: Page, button: str) -> dict:
    page.click(f"#{button}")
    page.wait_for(f"document.getElementById('result').dataset.endpoint === '{button}'")
    return rendered(page)


@pytest.mark.slow
def test_a_question_typed_in_chromium_shows_members_passages_answers_and_latency(browser, server) -> None:
    with httpx.Client(base_url=server, timeout=30) as http:
        expected = http.post("/retrieve", json={"query": QUESTION}).json()
        expected_answer = http.post("/answer", json={"query": QUESTION}).json()
    names = [m["name"] for m in expected["members"]]
    assert len(names) == 2 and {n.split("(")[0] for n in names} <= {family for family, _ in MEMBERS}

    with headless_chromium(browser) as page:
        page.navigate(f"{server}/")
        page.wait_for("document.getElementById('portfolio').textContent.startsWith('Bundle')")
        page.type_into("#query", QUESTION)
        assert page.evaluate("document.getElementById('router-choice').textContent").startswith("Router: learned")

        shown = click_and_wait(page, "retrieve")
        assert [m["name"] for m in shown["members"]] == names
        for card, member in zip(shown["members"], expected["members"], strict=True):
            assert card["titles"] == [p["title"] for p in member["passages"]] and len(card["titles"]) == 3
            assert card["texts"] == [p["text"] for p in member["passages"]] and all(card["texts"])
            assert f"router score {member['router_score']:.3f}" in card["facts"]
            assert card["candidate"] is None and not card["chosen"]
        assert set(shown["latency"]) == {"route", "shared", "members", "total", "stage.features", "stage.predict"}
        assert all(re.fullmatch(r"\d+\.\d", ms) for ms in shown["latency"].values()), shown["latency"]
        assert shown["selected"] is None and shown["status"].startswith("/retrieve: 2 members in ")

        shown = click_and_wait(page, "answer")
        assert shown["selected"] == expected_answer["answer"]
        assert [m["candidate"] for m in shown["members"]] == [c["answer"] for c in expected_answer["candidates"]]
        assert [m["chosen"] for m in shown["members"]] == [i == expected_answer["chosen"] for i in range(2)]
        assert set(shown["latency"]) == {"route", "retrieve", "answer", "select", "total", "stage.features",
                                         "stage.predict"}
        assert all(m["titles"] for m in shown["members"])
        assert page.errors == [], page.errors  # no script error, no blocked or failed request

        page.evaluate("document.getElementById('query').value = ''")
        page.click("#retrieve")
        error = page.wait_for("!document.getElementById('error').hidden && document.getElementById('error').innerText")
        assert "400" in error and "query: query is empty or whitespace only" in error
        assert re.search(r"request id: [0-9a-f]{32}", error), error
        assert [e for e in page.errors if "status of 400" not in e] == [], page.errors  # Chromium logs the 400


TRACE = """(() => {
  window.trace = [];  // what the result shows after each change: the answer box's text, the member cards
  new MutationObserver(() => window.trace.push({
    text: document.getElementById("answer-text")?.textContent ?? "",
    members: document.querySelectorAll("#members .member").length,
  })).observe(document.getElementById("result"), { subtree: true, childList: true, characterData: true });
})()"""


@pytest.mark.slow
def test_the_answer_box_fills_as_the_tokens_arrive_before_the_members_appear(browser, server, monkeypatch) -> None:
    question = f"{QUESTION} (drip)"  # the fake LLM streams its reply a piece every piece_s seconds
    monkeypatch.setattr(FakeLLM, "piece_s", 0.15)  # its explanation then takes seconds after the answer
    with httpx.Client(base_url=server, timeout=30) as http:
        expected = http.post("/answer", json={"query": question, "l": 1}).json()["answer"]
    with headless_chromium(browser) as page:
        page.navigate(f"{server}/")
        page.wait_for("document.getElementById('portfolio').textContent.startsWith('Bundle')")
        page.type_into("#query", question)
        page.evaluate("document.getElementById('l').value = '1'")
        page.evaluate(TRACE)
        shown = click_and_wait(page, "answer")
        trace = page.evaluate("window.trace")
        assert page.errors == [], page.errors
    assert shown["selected"] == expected and len(shown["members"]) == 1
    arriving = [t["text"] for t in trace if t["members"] == 0 and t["text"]]
    assert arriving, trace  # the answer box had text while no member was shown yet
    assert all(expected.startswith(text) for text in arriving), (arriving, expected)
    assert "the first token after" in shown["status"], shown["status"]
