"""Downloads with bounded waits: an unreachable URL fails within seconds, naming the URL.

urllib's socket timeout does not cover name resolution, so the request runs in a daemon
thread and the caller waits at most `connect_timeout` for the first response."""
from __future__ import annotations

import os
import shutil
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import BinaryIO

from .const import HTTP_CONNECTION_TIMEOUT, HTTP_READ_TIMEOUT
from .exceptions import HTTPDownloadError

CHUNK_SIZE = 1 << 16


def _open_http(url: str, connect_timeout: float, read_timeout: float) -> BinaryIO:
    result: dict = {}

    def request() -> None:
        try:
            result["resp"] = urllib.request.urlopen(url, timeout=read_timeout)
        except BaseException as exc:  # handed to the waiting thread
            result["error"] = exc

    worker = threading.Thread(target=request, daemon=True)
    worker.start()
    worker.join(connect_timeout)
    if worker.is_alive():
        raise HTTPDownloadError(f"An error occured when downloading from {url}: no answer "
                                f"within {connect_timeout} s (is the network reachable?)")
    if "error" in result:
        exc = result["error"]
        reason = getattr(exc, "reason", exc)
        raise HTTPDownloadError(
            f"An error occured when downloading from {url}: {reason}") from exc
    resp = result["resp"]
    if getattr(resp, "status", 200) != 200:
        resp.close()
        raise HTTPDownloadError(
            f"An error occured when downloading from {url}: HTTP status {resp.status}")
    return resp


def open_url(url: str, connect_timeout: float = HTTP_CONNECTION_TIMEOUT,
             read_timeout: float = HTTP_READ_TIMEOUT) -> BinaryIO:
    """A readable binary stream for an http(s)://, file:// URL or a local path."""
    scheme = urllib.parse.urlparse(url).scheme
    if scheme in ("http", "https"):
        return _open_http(url, connect_timeout, read_timeout)
    if scheme == "file":
        path = urllib.request.url2pathname(urllib.parse.urlparse(url).path)
    elif scheme == "" or len(scheme) == 1:     # a plain path (or a Windows drive letter)
        path = os.path.expanduser(url)
    else:
        raise HTTPDownloadError(f"An error occured when downloading from {url}: megtrace "
                                f"reads http://, https://, file:// URLs and local paths, "
                                f"not {scheme}://")
    try:
        return open(path, "rb")
    except OSError as exc:
        raise HTTPDownloadError(
            f"An error occured when downloading from {url}: {exc.strerror}") from exc


def download_from_url(url: str, dst: str) -> None:
    """Copy `url` to the file `dst`; a partial download never leaves `dst` behind."""
    dst = os.path.expanduser(dst)
    folder = os.path.dirname(os.path.abspath(dst))
    os.makedirs(folder, exist_ok=True)
    with open_url(url) as src, tempfile.NamedTemporaryFile(dir=folder, delete=False) as tmp:
        try:
            shutil.copyfileobj(src, tmp, CHUNK_SIZE)
        except (OSError, TimeoutError) as exc:
            tmp.close()
            os.unlink(tmp.name)
            raise HTTPDownloadError(
                f"An error occured when downloading from {url}: {exc}") from exc
    os.replace(tmp.name, dst)
