"""The launch files of every format, by name: what ``rankmap launch --format`` writes, and the
check of read-back launch files against a rank map. No torch here.

Each format's writer and reader live in its own module (:mod:`rankmap.launch.torchrun`,
:mod:`rankmap.launch.slurm`, :mod:`rankmap.launch.mpi`, :mod:`rankmap.launch.deepspeed`); all
keep the plan's host order (launchers lose it in known ways: torchrun's c10d rendezvous
ignores ``--node-rank`` [1]_, several tools sort hostnames as strings, node66 < node7).

References
----------
.. [1] PyTorch documentation, "torchrun (Elastic Launch)".
   https://pytorch.org/docs/stable/elastic/run.html
"""

from __future__ import annotations

from pathlib import Path

from rankmap.errors import LaunchError
from rankmap.job.rank_map import RankMap
from rankmap.launch.common import LaunchOptions, check_hosts
from rankmap.launch.deepspeed import check_deepspeed_hostfile, deepspeed_files
from rankmap.launch.mpi import RankfileEntry, check_rankfile, mpi_files
from rankmap.launch.slurm import check_slurm_hosts, slurm_files
from rankmap.launch.torchrun import torchrun_files

__all__ = ["FORMATS", "FILES", "FORMER_FILES", "PLAN_FILES", "MANIFEST", "manifest_text", "recorded_files", "launch_files", "check_against_map"]

FORMATS = ("torchrun", "slurm", "mpi", "deepspeed")
#: The files :func:`launch_files` writes per format: a folder ``launch-FORMAT`` holding others holds
#: the user's own files, which a new plan in the same folder must not delete.
FILES = {"torchrun": ("torchrun.sh", "torchrun-commands.txt"),
         "slurm": ("slurm.sbatch", "slurm-hostfile", "torchrun.sh", "torchrun-commands.txt",
                   "slurm-plan.sbatch", "job.yaml"),   # the last two: launch --plan-in-allocation
         "mpi": ("mpirun.sh", "rankfile"), "deepspeed": ("deepspeed.sh", "deepspeed-hostfile")}
#: Files a format wrote under another name in earlier releases (DeepSpeed's ``hostfile``, now
#: ``deepspeed-hostfile``): still launch's own in a ``launch-FORMAT`` folder, so a new map there
#: deletes them as stale instead of refusing them as the user's.
FORMER_FILES = {"deepspeed": ("hostfile",)}
#: What ``rankmap plan`` writes beside a rank map: no launch file may take one of these names
#: (``launch --out PLAN_FOLDER`` would replace the plan's own file).
PLAN_FILES = ("rankmap.json", "hostfile", "plan.png")


#: The record ``rankmap launch`` keeps of the files it wrote into a folder (name -> sha256 of the
#: text): a new rank map written into that folder later removes exactly those files, unless the
#: user changed one (then the new map is refused), so no launch file is left beside a map it
#: was not made for (``rankmap launch --out DIR`` into a plan's own folder).
MANIFEST = ".rankmap-launch.json"


def manifest_text(files: dict[str, str], previous: str | None = None) -> str:
    """The manifest for ``files`` (``{name: text}``), merged with a ``previous`` manifest of the
    same folder (other formats written there before), as JSON with sorted keys.

    Examples
    --------
    >>> print(manifest_text({"rankfile": "rank 0=n1 slot=0\\n"}), end="")
    {"files": {"rankfile": "abdd88823fdba2cbf373caeb19b81517a21bfd24b1f32f45b355da102a5bc494"}, "written_by": "rankmap launch"}
    """
    import hashlib
    import json

    recorded = recorded_files(previous, MANIFEST) if previous else {}
    recorded.update({name: hashlib.sha256(text.encode()).hexdigest() for name, text in files.items()})
    return json.dumps({"files": dict(sorted(recorded.items())), "written_by": "rankmap launch"}, sort_keys=True) + "\n"


def recorded_files(text: str, source: str) -> dict[str, str]:
    """``{name: sha256}`` from a manifest's text (:data:`MANIFEST`).

    Raises
    ------
    LaunchError
        Not a manifest rankmap launch wrote (names ``source``).
    """
    import json

    try:
        doc = json.loads(text)
        files = doc["files"]
        if doc.get("written_by") != "rankmap launch" or not all(
                isinstance(k, str) and "/" not in k and k not in ("", ".", "..") and isinstance(v, str)
                for k, v in files.items()):
            raise ValueError
    except (ValueError, TypeError, KeyError, AttributeError):
        raise LaunchError(f"{source}: not the record of launch files that rankmap launch writes: move it away") from None
    return dict(files)


def launch_files(rm: RankMap, fmt: str, opts: LaunchOptions, launch_dir: str | Path) -> dict[str, str]:
    """``{file name: text}`` of one format, ready for :func:`rankmap.fileio.atomic_write_files`.

    Parameters
    ----------
    rm : RankMap
    fmt : str
        One of :data:`FORMATS`.
    opts : LaunchOptions
    launch_dir : str or Path
        Where the files will be written, as the hosts see it: scripts name their neighbours
        by this path, relative to the work directory unless it is absolute.

    Raises
    ------
    LaunchError
        Unknown format, options the format cannot carry, a bad or unresolvable host.

    Examples
    --------
    >>> from rankmap.job.rank_map import RankMap
    >>> from rankmap.job.spec import JobSpec
    >>> rm = RankMap(job=JobSpec(tp=2, dp=2, num_micro_batches=1), cluster_name="c", cluster_hash="x",
    ...              hosts=("node8", "node66"), tor_groups=("t", "t"), rails=((0, 1), (0, 1)), nproc_per_node=2)
    >>> files = launch_files(rm, "mpi", LaunchOptions(rankmap_path="/s/rankmap.json", resolve=False), "/tmp/l")
    >>> print(files["rankfile"], end="")
    rank 0=node8 slot=0
    rank 1=node8 slot=1
    rank 2=node66 slot=0
    rank 3=node66 slot=1
    """
    if fmt not in FORMATS:
        raise LaunchError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    master = check_hosts(rm, opts)
    launch_dir = str(Path(launch_dir))
    if fmt == "torchrun":
        return torchrun_files(rm, opts, master)
    if fmt == "slurm":
        return slurm_files(rm, opts, launch_dir, master)
    if fmt == "mpi":
        return mpi_files(rm, opts, launch_dir, master)
    return deepspeed_files(rm, opts, launch_dir, master)


def check_against_map(rm: RankMap, *, rankfile: list[RankfileEntry] | None = None,
                      hostfile: list[tuple[str, int]] | None = None, slurm_hosts: list[str] | None = None) -> None:
    """Check read-back launch files against the map: an Open MPI rankfile, a DeepSpeed hostfile
    and the hosts of a SLURM_HOSTFILE, each when given.

    Raises
    ------
    LaunchError
        Naming the first rank or host whose placement differs from the map.
    """
    if rankfile is not None:
        check_rankfile(rm, rankfile)
    if hostfile is not None:
        check_deepspeed_hostfile(rm, hostfile)
    if slurm_hosts is not None:
        check_slurm_hosts(rm, slurm_hosts)
