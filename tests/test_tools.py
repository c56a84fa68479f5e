"""The tools method: native tool calls over the same environment, with a scripted model that writes the
real ChatML function-calling layout (so every reply goes through the real reader), the two servers'
chat protocols, and a short real episode of SmolLM2-135M-Instruct."""

import inspect
import json
import subprocess
import sys
from html import escape

import pytest
from servers import FakeOllama, OpenAIStub
from test_runs import _data

from rawreact import ModelError, PassageEnv, ScriptedModel, load_model, read_run
from rawreact.agents.record import history_text
from rawreact.agents.tools import NOT_RUN, check_call, check_model, shipped_tools, tool_react
from rawreact.models.base import ToolCall
from rawreact.models.chatml import ChatML, read_reply, render, tools_grammar
from rawreact.models.gbnf import check_grammar
from rawreact.models.ollama import OllamaModel
from rawreact.models.openai import OpenAIModel
from rawreact.reports.export import export
from rawreact.reports.html import write_page

RAWREACT = [sys.executable, "-m", "rawreact"]
PAGES = {
    "Orlo": "Orlo is a fishing village. It holds a lantern festival every October. Its harbour is small.",
    "Dallow": "Dallow is a town on the river Lee. It has a market on Tuesdays.",
}
TOOLS = shipped_tools()


def _chat(*replies: str) -> ChatML:
    return ChatML(ScriptedModel(list(replies)), constrain=False)


def _call(name: str, **arguments) -> str:
    return f"functions.{name}:\n{json.dumps(arguments)}"


def _paired(messages: list[dict]) -> bool:
    """Each assistant message's calls are answered, in order, by the tool messages right after it."""
    for k, message in enumerate(messages):
        calls = message.get("tool_calls") or []
        answers = messages[k + 1 : k + 1 + len(calls)]
        if [c["id"] for c in calls] != [a.get("tool_call_id") for a in answers if a["role"] == "tool"]:
            return False
    tool_ids = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    return len(tool_ids) == len(set(tool_ids))


def test_an_episode_searches_looks_up_and_finishes_with_every_result_paired_to_its_call():
    chat = _chat(_call("search", query="Orlo"), _call("lookup", keyword="October"), _call("finish", answer="October"))
    traj = tool_react("When is the festival of Orlo?", PassageEnv(PAGES), chat, "Answer it.")
    assert traj.ended == "finish" and traj.answer == "October" and traj.loop == "tools"
    assert [s.action_text for s in traj.steps] == [
        'search({"query": "Orlo"})',
        'lookup({"keyword": "October"})',
        'finish({"answer": "October"})',
    ]
    assert traj.steps[0].observation == "Orlo is a fishing village. It holds a lantern festival every October."
    assert traj.steps[1].observation.endswith("It holds a lantern festival every October.")
    assert traj.model_calls == 3 and traj.invalid_actions == 0 and traj.searches == traj.search_hits == 1
    assert (
        _paired(traj.messages)
        and [m["role"] for m in traj.messages]
        == ["system", "user"]
        + [
            "assistant",
            "tool",
        ]
        * 3
    )
    # The model saw each result as a tool turn, and text as written (no HTML escaping).
    second = chat.model.history[1]["prompt"]
    assert "<|im_start|>tool\nOrlo is a fishing village." in second and "&amp;" not in second
    assert second.endswith(
        'functions.search:\n{"query": "Orlo"}<|im_end|>\n<|im_start|>tool\n'
        + traj.steps[0].observation
        + "<|im_end|>\n<|im_start|>assistant\n"
    )


@pytest.mark.parametrize(
    "reply, message",
    [
        (
            'functions.serch:\n{"query": "Orlo"}',
            "there is no function 'serch'; the functions are search, lookup, finish.",
        ),
        ('functions.search:\n{"query": "Orlo"', "the arguments of search are not valid JSON (Expecting ',' delimiter"),
        ('functions.search:\n["Orlo"]', 'the arguments of search must be a JSON object, such as {"query": "..."}.'),
        ('functions.search:\n{"query": "Orlo", "page": 2}', 'search takes {"query": "..."}; unknown page.'),
        ('functions.search:\n{"title": "Orlo"}', 'search takes {"query": "..."}; missing query and unknown title.'),
        ('functions.search:\n{"query": 3}', "query of search must be a non-empty string."),
        ('functions.finish:\n{"answer": "  "}', "answer of finish must be a non-empty string."),
    ],
)
def test_a_malformed_call_is_handed_back_as_the_tools_result_and_the_episode_goes_on(reply, message):
    chat = _chat(reply, _call("finish", answer="October"))
    traj = tool_react("When is the festival of Orlo?", PassageEnv(PAGES), chat, "Answer it.")
    first = traj.steps[0]
    assert first.error == "invalid call" and first.action is None
    assert first.observation.startswith("Error: ") and message in first.observation
    assert message in traj.messages[3]["content"] and traj.messages[3]["tool_call_id"] == "call_1_0"
    assert traj.ended == "finish" and traj.answer == "October" and traj.invalid_actions == 1


