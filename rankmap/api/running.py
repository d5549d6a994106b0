"""Running a planned job: launch files, the in-allocation sbatch script, framework flags, local runs."""

from __future__ import annotations

from pathlib import Path

from rankmap.errors import LaunchError, RankmapError
from rankmap.job.rank_map import RankMap, read_rankmap

__all__ = ["check_engine_run", "launch_files", "launch_local", "allocation_files", "framework_flags"]


def check_engine_run(rankmap: RankMap, config_path: str | Path | None = None, steps: int | None = None):
    """Load and check the engine config for ``rankmap``'s job before anything starts.

    Returns the :class:`rankmap.engine.config.EngineConfig` (``steps`` applied).

    Raises
    ------
    SpecError, EngineError
        Bad config, or a config that does not fit the job (file and key named).
    """
    from rankmap.engine.config import load_config
    from rankmap.engine.runspec import resolve_run

    cfg = load_config(config_path)
    if steps is not None:
        cfg = cfg.with_steps(steps)
    resolve_run(cfg, rankmap.job)
    return cfg


def launch_files(rankmap: RankMap, fmt: str, options, out: str | Path) -> dict:
    """``{file name: text}`` of launch files for ``rankmap`` in format ``fmt``.

    See :func:`rankmap.launch.formats.launch_files` (formats ``FORMATS``; ``options`` a
    :class:`rankmap.launch.common.LaunchOptions`). Nothing is written.
    """
    from rankmap.launch.formats import launch_files as _launch_files
    return _launch_files(rankmap, fmt, options, out)


def launch_local(rankmap_path: str | Path, run_dir: str | Path, *, config_path: str | Path | None = None,
                 steps: int | None = None, master_port: int | None = None, timeout_s: float | None = None,
                 cwd: str | Path | None = None, entry: tuple | None = None, max_procs: int | None = None) -> Path:
    """Train ``rankmap_path``'s job on this machine: one torchrun agent per host of the map, on 127.0.0.1.

    Refuses a map with more workers than ``max_procs`` (see
    :func:`rankmap.launch.local.check_local_size`). With ``entry`` None, checks the engine
    config first (:func:`check_engine_run`) and runs the bundled engine; else runs ``entry``
    (the user's command, argv-exact, with ``RANKMAP_FILE`` naming the map) in ``cwd``. Runs
    the agents to the end (see :func:`rankmap.launch.local.run_agents`); every process started
    is stopped when the run ends. Returns the run folder.

    Raises
    ------
    LaunchError
        Too many workers, a worker failed (the message names the one that failed first, its
        rank, host, local rank, exit code or signal, and its stderr file under
        ``run_dir/logs/HOST/``) or the run timed out (the engine's ``error.txt`` is quoted when
        present).
    SpecError
        Bad rank map or config.
    """
    from rankmap.fileio import read_text
    from rankmap.launch.local import check_local_size, free_port, local_agents, run_agents

    rankmap_path = Path(rankmap_path).resolve()
    rm = read_rankmap(rankmap_path)
    check_local_size(rm, max_procs)
    run_dir = Path(run_dir).resolve()
    logs = run_dir / "logs"
    if entry:
        agents = local_agents(rm, [], master_port or free_port(), entry=tuple(entry), rankmap_file=str(rankmap_path),
                              log_dir=logs)
    else:
        agents = local_agents(rm, _engine_args(rm, rankmap_path, run_dir, config_path, steps),
                              master_port or free_port(), rankmap_file=str(rankmap_path), log_dir=logs)
    try:
        run_agents(agents, cwd=Path(cwd) if cwd else Path.cwd(), timeout_s=timeout_s)
    except LaunchError:
        error = run_dir / "error.txt"
        if not entry and error.is_file():
            raise LaunchError(f"the job stopped: {read_text(error).strip()}") from None
        raise
    return run_dir


def _engine_args(rm: RankMap, rankmap_path: Path, run_dir: Path, config_path, steps) -> list[str]:
    """The bundled engine's options for a local run (config checked first)."""
    cfg = check_engine_run(rm, config_path, steps)
    if cfg.data.root and not Path(cfg.data.root).is_dir():  # checked here: the agents would all fail
        raise RankmapError(f"{config_path}: data.root: {cfg.data.root} is not a folder")
    args = ["--rankmap", str(rankmap_path), "--out", str(run_dir)]
    if config_path:
        args += ["--config", str(Path(config_path).resolve())]
    if steps is not None:
        args += ["--steps", str(steps)]
    return args


def allocation_files(rankmap: RankMap, options, cluster_path: str, out: str | Path) -> dict:
    """``{file name: text}`` of an sbatch script that plans ``rankmap``'s job inside its allocation.

    See :func:`rankmap.launch.allocation.allocation_files`. Nothing is written.
    """
    from rankmap.launch.allocation import allocation_files as _files
    return _files(rankmap, options, cluster_path, str(out))


def framework_flags(rankmap: RankMap, framework: str) -> str:
    """A framework's command-line flags that build exactly ``rankmap``'s groups (one text block).

    See :mod:`rankmap.launch.adapters`.

    Raises
    ------
    LaunchError
        The framework cannot express the map's order (the reason is named).
    """
    from rankmap.launch.adapters import framework_flags as _flags
    return _flags(rankmap, framework)
