"""megtrace.hub: MegEngine 1.13's model hub (load, list, help, import_module, pretrained,
load_serialized_obj_from_url) with MegEngine's names, defaults and errors.

Beyond MegEngine, `repo_info` may be a local folder holding hubconf.py or a
"file:///path/to/git/repo[:branch]" URL, and `git_host` may be "file:///root": these work
offline. Network sources fail within seconds, naming the URL, when the host cannot be reached."""
from __future__ import annotations

import builtins
import functools
import hashlib
import os
import sys
import types
from typing import Any, Callable
from urllib.parse import urlparse

from .. import serialization
from ..distributed import is_distributed
from ..logger import get_logger
from .const import (CACHE_FOLDER_NAME, DEFAULT_CACHE_DIR, DEFAULT_GIT_HOST, DEFAULT_PROTOCOL,
                    ENV_MGE_HOME, ENV_XDG_CACHE_HOME, HUBCONF, HUBDEPENDENCY)
from .download import download_from_url
from .exceptions import InvalidProtocol, InvalidRepo
from .fetcher import GitFileFetcher, GitHTTPSFetcher, GitSSHFetcher
from .tools import cd, check_module_exists, load_module

__all__ = ["list", "load", "help", "load_serialized_obj_from_url", "pretrained",
           "import_module"]

logger = get_logger(__name__)

PROTOCOLS = {"HTTPS": GitHTTPSFetcher, "SSH": GitSSHFetcher}


def _get_megengine_home() -> str:
    """$MGE_HOME, else $XDG_CACHE_HOME/megtrace (XDG Base Directory layout)."""
    default = os.path.join(os.getenv(ENV_XDG_CACHE_HOME, DEFAULT_CACHE_DIR), CACHE_FOLDER_NAME)
    return os.path.expanduser(os.getenv(ENV_MGE_HOME, default))


def _local_folder(repo_info: str) -> str | None:
    path = os.path.expanduser(repo_info)
    return os.path.abspath(path) if os.path.isdir(path) else None


def _get_repo(git_host: str, repo_info: str, use_cache: bool = False, commit: str = None,
              protocol: str = DEFAULT_PROTOCOL) -> str:
    local = _local_folder(repo_info)
    if local is not None:
        if commit is not None:
            raise InvalidRepo(f"repo_info: '{repo_info}' is a local folder, which has no "
                              f"commit {commit!r} to check out; give a file:// git URL instead")
        return local
    if repo_info.startswith("file://") or git_host.startswith("file://"):
        fetcher = GitFileFetcher
    elif protocol in PROTOCOLS:
        fetcher = PROTOCOLS[protocol]
    else:
        raise InvalidProtocol("Invalid protocol, the value should be one of {}.".format(
            ", ".join(PROTOCOLS.keys())))
    cache_dir = os.path.join(_get_megengine_home(), "hub")
    os.makedirs(cache_dir, exist_ok=True)
    with cd(cache_dir):
        repo_dir = fetcher.fetch(git_host, repo_info, use_cache, commit)
    return os.path.join(cache_dir, repo_dir)


def _check_dependencies(module: types.ModuleType) -> None:
    dependencies = getattr(module, HUBDEPENDENCY, None)
    if not dependencies:
        return
    missing_deps = [m for m in dependencies if not check_module_exists(m)]
    if missing_deps:
        raise RuntimeError("Missing dependencies: {}".format(", ".join(missing_deps)))


def _init_hub(repo_info: str, git_host: str, use_cache: bool = True, commit: str = None,
              protocol: str = DEFAULT_PROTOCOL) -> types.ModuleType:
    """Fetch the repository and import its hubconf.py (its folder is importable meanwhile)."""
    repo_dir = _get_repo(git_host, repo_info, use_cache=use_cache, commit=commit,
                         protocol=protocol)
    hubconf = os.path.join(repo_dir, HUBCONF)
    if not os.path.isfile(hubconf):
        raise InvalidRepo(f"repo_info: '{repo_info}' has no {HUBCONF} at its top level")
    sys.path.insert(0, repo_dir)
    try:
        return load_module(HUBCONF, hubconf)
    finally:
        sys.path.remove(repo_dir)


