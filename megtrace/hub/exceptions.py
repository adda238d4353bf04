"""Hub errors, with MegEngine 1.13's class names and hierarchy (hub/exceptions.py)."""


class FetcherError(Exception):
    """Fetching a hub repository failed."""


class InvalidRepo(FetcherError):
    """The repo_info string is not "owner/name[:branch]" (or a local source)."""


class InvalidGitHost(FetcherError):
    """The git host is not a domain name or an IPv4 address."""


class GitPullError(FetcherError):
    """`git clone` failed."""


class GitCheckoutError(FetcherError):
    """`git checkout <commit>` failed."""


class InvalidProtocol(FetcherError):
    """The protocol is not one of HTTPS, SSH."""


class HTTPDownloadError(Exception):
    """A download failed; the message names the URL.

    MegEngine derives it from BaseException (megengine.utils.http_download); megtrace derives it
    from Exception so that `except Exception` handlers in user code see it too."""
