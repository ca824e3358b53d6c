"""Every notebook runs top to bottom in quick mode (LOO_ADAPT_NB_QUICK=1) and shows its results."""

import os
import re
import time
from pathlib import Path

import pytest

# the arviz-1.x CI environment installs no notebook tooling
nbformat = pytest.importorskip("nbformat")
NotebookClient = pytest.importorskip("nbclient").NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

#: notebook -> (texts its outputs must contain, minimum number of figures)
EXPECTED = {
    "ovarian_logistic.ipynb": (
        ["Pareto k diagnostic values", "Table 1:", "KL+VAR+LL+MM1+MM2",
         "split rule: unreliable", "MCMC, MixIS", "average_precision", "results.json"], 3),
    "ovarian_relu.ipynb": (
        ["relu_net", "Table 1:", "KL+VAR+LL+MM1+MM2", "MCMC, adaptive IS (min k-hat)",
         "auroc", "summary.txt"], 3),
    "laplace_bridge.ipynb": (
        ["mean_abs_dlogit", "k>0.7", "valla", "ella", "two moons", "VaLLA M ="], 3),
}


def _outputs(nb):
    texts, images = [], 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                texts.append(out.text)
            elif out.output_type in ("display_data", "execute_result"):
                images += "image/png" in out.data
                texts.append(out.data.get("text/plain", ""))
    return "\n".join(texts), images


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_is_committed_without_outputs(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
    assert "LOO_ADAPT_NB_QUICK" in nb.cells[1].source  # the parameter cell comes first


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_runs(name, tmp_path, monkeypatch):
    monkeypatch.setenv("LOO_ADAPT_NB_QUICK", "1")
    monkeypatch.setenv("LOO_ADAPT_NB_OUT", str(tmp_path / "report"))
    monkeypatch.setenv("PYTHONPATH",
                       os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    t0 = time.perf_counter()
    client.execute()  # raises CellExecutionError on the first failing cell
    seconds = time.perf_counter() - t0
    text, images = _outputs(nb)
    wanted, min_images = EXPECTED[name]
    missing = [w for w in wanted if w not in text]
    assert not missing, f"{name}: outputs lack {missing}"
    assert images >= min_images
    assert "quick mode" in text
    assert not re.search(r"Traceback|Error:", text)
    # the quick settings are meant to stay under a minute (loose bound for loaded machines)
    assert seconds < 120, f"{name} took {seconds:.0f} s in quick mode"
    if name != "laplace_bridge.ipynb":
        assert (tmp_path / "report" / "results.json").is_file()
