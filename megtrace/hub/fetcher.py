"""Where hub code comes from: GitHub-style hosts over HTTPS (zip archive) or SSH (git clone),
as in MegEngine 1.13, and, for offline use, a local folder or a `file://` git repository.

Every fetch lands in a fresh folder of the hub cache that is renamed into place only when
complete, so an interrupted fetch never leaves a half-written checkout behind."""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import zipfile

from ..version import __version__
from .const import DEFAULT_BRANCH_NAME, HTTP_READ_TIMEOUT
from .download import download_from_url
from .exceptions import GitCheckoutError, GitPullError, InvalidGitHost, InvalidRepo

_DOMAIN = re.compile(r"^(?:[a-z0-9](?:[a-z0-9-_]{0,61}[a-z0-9])?\.)+"
                     r"[a-z0-9][a-z0-9-_]{0,61}[a-z]$")
# git must fail rather than ask for a password or wait on an unreachable SSH host.
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0",
            "GIT_SSH_COMMAND": "ssh -o BatchMode=yes -o ConnectTimeout=5"}


class RepoFetcherBase:
    @classmethod
    def fetch(cls, git_host: str, repo_info: str, use_cache: bool = False,
              commit: str | None = None, silent: bool = True) -> str:
        raise NotImplementedError()

    @classmethod
    def _parse_repo_info(cls, repo_info: str) -> tuple[str, str, str]:
        try:
            branch_info = DEFAULT_BRANCH_NAME
            prefix_info = repo_info
            if ":" in repo_info:
                prefix_info, branch_info = repo_info.split(":")
            repo_owner, repo_name = prefix_info.split("/")
            return repo_owner, repo_name, branch_info
        except ValueError:
            raise InvalidRepo("repo_info: '{}' is invalid.".format(repo_info)) from None

    @classmethod
    def _check_git_host(cls, git_host: str) -> bool:
        return cls._is_valid_domain(git_host) or cls._is_valid_host(git_host)

    @classmethod
    def _is_valid_domain(cls, s: str) -> bool:
        try:
            return bool(_DOMAIN.match(s.encode("idna").decode("ascii")))
        except UnicodeError:
            return False

    @classmethod
    def _is_valid_host(cls, s: str) -> bool:
        nums = s.split(".")
        if len(nums) != 4 or any(not n.isdigit() for n in nums):
            return False
        return all(0 <= int(n) < 256 for n in nums)

    @classmethod
    def _gen_repo_dir(cls, repo_dir: str) -> str:
        return hashlib.sha1(repo_dir.encode()).hexdigest()[:16]

    @classmethod
    def _cache_name(cls, *parts: str) -> str:
        key = "_".join(p for p in parts if p)
        return "_".join(__version__.split(".")) + "_" + cls._gen_repo_dir(key)

    @classmethod
    def _checked(cls, git_host: str, repo_info: str) -> tuple[str, str, str]:
        if not cls._check_git_host(git_host):
            raise InvalidGitHost("git_host: '{}' is malformed.".format(git_host))
        return cls._parse_repo_info(repo_info)


def _run_git(args: list[str], silent: bool, cwd: str | None = None) -> tuple[int, str]:
    """Run git without prompts and with a time limit; returns (return code, stderr)."""
    env = dict(os.environ, **_GIT_ENV)
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE} if silent else {}
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, env=env, timeout=HTTP_READ_TIMEOUT,
                              **pipes)
    except FileNotFoundError:
        return 127, "git is not installed"
    except subprocess.TimeoutExpired:
        return 124, f"git {args[0]} took longer than {HTTP_READ_TIMEOUT} s"
    return proc.returncode, (proc.stderr or b"").decode(errors="replace")


