"""Question files: the three layouts load to the same questions, and bad files say what is wrong where."""

import json
import subprocess
import sys

import pytest

from rawreact import DataError, load_collection


def _hf_row(row: dict, with_id: str | None = None) -> dict:
    """An official HotpotQA row in the Hugging Face `hotpot_qa` layout."""
    hf = {
        "question": row["question"],
        "answer": row["answer"],
        "type": row["type"],
        "level": row["level"],
        "supporting_facts": {
            "title": [t for t, _ in row["supporting_facts"]],
            "sent_id": [i for _, i in row["supporting_facts"]],
        },
        "context": {"title": [t for t, _ in row["context"]], "sentences": [s for _, s in row["context"]]},
    }
    return hf if with_id is None else {"id": with_id, **hf}


def test_a_real_hotpotqa_file_loads_with_each_question_over_its_own_paragraphs(hotpotqa, tmp_path):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(hotpotqa))
    data = load_collection(path)
    assert [q.question for q in data.questions] == [row["question"] for row in hotpotqa]
    for question, row in zip(data.questions, hotpotqa, strict=True):
        assert question.answer == row["answer"] and question.id == row.get("_id", question.id)
        assert set(question.supporting) <= set(question.passages) == {title for title, _ in row["context"]}


def test_the_official_layout_gives_each_question_its_own_paragraphs(rows, tmp_path):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(rows[:5]))
    data = load_collection(path)
    assert data.layout == "hotpotqa" and len(data.questions) == 5 and data.passages == {}
    first = data.questions[0]
    row = rows[0]
    assert first.question == row["question"] and first.answer == row["answer"] and first.kind == "comparison/easy"
    assert first.supporting == tuple(title for title, _ in row["supporting_facts"]) and first.id == "case000"
    assert list(first.passages) == [title for title, _ in row["context"]]
    env = data.env(first, n_first=2)
    title, sentences = row["context"][1]
    assert env.step(f"Search[{title}]")[0] == f"{sentences[0]} {sentences[1].strip()}"
    assert env.step("Search[Paris]")[0].startswith("Could not find Paris.")  # only this question's paragraphs


def test_derived_ids_are_stable_unique_and_the_same_in_every_layout(rows, tmp_path):
    rows = [{k: v for k, v in row.items() if k != "_id"} for row in rows]  # rows without ids get derived ones
    official = tmp_path / "dev.json"
    official.write_text(json.dumps(rows + rows[:2]))  # two rows repeated
    ids = [q.id for q in load_collection(official).questions]
    assert len(set(ids)) == 102 and ids == [q.id for q in load_collection(official).questions]
    assert ids[100] == ids[0] + "-2" and ids[101] == ids[1] + "-2"
    hf = tmp_path / "hf.jsonl"
    hf.write_text("".join(json.dumps(_hf_row(row)) + "\n" for row in rows))
    assert [q.id for q in load_collection(hf).questions] == ids[:100]


def test_hugging_face_rows_as_json_and_jsonl_match_the_official_rows(rows, tmp_path):
    official = tmp_path / "dev.json"
    official.write_text(json.dumps([{**row, "_id": f"id{i}"} for i, row in enumerate(rows[:20])]))
    as_json = tmp_path / "hf.json"
    as_json.write_text(json.dumps([_hf_row(row, f"id{i}") for i, row in enumerate(rows[:20])]))
    as_jsonl = tmp_path / "hf.jsonl"
    as_jsonl.write_text("\n".join(json.dumps(_hf_row(row, f"id{i}")) for i, row in enumerate(rows[:20])))
    loaded = [load_collection(p) for p in (official, as_json, as_jsonl)]
    assert [c.layout for c in loaded] == ["hotpotqa", "hotpotqa-hf", "hotpotqa-hf"]
    assert loaded[0].questions == loaded[1].questions == loaded[2].questions
    assert loaded[0].questions[3].id == "id3"
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps(_hf_row(rows[0], "solo")) + "\n")
    assert [q.id for q in load_collection(one).questions] == ["solo"]


def test_the_envs_layout_still_loads_with_shared_passages():
    demo = load_collection()
    assert demo.layout == "envs" and len(demo.questions) == 7 and demo.questions[0].passages is None
    assert demo.env(demo.questions[0]).titles == list(demo.passages)


ROW = {"question": "q?", "answer": "a", "context": [["T", ["t."]]]}


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "is empty; give a HotpotQA file (JSON or JSONL) or a collection"),
        ("  \n", "is empty"),
        ('[{"question": "q?", "answer": "a", "context": []},', "line 1 column 51: not valid JSON"),
        ("[]", "has no rows; a HotpotQA file is a list of question rows"),
        (json.dumps([ROW, ROW, {"question": "q?", "context": []}]), "row 3 has no 'answer'"),
        (json.dumps([ROW, {"question": "q?", "answer": "a"}]), "row 2 has no 'context'; rawreact answers over each"),
        (json.dumps([{"question": 7, "answer": "a", "context": []}]), "row 1 has a non-string 'question'"),
        (json.dumps([{**ROW, "context": []}]), "row 1: 'context' has no paragraphs to search"),
        (json.dumps([{**ROW, "context": [["T", "not a list"]]}]), "row 1: context[0] must be [title, [sentence, ...]]"),
        (json.dumps([{**ROW, "context": {"title": ["T"]}}]), "must have lists 'title' and 'sentences' of the same"),
        (json.dumps([{**ROW, "_id": "x"}, {**ROW, "_id": "x"}]), "question ids must be unique; repeated: 'x'"),
        (json.dumps([ROW, "text"]), "row 2: a row must be an object"),
        (json.dumps(ROW) + "\n" + '{"question": "broken', "line 2: not valid JSON"),
        (json.dumps(ROW) + "\n" + json.dumps({"question": "q?", "answer": "a"}), "line 2 has no 'context'"),
        ('"just text"', "unknown layout; rawreact reads the official HotpotQA JSON"),
        ('{"rows": []}', "unknown layout"),
        (
            json.dumps({"passages": {"A": "a."}, "questions": [{"id": "1", "question": "q", "answer": "a"}] * 2}),
            "question ids must be unique; repeated: '1'",
        ),
    ],
)
def test_bad_question_files_name_the_file_and_the_row(tmp_path, content, message):
    path = tmp_path / "data.json"
    path.write_text(content)
    with pytest.raises(DataError) as error:
        load_collection(path)
    assert str(error.value).startswith(str(path)) and message in str(error.value)


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "data.json is empty; give a HotpotQA file"),
        ("[{oops", "data.json line 1 column 3: not valid JSON"),
        (json.dumps([ROW, {"question": "q?", "answer": "a"}]), "data.json row 2 has no 'context'; rawreact answers"),
        (json.dumps([{"question": "q?", "context": []}]), "data.json row 1 has no 'answer'"),
        ("42", "data.json: unknown layout"),
    ],
)
def test_the_cli_reports_a_bad_file_in_one_line(tmp_path, content, message):
    path = tmp_path / "data.json"
    path.write_text(content)
    result = subprocess.run([sys.executable, "-m", "rawreact", "run", str(path)], capture_output=True, text=True)
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"rawreact: error: {tmp_path}/") and message in result.stderr