def import_module(repo_info: str, git_host: str = DEFAULT_GIT_HOST, use_cache: bool = True,
                  commit: str = None, protocol: str = DEFAULT_PROTOCOL) -> types.ModuleType:
    """Import a repository's hubconf.py like a Python module.

    Args:
        repo_info: "repo_owner/repo_name[:tag_name/:branch_name]" (default branch ``master``),
            a local folder, or "file:///path/to/git/repo[:branch]".
        git_host: host of the git repository, e.g. github.com, or "file:///root".
        use_cache: use a previously fetched copy if there is one.
        commit: commit id to check out.
        protocol: HTTPS (public GitHub-style archives) or SSH.
    """
    return _init_hub(repo_info, git_host, use_cache, commit, protocol)


def list(repo_info: str, git_host: str = DEFAULT_GIT_HOST, use_cache: bool = True,
         commit: str = None, protocol: str = DEFAULT_PROTOCOL) -> builtins.list[str]:
    """Names of all entrypoints (callables) in the repository's hubconf.py."""
    hubmodule = _init_hub(repo_info, git_host, use_cache, commit, protocol)
    return [name for name in dir(hubmodule)
            if not name.startswith("__") and callable(getattr(hubmodule, name))]


def _entry(hubmodule: types.ModuleType, entry: str) -> Callable:
    if not callable(getattr(hubmodule, entry, None)):
        raise RuntimeError("Cannot find callable {} in hubconf.py".format(entry))
    return getattr(hubmodule, entry)


def load(repo_info: str, entry: str, *args, git_host: str = DEFAULT_GIT_HOST,
         use_cache: bool = True, commit: str = None, protocol: str = DEFAULT_PROTOCOL,
         **kwargs) -> Any:
    """Call entrypoint `entry` of the repository's hubconf.py with *args, **kwargs (e.g.
    ``pretrained=True``) after checking its `dependencies`; returns what it returns."""
    hubmodule = _init_hub(repo_info, git_host, use_cache, commit, protocol)
    func = _entry(hubmodule, entry)
    _check_dependencies(hubmodule)
    return func(*args, **kwargs)


def help(repo_info: str, entry: str, git_host: str = DEFAULT_GIT_HOST, use_cache: bool = True,
         commit: str = None, protocol: str = DEFAULT_PROTOCOL) -> str:
    """The docstring of entrypoint `entry` of the repository's hubconf.py."""
    hubmodule = _init_hub(repo_info, git_host, use_cache, commit, protocol)
    return _entry(hubmodule, entry).__doc__


def load_serialized_obj_from_url(url: str, model_dir: str = None) -> Any:
    """Load an object saved with megtrace.save / megengine.save from `url` (http(s)://,
    file:// or a path), downloading it once into `model_dir` (default MGE_HOME/serialized)."""
    if model_dir is None:
        model_dir = os.path.join(_get_megengine_home(), "serialized")
    os.makedirs(model_dir, exist_ok=True)
    filename = os.path.basename(urlparse(url).path)
    # a hash of the URL as prefix keeps files of the same name from different URLs apart
    digest = hashlib.sha256(url.encode()).hexdigest()[:6]
    cached_file = os.path.join(model_dir, digest + "_" + filename)
    logger.info("load_serialized_obj_from_url: download to or using cached %s", cached_file)
    if not os.path.exists(cached_file):
        if is_distributed():
            logger.warning("Downloading serialized object in DISTRIBUTED mode")
        download_from_url(url, cached_file)
    return serialization.load(cached_file)


class pretrained:
    """Decorator for a model builder: called with ``pretrained=True`` it fills the model with
    the weights at `url` (see load_serialized_obj_from_url).

    Example::

        @hub.pretrained("https://url/to/pretrained_resnet18.pkl")
        def resnet18(**kwargs):
            ...
    """

    def __init__(self, url: str):
        self.url = url

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def pretrained_model_func(pretrained=False, **kwargs):
            model = func(**kwargs)
            if pretrained:
                model.load_state_dict(load_serialized_obj_from_url(self.url))
            return model

        return pretrained_model_func
