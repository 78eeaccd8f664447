"""The GitHub Actions workflow parses and runs the same make targets as local CI."""

from __future__ import annotations

from pathlib import Path

import yaml

WORKFLOW = Path(__file__).resolve().parents[1] / ".github" / "workflows" / "ci.yml"


def load() -> dict:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    # YAML 1.1 reads the bare key `on` as True.
    workflow["on"] = workflow.pop(True, workflow.get("on"))
    return workflow


def run_lines(job: dict) -> list[str]:
    return [line for step in job["steps"] for line in step.get("run", "").splitlines()]


def test_workflow_triggers_on_push_and_pull_request():
    assert {"push", "pull_request"} <= set(load()["on"])


def test_test_job_runs_make_test():
    assert "make test" in run_lines(load()["jobs"]["test"])


def test_book_is_built_with_make_book_only_on_main_after_tests():
    book = load()["jobs"]["book"]
    assert "make book" in run_lines(book)
    assert book["needs"] == "test"
    assert "refs/heads/main" in book["if"]
    uploads = [step for step in book["steps"] if "upload-pages-artifact" in step.get("uses", "")]
    assert uploads[0]["with"]["path"] == "_build/html"


def test_deploy_job_publishes_to_pages():
    deploy = load()["jobs"]["deploy"]
    assert deploy["needs"] == "book"
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert any("deploy-pages" in step.get("uses", "") for step in deploy["steps"])
