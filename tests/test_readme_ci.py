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
