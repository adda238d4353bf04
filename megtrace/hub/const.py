"""Hub settings: MegEngine 1.13's names and values (hub/const.py), plus megtrace's cache folder."""
DEFAULT_BRANCH_NAME = "master"
HUBCONF = "hubconf.py"
HUBDEPENDENCY = "dependencies"
DEFAULT_GIT_HOST = "github.com"
ENV_MGE_HOME = "MGE_HOME"
ENV_XDG_CACHE_HOME = "XDG_CACHE_HOME"
DEFAULT_CACHE_DIR = "~/.cache"
DEFAULT_PROTOCOL = "HTTPS"
HTTP_CONNECTION_TIMEOUT = 5
HTTP_READ_TIMEOUT = 120
# MegEngine caches under $XDG_CACHE_HOME/megengine; megtrace keeps its own folder so the two
# never share (or corrupt) each other's checkouts. MGE_HOME overrides both, as in MegEngine.
CACHE_FOLDER_NAME = "megtrace"
