"""Launch files that a new rank map in the same folder makes stale.

``rankmap launch`` writes its files beside a rank map (a ``launch-FORMAT`` folder, or straight
into ``--out`` with a record, :data:`rankmap.launch.formats.MANIFEST`, naming them and their
checksums). A new ``plan`` or ``replan`` into that folder changes the host order those files
start, so they are deleted with the old map, or the new map is refused (exit 3) where a file
there is the user's (an edited script, a note, a link), which rankmap never deletes.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from rankmap.errors import RankmapError
from rankmap.fileio import read_bytes, read_text
from rankmap.launch.formats import FILES, FORMATS, FORMER_FILES, MANIFEST, recorded_files

__all__ = ["stale_launch_folders", "stale_launch_files"]


def stale_launch_folders(out: Path) -> list[Path]:
    """The folders ``rankmap launch`` writes beside a rank map by default (``launch-FORMAT``)
    that ``out`` holds: launch files made for the map a new one in ``out`` replaces.

    Raises RankmapError (exit 3) for such a folder holding anything but the files launch writes
    there (:data:`rankmap.launch.formats.FILES`): a subfolder (``launch --plan-in-allocation``
    keeps each allocation's plan in one), or a file of the user's (notes, an edited script).
    Those are not deleted, so the new map is refused until the folder is moved away. So is a
    symbolic link named ``launch-FORMAT``: launch writes through it, and rankmap does not delete
    files in the folder it points to (shared by other maps, perhaps), which would then go stale.
    """
    for link in (out / f"launch-{f}" for f in FORMATS):
        if link.is_symlink():
            raise RankmapError(f"{link}: a symbolic link (to {os.readlink(link)}): the launch files behind it, "
                               f"made for the map in {out}, would be stale beside a new map, and rankmap does not "
                               f"delete files through a link: remove {link} or give another --out")
    stale = [out / f"launch-{f}" for f in FORMATS if (out / f"launch-{f}").is_dir()]
    for folder in stale:
        fmt = folder.name.removeprefix("launch-")
        own = FILES[fmt] + FORMER_FILES.get(fmt, ()) + (MANIFEST,)
        other = sorted(e.name for e in folder.iterdir() if e.is_symlink() or not e.is_file() or e.name not in own)
        if other:
            raise RankmapError(f"{folder}: launch files of the map in {out} (a new map there makes them stale) "
                               f"beside {', '.join(other[:3])}{' ...' if len(other) > 3 else ''}, which launch "
                               f"does not write: move {folder} away or give another --out")
    return stale


def stale_launch_files(out: Path, keep: tuple = ()) -> list[Path]:
    """Launch files that ``rankmap launch --out OUT`` wrote straight into ``out`` (its record,
    :data:`rankmap.launch.formats.MANIFEST`, names them), the record last: a new map in ``out``
    makes them stale (they start the old host order). ``keep``: names the new map writes itself.

    Raises RankmapError (exit 3), deleting nothing, for a recorded file the user changed since
    launch wrote it (an edited script), or one that is now a link or not a file, as
    :func:`stale_launch_folders` does for a ``launch-FORMAT`` folder holding the user's files.
    """
    record = out / MANIFEST
    if not record.is_file() or record.is_symlink():
        return []
    stale, changed = [], []
    for name, digest in sorted(recorded_files(read_text(record), str(record)).items()):
        path = out / name
        if name in keep or not (path.exists() or path.is_symlink()):
            continue  # the new map rewrites it (a DeepSpeed hostfile), or the user removed it
        if path.is_symlink() or not path.is_file() or hashlib.sha256(read_bytes(path)).hexdigest() != digest:
            changed.append(name)
        stale.append(path)
    if changed:
        raise RankmapError(f"{out}: launch files of an earlier map ({', '.join(changed[:3])}"
                           f"{' ...' if len(changed) > 3 else ''}) changed since rankmap launch wrote them; a new map "
                           f"there makes them stale, and rankmap does not delete your edits: move them away or give "
                           f"another --out")
    return stale + [record]
