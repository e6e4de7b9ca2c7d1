"""Which code made a measured table: ``provenance.provenance``'s ``dirty``."""

import subprocess

from gradient_compressor import provenance


def _repo(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)
    git("init", "-q")
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "prove.md").write_text("table\n")
    (tmp_path / "design.py").write_text("code\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    return tmp_path


def test_a_results_table_written_is_not_a_local_change(tmp_path, monkeypatch):
    # make prove --out writes docs/results/prove.md before make prove-seed --out runs: the
    # second table still names the commit, not "with local changes".
    repo = _repo(tmp_path)
    monkeypatch.setattr(provenance, "_SOURCE_ROOT", repo)
    assert provenance.provenance()["dirty"] is False
    (repo / "docs" / "results" / "prove.md").write_text("a new table\n")
    assert provenance.provenance()["dirty"] is False
    (repo / "design.py").write_text("changed code\n")
    info = provenance.provenance()
    assert info["dirty"] is True
    assert provenance.describe(info).endswith("with local changes")