def _fresh_folder(target: str, fill) -> str:
    """Build `target` (relative to the current folder) with fill(tmp_dir), then move it in."""
    shutil.rmtree(target, ignore_errors=True)
    tmp = tempfile.mkdtemp(prefix=".fetch-", dir=".")
    try:
        fill(tmp)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def git_clone(url: str, branch: str | None, commit: str | None, target: str,
              silent: bool = True) -> str:
    """Clone `url` (a branch or tag, or a commit) into `target` without its .git folder."""

    def fill(tmp: str) -> None:
        checkout = os.path.join(tmp, "repo")
        if commit is None:
            args = ["clone", "--depth=1", url, checkout]
            if branch:
                args[1:1] = ["-b", branch]
        else:
            args = ["clone", url, checkout]
        code, err = _run_git(args, silent)
        if code:
            raise GitPullError(f"Repo pull error, please check repo info ({url}).\n{err}")
        if commit is not None:
            code, err = _run_git(["checkout", commit], silent, cwd=checkout)
            if code:
                raise GitCheckoutError(
                    "Git checkout error, please check the commit id.\n" + err)
        shutil.rmtree(os.path.join(checkout, ".git"), ignore_errors=True)
        for name in os.listdir(checkout):
            os.replace(os.path.join(checkout, name), os.path.join(tmp, name))
        os.rmdir(checkout)

    return _fresh_folder(target, fill)


class GitSSHFetcher(RepoFetcherBase):
    @classmethod
    def fetch(cls, git_host: str, repo_info: str, use_cache: bool = False,
              commit: str | None = None, silent: bool = True) -> str:
        """Clone git@host:owner/name.git; returns the checkout's folder (relative to the cache)."""
        owner, name, branch = cls._checked(git_host, repo_info)
        repo_dir = cls._cache_name(owner, name, branch.replace("/", "_"), commit or "")
        if use_cache and os.path.exists(repo_dir):
            return repo_dir
        url = "git@{}:{}/{}.git".format(git_host, owner, name)
        return git_clone(url, branch, commit, repo_dir, silent)


class GitHTTPSFetcher(RepoFetcherBase):
    @classmethod
    def fetch(cls, git_host: str, repo_info: str, use_cache: bool = False,
              commit: str | None = None, silent: bool = True) -> str:
        """Download https://host/owner/name/archive/<commit or branch>.zip and unpack it."""
        owner, name, branch = cls._checked(git_host, repo_info)
        repo_dir = cls._cache_name(owner, name, branch.replace("/", "_"), commit or "")
        if use_cache and os.path.exists(repo_dir):
            return repo_dir
        url = cls._git_archive_link(git_host, owner, name, branch, commit)
        return _fresh_folder(repo_dir, lambda tmp: cls._download_zip_and_extract(url, tmp))

    @classmethod
    def _download_zip_and_extract(cls, url: str, target_dir: str) -> None:
        archive = os.path.join(target_dir, ".archive.zip")
        download_from_url(url, archive)
        with zipfile.ZipFile(archive) as zf:
            top = zf.namelist()[0].split("/")[0]
            zf.extractall(target_dir)
        os.unlink(archive)
        unpacked = os.path.join(target_dir, top)
        for entry in os.listdir(unpacked):
            os.replace(os.path.join(unpacked, entry), os.path.join(target_dir, entry))
        os.rmdir(unpacked)

    @classmethod
    def _git_archive_link(cls, git_host: str, repo_owner: str, repo_name: str,
                          branch_info: str, commit: str | None) -> str:
        return "https://{}/{}/{}/archive/{}.zip".format(git_host, repo_owner, repo_name,
                                                        commit or branch_info)


class GitFileFetcher(RepoFetcherBase):
    """A git repository on this machine, named by a file:// URL (megtrace's offline source).

    Either `repo_info` is "file:///path/to/repo[:branch]", or `git_host` is "file:///root"
    and `repo_info` is "owner/name[:branch]" (cloned from /root/owner/name)."""

    @classmethod
    def fetch(cls, git_host: str, repo_info: str, use_cache: bool = False,
              commit: str | None = None, silent: bool = True) -> str:
        url, branch = cls.resolve(git_host, repo_info)
        repo_dir = cls._cache_name(url, branch or "", commit or "")
        if use_cache and os.path.exists(repo_dir):
            return repo_dir
        return git_clone(url, branch, commit, repo_dir, silent)

    @classmethod
    def resolve(cls, git_host: str, repo_info: str) -> tuple[str, str | None]:
        """(clone URL, branch or None for the repository's default branch)."""
        if repo_info.startswith("file://"):
            location, _, branch = repo_info[len("file://"):].partition(":")
            if not location:
                raise InvalidRepo("repo_info: '{}' is invalid.".format(repo_info))
            return "file://" + location, branch or None
        owner, name, branch = cls._parse_repo_info(repo_info)
        explicit = ":" in repo_info
        return f"{git_host.rstrip('/')}/{owner}/{name}", branch if explicit else None
