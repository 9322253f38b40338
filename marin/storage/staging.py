"""Attempt-scoped staging: a step writes into a folder of its own attempt, published only under its lease.

A runner paused past its lease (SIGSTOP, a long GC, a partition) can resume and write any file at
any time, through marin.storage or not (tensorstore writes Levanter's checkpoints directly). So a step
never writes its final folder. Its attempt gets a private folder,

    <out>/.executor_attempt.<NNN>-<owner8>/                      the step's files (its output_path)
    <out>/.executor_attempt.<NNN>-<owner8>/.executor_status etc. executor files waiting to be published

and every write into `<out>` itself is a *move* out of that folder: a rename locally, a server-side
copy on GCS and S3. A runner taking a step over first copies the previous attempt's files into its
own folder (to resume from its shards and checkpoints; a copy, so that no file the old runner still
holds open is ever published) and deletes that folder, or just deletes it; from then on every move the
old runner still tries fails because its source is gone, and anything it writes lands in a folder
nobody publishes. The executor files a runner publishes (`.executor_info`, the status, the manifest) are
written into its folder *before* its last lease check, so after that check it only moves. (One folder
per attempt, no sub-folders of its own: creating and removing folders is what costs most locally.)

Names starting with `.tmp-` are reserved for writes in progress (marin.storage writes a file under such a
name, then renames it into place). A complete output never holds one: publication fails naming every
`.tmp-*` file or folder it finds (`TemporaryNamesError`), whether the step named a file so or a writer
died before renaming its file, rather than leave it out of the output or its manifest; and an attempt
adopting an earlier one's files leaves that attempt's `.tmp-*` files behind, with a warning naming them
(a writer that was cut off never finished them, so nothing resumes from them).

`published_path` maps a path inside a staging folder to where it will be published, for what a step
records about itself (relative paths in its outputs, a run id made of its folder's name).
"""

from __future__ import annotations

import logging
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from marin.storage.backends import backend_for
from marin.storage.files import FSYNC, REMOTE_PARALLELISM, list_dir, write_bytes
from marin.storage.layout import ATTEMPT_PREFIX as ATTEMPT
from marin.storage.layout import EXECUTOR_FILE_PREFIX
from marin.storage.layout import TRASH_DIR as TRASH
from marin.storage.layout import is_bookkeeping as _is_bookkeeping
from marin.storage.paths import is_local, join, strip_protocol
from marin.storage.paths import published_path as published_path  # re-exported: steps import it from here

logger = logging.getLogger(__name__)

TEMP_PREFIX = ".tmp-"
"""Names of writes in progress: never part of a published output."""


class Fenced(RuntimeError):
    """A move out of a staging folder found its source gone: another runner took the step over."""


class TemporaryNamesError(ValueError):
    """A step's output holds files or folders named `.tmp-*` (reserved for writes in progress); nothing is published."""


def _temporary(rel: str) -> bool:
    return any(part.startswith(TEMP_PREFIX) for part in rel.split("/"))


def staging_path(output_path: str, attempt: str) -> str:
    return join(output_path, ATTEMPT + attempt)


def attempts(output_path: str) -> list[str]:
    """The attempts that have a staging folder in `<out>`, oldest first."""
    names = [n[len(ATTEMPT) :] for n in list_dir(output_path) if n.startswith(ATTEMPT)]
    return sorted(names, key=lambda n: (int(n.split("-")[0]) if n.split("-")[0].isdigit() else -1, n))


def _is_output(name: str) -> bool:
    return not name.startswith(EXECUTOR_FILE_PREFIX) and not name.startswith(TEMP_PREFIX)


def adopt(previous: str, target: str) -> None:
    """Copies the files of an earlier attempt's staging folder into `target`, then deletes that folder.

    A copy, never a rename: the earlier runner may be paused, not dead, with files of its folder open.
    Renamed, those very inodes would be published and its next `write()` would change an output marked
    SUCCESS; copied, its writes land in inodes nobody publishes (and that are gone with its folder).
    Locally the copy is made by the kernel (`shutil.copy2`); on a bucket a server-side copy per object.
    """
    left: list[str] = []
    if is_local(previous):
        src, dst = strip_protocol(previous), strip_protocol(target)
        shutil.rmtree(dst, ignore_errors=True)

        def ignore(folder: str, names: list[str]) -> set[str]:
            temps = {n for n in names if n.startswith(TEMP_PREFIX)}
            left.extend(os.path.relpath(os.path.join(folder, n), src) for n in sorted(temps))
            return _not_adopted(folder, names) | temps

        shutil.copytree(
            src, dst, symlinks=True, ignore=ignore, ignore_dangling_symlinks=True, copy_function=_copy_if_there
        )
    else:
        store = backend_for(previous)
        names = [rel for rel, _ in store.list_files(previous) if not _not_resumed(rel)]
        left = [rel for rel in names if _temporary(rel)]
        names = [rel for rel in names if not _temporary(rel)]
        _parallel(lambda rel: store.copy(join(previous, rel), join(target, rel)), names)
    if left:
        logger.warning(
            "not resumed from %s: %s (writes in progress of a runner that was cut off)", previous, _listed(left)
        )
    discard(previous)


