"""The agent's own files, which the workspace tools never read, write, move or delete.

A session's workspace can contain the agent's state: the project is `$HOME` (and so holds
`~/.local/state/steerable-bridge`), or the store was put in the project (`--storage
./x.db`). A model that could write the session store, the approvals file or its key
could grant itself permissions, so `Workspace.resolve` asks `AgentFiles.refusal(real)`
about every path a tool names and refuses the agent's files with `agent_state`. Three
kinds of entry are kept: a *file family* (`keep_file`: the file and every name in its
folder that begins with its name — `sessions.db-wal`, `-shm`, `-journal`,
`approvals.json.lock` and temporary siblings, present or not yet), a *tree*
(`keep_tree`: the state folder, the spill folder, everything under them), and a single
*file* (`keep_file(path, family=False)`: a log file). A path is refused when, compared
case-insensitively (so a case variant on a case-insensitive disk is caught too), it
names an entry; when it is a file whose inode (device and inode number) is one of the
entries' files — a hard link made under another name; or when it does not exist yet but
its folder is an entry's folder by inode (a case or mount variant of the folder). `..`
and symbolic links are gone before the check: it is given the resolved path. Names are
compared without touching the disk; inodes cost a few `stat` calls, and the folders and
trees are only listed (boundedly, reading inode numbers from the listing) for a target
that has more than one link.
`AGENT_FILES` is the process's registry: the composition root adds what it keeps, and
every `Workspace` consults it by default, including workspaces the transports make for
sessions long after start-up. It only ever grows and is read without a lock. Commands and
MCP servers in the sandbox are kept off the same files by `masks(roots)`: read-only binds
and empty tmpfs mounts laid over the writable workspace (`bwrap.py`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from steerable_bridge.runtime.ports.environment import WorkspaceError

__all__ = ["AGENT_FILES", "AgentFiles"]

TREE_SCAN_LIMIT = 20_000
"""Entries listed under the trees when looking for a hard link's other name; beyond it the
write is refused, since the link cannot be shown to be harmless."""


def _fold(path: str) -> str:
    return os.path.normcase(path).casefold()


def _under(folded: str, folded_root: str) -> bool:
    return folded == folded_root or folded.startswith(folded_root.rstrip(os.sep) + os.sep)


@dataclass(frozen=True, slots=True)
class _Entry:
    folder: str
    """Real path of the folder (the tree itself for a tree)."""
    name: str | None
    """The file's name; None for a tree."""
    family: bool
    """Names beginning with `name` belong to it too."""
    what: str

    def names(self, real: str) -> bool:
        folded = _fold(real)
        if self.name is None:
            return _under(folded, _fold(self.folder))
        folder, name = os.path.split(folded)
        if folder != _fold(self.folder):
            return False
        own = self.name.casefold()
        return name.startswith(own) if self.family else name == own


