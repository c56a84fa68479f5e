"""A plan's method options are resolved once (issue 94, "resolved means resolved"): the prompt files a method reads
are read when the plan is made, the manifest hashes those texts, and the run sends them, whatever happens to the
files after. Before, `RunPlan.options` read them again at every use: a value prompt edited after the plan was made
was sent under the hash of the old one, and one deleted made the run fail."""

import json
from pathlib import Path

from test_lats import STRINGS, _checkout, _orlo

from rawreact import Settings, load_collection
from rawreact.runs.plan import make_plan


class Sent:
    """The plan's model, keeping every prompt it is sent."""

    def __init__(self, model) -> None:
        self.model, self.name, self.prompts = model, model.name, []
        self.supports_grammar = model.supports_grammar

    def complete(self, prompt, **options):
        self.prompts.append(prompt)
        return self.model.complete(prompt, **options)

    def sample(self, prompt, **options):
        self.prompts.append(prompt)
        return self.model.sample(prompt, **options)

    def __getattr__(self, name):
        return getattr(self.model, name)


def _run(plan) -> tuple[Sent, dict]:
    model = Sent(plan.load_model())
    results = list(plan.run(model))
    assert len(results) == 1
    return model, json.loads(Path(f"{plan.out}.manifest.json").read_text())["config"]


def test_a_value_prompt_edited_or_deleted_after_the_plan_is_made_is_sent_as_the_manifest_hashed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _orlo(tmp_path)
    value = tmp_path / "value.txt"
    for k, then in enumerate(("edited", "deleted")):
        value.write_text("Score the attempt from 1 to 10.\n\n")
        settings = Settings(method="lats", model="scripted:s.json", value_prompt="value.txt", iterations=2)
        plan = make_plan(settings, load_collection("q.json"), out=tmp_path / f"{then}.jsonl")
        hashed = plan.parts.config["lats_prompts_sha256"]
        if then == "edited":
            value.write_text("Say yes.\n\n")
        else:
            value.unlink()
        model, config = _run(plan)
        values = [p for p in model.prompts if p.startswith("Score the attempt from 1 to 10.")]
        assert values and not any(p.startswith("Say yes") for p in model.prompts), k
        assert config["lats_prompts_sha256"] == hashed


def test_the_repositorys_lats_prompts_edited_after_the_plan_is_made_are_sent_as_the_manifest_hashed(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    _orlo(tmp_path)
    hotpot = _checkout(tmp_path / "LATS") / "hotpot" / "hotpot.py"
    settings = Settings(method="lats", loop="reference", lats_prompts=str(hotpot), model="scripted:s.json",
                        iterations=2)  # fmt: skip
    plan = make_plan(settings, load_collection("q.json"), out=tmp_path / "r.jsonl")
    hashed = plan.parts.config["lats_prompts_sha256"]
    edited = dict(STRINGS, value_prompt_reasoning="EDITED {s} {input}", cot_prompt="EDITED {input}")
    hotpot.write_text("".join(f"{name} = '''{text}'''\n\n" for name, text in edited.items()))
    model, config = _run(plan)
    assert model.prompts and not any("EDITED" in p for p in model.prompts)
    assert any(p.startswith(STRINGS["cot_prompt"].split("{")[0]) for p in model.prompts)
    assert config["lats_prompts_sha256"] == hashed