def _listed(rels: list[str], limit: int = 10) -> str:
    return ", ".join(rels[:limit]) + (f" and {len(rels) - limit} more" if len(rels) > limit else "")


def _refuse_temporary(staging: str, rels: list[str]) -> None:
    if rels:
        raise TemporaryNamesError(
            f"the step's output holds {len(rels)} file(s) or folder(s) named {TEMP_PREFIX}*: {_listed(sorted(rels))} "
            f"(in {staging}). Names starting with {TEMP_PREFIX} are reserved for writes in progress and are never "
            "published: rename them, or delete them before the step returns (a writer that died mid-write leaves "
            "one too; the next attempt does not resume from it)."
        )


def _temporary_local(root: str) -> list[str]:
    """Relative paths of the `.tmp-*` files and folders under a local staging folder (not its executor files)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        top = dirpath == root
        for name in filenames + dirnames:
            if name.startswith(TEMP_PREFIX):
                found.append(os.path.relpath(os.path.join(dirpath, name), root))
        dirnames[:] = [
            d
            for d in dirnames
            if not d.startswith(TEMP_PREFIX) and not (top and (d == TRASH or d.startswith(EXECUTOR_FILE_PREFIX)))
        ]
    return found


def _not_resumed(rel: str) -> bool:
    """The staged executor files and the trash of an attempt are its own, never resumed from."""
    top = rel.split("/", 1)[0]
    return top == TRASH or (top.startswith(EXECUTOR_FILE_PREFIX) and "/" not in rel)


def _not_adopted(folder: str, names: list[str]) -> set[str]:
    if os.path.basename(folder).startswith(ATTEMPT):
        return {n for n in names if _not_resumed(n) and (n == TRASH or not os.path.isdir(os.path.join(folder, n)))}
    return set()


def _copy_if_there(src: str, dst: str) -> None:
    """A file the earlier runner removed while it was being copied is simply not resumed from."""
    try:
        shutil.copy2(src, dst)
    except FileNotFoundError:
        pass


def discard(staging: str) -> None:
    """Deletes a staging folder and everything in it."""
    if is_local(staging):
        shutil.rmtree(strip_protocol(staging), ignore_errors=True)
        return
    store = backend_for(staging)
    _parallel(lambda rel: store.delete(join(staging, rel)), [rel for rel, _ in store.list_files(staging)])


def discard_all(output_path: str) -> None:
    """Deletes every staging folder of a step (after its SUCCESS): nothing in them is needed any more."""
    for name in attempts(output_path):
        staging = staging_path(output_path, name)
        if is_local(staging):
            try:
                os.rmdir(strip_protocol(staging))  # the usual case: everything was moved out
                continue
            except OSError:
                pass
        discard(staging)


def stage_commit_file(staging: str, name: str, data: bytes) -> None:
    """Writes an executor file (`.executor_status`, ...) into the staging folder, to be published later.

    Locally a plain write: only this runner reads it (to move it out), and a half-written one is never
    moved, so the usual temporary file and rename would buy nothing.
    """
    path = join(staging, name)
    if not is_local(path):
        write_bytes(path, data)
        return
    local = strip_protocol(path)
    try:
        f = open(local, "wb")
    except FileNotFoundError:
        os.makedirs(os.path.dirname(local), exist_ok=True)
        f = open(local, "wb")
    with f:
        f.write(data)


def publish_commit_file(staging: str, output_path: str, name: str) -> None:
    """Moves a staged executor file into `<out>`; Fenced when the staging folder was taken over."""
    source, target = join(staging, name), join(output_path, name)
    if is_local(source):
        try:
            os.replace(strip_protocol(source), strip_protocol(target))
        except FileNotFoundError as exc:
            raise Fenced(f"{source} is gone: another runner took {output_path} over") from exc
        return
    if not backend_for(source).copy(source, target):
        raise Fenced(f"{source} is gone: another runner took {output_path} over")


@dataclass(frozen=True)
class Publication:
    """What publishing a staging folder will do, listed before the runner's last lease check."""

    staging: str
    """The attempt's staging folder."""
    output_path: str
    """The step's final folder."""
    outputs: list[str]
    """The staged files to move in (locally: top-level names; on a bucket: every object)."""
    stale: list[tuple[str, str | None]]
    """The final folder's own files to remove first, with the version each had when listed (buckets)."""


