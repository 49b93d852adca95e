"""Where verdicts are remembered: one JSON file per verdict under the user's cache folder.

The folder is `$POOL3D_CACHE_DIR`, else the platform's user cache folder
(`$XDG_CACHE_HOME/pool3d_pass` or `~/.cache/pool3d_pass` on Linux,
`~/Library/Caches/pool3d_pass` on macOS, `%LOCALAPPDATA%/pool3d_pass/Cache`
on Windows), then `v<FORMAT>/` inside it: a later format lives beside this
one and neither reads the other's files.

* One file per verdict, named by its key's digest (key.py), holding the key
  itself: a file whose format, device or subject is not the one asked for
  (another version's, a digest collision), or that does not parse (a
  partial write by a killed process, a disk error), is treated as absent:
  the verdict is measured again and the file replaced.
* Writes are atomic: a temporary file in the same folder, then
  `os.replace`, so a reader sees the old file or the new one, never half.
* `lock()` is a file lock (`fcntl.flock` on `v<FORMAT>/.lock`) that
  calibrations hold, so two processes wanting the same classes measure them
  once: the second waits, then finds the first's verdicts.
* A folder that cannot be written is not an error: the verdict then lives
  for this process only, and a WARNING says so once.

No JAX is imported here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from pool3d_pass import environment
from pool3d_pass.calibration.key import NUMERICS, Device, Subject, digest

FORMAT = 1
logger = logging.getLogger("pool3d_pass")
_parsed: dict[str, tuple] = {}  # path -> ((mtime, size, inode), entry): a compile re-reads only a changed file


def cache_dir() -> Path:
    """The cache folder (without the format's subfolder): $POOL3D_CACHE_DIR, else the user's cache folder."""
    chosen = os.environ.get(environment.CACHE_DIR, "").strip()
    if chosen:
        return Path(chosen).expanduser()
    home = Path.home()
    if sys.platform == "darwin":
        return home / "Library" / "Caches" / "pool3d_pass"
    if sys.platform.startswith("win"):
        return Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local") / "pool3d_pass" / "Cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache") / "pool3d_pass"


def _valid_verdict(kind: str, verdict) -> bool:
    if not isinstance(verdict, dict):
        return False
    if kind == NUMERICS:
        return isinstance(verdict.get("passed"), bool)
    return isinstance(verdict.get("rewrite"), bool) and isinstance(verdict.get("ratio"), (int, float))


class Store:
    """The verdicts of one cache folder (`root`, default `cache_dir()`)."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root is not None else cache_dir()
        self.folder = self.root / f"v{FORMAT}"
        self._memory: dict[str, dict] = {}  # verdicts that could not be written

    def path(self, device: Device, subject: Subject) -> Path:
        return self.folder / f"{subject.kind}-{digest(device, subject)}.json"

    def read(self, device: Device, subject: Subject) -> dict | None:
        """The stored entry for `subject` on `device` ({"verdict", "stored", ...}), or None (absent, corrupt, foreign)."""
        path = self.path(device, subject)
        if path.name in self._memory:
            return self._memory[path.name]
        try:
            stat = path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
            cached = _parsed.get(str(path))
            if cached is not None and cached[0] == stamp:
                entry = cached[1]
            else:
                entry = json.loads(path.read_text(encoding="utf-8"))
                _parsed[str(path)] = (stamp, entry)
        except (OSError, ValueError):
            return None
        if (not isinstance(entry, dict) or entry.get("format") != FORMAT
                or entry.get("device") != dataclasses.asdict(device)
                or {k: v for k, v in (entry.get("subject") or {}).items() if k != "shape"}
                != json.loads(json.dumps(subject.identity()))
                or not _valid_verdict(subject.kind, entry.get("verdict"))):
            return None
        return entry

    def write(self, device: Device, subject: Subject, verdict: dict) -> dict:
        """Store `verdict` for `subject` on `device` (atomically); the entry written."""
        entry = {"format": FORMAT, "device": dataclasses.asdict(device),
                 "subject": json.loads(json.dumps(dataclasses.asdict(subject))), "verdict": verdict,
                 "stored": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                 "by": f"{socket.gethostname()} pid {os.getpid()}"}
        path = self.path(device, subject)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=self.folder)
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as file:
                    json.dump(entry, file, indent=1, sort_keys=True)
                os.replace(temporary, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
            entry["path"] = str(path)
        except OSError as error:
            _warn_unwritable(str(self.folder), f"{type(error).__name__}: {error}")
            self._memory[path.name] = entry
            entry["path"] = "this process only (the cache folder cannot be written)"
        return entry

    def entries(self) -> list[dict]:
        """Every readable entry of this format, oldest first, each with its "path" (for listings)."""
        found = []
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else ():
            try:
                entry = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                found.append({"path": str(path), "unreadable": True})
                continue
            if isinstance(entry, dict) and entry.get("format") == FORMAT:
                entry["path"] = str(path)
                found.append(entry)
        return sorted(found, key=lambda e: str(e.get("stored", "")))

    @contextlib.contextmanager
    def lock(self, timeout_s: float) -> Iterator[bool]:
        """Hold the folder's file lock (True), or give up after `timeout_s` (False); never raises."""
        try:
            import fcntl
        except ImportError:  # no flock (Windows): calibrations are not serialised across processes
            yield True
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle = open(self.folder / ".lock", "a+")  # noqa: SIM115 - held across the yield
        except OSError:
            yield True
            return
        deadline = time.monotonic() + timeout_s
        held = False
        try:
            while True:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    held = True
                    break
                except OSError:
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(0.05)
            yield held
        finally:
            if held:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            handle.close()


@functools.cache
def _warn_unwritable(folder: str, why: str) -> None:
    logger.warning("pool3d_pass calibration: cannot write the verdict cache %s (%s); verdicts are kept for this "
                   "process only (set %s to a writable folder)", folder, why, environment.CACHE_DIR)
