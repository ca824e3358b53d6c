"""Running the CLI in-process from the fault tests: exit code, stdout, stderr."""

from loo_adapt.cli import main


def run_cli(capsys, *args):
    """``main(args)`` with its exit code and what it printed (out, err)."""
    rc = main([str(a) for a in args])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def one_line(err: str) -> str:
    """The single line an error must be (no traceback)."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]
