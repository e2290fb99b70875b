"""Passages about a made-up company (no questions): what a team with only its documents brings.

Some passages name another passage's title (``Harbour Works``, ``Tessa Lind``, ``Quill Sensor``),
so bridge questions have title links; the rest share words with their neighbours only.
"""

from __future__ import annotations

import json
from pathlib import Path

from ragfolio.core.data.passages import Corpus
from ragfolio.core.data.records import passage_id

PASSAGES: list[tuple[str, str]] = [
    ("Larkspur Instruments", "Larkspur Instruments is a maker of river sensors founded in 1994 by Tessa Lind in the "
     "town of Norrvik. Its first factory was Harbour Works, and its best-selling product is the Quill Sensor."),
    ("Tessa Lind", "Tessa Lind is an engineer who studied hydrology at the University of Ostmark. She led the "
     "company until 2011, when she handed the post of chief executive to Omar Rask."),
    ("Harbour Works", "Harbour Works is a brick factory on the west quay of Norrvik, opened in 1996. It employs "
     "140 people and assembles every sensor the company sells in Europe."),
    ("Quill Sensor", "The Quill Sensor measures the turbidity of river water every ten seconds. It was launched "
     "in 2003 and weighs 310 grams; a solar panel charges its battery."),
    ("Omar Rask", "Omar Rask became chief executive in 2011 after ten years as head of sales. He moved the "
     "research team to Dunmere and opened an office in Lisbon."),
    ("Dunmere Laboratory", "Dunmere Laboratory is the research site of the company, in a former paper mill by "
     "the Aske river. Twenty-eight scientists work there on flood forecasting."),
    ("Heron Buoy", "The Heron Buoy is a floating station that carries three sensors and radios its readings to "
     "shore. It was launched in 2015 and weighs 42 kilograms."),
    ("Lisbon Office", "The Lisbon Office sells sensors to water boards in Portugal and Spain. It opened in 2014 "
     "and has a staff of nineteen, most of them field technicians."),
    ("Flood Watch Service", "Flood Watch Service is a subscription that sends warnings when a river rises "
     "quickly. About 600 towns paid for it in 2022, mostly in Scandinavia."),
    ("Norrvik", "Norrvik is a harbour town of 23,000 people at the mouth of the Aske river. Its largest "
     "employer is the sensor company whose factory stands on the west quay."),
    ("Ostmark University", "Ostmark University has taught hydrology since 1921. Its graduates include the founder "
     "of a sensor company and two ministers of the environment."),
    ("Annual Report 2022", "In 2022 the company earned 48 million euros, up 9 percent, and sold 31,000 sensors. "
     "The subscription business grew fastest, by 30 percent."),
]


def write_passage_folder(folder: Path) -> Path:
    """The passages as one passage file ``folder/company.jsonl`` (``{"title", "text"}`` a line)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"title": title, "text": text}) for title, text in PASSAGES]
    (folder / "company.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def company_corpus() -> Corpus:
    """The passages as a :class:`Corpus`, ids as the corpus builder names them."""
    return Corpus(tuple(passage_id(t, x) for t, x in PASSAGES), tuple(t for t, _ in PASSAGES),
                  tuple(x for _, x in PASSAGES))
