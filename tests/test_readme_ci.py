"""README's test command is the one CI runs, and the package metadata is coherent."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bash_blocks(text):
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    blocks = [b.strip() for b in _bash_blocks(readme)]
    test_cmds = [b for b in blocks if "pytest" in b]
    assert len(test_cmds) == 1, test_cmds
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_cmds[0] in ci


def test_readme_main_job_command_uses_the_embedded_sampler():
    readme = (ROOT / "README.md").read_text()
    blocks = [b.strip() for b in _bash_blocks(readme)]
    assert any("[stanli]" in b and "loo-adapt demo" in b for b in blocks)


def test_stanli_pinned_and_script_declared():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = meta["project"]["optional-dependencies"]
    assert any(re.fullmatch(r"stanli==\d+\.\d+\.\d+", d) for d in extras["stanli"])
    assert meta["project"]["scripts"]["loo-adapt"] == "loo_adapt.cli:main"


def test_readme_stanli_example_runs(capsys):
    """The five-line stanli example runs as written and prints the k table of every row."""
    import warnings

    import pytest

    pytest.importorskip("stanli", reason="the example fits with stanli")
    readme = (ROOT / "README.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S)
                if "stanli.Model" in b]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a disagreement note of the pooling check may come
        exec(compile(block, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "Computed from 4000 by 54 log-likelihood matrix." in printed
    counts = [int(m) for m in re.findall(r"^\s*\S.*?\)\s+(\d+)\s+[\d.]+%", printed, flags=re.M)]
    assert sum(counts[:4]) == 54  # every row in the first k table, MixIS rows in their bin