def test_a_call_cut_off_by_the_token_limit_is_truncated():
    long = 'functions.finish:\n{"answer": "' + "very " * 30 + '"}'
    traj = tool_react("Where?", PassageEnv(PAGES), _chat(long, _call("finish", answer="Orlo")), "A.", max_tokens=12)
    first = traj.steps[0]
    assert first.error == "truncated" and first.calls[0].finish_reason == "length"
    assert first.observation.startswith("Error: the call of finish was cut off at the token limit before its arguments")
    assert traj.answer == "Orlo" and traj.invalid_actions == 1


def test_a_plain_text_answer_ends_the_episode_and_is_marked():
    traj = tool_react("Where?", PassageEnv(PAGES), _chat("message:\nIt is in Orlo."), "Answer it.")
    assert traj.ended == "text" and traj.answer == "It is in Orlo." and len(traj.steps) == 1
    # The answer parser reads an answer in the text, as for CoT; else the text is the answer.
    said = tool_react("Where?", PassageEnv(PAGES), _chat("message:\nI looked.\nSo the answer is Orlo."), "A.")
    assert said.ended == "text" and said.answer == "Orlo"
    assert traj.steps[0].action is None and traj.steps[0].error is None and traj.model_calls == 1
    assert traj.messages[-1] == {"role": "assistant", "content": "It is in Orlo."}


def test_the_step_cap_and_several_calls_in_one_reply():
    search = _call("search", query="Orlo")
    capped = tool_react("Where?", PassageEnv(PAGES), _chat(search, search, search), "A.", max_steps=2)
    assert capped.ended == "max_steps" and len(capped.steps) == 2 and capped.answer == ""
    # Three calls in one reply: each a step of its own, one model call; after finish, the rest are not run.
    both = "\n".join([_call("search", query="Dallow"), _call("finish", answer="Lee"), _call("search", query="Orlo")])
    traj = tool_react("Which river?", PassageEnv(PAGES), _chat(both), "A.")
    assert [s.action.name for s in traj.steps] == ["search", "finish"] and traj.model_calls == 1
    assert traj.ended == "finish" and traj.answer == "Lee" and _paired(traj.messages)
    assert traj.messages[-1] == {"role": "tool", "tool_call_id": "call_1_2", "name": "search", "content": NOT_RUN}
    cut = tool_react("Which river?", PassageEnv(PAGES), _chat("\n".join([search] * 3)), "A.", max_steps=2)
    assert cut.ended == "max_steps" and len(cut.steps) == 2 and cut.messages[-1]["content"] == NOT_RUN
    assert _paired(cut.messages)


def test_a_repeated_call_gets_the_guardrails_note():
    search = _call("search", query="Orlo")
    traj = tool_react(
        "Where?", PassageEnv(PAGES), _chat(search, search, _call("finish", answer="x")), "A.", repeats="note"
    )
    assert traj.steps[1].repeat_of == 1 and traj.repeats == 1
    assert traj.messages[5]["content"].endswith("and saw the same. Try a different action.)")


def test_check_call_reads_what_servers_send():
    assert check_call(ToolCall("c", "lookup", '{"keyword": "river  Lee"}'), TOOLS)[0].arg == "river Lee"
    assert check_call(ToolCall("c", "search", ""), TOOLS)[1] == 'Error: search takes {"query": "..."}; missing query.'


def test_the_reader_takes_calls_messages_and_text_without_a_label():
    assert read_reply('functions.search:\n{"query": "A"}', 2) == (
        "",
        [ToolCall("call_2_0", "search", '{"query": "A"}')],
    )
    assert read_reply("message:\nIt is A.", 1) == ("It is A.", [])
    assert read_reply("  Just text.", 1) == ("Just text.", [])


