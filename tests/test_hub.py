"""megtrace.hub against a tiny hub repository made in a temporary folder: as a local folder,
as file:// git sources (branch, commit), and unreachable network sources that must fail fast
with the URL in the message."""
import subprocess
import textwrap
import time

import numpy as np
import pytest

import megtrace as mge
import megtrace.hub as hub
import megtrace.module as M
from megtrace.hub.exceptions import (GitCheckoutError, GitPullError, HTTPDownloadError,
                                     InvalidGitHost, InvalidProtocol, InvalidRepo)

HUBCONF = '''
import megtrace.hub as hub
import megtrace.module as M

dependencies = ["numpy"]
VERSION = {version!r}


@hub.pretrained({weights_url!r})
def tiny(width=4, **kwargs):
    """A linear layer: the tiny model of the test hub."""
    return M.Linear(3, width, **kwargs)


def needs_missing():
    return None
'''


def _git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                   check=True, capture_output=True)


@pytest.fixture
def hub_home(tmp_path, monkeypatch):
    monkeypatch.setenv("MGE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def weights(tmp_path):
    state = {"weight": mge.tensor(np.arange(12, dtype="float32").reshape(4, 3)),
             "bias": mge.tensor(np.zeros(4, "float32"))}
    path = tmp_path / "tiny.pkl"
    mge.save(state, str(path))
    return path


@pytest.fixture
def repo(tmp_path, weights):
    """A git repository (branch main, two commits) whose hubconf.py names its version."""
    root = tmp_path / "gitroot" / "owner" / "tinyhub"
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    commits = []
    for version in ("v1", "v2"):
        (root / "hubconf.py").write_text(textwrap.dedent(HUBCONF.format(
            version=version, weights_url=weights.as_uri())))
        _git(root, "add", "hubconf.py")
        _git(root, "commit", "-q", "-m", version)
        commits.append(subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, check=True,
                                      capture_output=True, text=True).stdout.strip())
    return root, commits


def test_local_folder_list_help_load(repo, hub_home):
    root, _ = repo
    assert set(hub.list(str(root))) >= {"tiny", "needs_missing"}
    assert "tiny model of the test hub" in hub.help(str(root), "tiny")
    model = hub.load(str(root), "tiny", width=4)
    assert isinstance(model, M.Linear) and model.weight.shape == (4, 3)
    assert hub.import_module(str(root)).VERSION == "v2"
    assert not hub_home.exists()                    # a local folder is used in place


def test_pretrained_loads_weights_from_url(repo, hub_home, weights):
    root, _ = repo
    model = hub.load(str(root), "tiny", pretrained=True)
    np.testing.assert_array_equal(model.weight.numpy(),
                                  np.arange(12, dtype="float32").reshape(4, 3))
    cached = list((hub_home / "serialized").iterdir())
    assert len(cached) == 1 and cached[0].name.endswith("_tiny.pkl")


def test_file_git_url_branch_and_commit(repo, hub_home):
    root, (first, second) = repo
    assert hub.import_module(root.as_uri() + ":main").VERSION == "v2"
    assert hub.import_module(root.as_uri()).VERSION == "v2"          # default branch
    assert hub.import_module(root.as_uri(), commit=first).VERSION == "v1"
    assert hub.load(root.as_uri(), "tiny", width=2).weight.shape == (2, 3)


def test_file_git_host_with_megengine_repo_info(repo, hub_home):
    root, (first, _) = repo
    host = root.parent.parent.as_uri()
    assert hub.import_module("owner/tinyhub:main", git_host=host).VERSION == "v2"
    assert hub.import_module("owner/tinyhub", git_host=host, commit=first).VERSION == "v1"


def test_use_cache_keeps_and_refreshes_checkouts(repo, hub_home):
    root, _ = repo
    url = root.as_uri() + ":main"
    assert hub.import_module(url).VERSION == "v2"
    (root / "hubconf.py").write_text("VERSION = 'v3'\n")
    _git(root, "commit", "-q", "-am", "v3")
    assert hub.import_module(url).VERSION == "v2"                     # cached copy
    assert hub.import_module(url, use_cache=False).VERSION == "v3"


def test_bad_sources_raise_megengine_errors(repo, hub_home, tmp_path):
    root, _ = repo
    with pytest.raises(RuntimeError, match="Cannot find callable nope in hubconf.py"):
        hub.load(str(root), "nope")
    with pytest.raises(RuntimeError, match="Cannot find callable VERSION in hubconf.py"):
        hub.help(str(root), "VERSION")
    with pytest.raises(InvalidRepo, match="repo_info: 'ab' is invalid."):
        hub.list("ab")
    with pytest.raises(InvalidGitHost, match="git_host: 'bad host' is malformed."):
        hub.list("a/b", git_host="bad host")
    with pytest.raises(InvalidProtocol, match="one of HTTPS, SSH"):
        hub.list("a/b", protocol="FTP")
    with pytest.raises(GitPullError, match="missing"):
        hub.list((tmp_path / "missing").as_uri())
    with pytest.raises(GitCheckoutError, match="commit id"):
        hub.list(root.as_uri(), commit="0" * 40)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidRepo, match="no hubconf.py"):
        hub.list(str(tmp_path / "empty"))


def test_missing_dependencies_are_named(tmp_path, hub_home):
    (tmp_path / "hubconf.py").write_text(
        "dependencies = ['numpy', 'no_such_module_xyz']\ndef m():\n    return 1\n")
    with pytest.raises(RuntimeError, match="Missing dependencies: no_such_module_xyz"):
        hub.load(str(tmp_path), "m")


@pytest.mark.parametrize("call", [
    lambda: hub.list("owner/name", git_host="127.0.0.1"),
    lambda: hub.load("owner/name", "m", git_host="no-such-host.invalid"),
    lambda: hub.load_serialized_obj_from_url("http://127.0.0.1:9/weights.pkl"),
])
def test_unreachable_network_fails_fast_naming_the_url(call, hub_home):
    start = time.monotonic()
    with pytest.raises(HTTPDownloadError) as info:
        call()
    assert time.monotonic() - start < 15
    assert "127.0.0.1" in str(info.value) or "no-such-host.invalid" in str(info.value)
    assert "://" in str(info.value)
    assert not list((hub_home / "hub").glob(".fetch-*"))    # no half-written checkout


def test_load_serialized_obj_from_local_url(weights, tmp_path):
    got = hub.load_serialized_obj_from_url(weights.as_uri(), model_dir=str(tmp_path / "c"))
    np.testing.assert_array_equal(got["weight"], np.arange(12).reshape(4, 3))
    with pytest.raises(HTTPDownloadError, match="s3://bucket/x.pkl"):
        hub.load_serialized_obj_from_url("s3://bucket/x.pkl", model_dir=str(tmp_path / "c"))
