"""nbgitpuller links: one click clones (first time) or merges (afterwards) the collection into a
student's hub home and opens a notebook.

The form is nbgitpuller's (docs: "url-options", and its link generator, which encodes each value as
JavaScript's encodeURIComponent does)::

    https://HUB/hub/user-redirect/git-pull?repo=<repo>&branch=<branch>&targetPath=<dir>&urlpath=lab/tree/<dir>/<path>

``<dir>`` is the folder nbgitpuller clones into: the repository's name (its URL's last part,
without ``.git``), unless ``target`` names another. ``targetPath`` is always in the link: without
it nbgitpuller 1.3 names the folder after the URL's last part *with* ``.git`` (handlers.py:
``repo.rstrip('/').split('/')[-1]``), so a clone URL such as ``https://github.com/you/course.git``
was cloned into ``course.git/`` while the link opened ``course/...``: the first link every student
clicked was an error (lecturer walkthrough, problem 1).
"""

from __future__ import annotations

from urllib.parse import quote

__all__ = ["nbgitpuller_link", "clone_folder"]


def clone_folder(repo: str) -> str:
    """The folder nbgitpuller clones ``repo`` into: its last path part without ``.git``."""
    name = repo.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return name[:-4] if name.endswith(".git") else name


def nbgitpuller_link(repo: str, path: str, hub: str, *, branch: str = "main",
                     target: str | None = None, interface: str = "lab") -> str:
    """The link that pulls ``repo`` at ``branch`` into the user's home on ``hub`` and opens
    ``path`` (relative to the repository root) in JupyterLab (``interface="lab"``) or the classic
    tree (``"tree"``)."""
    for name, value in (("repo", repo), ("path", path), ("hub", hub), ("branch", branch)):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"nbgitpuller_link: {name} must be a non-empty string, got {value!r}")
    if interface not in ("lab", "tree"):
        raise ValueError(f"nbgitpuller_link: interface must be 'lab' or 'tree', got {interface!r}")
    if not hub.startswith(("http://", "https://")):
        raise ValueError(f"nbgitpuller_link: hub must be the hub's http(s) address, got {hub!r}")
    folder = target or clone_folder(repo)
    if not folder or folder in (".", "..") or "/" in folder:
        raise ValueError(f"nbgitpuller_link: target must be a folder name in the student's home, "
                         f"got {folder!r}")
    urlpath = f"{'lab/tree' if interface == 'lab' else 'tree'}/{folder}/{path.lstrip('/')}"
    query = [("repo", repo), ("branch", branch), ("targetPath", folder), ("urlpath", urlpath)]
    return (f"{hub.rstrip('/')}/hub/user-redirect/git-pull?"
            + "&".join(f"{k}={quote(v, safe='')}" for k, v in query))