def test_llama_cpp_pythons_own_handler_drops_tool_results_which_is_why_rawreact_renders_the_layout():
    """A canary: when llama-cpp-python renders tool turns and stops escaping, its handler could be used."""
    from jinja2 import StrictUndefined, select_autoescape
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from llama_cpp import llama_chat_format

    source = inspect.getsource(llama_chat_format.chatml_function_calling)
    namespace: dict = {}
    exec(source[source.index("function_calling_template = (") : source.index("template_renderer =")], namespace)
    template = ImmutableSandboxedEnvironment(autoescape=select_autoescape(["html", "xml"]), undefined=StrictUndefined)
    call = {"id": "c", "type": "function", "function": {"name": "search", "arguments": '{"query": "A"}'}}
    messages = [
        {"role": "user", "content": "Is A & B near?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": "A lies on the river Lee."},
    ]
    theirs = template.from_string(namespace["function_calling_template"]).render(
        messages=messages, tools=list(TOOLS), tool_calls=True, add_generation_prompt=True
    )
    assert "river Lee" not in theirs and "A &amp; B" in theirs and "&#34;query&#34;" in theirs
    ours = render(messages, list(TOOLS))
    assert "<|im_start|>tool\nA lies on the river Lee.<|im_end|>" in ours and "A & B" in ours


def test_the_tools_grammar_admits_calls_and_messages_and_nothing_else(gemma):
    grammar = tools_grammar(list(TOOLS))
    check_grammar(grammar)
    for good in (
        'functions.search:\n{"query": "Orlo"}',
        'functions.finish:\n{"answer": "1,450"}',
        "message:\nNo idea.",
    ):
        assert gemma.admits(grammar, good), good
    for bad in (
        'functions.search:\n{"q": "Orlo"}',
        'functions.serch:\n{"query": "x"}',
        "I think",
        'functions.search:\n{"query": ""}',
    ):
        assert not gemma.admits(grammar, bad), bad


def test_a_base_model_without_a_chat_template_is_refused(gemma):
    with pytest.raises(ModelError, match="gemma3-270m has no chat template"):
        check_model(gemma)


def test_the_openai_chat_protocol():
    call = {"id": "call_x", "type": "function", "function": {"name": "search", "arguments": '{"query": "Orlo"}'}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    reply = {
        "choices": [{"finish_reason": "tool_calls", "message": message}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 9},
    }
    text = {"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": "Orlo."}}], "usage": {}}
    stub = OpenAIStub([(200, reply), (200, text)], owned_by="llamacpp")
    try:
        model = OpenAIModel(stub.url)
        traj = tool_react("Where?", PassageEnv(PAGES), model, "Answer it.", max_tokens=50)
    finally:
        stub.close()
    first, second = stub.requests
    assert first["tools"] == list(TOOLS) and first["tool_choice"] == "auto" and first["max_tokens"] == 50
    assert first["messages"] == [
        {"role": "system", "content": "Answer it."},
        {"role": "user", "content": "Question: Where?"},
    ]
    assert second["messages"][2]["tool_calls"][0]["id"] == "call_x"
    assert second["messages"][3] == {"role": "tool", "tool_call_id": "call_x", "content": traj.steps[0].observation}
    assert traj.ended == "text" and traj.answer == "Orlo." and traj.steps[0].calls[0].prompt_tokens == 120
    assert json.loads(traj.steps[0].calls[0].text)["tool_calls"][0]["function"]["name"] == "search"


def test_the_ollama_chat_protocol():
    def said(name: str, **arguments) -> dict:
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": name, "arguments": arguments}}],
        }

    replies = [said("search", query="Orlo"), said("finish", answer="October")]
    server = FakeOllama(None, models=("smollm2:135m",), chat=replies)
    try:
        model = OllamaModel("smollm2:135m", host=server.url, n_ctx=2048)
        traj = tool_react("When?", PassageEnv(PAGES), model, "Answer it.")
    finally:
        server.close()
    first, second = server.requests
    # The ollama client sends each schema without additionalProperties (its Tool type has no such field);
    # an extra key is still refused, by rawreact's own check of the call.
    plain = [json.loads(json.dumps(t).replace(', "additionalProperties": false', "")) for t in TOOLS]
    assert first["tools"] == plain and first["think"] is False and first["options"]["num_ctx"] == 2048
    assert second["messages"][2]["tool_calls"] == [{"function": {"name": "search", "arguments": {"query": "Orlo"}}}]
    assert second["messages"][3] == {"role": "tool", "content": traj.steps[0].observation, "tool_name": "search"}
    assert traj.ended == "finish" and traj.answer == "October" and _paired(traj.messages)