class AgentFiles:
    """The files one agent process keeps; see the module docstring."""

    def __init__(self) -> None:
        self._entries: tuple[_Entry, ...] = ()

    def keep_file(self, path: str, what: str, *, family: bool = True) -> None:
        """Protect `path` (and, with `family`, every name in its folder starting with it)."""
        folder, name = os.path.split(os.path.realpath(os.path.expanduser(path)))
        self._add(_Entry(folder=folder, name=name, family=family, what=what))

    def keep_tree(self, folder: str, what: str) -> None:
        """Protect `folder` and everything under it."""
        real = os.path.realpath(os.path.expanduser(folder))
        self._add(_Entry(folder=real, name=None, family=False, what=what))

    def _add(self, entry: _Entry) -> None:
        if entry not in self._entries:
            self._entries = (*self._entries, entry)

    def refusal(self, real: str, shown: str | None = None) -> WorkspaceError | None:
        """The `agent_state` error when the resolved path `real` is one of the agent's
        files (by name, folder inode or file inode); None when a tool may use it."""
        entries = self._entries
        if not entries:
            return None
        found = next((e for e in entries if e.names(real)), None)
        if found is None:
            found = self._by_inode(real, entries)
        if found is None:
            return None
        return WorkspaceError(
            "agent_state",
            f"{shown or real!r} is the agent's own {found.what}; workspace tools never read,"
            " write, move or delete it, so it was not touched — work on project files"
            " instead (to keep the agent's state out of a project, start the agent with"
            " --storage outside it, e.g. the default)",
        )

    def masks(self, roots: Sequence[str]) -> list[str]:
        """bubblewrap arguments that keep the agent's files inside the writable `roots` out
        of a sandboxed command's reach (mounted after the roots' own binds): a tree is hidden
        under an empty tmpfs, each existing file of a family is bound read-only over itself,
        so a command can neither read the approvals key nor rewrite the store or its `-wal`.
        A tree that *is* a root is left alone (hiding it would hide the whole workspace)."""
        folded_roots = [_fold(os.path.realpath(root)) for root in roots]
        out: list[str] = []
        for entry in self._entries:
            folded = _fold(entry.folder)
            if not any(_under(folded, root) for root in folded_roots):
                continue
            if entry.name is None:
                if folded not in folded_roots and os.path.isdir(entry.folder):
                    out += ["--tmpfs", entry.folder]
                continue
            try:
                names = sorted(os.listdir(entry.folder))
            except OSError:
                continue
            for name in names:
                if name.startswith(entry.name) if entry.family else name == entry.name:
                    path = os.path.join(entry.folder, name)
                    if os.path.isfile(path):
                        out += ["--ro-bind", path, path]
        return out

    # -- by inode ------------------------------------------------------------------------------

    def _by_inode(self, real: str, entries: tuple[_Entry, ...]) -> _Entry | None:
        try:
            target = os.stat(real)
        except OSError:
            return self._by_folder(real, entries)
        if stat.S_ISDIR(target.st_mode):
            ident = (target.st_dev, target.st_ino)
            return next((e for e in entries if e.name is None and _ident(e.folder) == ident), None)
        ident = (target.st_dev, target.st_ino)
        for entry in entries:
            if entry.name is not None and _ident(os.path.join(entry.folder, entry.name)) == ident:
                return entry
        if target.st_nlink < 2:
            return None  # its only name is `real`, which is not one of ours
        for entry in entries:
            home = _ident(entry.folder)
            if home is None or home[0] != target.st_dev:
                continue  # a hard link never crosses devices
            if _holds(entry, target.st_ino):
                return entry
        return None

    def _by_folder(self, real: str, entries: tuple[_Entry, ...]) -> _Entry | None:
        """A name that does not exist yet, in a folder that is an entry's folder by inode."""
        folder, name = os.path.split(real)
        ident = _ident(folder)
        if ident is None:
            return None
        for entry in entries:
            if _ident(entry.folder) != ident:
                continue
            if entry.name is None:
                return entry
            own = entry.name.casefold()
            if name.casefold() == own or (entry.family and name.casefold().startswith(own)):
                return entry
        return None


def _ident(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino)


def _holds(entry: _Entry, inode: int) -> bool:
    """Whether one of the entry's files (on the folder's device) has inode number `inode`;
    True too when the tree is larger than `TREE_SCAN_LIMIT`. Reads directory entries only
    (their inode numbers come with the listing: no `stat` per file)."""
    if entry.name is not None:
        own = entry.name.casefold()
        try:
            with os.scandir(entry.folder) as listing:
                for item in listing:
                    mine = (
                        item.name.casefold().startswith(own) if entry.family else item.name == own
                    )
                    if mine and item.inode() == inode:
                        return True
        except OSError:
            pass
        return False
    seen = 0
    pending = [entry.folder]
    while pending:
        try:
            with os.scandir(pending.pop()) as listing:
                for item in listing:
                    seen += 1
                    if seen > TREE_SCAN_LIMIT:
                        return True
                    if item.is_dir(follow_symlinks=False):
                        pending.append(item.path)
                    elif item.inode() == inode and item.is_file(follow_symlinks=False):
                        return True
        except OSError:
            continue
    return False


AGENT_FILES = AgentFiles()
"""This process's own files (filled by the composition root)."""
