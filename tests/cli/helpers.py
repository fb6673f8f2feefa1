"""Run the real `linkscope` typer app in-process."""

from __future__ import annotations

from typer.testing import CliRunner, Result

from linkscope.cli.main import app


def run_cli(*args: str) -> Result:
    """Invoke `linkscope ARGS...` and return the result (stdout, stderr, exit_code)."""
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def forget_packaged_data() -> None:
    """Drop the process's copies of the packaged model data, so that the next command reads it again (from the
    cache between starts, as a fresh process would)."""
    from linkscope.model.comm import params
    from linkscope.model.ranges import accuracy
    from linkscope.model.step import compute, transformer

    for loader in (compute.packaged_constants, params.nccl_tuning, params.packaged_comm_fit, params.fabric_traits,
                   accuracy.accuracy_file, accuracy.residuals, accuracy._packaged_spread,
                   transformer.model_presets):
        loader.cache_clear()