def prepare_publication(staging: str, output_path: str) -> Publication:
    """Lists what `publish` will move and remove; locally, fsyncs the staged files and makes the trash.

    Everything `publish` does afterwards is a move out of, or into, the staging folder (or a delete
    conditional on a version listed here), so it fails once another runner took the staging folder.
    """
    if is_local(staging):
        src, dst = strip_protocol(staging), strip_protocol(output_path)
        _refuse_temporary(staging, _temporary_local(src))
        if FSYNC:
            fsync_tree(src)
        outputs = sorted(n for n in os.listdir(src) if _is_output(n))
        stale = sorted((n, None) for n in (os.listdir(dst) if os.path.isdir(dst) else []) if _is_output(n))
        if stale:
            os.makedirs(os.path.join(src, TRASH), exist_ok=True)
        return Publication(staging, output_path, outputs, stale)
    store = backend_for(staging)
    listed = [rel for rel, _ in store.list_files(staging)]
    _refuse_temporary(staging, [rel for rel in listed if _temporary(rel) and not _not_resumed(rel)])
    outputs = sorted(rel for rel in listed if not _is_bookkeeping(rel))
    wanted = set(outputs)
    stale = sorted(
        (rel, version)
        for rel, version in store.list_versions(output_path)
        if not _is_bookkeeping(rel) and rel not in wanted
    )
    return Publication(staging, output_path, outputs, stale)


def publish(pub: Publication) -> None:
    """Makes the final folder's own files exactly the staged ones; Fenced once the step was taken over.

    Executor files (`.executor_*`: status, lease, logs, the attempts folder) are left alone. Locally the
    final folder's old files are moved into the staging folder's trash (a rename that fails once that
    folder is gone), then the staged ones are renamed in. On a bucket the old objects are deleted only if
    unchanged since listed, then the staged ones are copied in (a copy fails once its source is gone).
    """
    gone = f"{pub.staging} is gone: another runner took {pub.output_path} over"
    if is_local(pub.staging):
        src, dst = strip_protocol(pub.staging), strip_protocol(pub.output_path)
        trash = os.path.join(src, TRASH)
        try:
            for name, _ in pub.stale:
                if os.path.lexists(os.path.join(dst, name)):
                    os.rename(os.path.join(dst, name), os.path.join(trash, name))
            for name in pub.outputs:
                os.rename(os.path.join(src, name), os.path.join(dst, name))
        except FileNotFoundError as exc:
            raise Fenced(gone) from exc
        return
    store = backend_for(pub.staging)
    removed = _parallel(lambda item: store.delete_if_unchanged(join(pub.output_path, item[0]), item[1]), pub.stale)
    if not all(removed):
        raise Fenced(f"{pub.output_path} changed since it was listed: another runner took it over")
    copied = _parallel(lambda rel: store.copy(join(pub.staging, rel), join(pub.output_path, rel)), pub.outputs)
    if not all(copied):
        raise Fenced(gone)


def fsync_tree(root: str) -> None:
    """fsyncs every file and every sub-folder under a local `root`, all at once.

    The calls run concurrently so the file system can commit them together (ext4 turns concurrent
    fsyncs into one journal commit): a step's publication costs about one commit, not one per file.
    `root` itself is not synced: its entries are renamed away, into the final folder.
    """
    paths = []
    for dirpath, dirnames, filenames in os.walk(root):
        # the commit folder's entries are renamed away, never used from there: only its files count
        paths += [os.path.join(dirpath, d) for d in dirnames if not (dirpath == root and d == TRASH)]
        paths += [os.path.join(dirpath, n) for n in filenames]
    if len(paths) == 1:
        _fsync(paths[0])
    elif paths:
        list(_fsync_pool().map(_fsync, paths))


def sync_folder(path: str) -> None:
    """fsyncs a local folder, so the renames into it survive power loss (a no-op on buckets or with MARIN_FSYNC=0)."""
    if FSYNC and is_local(path):
        _fsync(strip_protocol(path))


def _fsync(path: str) -> None:
    if os.path.islink(path):
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_pool: ThreadPoolExecutor | None = None


def _fsync_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="marin-fsync")
    return _pool


def _parallel(fn, items: list) -> list:
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(REMOTE_PARALLELISM, len(items))) as pool:
        return list(pool.map(fn, items))