def test_the_cli_runs_the_tools_method_and_show_prints_the_history(rows, tmp_path):
    data = _data(rows, tmp_path, 2)
    scripts = {}
    for row in rows[:2]:
        title = row["supporting_facts"][0][0]
        scripts[row["question"]] = [_call("search", query=title), _call("finish", answer=row["answer"])]
    (tmp_path / "s.json").write_text(json.dumps({"questions": scripts}))
    out = tmp_path / "tools.jsonl"
    done = subprocess.run(
        [*RAWREACT, "run", data, "--method", "tools", "--model", f"scripted:{tmp_path / 's.json'}", "--out", out, "-q"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    manifest, records = read_run(out)
    assert {r["em"] for r in records} == {1.0} and {r["loop"] for r in records} == {"tools"}
    assert manifest["config"]["method"] == "tools" and manifest["config"]["prompt"] == "prompts/tools/instruction.txt"
    shown = subprocess.run([*RAWREACT, "show", out, "--id", records[0]["id"]], capture_output=True, text=True)
    assert shown.returncode == 0 and history_text(records[0]["trajectory"]["messages"][1:]) in shown.stdout
    assert "[tool search (call_1_0)]" in shown.stdout
    page = write_page({"tools": out}, tmp_path / "tools.html", resamples=100).read_text(encoding="utf-8")
    assert page.count('<tr class="question ') == 2 and escape('search({"query": ') in page
    assert page.count("System message: <a href") == 2 and "Few-shot prompt" not in page
    chat = export([out], tmp_path / "chat.jsonl", layout="chat")
    first = json.loads((tmp_path / "chat.jsonl").read_text().splitlines()[0])
    assert chat.examples == 2 and first["messages"] == [
        {k: v for k, v in m.items() if not (m["role"] == "tool" and k == "name")}
        for m in records[0]["trajectory"]["messages"][1:]
    ]
    assert first["tools"] == list(TOOLS) and export([out], tmp_path / "c.jsonl").no_trajectory == 2
    trl = export([out], tmp_path / "trl.jsonl", layout="trl")  # one example per assistant turn, the tools beside it
    turns = sum(m["role"] == "assistant" for m in first["messages"])
    lines = [json.loads(line) for line in (tmp_path / "trl.jsonl").read_text().splitlines()]
    last = lines[turns - 1]["prompt"] + lines[turns - 1]["completion"]  # the first episode's last assistant turn
    assert trl.examples >= turns and last == first["messages"][: len(last)] and last[-1]["role"] == "assistant"
    assert all(line["tools"] == list(TOOLS) and line["completion"][0]["role"] == "assistant" for line in lines)
    for bad, message in (
        (["--model", "gemma3-270m"], "gemma3-270m has no chat template"),
        (["--model", f"scripted:{tmp_path / 's.json'}", "--grammar", "step"], "the tools method"),
    ):
        refused = subprocess.run([*RAWREACT, "run", data, "--method", "tools", *bad], capture_output=True, text=True)
        assert refused.returncode == 2 and message in refused.stderr and "Traceback" not in refused.stderr


def test_smollm2_runs_a_tools_episode_on_the_embedded_model(demo):
    model = load_model("smollm2-135m", n_ctx=4096)
    question = demo.questions[0]
    traj = tool_react(question.question, demo.env(question), model, shipped_instruction(), max_steps=3, max_tokens=60)
    assert traj.ended in ("finish", "text", "max_steps") and 1 <= len(traj.steps) <= 3
    assert _paired(traj.messages) and traj.invalid_actions == sum(s.error is not None for s in traj.steps)
    for step in traj.steps:  # the grammar keeps every reply a well-formed call or a message
        if step.calls:
            content, calls = read_reply(step.calls[0].text, 1)
            assert calls or content
    calls = [c for s in traj.steps for c in s.calls]
    assert all(c.prompt_tokens > 0 for c in calls) and all(c.evaluated_tokens < c.prompt_tokens for c in calls[1:])


def shipped_instruction() -> str:
    from rawreact.core.resources import resource

    return resource("prompts", "tools/instruction.txt").read_text(encoding="utf-8")
