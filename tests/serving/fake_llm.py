"""A fake OpenAI-compatible LLM for the service tests (and ``benchmarks/fuzz_service.py``): no model."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler

from local_http import send_json

from ragfolio.core.answering.conversation import Turn, rewrite_messages
from ragfolio.core.llm.chat import render_plain


def usage(prompt: str) -> dict[str, int]:
    """The tokens the fake reports for a call: the prompt's words, and 2 generated."""
    return {"prompt_tokens": len(prompt.split()), "completion_tokens": 2}


def rewrite_tokens(turns: list[Turn], follow_up: str) -> tuple[int, int]:
    """``(prompt, completion)`` tokens the fake reports for the rewrite of ``follow_up`` after ``turns``."""
    counted = usage(render_plain(rewrite_messages(turns, follow_up)))
    return counted["prompt_tokens"], counted["completion_tokens"]


def _reply(prompt: str) -> str:
    """The title of the first passage shown for an answer prompt, "2" for a selector prompt, the
    follow-up's rewrite (:data:`FakeLLM.rewrites`) for a rewrite prompt; for a prompt it cannot read
    (a question that holds "Passages:" itself, say), "unknown"."""
    if prompt.startswith("Rewrite the follow-up as a standalone question"):  # ragfolio.core.answering.conversation
        follow_up = prompt.rsplit("\n\nFollow-up: ", 1)[1]
        FakeLLM.rewritten.append(follow_up)
        return json.dumps({"question": FakeLLM.rewrites.get(follow_up, follow_up)})
    if "Candidate answers" in prompt:
        return "2"
    try:  # after the prompt's worked example
        return prompt.rsplit("Passages:\n", 1)[1].split("[1] ", 1)[1].split(":")[0]
    except IndexError:
        return "unknown"


class FakeLLM(BaseHTTPRequestHandler):
    """``POST /v1/completions``: answers with the title of the first passage shown, selects "2",
    rewrites a follow-up as ``FakeLLM.rewrites`` says (a follow-up it does not name: as it is).

    A question containing ``slow`` is answered after ``FakeLLM.delay_s`` seconds. With ``stream:
    true`` the reply is server-sent events of ``FakeLLM.piece_chars`` characters each (``piece_s``
    seconds apart for a question containing ``drip``), and an answer asked for in JSON
    (``response_format``) is ``{"answer": <title>, "used": [1], "explanation": "evidence"}``, as a
    constrained reader writes it; for a question containing ``unanswerable`` it is a guess,
    ``{"answer": "Brindlewood Analytics", "used": [], "explanation": "guess"}``.
    """

    delay_s = 1.5
    piece_chars = 3
    piece_s = 0.05
    streamed: list[str] = []  # the prompts asked for with stream: true
    rewrites: dict[str, str] = {}  # follow-up -> its standalone question
    rewritten: list[str] = []  # the follow-ups asked to be rewritten
    cut: list[str] = []  # the streamed prompts whose reader went away before the end

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["prompt"]
        text = _reply(prompt)
        question = prompt.rsplit("Question:", 1)[-1]
        if "slow" in question:
            time.sleep(self.delay_s)
        counted = usage(prompt)
        if body.get("response_format") and "Passages:" in prompt:  # it read the answer from passage 1
            text = json.dumps({"answer": text, "used": [1], "explanation": "evidence"})
            if "unanswerable" in question:  # ... or it guesses
                text = json.dumps({"answer": "Brindlewood Analytics", "used": [], "explanation": "guess"})
        if body.get("stream"):
            FakeLLM.streamed.append(prompt)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            pieces = [text[i:i + self.piece_chars] for i in range(0, len(text), self.piece_chars)]
            events = [{"choices": [{"index": 0, "text": piece, "finish_reason": None}]} for piece in pieces] + [
                {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]}, {"choices": [], "usage": counted}]
            try:
                for event in events:
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(self.piece_s if "drip" in question else 0.0)
                self.wfile.write(b"data: [DONE]\n\n")
            except (BrokenPipeError, ConnectionResetError):
                FakeLLM.cut.append(prompt)
            return
        payload = {"choices": [{"text": text}], "usage": counted}
        data = json.dumps(payload).encode()
        send_json(self, data)

    def log_message(self, *args: object) -> None:
        pass
